"""Pages of the version's change list (written by `ingest.changes`; `ingest.layout.CHANGE_FILES`
says what each array holds), from memory-mapped arrays.

The list is grouped by venue and in change order (effective date, then line id) within each, so
a venue's changes in a date window are one slice, found by two binary searches; the other
filters test the slice's own codes. Across venues, each change's place in the overall order
(`change_rank`) orders the page: the ranks of each venue's matches rise, so the page's first
and last ranks are found by bisecting on the rank, counting each venue's matches below it with
a binary search, and only the changes between them are sorted.
"""

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ingest.layout import CHANGE_FILES, CHANGE_TYPES
from service.dataset.index import Array

# Keys searched for as the arrays' own types: a Python int makes `np.searchsorted` copy the
# whole slice into 64-bit integers first (7 ms for a venue's 5M ranks, against 3 µs).
DAY, RANK = np.int32, np.uint32


@dataclass(frozen=True)
class ChangeFilter:
    """Which changes a request means: venue codes (None: every venue), per filtered column a
    lookup table of its wanted codes (`ResultsIndex.wanted_codes`), the change types, and the
    first and last effective day (days since 1970; None: open)."""

    venues: list[int] | None
    wanted: dict[str, Array]  # keyed by a column of `CHANGE_FILTERED`
    types: list[str] | None
    first_day: int | None
    last_day: int | None


@dataclass(frozen=True)
class Run:
    """One venue's matching entries and their ranks (both rising): `entries` None stands for
    the whole slice from `first` (no array of every entry is made for an unfiltered venue)."""

    first: int
    entries: Array | None
    ranks: Array

    def between(self, begin: int, end: int) -> Array:
        """The entries at places [begin, end) of the run (cut short at its end)."""
        if self.entries is None:
            return np.arange(self.first + begin, self.first + min(end, len(self.ranks)))
        return self.entries[begin:end]


class ChangeList:
    def __init__(self, directory: Path) -> None:
        self._arrays: dict[str, Array] = {
            name: np.load(directory / f"{name}.npy", mmap_mode="r") for name in CHANGE_FILES
        }
        self.size = len(self._arrays["change_day"])
        self._bounds = np.asarray(self._arrays["change_bounds"])

    def page(
        self, chosen: ChangeFilter, descending: bool, offset: int, size: int
    ) -> tuple[int, list[int]]:
        """The number of matching changes and the page's entries (indexes into the arrays), in
        change order (reversed when `descending`)."""
        runs = list(self._matches(chosen))
        total = sum(len(run.ranks) for run in runs)
        if offset >= total:
            return total, []
        first = total - offset - size if descending else offset
        last = total - offset - 1 if descending else offset + size - 1
        entries = _between(runs, max(first, 0), last)
        return total, (entries[::-1] if descending else entries).tolist()

    def ordered(self, chosen: ChangeFilter, descending: bool, chunk: int) -> Iterator[Array]:
        """Every matching entry in the answer's order, at most `chunk` at a time."""
        runs = list(self._matches(chosen))
        total = sum(len(run.ranks) for run in runs)
        for begin in range(0, total, chunk):
            first, last = begin, min(begin + chunk, total) - 1
            if descending:
                first, last = total - 1 - last, total - 1 - first
            entries = _between(runs, first, last)
            yield entries[::-1] if descending else entries

    def columns(self, entries: Array) -> dict[str, Array]:
        """The `day`, `type` (a 1-based place in `CHANGE_TYPES`) and records (`before`,
        `after`: positions, `NO_RECORD` for none) of the entries, as arrays."""
        return {
            name: np.asarray(self._arrays[f"change_{name}"][entries])
            for name in ("day", "type", "before", "after")
        }

    def _matches(self, chosen: ChangeFilter) -> Iterator[Run]:
        """Per venue with a match, its matching entries."""
        arrays = self._arrays
        venues = chosen.venues if chosen.venues is not None else range(len(self._bounds) - 1)
        types = None
        if chosen.types is not None:
            types = np.zeros(len(CHANGE_TYPES) + 1, dtype=bool)
            types[[CHANGE_TYPES.index(name) + 1 for name in chosen.types]] = True
        for venue in sorted(venues):
            start, stop = int(self._bounds[venue]), int(self._bounds[venue + 1])
            if start == stop:
                continue
            days = arrays["change_day"][start:stop]
            if chosen.last_day is not None:
                stop = start + int(np.searchsorted(days, DAY(chosen.last_day), side="right"))
            if chosen.first_day is not None:
                start += int(np.searchsorted(days, DAY(chosen.first_day), side="left"))
            if start >= stop:
                continue
            if not chosen.wanted and types is None:
                yield Run(start, None, arrays["change_rank"][start:stop])
                continue
            keep = np.ones(stop - start, dtype=bool)
            for column, wanted in chosen.wanted.items():
                keep &= wanted[arrays[f"change_{column}"][start:stop]]
            if types is not None:
                keep &= types[arrays["change_type"][start:stop]]
            entries = start + np.flatnonzero(keep)
            if len(entries):
                yield Run(start, entries, arrays["change_rank"][entries])


def _between(runs: list[Run], first: int, last: int) -> Array:
    """The entries holding the `first` to `last` smallest ranks across the runs (0-based, both
    inclusive), in rank order."""
    if len(runs) == 1:
        return runs[0].between(first, last + 1)
    low, high = _nth_rank(runs, first), _nth_rank(runs, last)
    entries, ranks = [], []
    for run in runs:
        begin = int(np.searchsorted(run.ranks, RANK(low), side="left"))
        end = int(np.searchsorted(run.ranks, RANK(high), side="right"))
        entries.append(run.between(begin, end))
        ranks.append(run.ranks[begin:end])
    return np.concatenate(entries)[np.argsort(np.concatenate(ranks))]


def _nth_rank(runs: list[Run], nth: int) -> int:
    """The rank that is the `nth` smallest (0-based) across the runs: the least rank with more
    than `nth` ranks at or below it."""
    low = min(int(run.ranks[0]) for run in runs)
    high = max(int(run.ranks[-1]) for run in runs)
    while low < high:
        middle = (low + high) // 2
        if sum(int(np.searchsorted(run.ranks, RANK(middle), side="right")) for run in runs) > nth:
            high = middle
        else:
            low = middle + 1
    return low
