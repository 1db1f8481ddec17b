"""The results' matches in an answer's order (`order_by`, `order_dir`), as the pager asks for
them: the positions at places `first` to `last` (`service.dataset.pager.Ordering`).

They are found without ordering every match: the matches are counted per value of the sort
column, the values that cover the places asked for are picked in the answer's order, and only
the records holding those values are ordered by record id (their precomputed rank).
"""

from functools import cached_property
from typing import Final

import numpy as np

from ingest.layout import NULL_RANK
from service.dataset.index import Array, Match, ResultsIndex, sorted_groups
from service.dataset.queries import ORDER_COLUMNS

# The sort keys' arrays: the allow-listed column's own codes, except for amount (its rank) and
# ingested_at. Every record of a version has that version's time, and version ids begin with it
# (`ingest.pipeline`), so the version's code, given in id order (`ingest.serving`), ranks it.
RANKED_BY: Final = {"amount": "amount_rank", "ingested_at": "version_id"}
ORDER_ARRAYS: Final = {key: RANKED_BY.get(column, column) for key, column in ORDER_COLUMNS.items()}


class ResultsOrder:
    """The matches of one selection in the order asked. A page orders only the records of the
    sort values it touches, and only as many of them as it needs; a download (`streamed`)
    orders each run of sort values whole and keeps it for the chunks that follow, so memory
    follows the chunk (or the one sort value held by more records), not the selection."""

    def __init__(
        self, index: ResultsIndex, matches: list[Match], order_by: str, order_dir: str,
        *, streamed: bool = False,
    ) -> None:  # fmt: skip
        self._index = index
        self._matches = matches
        self._column = ORDER_ARRAYS[order_by]
        self._descending = order_dir == "desc"
        self._streamed = streamed
        # The last window ranked (a download keeps it): its first place, and its positions.
        self._ranked_window: tuple[int, Array] = (0, np.empty(0, np.int64))
        self.total = sum(match.count for match in matches)

    def places(self, first: int, last: int) -> Array:
        window_start, window = self._ranked_window
        if window_start <= first and last < window_start + len(window):
            return window[first - window_start : last + 1 - window_start]
        values, ends = self._sort_values
        low = int(np.searchsorted(ends, first, side="right"))
        high = int(np.searchsorted(ends, last, side="right"))
        start = int(ends[low - 1]) if low else 0
        wanted = None if self._streamed else last + 1 - start
        ranked = self._ranked(values[low : high + 1], wanted)
        if self._streamed:
            self._ranked_window = (start, ranked)
        return ranked[first - start : last + 1 - start]

    @cached_property
    def _sort_values(self) -> tuple[Array, Array]:
        """The sort values held by the matches, in the answer's order (nulls last in both
        directions), and the running count of records up to and including each."""
        histograms = [self._histogram(match) for match in self._matches]
        values, inverse = np.unique(np.concatenate([v for v, _ in histograms]), return_inverse=True)
        counts = np.bincount(inverse, weights=np.concatenate([c for _, c in histograms]))
        order = np.arange(len(values))
        if self._descending:
            order = order[::-1]
        missing = values == _null_of(self._column)
        order = np.concatenate([order[~missing[order]], order[missing[order]]])
        return values[order], np.cumsum(counts[order]).astype(np.int64)

    def _ranked(self, chosen: Array, wanted: int | None) -> Array:
        """The positions of the matches holding one of `chosen` (sort values in the answer's
        order), ordered by value and then record id; only the first `wanted` when given."""
        by_value = np.argsort(chosen)
        ascending = chosen[by_value]
        positions = np.concatenate([self._holding(match, ascending) for match in self._matches])
        place = by_value[np.searchsorted(ascending, self._index.column(self._column)[positions])]
        ranks = self._index.column("record_rank")[positions].astype(np.uint64)
        keys = (place.astype(np.uint64) << np.uint64(32)) | ranks
        if wanted is not None and wanted < len(keys):  # only the first `wanted` need sorting
            picked = np.argpartition(keys, wanted - 1)[:wanted]
            positions, keys = positions[picked], keys[picked]
        return positions[np.argsort(keys)]  # keys are unique (they hold the record's rank)

    def _histogram(self, match: Match) -> tuple[Array, Array]:
        """The sort values of a run's matches and how many matches hold each."""
        run, column = match.run, self._column
        if column in ("exchange", "fee_type"):  # one value per run
            return np.array([getattr(run, column)]), np.array([match.count])
        if column == "effective_start" and match.positions is None:
            days, bounds = self._index.start_groups[run.start]
            ends = np.clip(np.append(bounds[1:], run.stop), run.start, match.stop)
            begins = np.clip(bounds, run.start, match.stop)
            return days, ends - begins
        run_values = self._values(match)
        if column == "effective_start":  # sorted within a run: no need to sort again
            days, bounds = sorted_groups(run_values, 0)
            return days, np.diff(np.append(bounds, len(run_values)))
        values, counts = np.unique(run_values, return_counts=True)
        return values, counts

    def _holding(self, match: Match, chosen: Array) -> Array:
        """The positions of a run's matches whose sort value is one of `chosen` (sorted)."""
        run, column = match.run, self._column
        if column in ("exchange", "fee_type"):
            if getattr(run, column) not in chosen:
                return np.empty(0, dtype=np.int64)
            return match.all_positions()
        if column == "effective_start" and match.positions is None:
            starts = self._index.column("effective_start")[run.start : match.stop]
            low = int(np.searchsorted(starts, chosen[0], side="left"))
            high = int(np.searchsorted(starts, chosen[-1], side="right"))
            return np.arange(run.start + low, run.start + high, dtype=np.int64)
        positions = match.all_positions()
        return positions[np.isin(self._index.column(column)[positions], chosen)]

    def _values(self, match: Match) -> Array:
        array = self._index.column(self._column)
        if match.positions is None:
            return np.asarray(array[match.run.start : match.stop])
        return np.asarray(array[match.positions])


def _null_of(column: str) -> int:
    """The stored value of a missing sort value (effective_start is required: none)."""
    return {"amount_rank": int(NULL_RANK), "effective_start": -1}.get(column, 0)
