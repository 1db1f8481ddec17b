"""Pages of the version's change list (written by `ingest.changes`; `ingest.layout.CHANGE_FILES`
says what each array holds), from memory-mapped arrays.

The list is held twice. Grouped by venue, in change order (effective date, then line id) within
each, a venue's changes in a date window are one slice, found by two binary searches, and the
other filters test the slice's own codes. Grouped by class (`ingest.layout.CLASSED`), in change
order within each, a filter on the classed columns is a few slices, cut to a date window by
rank: a filter of every venue on a fee type and an action reads no change it leaves out (on
the venue grouping it tested all 9.5M entries of a 10M-record version: 82 ms against 3 ms). A
request takes the grouping that reads fewer entries.

Each change's place in the overall order (`change_rank`) orders the page: the ranks of each
run of matches rise, so the page is the runs' first ranks merged (an early page), or is found
by bisecting on the rank, counting each run's matches below it with a binary search.
"""

import itertools
from dataclasses import dataclass
from pathlib import Path
from typing import Final, Literal

import numpy as np

from ingest.layout import CHANGE_FILES, CHANGE_TYPES, CLASSED, NO_RECORD
from service.dataset.classes import wanted_classes
from service.dataset.index import Array, ResultsIndex
from service.dataset.mapped import mapped_array

# Keys searched for as the arrays' own types: a Python int makes `np.searchsorted` copy the
# whole slice into 64-bit integers first (7 ms for a venue's 5M ranks, against 3 µs).
DAY, RANK = np.int32, np.uint32
# The most ranks an early page merges from the runs' heads (or tails), over bisecting for it.
MERGED: Final = 250_000


@dataclass(frozen=True)
class ChangeFilter:
    """Which changes a request means: venue codes (None: every venue), per filtered column a
    lookup table of its wanted codes (`ResultsIndex.wanted_codes`), the change types, and the
    first and last effective day (days since 1970; None: open)."""

    venues: list[int] | None
    # Keyed by a column of `CLASSED`, or another coded column, tested on the record the change
    # leads to (for a removal, the record it ends): `standard`.
    wanted: dict[str, Array]
    types: list[str] | None
    first_day: int | None
    last_day: int | None


@dataclass(frozen=True)
class Run:
    """One venue's (or class's) matching entries and their ranks, in rank order: `entries`
    None stands for the whole slice from `first` (no array of every entry is made for an
    unfiltered venue)."""

    first: int
    entries: Array | None
    ranks: Array

    def between(self, begin: int, end: int) -> Array:
        """The entries at places [begin, end) of the run (cut short at its end)."""
        if self.entries is None:
            return np.arange(self.first + begin, self.first + min(end, len(self.ranks)))
        return self.entries[begin:end]


