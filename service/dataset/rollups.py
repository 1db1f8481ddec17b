"""A version's rollups (`ingest.rollups`), read when the version is opened, and the search that
answers a discovery call's counts from the arrays the ingest wrote beside them.

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
import pyarrow.parquet as pq

from ingest.layout import (
    DAY_OFFSET,
    DISCOVERY_ARRAYS,
    GROUP_COLUMNS,
    OPEN_END,
    OPEN_START,
    ROLLUP_DIR,
    VERSION_KEY,
    discovery_array_path,
)
from service.dataset.index import EPOCH
from service.dataset.mapped import mapped_array

Keys = npt.NDArray[np.int64]


class RollupMismatch(ValueError):
    """A rollup file written for another version than the one being opened."""


def read_rollup(version_dir: Path, name: str, version_id: str) -> pa.Table:
    """One rollup table, refused unless it was written for `version_id`."""
    path = version_dir / ROLLUP_DIR / f"{name}.parquet"
    table = pq.read_table(path)
    written_for = (table.schema.metadata or {}).get(VERSION_KEY, b"").decode() or "no version"
    if written_for != version_id:
        raise RollupMismatch(f"{path} was written for {written_for}, not for version {version_id}")
    return table


def day(value: date | None, open_side: int) -> int:
    return open_side if value is None else (value - EPOCH).days + DAY_OFFSET


class DiscoveryCounts:
    """Records per value of a discovery dimension, for one venue and a date window, searched in
    the arrays the ingest wrote (`ingest.layout.DISCOVERY_ARRAYS`), memory-mapped: opening a
    version sorts nothing and copies nothing."""

    def __init__(self, groups: pa.Table, version_dir: Path) -> None:
        self._starts, self._started, self._ends, self._ended = (
            mapped_array(discovery_array_path(version_dir, name)) for name in DISCOVERY_ARRAYS
        )
        group_numbers: dict[tuple[str, str], dict[str, int]] = defaultdict(dict)
        named = (groups[name].to_pylist() for name in GROUP_COLUMNS)
        for number, (dimension, exchange, value) in enumerate(zip(*named, strict=True)):
            group_numbers[(dimension, exchange)][str(value)] = number << 32
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
