"""A version's rollups (`ingest.rollups`), read when the version is opened, and the in-memory
search that answers a discovery call's counts from them.

The records of a venue and value that are in force somewhere in a window [S, E] are those that
started on or before E, less those that ended before S (a record that ended before S started
before it too, since the ingest refuses an end before its start). Both are prefix sums over
the value's periods sorted by start and by end, so a call costs one binary search per value and
side, whatever the size of the dataset: no query, no scan, no thread.
"""

from collections import defaultdict
from dataclasses import dataclass
from datetime import date
from pathlib import Path
from typing import Final

import numpy as np
import numpy.typing as npt
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from ingest.layout import ROLLUP_DIR, VERSION_KEY
from service.dataset.index import EPOCH

# A day is stored as days since 1970 plus 2**31, so it fits the low 32 bits of a search key
# whose high bits are the group (one venue, dimension and value); an open side is the extreme.
OFFSET: Final = 2**31
OPEN_END: Final = 2**32 - 1
OPEN_START: Final = 0

Keys = npt.NDArray[np.int64]
# The text columns of the counts rollup that name a group. Read as dictionaries straight from
# the Parquet file's own: encoding 1.1M strings at open took 0.1-0.4 s of a 10M version's open.
ENCODED: Final = ("dimension", "exchange", "value")


class RollupMismatch(ValueError):
    """A rollup file written for another version than the one being opened."""


def read_rollup(
    version_dir: Path, name: str, version_id: str, *, dictionary: tuple[str, ...] = ()
) -> pa.Table:
    """One rollup table, refused unless it was written for `version_id`; the `dictionary`
    columns are read as dictionary arrays (one dictionary per column)."""
    path = version_dir / ROLLUP_DIR / f"{name}.parquet"
    table = pq.read_table(path, read_dictionary=list(dictionary)).unify_dictionaries()
    written_for = (table.schema.metadata or {}).get(VERSION_KEY, b"").decode() or "no version"
    if written_for != version_id:
        raise RollupMismatch(f"{path} was written for {written_for}, not for version {version_id}")
    return table


def day(value: date | None, open_side: int) -> int:
    return open_side if value is None else (value - EPOCH).days + OFFSET


class DiscoveryCounts:
    """Records per value of a discovery dimension, for one venue and a date window."""

    def __init__(self, counts: pa.Table) -> None:
        # One group per (dimension, venue, value); its number is the high half of every key.
        dimension, exchange, value = (_encoded(counts[name]) for name in ENCODED)
        sizes = (len(exchange.dictionary), len(value.dictionary))
        group = (
            _codes(dimension) * (sizes[0] * sizes[1]) + _codes(exchange) * sizes[1] + _codes(value)
        )
        starts = _days(counts["effective_start"], OPEN_END)
        ends = _days(counts["effective_end"], OPEN_END)  # still in force: never ends before S
        records = counts["records"].to_numpy().astype(np.int64)
        self._starts, self._started = _prefix_sums(group, starts, records)
        self._ends, self._ended = _prefix_sums(group, ends, records)
        names = (dimension.dictionary.to_pylist(), exchange.dictionary.to_pylist())
        values = value.dictionary.to_pylist()
        group_numbers: dict[tuple[str, str], dict[str, int]] = defaultdict(dict)
        grouped = self._starts >> 32  # the groups, sorted: each distinct one where it changes
        for number in grouped[np.flatnonzero(np.diff(grouped, prepend=-1))].tolist():
            rest, value_code = divmod(number, sizes[1])
            dimension_code, exchange_code = divmod(rest, sizes[0])
            key = (names[0][dimension_code], names[1][exchange_code])
            group_numbers[key][str(values[value_code])] = number << 32
        self._groups = {key: self._group(numbers) for key, numbers in group_numbers.items()}

    def _group(self, numbers: dict[str, int]) -> "_Group":
        groups = np.array(list(numbers.values()), dtype=np.int64)
        # The sums before each group's first period do not depend on the window: found once.
        before_started = self._started[self._starts.searchsorted(groups, side="left")]
        before_ended = self._ended[self._ends.searchsorted(groups, side="left")]
        return _Group(tuple(numbers), groups, before_started, before_ended)

    def count(
        self, dimension: str, venue: str, start: date | None, end: date | None
    ) -> dict[str, int]:
        """Records in force in [start, end] per value the venue has any record for (0 when
        none is in the window); a missing side is open."""
        group = self._groups.get((dimension, venue), NONE)
        # Per value: the records started on or before E, less those ended before S.
        last_start = self._starts.searchsorted(group.groups | day(end, OPEN_END), side="right")
        last_end = self._ends.searchsorted(group.groups | day(start, OPEN_START), side="left")
        started = self._started[last_start] - group.before_started
        ended = self._ended[last_end] - group.before_ended
        return dict(zip(group.values, (started - ended).tolist(), strict=True))


@dataclass(frozen=True)
class _Group:
    """One venue's values of one dimension: their group numbers (the high half of their keys)
    and the sums before each group."""

    values: tuple[str, ...]
    groups: Keys
    before_started: Keys
    before_ended: Keys


EMPTY: Final = np.empty(0, dtype=np.int64)
NONE: Final = _Group((), EMPTY, EMPTY, EMPTY)  # a venue with no records


def _encoded(column: pa.ChunkedArray) -> pa.DictionaryArray:
    """A column read with the file's dictionary (`ENCODED`), as one array."""
    encoded: pa.DictionaryArray = column.combine_chunks()
    return encoded


def _codes(encoded: pa.DictionaryArray) -> Keys:
    codes: Keys = encoded.indices.to_numpy().astype(np.int64)
    return codes


def _days(column: pa.ChunkedArray, open_side: int) -> Keys:
    days: Keys = pc.fill_null(pc.cast(column, pa.int32()), open_side - OFFSET).to_numpy()
    return days.astype(np.int64) + OFFSET


def _prefix_sums(group: Keys, days: Keys, records: Keys) -> tuple[Keys, Keys]:
    """Search keys (group, day) in order, and the records up to each (a leading 0)."""
    keys = (group << 32) | days
    order = np.argsort(keys, kind="stable")
    return keys[order], np.concatenate(([0], np.cumsum(records[order])))