class ChangeList:
    def __init__(self, directory: Path, index: ResultsIndex) -> None:
        self._index = index
        self._arrays: dict[str, Array] = {
            name: mapped_array(directory / f"{name}.npy") for name in CHANGE_FILES
        }
        self.size = len(self._arrays["change_day"])
        self._bounds = np.array(self._arrays["change_bounds"])
        self._class_bounds = np.array(self._arrays["change_class_bounds"])

    def ordering(self, chosen: ChangeFilter, descending: bool) -> "Changes":
        """The matching changes in change order (reversed when `descending`), for the pager."""
        return Changes(self._matches(chosen), descending)

    def columns(self, entries: Array) -> dict[str, Array]:
        """The `day`, `type` (a 1-based place in `CHANGE_TYPES`) and records (`before`,
        `after`: positions, `NO_RECORD` for none) of the entries, as arrays."""
        return {
            name: np.asarray(self._arrays[f"change_{name}"][entries])
            for name in ("day", "type", "before", "after")
        }

    def _matches(self, chosen: ChangeFilter) -> list[Run]:
        """The runs of matching entries, from the grouping that reads fewer: by venue, or (with
        a filter on a classed column) by class."""
        venues = self._venue_slices(chosen)
        classes = wanted_classes(chosen.wanted)
        types = None
        if chosen.types is not None:
            types = np.zeros(len(CHANGE_TYPES) + 1, dtype=bool)
            types[[CHANGE_TYPES.index(name) + 1 for name in chosen.types]] = True
        runs = None
        if classes is not None:
            slices = self._class_slices(classes, chosen)
            tested = chosen.venues is not None or types is not None
            read = sum(stop - start for start, stop in slices) if tested else 0
            if by_class(read, sum(stop - start for start, stop in venues)):
                runs = self._class_runs(slices, chosen.venues, types)
        if runs is None:
            runs = self._venue_runs(venues, classes, types)
        others = {name: table for name, table in chosen.wanted.items() if name not in CLASSED}
        if not others:
            return runs
        return [run for run in (self._of_records(run, others) for run in runs) if run is not None]

    def _of_records(self, run: Run, wanted: dict[str, Array]) -> Run | None:
        """The run's entries whose record (the one the change leads to, or for a removal the
        one it ends) holds a wanted code of each column; None when none does."""
        entries = run.between(0, len(run.ranks))
        after = self._arrays["change_after"][entries]
        record = np.where(after == NO_RECORD, self._arrays["change_before"][entries], after)
        keep = np.ones(len(entries), dtype=bool)
        for name, table in wanted.items():
            keep &= table[self._index.column(name)[record]]
        return Run(0, entries[keep], run.ranks[keep]) if keep.any() else None

    def _venue_slices(self, chosen: ChangeFilter) -> list[tuple[int, int]]:
        """Per venue chosen, its entries in the date window (a slice of the venue grouping)."""
        slices = []
        every = range(len(self._bounds) - 1)
        for venue in sorted(chosen.venues) if chosen.venues is not None else every:
            start, stop = int(self._bounds[venue]), int(self._bounds[venue + 1])
            days = self._arrays["change_day"][start:stop]
            if chosen.last_day is not None:
                stop = start + int(np.searchsorted(days, DAY(chosen.last_day), side="right"))
            if chosen.first_day is not None:
                start += int(np.searchsorted(days, DAY(chosen.first_day), side="left"))
            if start < stop:
                slices.append((start, stop))
        return slices

    def _venue_runs(
        self, slices: list[tuple[int, int]], classes: Array | None, types: Array | None
    ) -> list[Run]:
        arrays, runs = self._arrays, []
        for start, stop in slices:
            if classes is None and types is None:
                runs.append(Run(start, None, arrays["change_rank"][start:stop]))
                continue
            keep = np.ones(stop - start, dtype=bool)
            if classes is not None:
                keep &= classes[arrays["change_class"][start:stop]]
            if types is not None:
                keep &= types[arrays["change_type"][start:stop]]
            entries = start + np.flatnonzero(keep)
            if len(entries):
                runs.append(Run(start, entries, arrays["change_rank"][entries]))
        return runs

    def _class_slices(self, classes: Array, chosen: ChangeFilter) -> list[tuple[int, int]]:
        """Per wanted class, its entries in the date window (a slice of the class grouping):
        the window is a range of ranks, since change order begins with the day."""
        low, high = self._rank_window(chosen)
        ranks, slices = self._arrays["change_class_rank"], []
        for number in np.flatnonzero(classes).tolist():
            start, stop = int(self._class_bounds[number]), int(self._class_bounds[number + 1])
            if start == stop:
                continue
            if high is not None:
                stop = start + int(np.searchsorted(ranks[start:stop], RANK(high), side="left"))
            if low is not None:
                start += int(np.searchsorted(ranks[start:stop], RANK(low), side="left"))
            if start < stop:
                slices.append((start, stop))
        return slices

    def _rank_window(self, chosen: ChangeFilter) -> tuple[int | None, int | None]:
        """The ranks [low, high) of the changes in the date window (None: open): the number
        dated before its first day, and up to its last, counted in every venue's slice."""
        days, bounds = self._arrays["change_day"], self._bounds.tolist()
        every = [days[start:stop] for start, stop in itertools.pairwise(bounds) if stop > start]

        def before(day: int | None, side: Literal["left", "right"]) -> int | None:
            if day is None:
                return None
            return sum(int(np.searchsorted(venue, DAY(day), side=side)) for venue in every)

        return before(chosen.first_day, "left"), before(chosen.last_day, "right")

    def _class_runs(
        self, slices: list[tuple[int, int]], venues: list[int] | None, types: Array | None
    ) -> list[Run]:
        arrays, runs = self._arrays, []
        wanted_venues = None
        if venues is not None:
            wanted_venues = np.zeros(len(self._bounds) - 1, dtype=bool)
            wanted_venues[venues] = True
        for start, stop in slices:
            entries = arrays["change_by_class"][start:stop]
            ranks = arrays["change_class_rank"][start:stop]
            if wanted_venues is not None or types is not None:
                keep = np.ones(stop - start, dtype=bool)
                if wanted_venues is not None:
                    keep &= wanted_venues[arrays["change_class_venue"][start:stop]]
                if types is not None:
                    keep &= types[arrays["change_class_type"][start:stop]]
                entries, ranks = entries[keep], ranks[keep]
            if len(entries):
                runs.append(Run(0, entries, ranks))
        return runs


class Changes:
    """The matching changes, in change order or its exact reverse, by place
    (`service.dataset.pager.Ordering`)."""

    def __init__(self, runs: list[Run], descending: bool) -> None:
        self._runs = runs
        self._descending = descending
        self.total = sum(len(run.ranks) for run in runs)

    def places(self, first: int, last: int) -> Array:
        if not self._descending:
            return _between(self._runs, first, last, self.total)
        end = self.total - 1
        return _between(self._runs, end - last, end - first, self.total)[::-1]


def by_class(read_by_class: int, read_by_venue: int) -> bool:
    """Whether to take the class grouping, given how many entries each would read."""
    return read_by_class <= read_by_venue


def _between(runs: list[Run], first: int, last: int, total: int) -> Array:
    """The entries holding the `first` to `last` smallest ranks across the runs (0-based, both
    inclusive, of `total`), in rank order."""
    if len(runs) == 1:
        return runs[0].between(first, last + 1)
    head, tail = last + 1, total - first
    if min(head, tail) * len(runs) <= MERGED:
        # An early (or late) page: it is among each run's first `head` (or last `tail`).
        cut = [
            (0, head) if head <= tail else (max(len(run.ranks) - tail, 0), len(run.ranks))
            for run in runs
        ]
        entries = np.concatenate([run.between(*at) for run, at in zip(runs, cut, strict=True)])
        ranks = np.concatenate([run.ranks[slice(*at)] for run, at in zip(runs, cut, strict=True)])
        skipped = 0 if head <= tail else total - len(ranks)
        order = np.argsort(ranks)
        return entries[order[first - skipped : last + 1 - skipped]]
    low, high = _nth_rank(runs, first), _nth_rank(runs, last)
    window_entries, window_ranks = [], []
    for run in runs:
        begin = int(np.searchsorted(run.ranks, RANK(low), side="left"))
        end = int(np.searchsorted(run.ranks, RANK(high), side="right"))
        window_entries.append(run.between(begin, end))
        window_ranks.append(run.ranks[begin:end])
    return np.concatenate(window_entries)[np.argsort(np.concatenate(window_ranks))]


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
