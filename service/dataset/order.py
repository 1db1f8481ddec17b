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
from service.dataset.index import FEW_CODES, Array, Match, ResultsIndex, one_of, sorted_groups
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
        # A page's sort values per match, gathered once for counting and again read for ranking
        # (a download keeps none: they would be the size of the selection).
        self._gathered: dict[int, Array] = {}
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
        histograms = [self._histogram(number) for number in range(len(self._matches))]
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
        held = [self._holding(number, ascending) for number in range(len(self._matches))]
        positions = np.concatenate([positions for positions, _ in held])
        keys = self._index.column("record_rank")[positions]
        if len(chosen) > 1:  # the value's place in the answer, then the rank
            values = np.concatenate([values for _, values in held])
            place = by_value[np.searchsorted(ascending, values)].astype(np.uint64)
            keys = (place << np.uint64(32)) | keys.astype(np.uint64)
        if wanted is not None and wanted < len(keys):  # only the first `wanted` need sorting
            picked = np.argpartition(keys, wanted - 1)[:wanted]
            positions, keys = positions[picked], keys[picked]
        return positions[np.argsort(keys)]  # keys are unique (they hold the record's rank)

    def _histogram(self, number: int) -> tuple[Array, Array]:
        """The sort values of match `number`'s records and how many records hold each."""
        match, column = self._matches[number], self._column
        run = match.run
        if column in ("exchange", "fee_type"):  # one value per run
            return np.array([getattr(run, column)]), np.array([match.count])
        if column == "effective_start" and match.positions is None:
            days, bounds = self._index.start_groups[run.start]
            ends = np.clip(np.append(bounds[1:], run.stop), run.start, match.stop)
            begins = np.clip(bounds, run.start, match.stop)
            return days, ends - begins
        run_values = self._values(number)
        if column == "effective_start":  # sorted within a run: no need to sort again
            days, bounds = sorted_groups(run_values, 0)
            return days, np.diff(np.append(bounds, len(run_values)))
        if run_values.dtype.itemsize <= 2:  # a narrow code: counted per code, not sorted
            per_code = np.bincount(run_values)
            values = np.flatnonzero(per_code)
            return values, per_code[values]
        values, counts = np.unique(run_values, return_counts=True)
        return values, counts

    def _holding(self, number: int, chosen: Array) -> tuple[Array, Array]:
        """The positions of match `number`'s records whose sort value is one of `chosen`
        (sorted, and consecutive among the values the matches hold), and their values."""
        match, column = self._matches[number], self._column
        run = match.run
        if column in ("exchange", "fee_type"):  # one value per run
            value = getattr(run, column)
            positions = match.all_positions() if value in chosen else np.empty(0, np.int64)
            return positions, np.full(len(positions), value)
        values = self._values(number)
        if column == "effective_start":  # sorted within a run: its holders are one stretch
            low = int(np.searchsorted(values, chosen[0], side="left"))
            high = int(np.searchsorted(values, chosen[-1], side="right"))
            if match.positions is None:
                positions = np.arange(run.start + low, run.start + high, dtype=np.int64)
            else:
                positions = match.positions[low:high]
            return positions, values[low:high]
        few = len(chosen) <= FEW_CODES
        held = one_of(values, chosen.tolist()) if few else np.isin(values, chosen)
        if match.positions is None:
            return np.flatnonzero(held) + run.start, values[held]
        return match.positions[held], values[held]

    def _values(self, number: int) -> Array:
        """The sort values of match `number`'s records, in position order."""
        if number in self._gathered:
            return self._gathered[number]
        match, array = self._matches[number], self._index.column(self._column)
        if match.positions is None:
            values = np.asarray(array[match.run.start : match.stop])
        else:
            values = np.asarray(array[match.positions])
        if not self._streamed:
            self._gathered[number] = values
        return values


def _null_of(column: str) -> int:
    """The stored value of a missing sort value (effective_start is required: none)."""
    return {"amount_rank": int(NULL_RANK), "effective_start": -1}.get(column, 0)
