"""Comparisons from the version's class index (written by `ingest.classes`;
`ingest.layout.CLASS_FILES` says what each array holds), from memory-mapped arrays.

The index groups the positions by venue, class and slot (unit, and whether the amount is a
money figure), in amount order within a group. A comparison's venues and classed filters pick
groups; in each, the records in force on the day are counted by two binary searches in its
sorted starts and ends, and its lowest amount in force is the first record in force met from
the group's start (its highest, the last from its end): a few probes, made for every group at
once in widening windows. Every step runs over all groups together, in numpy; no record that
is not looked at is read. An age limit (`max_age_days`) counts each group's stale records in
force apart (`_stale`) and probes past them. Filters on other columns (symbol and trade,
provenance) are not in the groups: with one, each picked group's records are tested in order
instead.
"""

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Final, Literal

import numpy as np

from ingest.layout import (
    CLASS_FILES,
    CLASSED,
    CLASSES,
    NULL_RANK,
    SLOTS,
    class_codes,
    group_number,
)
from service.dataset.index import EPOCH, Array, ResultsIndex
from service.dataset.mapped import mapped_array
from service.dataset.queries import Selection

CODES: Final = class_codes()  # per classed column, its code in each class
FIRST_PROBES: Final = 8  # records probed per group at first (the window doubles each round)


@dataclass(frozen=True)
class Spread:
    """One venue's matching records with an amount in the unit compared: how many, and the
    positions of the lowest and highest amounts (ties: the lower record id); then how many
    matching records are counted in another unit or have no figure, and how many were left out
    as last confirmed too long before the day (in any unit)."""

    compared: int
    lowest: int | None
    highest: int | None
    elsewhere: int
    stale: int = 0


@dataclass(frozen=True)
class GroupSpreads:
    """Per group picked: how many of its records are in force (and confirmed recently enough),
    and for the groups compared with any, the places in the index of the lowest and the
    highest in force; then how many in force were left out as stale."""

    counts: Array
    lowest: Array
    highest: Array
    stale: Array | None = None


