"""Results pages from the version's index arrays (written by `ingest.serving`), not from SQL.

Positions follow the files' order: venue, fee type, effective start, record id. So one venue
and fee type is a contiguous run, sorted by effective start and then by record id. A request's
venues and fee types pick runs; its date window cuts each run short (a record that starts after
the window ends cannot overlap it); every other filter is a vectorized test of the run's codes.

The page is then found without ordering every match: the matches are counted per value of the
sort column, the values that cover the page's positions are picked in serving order, and only
the records holding those values are ordered by record id (their precomputed rank). Answers are
the SQL path's answers exactly; `tests/test_results_index.py` compares the two.
"""

import itertools
import json
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import date, timedelta
from pathlib import Path
from typing import Any, Final

import numpy as np
import numpy.typing as npt
import pyarrow as pa
import pyarrow.compute as pc

from ingest.layout import CODE_TYPES, CODED, CODES_FILE, NO_END, NO_RECORD, NULL_RANK
from ingest.schema import FLAGS
from service.dataset.queries import ORDER_COLUMNS, RESULT_FILTERS, Selection

EPOCH: Final = date(1970, 1, 1)
Array = npt.NDArray[Any]

# The sort keys' arrays: the allow-listed column's own codes, except for amount (its rank) and
# ingested_at. Every record of a version has that version's time, and version ids begin with it
# (`ingest.pipeline`), so the version's code, given in id order (`ingest.serving`), ranks it.
RANKED_BY: Final = {"amount": "amount_rank", "ingested_at": "version_id"}
ORDER_ARRAYS: Final = {key: RANKED_BY.get(column, column) for key, column in ORDER_COLUMNS.items()}


@dataclass(frozen=True)
class Run:
    """The positions [start, stop) of one venue's records of one fee type."""

    exchange: int
    fee_type: int
    start: int
    stop: int


@dataclass(frozen=True)
class Match:
    """A run's matching records: all of [run.start, stop) when `positions` is None."""

    run: Run
    stop: int
    positions: Array | None

    @property
    def count(self) -> int:
        return self.stop - self.run.start if self.positions is None else len(self.positions)

    def all_positions(self) -> Array:
        if self.positions is None:
            return np.arange(self.run.start, self.stop, dtype=np.int64)
        return self.positions


@dataclass(frozen=True)
class Window:
    """A selection's dates as days since 1970: the last start, the first end and the earliest
    confirmation a matching record may have (None: open)."""

    latest_start: int | None
    earliest_end: int | None
    oldest_confirmation: int | None = None


@dataclass(frozen=True)
class Holding:
    """What a selection's records hold: how many, the values of the columns asked for, and
    their span (the last day of a record still in force is the later of its start and the
    version's as-of date, as in the rollups)."""

    count: int
    values: Mapping[str, Sequence[str]]  # per column, sorted
    earliest: date | None
    latest: date | None


