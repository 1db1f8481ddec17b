"""The class index of a version, for the comparisons (the layout: `ingest.layout.CLASS_FILES`).

A comparison asks, per venue, how many records of some classes are in force on one day with an
amount in one unit (and how many in another), and which of them has the lowest and the highest
amount. Grouped by venue, class and slot (unit, and whether the amount is a money figure), a
group's records in force are counted with two binary searches in its sorted starts and ends,
and its lowest amount in force is the first record in force met in amount order (its highest,
the last): a few probes from either end. Testing every record of the wanted classes instead
took 17 ms for every option line of every venue at 10M records (650k of them in force), 6.9 ms
this way (one Python process, no server).
"""

from pathlib import Path
from typing import Any, Final

import numpy as np
import numpy.typing as npt

from ingest.layout import CLASSES, NO_END, NULL_RANK, SLOTS, group_number

Array = npt.NDArray[Any]

# The results index's arrays the class index is made from (by position), besides the classes
# and the ranks.
CLASSES_READ: Final = ("exchange", "unit", "effective_start", "effective_end", "confirmed_through")
# Copied into the index's amount order: file name -> the results index's array.
COPIED: Final = {
    "class_start": "effective_start",
    "class_end": "effective_end",
    "class_confirmed": "confirmed_through",
    "class_amount": "amount_rank",
}
# Sorted within each group on their own: file name -> the results index's array.
SORTED: Final = {"class_sorted_start": "effective_start", "class_sorted_end": "effective_end"}


def write_classes(index: Path, arrays: dict[str, Array], classes: Array, venues: int) -> None:
    """Write the class index (`CLASS_FILES`) into `index/`, from the results index's arrays by
    position (`arrays`: venue codes, units, ranks and periods), the records' classes and the
    number of venue codes."""
    amount = arrays["amount_rank"]
    money = amount != NULL_RANK
    slot = arrays["unit"].astype(np.int32) * 2 + ~money
    group = group_number(arrays["exchange"].astype(np.int32), classes.astype(np.int32), slot)
    del slot
    groups = (venues + 1) * CLASSES * SLOTS
    group_sizes = np.bincount(group, minlength=groups)
    # The open records: an age limit counts their last confirmations (sorted within each group).
    open_ = arrays["effective_end"] == NO_END
    open_group_sizes = np.bincount(group[open_], minlength=groups)
    # Numbered densely (in the same order), the groups take fewer bits in a sort key.
    dense = (np.cumsum(group_sizes > 0) - 1)[group]
    del group
    order = amount_order(dense, np.where(money, amount, 0), arrays["record_rank"])
    np.save(index / "class_order.npy", order.astype(np.uint32))
    for name, source in COPIED.items():
        np.save(index / f"{name}.npy", arrays[source][order])
    # The few records ended, yet last confirmed before their end (a complete schedule's
    # omission ended them): their places in that order.
    end, confirmed = arrays["effective_end"][order], arrays["confirmed_through"][order]
    ended_presumed = np.flatnonzero((end != NO_END) & (confirmed < end))
    np.save(index / "class_ended_presumed.npy", ended_presumed.astype(np.int64))
    del order, end, confirmed
    for name, source in SORTED.items():
        np.save(index / f"{name}.npy", _sorted_within(dense, arrays[source]))
    open_confirmed = _sorted_within(dense[open_], arrays["confirmed_through"][open_])
    np.save(index / "class_sorted_open_confirmed.npy", open_confirmed)
    np.save(
        index / "class_bounds.npy", np.concatenate(([0], np.cumsum(group_sizes))).astype(np.int64)
    )
    # 32-bit: a table of every group (a few hundred kB a venue), for fewer records than 2**31.
    bounds = np.concatenate(([0], np.cumsum(open_group_sizes))).astype(np.int32)
    np.save(index / "class_open_bounds.npy", bounds)


def amount_order(group: Array, amount: Array, record: Array) -> Array:
    """The positions ordered by group, then amount rank, then record rank. At 10M records the
    three fit one 64-bit key (15 + 17 + 24 bits), sorted as numbers in 1 s; `np.lexsort` of
    the three took 6.9 s, and still orders keys too wide for one number."""
    bits = [int(values.max(initial=0)).bit_length() for values in (group, amount, record)]
    ordered: Array
    if sum(bits) > 64:
        ordered = np.lexsort((record, amount, group))
        return ordered
    key = group.astype(np.uint64) << np.uint64(bits[1] + bits[2])
    key |= amount.astype(np.uint64) << np.uint64(bits[2])
    key |= record.astype(np.uint64)
    key.sort()
    by_record = np.empty(len(record), dtype=np.int64)  # a record rank's position
    by_record[record] = np.arange(len(record))
    ordered = by_record[key & np.uint64((1 << bits[2]) - 1)]
    return ordered


def _sorted_within(group: Array, days: Array) -> Array:
    """The days of each group sorted on their own, in group order (as one sorted 64-bit key of
    the group and the day, the day offset to be unsigned; an open end's `NO_END` included)."""
    low = int(days.min(initial=0))
    key = group.astype(np.uint64) << np.uint64(32)
    key |= (days.astype(np.int64) - low).astype(np.uint64)
    key.sort()
    return ((key & np.uint64(0xFFFFFFFF)).astype(np.int64) + low).astype(days.dtype)