class ClassIndex:
    def __init__(self, directory: Path, index: ResultsIndex) -> None:
        self._arrays: dict[str, Array] = {
            name: mapped_array(directory / f"{name}.npy") for name in CLASS_FILES
        }
        self._bounds = np.array(self._arrays["class_bounds"])
        self._index = index

    def spreads(self, selection: Selection, unit: str) -> dict[str, Spread]:
        """Per venue with a matching record in force on the selection's day (`in_force_on`),
        the spread of their amounts in `unit` (a value of the coded `unit`), found by amount
        rank: no amount is read."""
        if selection.in_force_on is None:
            raise ValueError("a comparison is of one day: the selection needs in_force_on")
        wanted = self._index.wanted_codes(selection)
        if wanted is None:
            return {}
        day = np.int32((selection.in_force_on - EPOCH).days)  # the arrays' own type
        venues = wanted.pop("exchange", None)
        classes_wanted = wanted_classes(wanted)
        every = np.arange(1, (len(self._bounds) - 1) // (CLASSES * SLOTS))
        picked = every if venues is None else np.flatnonzero(venues)
        classes = np.arange(CLASSES) if classes_wanted is None else np.flatnonzero(classes_wanted)
        # Every group of the venues' wanted classes (in every slot) holding a record, in order.
        groups = group_number(
            picked[:, None, None], classes[None, :, None], np.arange(SLOTS)[None, None, :]
        ).ravel()
        groups = groups[self._bounds[groups] < self._bounds[groups + 1]]
        if not len(groups):
            return {}
        code = self._index.code("unit", unit)
        compared = groups % SLOTS == (-1 if code is None else code * 2)  # money in the unit
        others = {column: table for column, table in wanted.items() if column not in CLASSED}
        oldest = selection.oldest_confirmation()
        floor = None if oldest is None else np.int32((oldest - EPOCH).days)
        if others:
            per_group = self._tested(groups, compared, day, others, floor)
        else:
            per_group = self._probed(groups, compared, day, floor)
        return self._by_venue(groups // (CLASSES * SLOTS), compared, per_group)

    def _probed(
        self, groups: Array, compared: Array, day: np.int32, floor: np.int32 | None
    ) -> GroupSpreads:
        """The groups' records in force, counted in their sorted periods, and the extremes of
        the compared ones probed from either end; with a `floor`, those last confirmed before
        it counted apart, as stale, and passed over."""
        begin, end = self._bounds[groups], self._bounds[groups + 1]
        started = _search(self._arrays["class_sorted_start"], begin, end, day, "right")
        ended = _search(self._arrays["class_sorted_end"], begin, end, day, "left")
        counts = started - ended
        stale = None
        if floor is not None:
            stale = self._stale(groups, begin, end, day, floor)
            counts = counts - stale
        some = compared & (counts > 0)
        begin, end = begin[some], end[some]
        lowest = self._first_in_force(begin, end, day, 1, floor)
        last = self._first_in_force(end - 1, begin - 1, day, -1, floor)
        # Ties for the highest amount go to the lowest record id: the first in force of the
        # records holding that amount (the group is in record order within an amount).
        amounts = self._arrays["class_amount"]
        tied = _search(amounts, begin, last, amounts[last], "left")
        return GroupSpreads(
            counts, lowest, self._first_in_force(tied, last + 1, day, 1, floor), stale
        )

    def _stale(
        self, groups: Array, begin: Array, end: Array, day: np.int32, floor: np.int32
    ) -> Array:
        """Per group, its records in force on `day` last confirmed before `floor`. A record's
        confirmation is its end when it is not presumed, so those are its open records last
        confirmed before the floor (a binary search in their sorted confirmations), and the few
        ended ones a complete schedule ended after their last confirmation (tested)."""
        arrays = self._arrays
        low, high = arrays["class_open_bounds"][groups], arrays["class_open_bounds"][groups + 1]
        stale = _search(arrays["class_sorted_open_confirmed"], low, high, floor, "left") - low
        places = arrays["class_ended_presumed"]
        first = np.searchsorted(places, begin, side="left")
        last = np.searchsorted(places, end, side="left")
        for at in np.flatnonzero(last > first).tolist():
            presumed = places[first[at] : last[at]]
            stale[at] += int(
                np.count_nonzero(
                    (arrays["class_start"][presumed] <= day)
                    & (arrays["class_end"][presumed] >= day)
                    & (arrays["class_confirmed"][presumed] < floor)
                )
            )
        return stale

    def _tested(
        self,
        groups: Array,
        compared: Array,
        day: np.int32,
        others: dict[str, Array],
        floor: np.int32 | None,
    ) -> GroupSpreads:
        """The groups' records in force that hold the other filters' codes, tested in order;
        those last confirmed before `floor` (when given) are counted apart, as stale."""
        arrays, column = self._arrays, self._index.column
        begin, end = self._bounds[groups], self._bounds[groups + 1]
        matching = []
        for start, stop in _merged(begin, end):
            in_force = (arrays["class_start"][start:stop] <= day) & (
                arrays["class_end"][start:stop] >= day
            )
            places = start + np.flatnonzero(in_force)
            for name, table in others.items():
                places = places[table[column(name)[arrays["class_order"][places]]]]
            matching.append(places)
        places = np.concatenate(matching)
        stale = None
        if floor is not None:
            old = arrays["class_confirmed"][places] < floor
            holder = np.searchsorted(end, places[old], side="right")
            stale = np.bincount(holder, minlength=len(groups))
            places = places[~old]
        owner = np.searchsorted(end, places, side="right")  # the group holding each place
        counts = np.bincount(owner, minlength=len(groups))
        some = np.flatnonzero(compared & (counts > 0))
        firsts = np.searchsorted(owner, some, side="left")
        lasts = np.searchsorted(owner, some, side="right") - 1
        # The highest amount's first holder: its places are sorted, the amounts within a group.
        amounts = arrays["class_amount"][places]
        tied = [
            first + int(np.searchsorted(amounts[first : last + 1], amounts[last], "left"))
            for first, last in zip(firsts.tolist(), lasts.tolist(), strict=True)
        ]
        return GroupSpreads(counts, places[firsts], places[np.array(tied, dtype=np.int64)], stale)

    def _first_in_force(
        self, cursor: Array, limit: Array, day: np.int32, step: int, floor: np.int32 | None
    ) -> Array:
        """Per group, the first place in force (and confirmed on or after `floor`, when given)
        from `cursor` towards `limit` (excluded), going by `step`: windows of places probed for
        every group at once, each round twice as wide (each group is known to hold one)."""
        starts, ends = self._arrays["class_start"], self._arrays["class_end"]
        confirmed = self._arrays["class_confirmed"]
        first_places = np.empty(len(cursor), dtype=np.int64)
        cursor, limit = cursor.astype(np.int64), limit.astype(np.int64)
        todo, width = np.arange(len(cursor)), FIRST_PROBES
        while len(todo):
            at = cursor[todo, None] + step * np.arange(width)
            inside = (at < limit[todo, None]) if step > 0 else (at > limit[todo, None])
            at = np.where(inside, at, cursor[todo, None])  # out of range: read a safe place
            hit = inside & (starts[at] <= day) & (ends[at] >= day)
            if floor is not None:
                hit &= confirmed[at] >= floor
            has_hit = hit.any(axis=1)
            first_places[todo[has_hit]] = at[has_hit, hit[has_hit].argmax(axis=1)]
            cursor[todo] += step * width
            todo, width = todo[~has_hit & inside[:, -1]], width * 2
        return first_places

    def _by_venue(self, venues: Array, compared: Array, groups: GroupSpreads) -> dict[str, Spread]:
        """Each venue's spread from its groups': counts summed, extremes the least keys."""
        order, records = self._arrays["class_order"], self._index.column("record_rank")
        amounts = self._arrays["class_amount"]
        counts = groups.counts
        some = venues[compared & (counts > 0)]

        def key(places: Array, amount: Array) -> Array:
            rank = records[order[places]].astype(np.uint64)
            return (amount.astype(np.uint64) << np.uint64(32)) | rank

        top = np.uint64(NULL_RANK)
        low_at, high_at = groups.lowest, groups.highest
        lowest = _least(some, key(low_at, amounts[low_at]), low_at)
        highest = _least(some, key(high_at, top - amounts[high_at]), high_at)
        names, owner = np.unique(venues, return_inverse=True)
        matched = np.bincount(owner, weights=counts, minlength=len(names)).astype(np.int64)
        in_unit = np.bincount(owner, weights=counts * compared, minlength=len(names))
        stale = np.zeros(len(names), dtype=np.int64)
        if groups.stale is not None:
            stale = np.bincount(owner, weights=groups.stale, minlength=len(names)).astype(np.int64)
        spreads = {}
        for venue, total, here, old in zip(
            names.tolist(), matched.tolist(), in_unit.tolist(), stale.tolist(), strict=True
        ):
            if not total and not old:
                continue
            low, high = lowest.get(venue), highest.get(venue)
            spreads[self._index.value("exchange", venue)] = Spread(
                int(here),
                None if low is None else int(order[low]),
                None if high is None else int(order[high]),
                total - int(here),
                old,
            )
        return spreads


def wanted_classes(wanted: Mapping[str, Array]) -> Array | None:
    """Which classes the filters on classed columns keep (`ResultsIndex.wanted_codes`'s lookup
    tables), by number; None when no classed column is filtered."""
    filters = [column for column in CLASSED if column in wanted]
    if not filters:
        return None
    classes_wanted = np.ones(CLASSES, dtype=bool)
    for column in filters:
        classes_wanted &= wanted[column][CODES[column]]
    return classes_wanted


def _search(
    values: Array, begin: Array, end: Array, key: Array | np.generic, side: Literal["left", "right"]
) -> Array:
    """Per range [begin, end) of `values`, each sorted, where `key` (one, or one per range)
    goes, as `np.searchsorted` would put it: a binary search of every range at once, each
    step over the ranges not yet settled."""
    low, high = begin.astype(np.int64), end.astype(np.int64)
    keys = np.broadcast_to(key, low.shape)
    todo = np.flatnonzero(low < high)
    while len(todo):
        below, above = low[todo], high[todo]
        middle = (below + above) // 2
        seen, wanted = values[middle], keys[todo]
        go = (seen < wanted) if side == "left" else (seen <= wanted)
        below, above = np.where(go, middle + 1, below), np.where(go, above, middle)
        low[todo], high[todo] = below, above
        todo = todo[below < above]
    return low


def _merged(begin: Array, end: Array) -> list[tuple[int, int]]:
    """Adjacent ranges (sorted) joined: one read per run of neighbouring groups."""
    cuts = np.flatnonzero(begin[1:] != end[:-1]) + 1
    firsts, lasts = np.concatenate(([0], cuts)), np.concatenate((cuts, [len(begin)])) - 1
    return list(zip(begin[firsts].tolist(), end[lasts].tolist(), strict=True))


def _least(owners: Array, keys: Array, places: Array) -> dict[int, int]:
    """Per owner, the place with its least key."""
    order = np.lexsort((keys, owners))
    firsts = order[np.flatnonzero(np.diff(owners[order], prepend=-1))]
    return dict(zip(owners[firsts].tolist(), places[firsts].tolist(), strict=True))