class ResultsIndex:
    def __init__(self, directory: Path) -> None:
        names: dict[str, list[str]] = json.loads((directory / CODES_FILE).read_text("utf-8"))
        self._names = names
        # Code of each value, per column (0 stands for no value; codes start at 1).
        self._codes = {
            column: {value: number for number, value in enumerate(values, start=1)}
            for column, values in names.items()
        }
        self._arrays: dict[str, Array] = {
            name: np.load(directory / f"{name}.npy", mmap_mode="r")
            for name in (*CODE_TYPES, "record_rank", "amount_rank")
        }
        self.size = len(self._arrays["exchange"])
        # Each coded column's values by code, for `decoded` (code 0, no value: null).
        self._values_of = {
            column: pa.array([None, *values], pa.string()) for column, values in names.items()
        }
        self.runs = self._find_runs()
        # Each run's distinct effective starts and where each begins, so requests only read them.
        starts = self._arrays["effective_start"]
        self._start_groups = {
            run.start: _sorted_groups(np.asarray(starts[run.start : run.stop]), run.start)
            for run in self.runs
        }

    def _find_runs(self) -> list[Run]:
        exchange, fee_type = self._arrays["exchange"], self._arrays["fee_type"]
        if self.size == 0:
            return []
        changes = np.flatnonzero((np.diff(exchange) != 0) | (np.diff(fee_type) != 0)) + 1
        bounds = [0, *changes.tolist(), self.size]
        return [
            Run(int(exchange[lo]), int(fee_type[lo]), lo, hi)
            for lo, hi in itertools.pairwise(bounds)
        ]

    def holding(self, selection: Selection, columns: Mapping[str, str], as_of: date) -> Holding:
        """What the matching records hold (`Holding`): the values of each coded column of
        `columns` (under its key there), each value's records counted per run (`bincount` over
        the small codes), a whole run by slice."""
        wanted = {
            key: np.zeros(len(self._names[name]) + 1, np.int64) for key, name in columns.items()
        }
        count, firsts, lasts = 0, [], []
        for match in self._matches(selection):
            at = slice(match.run.start, match.stop) if match.positions is None else match.positions
            for key, seen in wanted.items():
                seen += np.bincount(self._arrays[columns[key]][at], minlength=len(seen))
            starts, ends = self._arrays["effective_start"][at], self._arrays["effective_end"][at]
            open_until = np.maximum(starts, (as_of - EPOCH).days)
            firsts.append(int(starts.min()))
            lasts.append(int(np.where(ends == NO_END, open_until, ends).max()))
            count += match.count
        values = {key: self._present(columns[key], seen) for key, seen in wanted.items()}
        if not count:
            return Holding(0, values, None, None)
        return Holding(count, values, _date(min(firsts)), _date(max(lasts)))

    def column(self, name: str) -> Array:
        """The array of a column of `CODE_TYPES` (or of a rank): a value per position."""
        return self._arrays[name]

    def code(self, column: str, value: str) -> int | None:
        """The code of a coded column's value (None: no record holds it)."""
        return self._codes[column].get(value)

    def value(self, column: str, code: int) -> str:
        """The value a coded column's code stands for."""
        return self._names[column][code - 1]

    def decoded(self, positions: Array) -> dict[str, pa.Array]:
        """The venue, the coded columns, the period and the confirmation of the records at
        `positions` (nulls for `NO_RECORD`), as Arrow arrays under their dataset names: each
        code's value (the flags as booleans), the dates as dates (`effective_end` null while
        open)."""
        missing = positions == NO_RECORD
        at = np.where(missing, 0, positions)
        found = {
            column: self._values_of[column].take(
                pa.array(np.asarray(self._arrays[column][at]), mask=missing)
            )
            for column in ("exchange", *CODED)
        }
        for flag in FLAGS:
            found[flag] = pc.equal(found[flag], "true")
        starts = np.asarray(self._arrays["effective_start"][at])
        ends = np.asarray(self._arrays["effective_end"][at])
        confirmed = np.asarray(self._arrays["confirmed_through"][at])
        found["effective_start"] = pa.array(starts, mask=missing).cast(pa.date32())
        found["effective_end"] = pa.array(ends, mask=missing | (ends == NO_END)).cast(pa.date32())
        found["confirmed_through"] = pa.array(confirmed, mask=missing).cast(pa.date32())
        return found

    def _present(self, column: str, seen: Array) -> list[str]:
        """The values of a coded column with any record (no value, code 0, left out)."""
        names = self._names[column]
        return sorted(names[code - 1] for code in np.flatnonzero(seen).tolist() if code)

    def count(self, selection: Selection) -> int:
        """The number of matching records."""
        return sum(match.count for match in self._matches(selection))

    def page(
        self, selection: Selection, order_by: str, order_dir: str, offset: int, size: int
    ) -> tuple[int, list[int]]:
        """The number of matching records and the positions of the page's records, in order."""
        column = ORDER_ARRAYS[order_by]
        matches = self._matches(selection)
        total = sum(match.count for match in matches)
        if offset >= total:
            return total, []
        values, ends = self._sort_values(matches, column, order_dir)
        first = int(np.searchsorted(ends, offset, side="right"))
        last = int(np.searchsorted(ends, offset + size - 1, side="right"))
        skip = offset - (int(ends[first - 1]) if first else 0)
        ranked = self._ranked(matches, column, values[first : last + 1], skip + size)
        return total, ranked[skip : skip + size].tolist()

    def ordered(
        self, selection: Selection, order_by: str, order_dir: str, chunk: int
    ) -> Iterator[Array]:
        """The positions of every matching record in the answer's order, at most `chunk` at a
        time. Only the records of the sort values in hand are ordered at once, so memory
        follows the chunk (or the one sort value held by more records), not the selection."""
        column = ORDER_ARRAYS[order_by]
        matches = self._matches(selection)
        if not matches:
            return
        values, ends = self._sort_values(matches, column, order_dir)
        first = 0
        while first < len(values):
            done = int(ends[first - 1]) if first else 0
            last = max(first, int(np.searchsorted(ends, done + chunk, side="right")) - 1)
            ranked = self._ranked(matches, column, values[first : last + 1], None)
            for begin in range(0, len(ranked), chunk):
                yield ranked[begin : begin + chunk]
            first = last + 1

    def _sort_values(
        self, matches: list["Match"], column: str, order_dir: str
    ) -> tuple[Array, Array]:
        """The sort values held by the matches, in the answer's order (nulls last in both
        directions), and the running count of records up to and including each."""
        found = [self._histogram(match, column) for match in matches]
        values, inverse = np.unique(np.concatenate([v for v, _ in found]), return_inverse=True)
        counts = np.bincount(inverse, weights=np.concatenate([c for _, c in found]))
        order = np.arange(len(values))
        if order_dir == "desc":
            order = order[::-1]
        missing = values == _null_of(column)
        order = np.concatenate([order[~missing[order]], order[missing[order]]])
        return values[order], np.cumsum(counts[order]).astype(np.int64)

    def _ranked(
        self, matches: list["Match"], column: str, chosen: Array, wanted: int | None
    ) -> Array:
        """The positions of the matches holding one of `chosen` (sort values in the answer's
        order), ordered by value and then record id; only the first `wanted` when given."""
        by_value = np.argsort(chosen)
        ascending = chosen[by_value]
        positions = np.concatenate([self._holding(match, column, ascending) for match in matches])
        place = by_value[np.searchsorted(ascending, self._arrays[column][positions])]
        keys = (place.astype(np.uint64) << np.uint64(32)) | self._arrays["record_rank"][
            positions
        ].astype(np.uint64)
        if wanted is not None and wanted < len(keys):  # only the first `wanted` need sorting
            picked = np.argpartition(keys, wanted - 1)[:wanted]
            positions, keys = positions[picked], keys[picked]
        return positions[np.argsort(keys)]  # keys are unique (they hold the record's rank)

    def _histogram(self, match: "Match", column: str) -> tuple[Array, Array]:
        """The sort values of a run's matches and how many matches hold each."""
        run = match.run
        if column in ("exchange", "fee_type"):  # one value per run
            return np.array([getattr(run, column)]), np.array([match.count])
        if column == "effective_start" and match.positions is None:
            days, bounds = self._start_groups[run.start]
            ends = np.clip(np.append(bounds[1:], run.stop), run.start, match.stop)
            begins = np.clip(bounds, run.start, match.stop)
            return days, ends - begins
        held = self._values(match, column)
        if column == "effective_start":  # sorted within a run: no need to sort again
            days, bounds = _sorted_groups(held, 0)
            return days, np.diff(np.append(bounds, len(held)))
        values, counts = np.unique(held, return_counts=True)
        return values, counts

    def _holding(self, match: "Match", column: str, chosen: Array) -> Array:
        """The positions of a run's matches whose sort value is one of `chosen` (sorted)."""
        run = match.run
        if column in ("exchange", "fee_type"):
            if getattr(run, column) not in chosen:
                return np.empty(0, dtype=np.int64)
            return match.all_positions()
        if column == "effective_start" and match.positions is None:
            starts = self._arrays["effective_start"][run.start : match.stop]
            low = int(np.searchsorted(starts, chosen[0], side="left"))
            high = int(np.searchsorted(starts, chosen[-1], side="right"))
            return np.arange(run.start + low, run.start + high, dtype=np.int64)
        positions = match.all_positions()
        return positions[np.isin(self._arrays[column][positions], chosen)]

    def _values(self, match: "Match", column: str) -> Array:
        if match.positions is None:
            return np.asarray(self._arrays[column][match.run.start : match.stop])
        return np.asarray(self._arrays[column][match.positions])

    def _matches(self, selection: Selection) -> list["Match"]:
        """Each selected run with the part of it that matches."""
        wanted = self.wanted_codes(selection)
        if wanted is None:
            return []
        window = Window(
            latest_start=min(_days(selection.end_date, selection.in_force_on), default=None),
            earliest_end=max(_days(selection.start_date, selection.in_force_on), default=None),
            oldest_confirmation=min(_days(selection.oldest_confirmation()), default=None),
        )
        matches = (
            self._match(run, wanted, window)
            for run in self.runs
            if _allowed(wanted, "exchange", run.exchange)
            and _allowed(wanted, "fee_type", run.fee_type)
        )
        return [match for match in matches if match is not None]

    def _match(self, run: Run, wanted: dict[str, Array], window: "Window") -> "Match | None":
        """The part of one run in the window with the wanted codes (none: None)."""
        stop = run.stop
        if window.latest_start is not None:  # a record starting after the window cannot overlap
            starts = self._arrays["effective_start"][run.start : run.stop]
            # The key as the array's own type: a Python int makes `np.searchsorted` copy the
            # run into 64-bit integers first (9 ms for 5M starts, against 5 µs).
            latest = starts.dtype.type(window.latest_start)
            stop = run.start + int(np.searchsorted(starts, latest, side="right"))
        if stop <= run.start:
            return None
        tested = [column for column in wanted if column not in ("exchange", "fee_type")]
        bounds = {
            "effective_end": window.earliest_end,
            "confirmed_through": window.oldest_confirmation,
        }
        if not tested and all(bound is None for bound in bounds.values()):
            return Match(run, stop, None)
        keep = np.ones(stop - run.start, dtype=bool)
        for column in tested:
            keep &= wanted[column][self._arrays[column][run.start : stop]]
        for column, bound in bounds.items():
            if bound is not None:
                keep &= self._arrays[column][run.start : stop] >= bound
        positions = run.start + np.flatnonzero(keep)
        return Match(run, stop, positions) if len(positions) else None

    def wanted_codes(self, selection: Selection) -> dict[str, Array] | None:
        """Per filtered column, a lookup table of its wanted codes; None when nothing can
        match."""
        lists = dict(selection.values)
        if selection.venues is not None:
            lists["exchange_name"] = selection.venues
        wanted: dict[str, Array] = {}
        for name, values in lists.items():
            column = RESULT_FILTERS[name]
            codes = self._codes[column]
            known = [codes[value] for value in values if value in codes]
            if not known:
                return None
            wanted[column] = _lookup(known, column)
        if selection.version_id is not None:
            code = self._codes["version_id"].get(selection.version_id)
            if code is None:
                return None
            wanted["version_id"] = _lookup([code], "version_id")
        return wanted


def _sorted_groups(values: Array, first: int) -> tuple[Array, Array]:
    """The distinct values of a sorted array and where each begins (counted from `first`)."""
    bounds = np.concatenate([[0], np.flatnonzero(np.diff(values)) + 1])
    return values[bounds], bounds + first


def _null_of(column: str) -> int:
    """The stored value of a missing sort value (effective_start is required: none)."""
    return {"amount_rank": int(NULL_RANK), "effective_start": -1}.get(column, 0)


def _lookup(codes: list[int], column: str) -> Array:
    """A table saying, for every possible code of the column, whether it is wanted: testing a
    run's codes is then one gather (`np.isin` sorts, and cost ten times as much)."""
    table = np.zeros(int(np.iinfo(CODE_TYPES[column]).max) + 1, dtype=np.bool_)
    table[codes] = True
    return table


def _allowed(wanted: dict[str, Array], column: str, code: int) -> bool:
    return column not in wanted or bool(wanted[column][code])


def _date(days: int) -> date:
    return EPOCH + timedelta(days=days)


def _days(*days: date | None) -> list[int]:
    """The given days as days since 1970."""
    return [(day - EPOCH).days for day in days if day is not None]
