"""The results' matches from the version's index arrays (written by `ingest.serving`), not from
SQL: which records a selection matches, what they hold, and their codes decoded.

Positions follow the files' order: venue, fee type, effective start, record id. So one venue
and fee type is a contiguous run, sorted by effective start and then by record id. A request's
venues and fee types pick runs; its date window cuts each run short (a record that starts after
the window ends cannot overlap it); every other filter is a vectorized test of the run's codes.
`service.dataset.order` puts the matches in an answer's order; answers are the SQL path's
answers exactly (`tests/test_results_index.py` compares the two).
"""

import itertools
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import date, timedelta
from pathlib import Path
from typing import Any, Final, cast

import numpy as np
import numpy.typing as npt
import pyarrow as pa
import pyarrow.compute as pc

from ingest.layout import CODE_TYPES, CODED, CODES_FILE, NO_END, NO_RECORD
from ingest.schema import FLAGS
from service.dataset.mapped import mapped_array
from service.dataset.price_keys import PriceKeys
from service.dataset.queries import RESULT_FILTERS, Selection

EPOCH: Final = date(1970, 1, 1)
DAYS: Final = ("effective_start", "effective_end", "confirmed_through")  # days since EPOCH
POSITION: Final = "position"
Array = npt.NDArray[Any]


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
            name: mapped_array(directory / f"{name}.npy")
            for name in (*CODE_TYPES, "record_rank", "amount_rank")
        }
        self.size = len(self._arrays["exchange"])
        # A record's position, as a column: what the `fee_code` filter tests (`wanted_codes`).
        # It is indexed only as the arrays are (a slice, or positions), so it stands as one.
        self._arrays[POSITION] = cast(Array, Positions())
        self.price_keys = PriceKeys(directory)
        # Each coded column's values by code, for `values` (code 0, no value: null).
        self._values_of = {
            column: pa.array([None, *values], pa.string()) for column, values in names.items()
        }
        # Every column's values in one array (`decoded` takes from all of them in one go), and
        # where each column's begin in it.
        self._every_value = pa.concat_arrays(list(self._values_of.values()))
        sizes = [len(values) for values in self._values_of.values()]
        self._first_of = dict(zip(names, np.cumsum([0, *sizes[:-1]]).tolist(), strict=True))
        self.runs = self._find_runs()
        # Each run's distinct effective starts and where each begins, so requests only read them.
        starts = self._arrays["effective_start"]
        self.start_groups = {
            run.start: sorted_groups(np.asarray(starts[run.start : run.stop]), run.start)
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
        for match in self.matches(selection):
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

    def values(self, column: str) -> list[str]:
        """The values a coded column's records hold, in code order (the first is code 1)."""
        return self._names[column]

    def codes_of(self, column: str, values: pa.Array | pa.ChunkedArray) -> Array:
        """Each value as the column's code: -1 for a null, -2 for a value no record holds."""
        # The values by code (null at 0): a value's place among them is its code.
        found = pc.index_in(values, value_set=self._values_of[column])
        codes = np.asarray(pc.fill_null(found, -2).to_numpy(zero_copy_only=False), np.int64)
        return np.where(pc.is_null(values).to_numpy(zero_copy_only=False), -1, codes)

    def decode(self, column: str, codes: Array, missing: Array | None = None) -> pa.Array:
        """A column's values from the index's codes of it: a coded column's (code 0, no value:
        null; the flags as booleans), a day's as a date (an open end: null); `missing` rows
        null."""
        if column in DAYS:
            open_end = codes == NO_END
            mask = open_end if missing is None else missing | open_end
            return pa.array(codes, pa.int32(), mask=mask).cast(pa.date32())
        return _as_stored(column, self._values_of[column].take(pa.array(codes, mask=missing)))

    def value(self, column: str, code: int) -> str:
        """The value a coded column's code stands for."""
        return self._names[column][code - 1]

    def decoded(
        self, positions: Array, coded: tuple[str, ...] = ("exchange", *CODED)
    ) -> dict[str, pa.Array]:
        """The `coded` columns (by default the venue and the closed ones; any of the index's,
        `HELD_VALUES` too), the period and the confirmation of the records at `positions`
        (nulls for `NO_RECORD`), as Arrow arrays under their dataset names: each code's value
        (the flags as booleans), the dates as dates (`effective_end` null while open)."""
        missing = positions == NO_RECORD
        at = np.where(missing, 0, positions)
        # One take for every coded column: a take per column cost 35 µs however few the rows,
        # 0.7 ms of a fee line's three records.
        codes = np.concatenate(
            [self._arrays[column][at] + np.int64(self._first_of[column]) for column in coded]
        )
        every = self._every_value.take(pa.array(codes, mask=np.tile(missing, len(coded))))
        columns: dict[str, pa.Array] = {}
        size = len(positions)
        for number, column in enumerate(coded):
            columns[column] = _as_stored(column, every.slice(number * size, size))
        for column in DAYS:
            columns[column] = self.decode(column, np.asarray(self._arrays[column][at]), missing)
        return columns

    def _present(self, column: str, seen: Array) -> list[str]:
        """The values of a coded column with any record (no value, code 0, left out)."""
        names = self._names[column]
        return sorted(names[code - 1] for code in np.flatnonzero(seen).tolist() if code)

    def count(self, selection: Selection) -> int:
        """The number of matching records."""
        return sum(match.count for match in self.matches(selection))

    def matches(self, selection: Selection) -> list["Match"]:
        """Each selected run with the part of it that matches."""
        wanted = self.wanted_codes(selection)
        if wanted is None:
            return []
        window = Window(
            latest_start=min(_days(selection.end_date, selection.in_force_on), default=None),
            earliest_end=max(_days(selection.start_date, selection.in_force_on), default=None),
            oldest_confirmation=min(_days(selection.oldest_confirmation()), default=None),
        )
        # The columns tested record by record (a run is one venue and fee type), each with its
        # few wanted codes, compared one by one (`_wanted`), or None: its table is used (the
        # positions' table is as long as the version, so its codes are not listed).
        tested = {
            column: None if column == POSITION else _few(table)
            for column, table in wanted.items()
            if column not in ("exchange", "fee_type")
        }
        matches = (
            self._match(run, wanted, tested, window)
            for run in self.runs
            if _allowed(wanted, "exchange", run.exchange)
            and _allowed(wanted, "fee_type", run.fee_type)
        )
        return [match for match in matches if match is not None]

    def _match(
        self,
        run: Run,
        wanted: dict[str, Array],
        tested: dict[str, list[int] | None],
        window: "Window",
    ) -> "Match | None":
        """The part of one run in the window with the wanted codes (none: None); `tested`: the
        columns to test record by record, with their few wanted codes (`matches`)."""
        stop = run.stop
        if window.latest_start is not None:  # a record starting after the window cannot overlap
            starts = self._arrays["effective_start"][run.start : run.stop]
            # The key as the array's own type: a Python int makes `np.searchsorted` copy the
            # run into 64-bit integers first (9 ms for 5M starts, against 5 µs).
            latest = starts.dtype.type(window.latest_start)
            stop = run.start + int(np.searchsorted(starts, latest, side="right"))
        if stop <= run.start:
            return None
        bounds = {
            "effective_end": window.earliest_end,
            "confirmed_through": window.oldest_confirmation,
        }
        if not tested and all(bound is None for bound in bounds.values()):
            return Match(run, stop, None)
        keep = np.ones(stop - run.start, dtype=bool)
        for column, few in tested.items():
            keep &= _wanted(self._arrays[column][run.start : stop], wanted[column], few)
        for column, bound in bounds.items():
            if bound is not None:
                keep &= self._arrays[column][run.start : stop] >= bound
        positions = run.start + np.flatnonzero(keep)
        return Match(run, stop, positions) if len(positions) else None

    def _carrying(self, codes: list[str]) -> Array | None:
        """A lookup table by position of the records carrying any of `codes`; None for none."""
        pairs = [(self.value("exchange", run.exchange), self.value("fee_type", run.fee_type))
                 for run in self.runs]  # fmt: skip
        positions = self.price_keys.coded(pairs, codes)
        if not len(positions):
            return None
        table = np.zeros(self.size, dtype=np.bool_)
        table[positions] = True
        return table

    def wanted_codes(self, selection: Selection) -> dict[str, Array] | None:
        """Per filtered column, a lookup table of its wanted codes; None when nothing can
        match."""
        lists = dict(selection.values)
        if selection.venues is not None:
            lists["exchange_name"] = selection.venues
        wanted: dict[str, Array] = {}
        for name, values in lists.items():
            column = RESULT_FILTERS[name]
            if name == "fee_code":  # the records carrying the codes, by the price keys
                carrying = self._carrying(values)
                if carrying is None:
                    return None
                wanted[POSITION] = carrying
                continue
            codes = self._codes[column]
            if name == "tape":  # coded as their text: the lists holding one, or every tape
                values = [text for text in codes if not text or set(text.split()) & set(values)]
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


class Positions:
    """Every record's position, as a column of the index reads: a slice of it, or the values
    at some positions (they are the positions)."""

    def __getitem__(self, at: slice | Array) -> Array:
        if isinstance(at, slice):
            return np.arange(at.start, at.stop, dtype=np.int64)
        return np.asarray(at, dtype=np.int64)


def sorted_groups(values: Array, first: int) -> tuple[Array, Array]:
    """The distinct values of a sorted array and where each begins (counted from `first`)."""
    bounds = np.concatenate([[0], np.flatnonzero(np.diff(values)) + 1])
    return values[bounds], bounds + first


def _lookup(codes: list[int], column: str) -> Array:
    """A table saying, for every possible code of the column, whether it is wanted: testing a
    run's codes is then one gather (`np.isin` sorts, and cost ten times as much)."""
    table = np.zeros(int(np.iinfo(CODE_TYPES[column]).max) + 1, dtype=np.bool_)
    table[codes] = True
    return table


# Up to this many wanted codes, a run's codes are compared with each: a comparison of the 941,588
# one-byte codes of one venue's option run took 0.05 ms, where a look-up in the column's table
# took 0.93 ms (`np.take`) and 2.1 ms by indexing the table, which first copies the codes as
# 64-bit indices (10M records, #40 part 7).
FEW_CODES: Final = 4


def _few(table: Array) -> list[int] | None:
    """The codes a column's lookup table wants, when they are few (`FEW_CODES`)."""
    codes = np.flatnonzero(table)
    return codes.tolist() if 0 < len(codes) <= FEW_CODES else None


def _wanted(values: Array, table: Array, few: list[int] | None) -> Array:
    """Whether each of a run's `values` (codes, or positions) is wanted: compared with each of
    the `few` wanted codes when there are few (as Python ints, so the comparison keeps the
    codes' own type), else looked up in the column's `table`."""
    return np.take(table, values) if few is None else one_of(values, few)


def _as_stored(column: str, values: pa.Array) -> pa.Array:
    """A coded column's values as the dataset holds them: the flags as booleans."""
    return pc.equal(values, "true") if column in FLAGS else values


def one_of(values: Array, codes: list[int]) -> Array:
    """Whether each of `values` is one of `codes` (at least one), found by comparing with each:
    for a few codes far quicker than a look-up or `np.isin`, which convert every value to a
    64-bit index first (`np.isin`: 9.1 ms against 0.07 for 941,588 one-byte codes)."""
    hit: Array = values == codes[0]
    for code in codes[1:]:
        hit |= values == code
    return hit


def _allowed(wanted: dict[str, Array], column: str, code: int) -> bool:
    return column not in wanted or bool(wanted[column][code])


def _date(days: int) -> date:
    return EPOCH + timedelta(days=days)


def _days(*days: date | None) -> list[int]:
    """The given days as days since 1970."""
    return [(day - EPOCH).days for day in days if day is not None]
