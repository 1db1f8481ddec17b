"""The change list of a version: every change of every fee line, as `GET /fee-changes` lists them
(the layout: `ingest.layout.CHANGE_FILES`).

The rules, per line in effective order (docs/raw-format.md, "Fee changes"):

    the first record                      added, on its start
    a record starting the day after the   changed, on its start, when what a client sees differs
    previous one ends                     (the figure or its unit); else no change
    a record after a gap                  removed, the day after the earlier one ends; then
                                          added, on its start
    a record that ends (and no record     removed, the day after its end
    follows the next day)

What a client sees of a figure is its amount and currency when it has one (`$0.0030` and
`$0.003` are one figure), else its printed text. The ingest has rejected overlapping records of
a line, so a record starts at the earliest the day after the previous one ends.

The list is made from arrays the index already holds (the line order, the periods, the venue
codes) and one hash per record of what a client sees, in numpy: a window over the line id in
SQL sorts every record again.
"""

from pathlib import Path
from typing import Any, Final

import duckdb
import numpy as np
import numpy.typing as npt

from ingest.arrays import query_arrays
from ingest.layout import CHANGE_TYPES, CLASSES, NO_END, NO_RECORD

Array = npt.NDArray[Any]

# What a client sees of a record's figure, as a hash: equal hashes, no change (`ingest.lives`
# also finds repeated readings by it). The unit, not the printed basis: two readings printing
# "per share" and "per share executed" show one figure.
SEEN_FIGURE: Final = """hash(
    CASE
        WHEN amount IS NULL THEN fee_amount
        ELSE CAST(amount AS VARCHAR) || ' ' || coalesce(currency, '')
    END,
    unit
)"""
# What a client sees of each record, per position (in table order).
SEEN: Final = f"""
SELECT {SEEN_FIGURE} AS seen
FROM {{records}}
"""

# The results index's arrays the list is made from (by position).
CHANGES_READ: Final = ("exchange", "effective_start", "effective_end")
# Coded as 1-based places in `CHANGE_TYPES`.
ADDED, CHANGED, REMOVED = range(1, len(CHANGE_TYPES) + 1)


def write_changes(
    con: duckdb.DuckDBPyConnection,
    records: str,
    index: Path,
    coded: dict[str, Array],
    classes: Array,
    lines: tuple[Array, Array],
) -> None:
    """Write the change list (`CHANGE_FILES`) of the records in `records` into `index/`, from
    the results index's arrays (`coded`: periods and venue codes by position), the records'
    classes and the line index (`line_order`, `line_bounds`). Each array is let go once saved
    (at 10M records the lists are 200 MB): the steps hand them on in dicts they empty."""
    rows = len(coded["exchange"])
    seen = query_arrays(con, SEEN.format(records=records), rows, {"seen": np.uint64})["seen"]
    periods = coded["effective_start"], coded["effective_end"]
    day, kind, before, after, line = _changes(*lines, *periods, seen)
    del seen
    # Change order: effective date, then line (lines are numbered in line id order).
    key = (day.astype(np.int64) << np.int64(32)) | line.astype(np.int64)
    by_change = np.argsort(key, kind="stable")
    del key, line
    rank = np.empty(len(by_change), dtype=np.uint32)
    rank[by_change] = np.arange(len(by_change), dtype=np.uint32)
    record = np.where(after == NO_RECORD, before, after)  # the line's, for its venue and class
    venue, klass = coded["exchange"][record], classes[record]
    del record
    saved = {"change_day": day, "change_type": kind, "change_before": before,
             "change_after": after, "change_rank": rank, "change_class": klass}  # fmt: skip
    del day, before, after
    order = _save_by_venue(index, saved, venue, by_change, coded["exchange"].dtype)
    class_arrays = {
        "by_change": by_change,
        "order": order,
        "rank": rank,
        "venue": venue,
        "type": kind,
    }
    del by_change, order, rank, venue, kind
    _save_by_class(index, class_arrays, klass)


def _save_by_venue(
    index: Path, saved: dict[str, Array], venue: Array, by_change: Array, codes: np.dtype
) -> Array:
    """Save the arrays of `saved` grouped by venue, in change order within each (a stable sort
    of the small codes), emptying it, and each venue's bounds; returns that order."""
    order = by_change[np.argsort(venue[by_change], kind="stable")]
    bounds = np.searchsorted(venue[order], np.arange(int(np.iinfo(codes).max) + 2))
    for name in list(saved):
        np.save(index / f"{name}.npy", saved.pop(name)[order])
    np.save(index / "change_bounds.npy", bounds.astype(np.int64))
    return order


def _save_by_class(index: Path, class_arrays: dict[str, Array], klass: Array) -> None:
    """Save the grouping by class, in change order within each: the entries (their places in
    the venue grouping `class_arrays["order"]`), and the ranks, venues and types a filter reads
    there; `class_arrays` is emptied as they are saved."""
    by_change = class_arrays.pop("by_change")
    by_class = by_change[np.argsort(klass[by_change], kind="stable")]
    del by_change
    order = class_arrays.pop("order")
    entry = np.empty(len(order), dtype=np.uint32)
    entry[order] = np.arange(len(order), dtype=np.uint32)
    del order
    np.save(index / "change_by_class.npy", entry[by_class])
    del entry
    for name in ("rank", "venue", "type"):
        np.save(index / f"change_class_{name}.npy", class_arrays.pop(name)[by_class])
    counts = np.bincount(klass, minlength=CLASSES)
    np.save(index / "change_class_bounds.npy", np.concatenate(([0], np.cumsum(counts))))


def _changes(
    order: Array, bounds: Array, starts: Array, ends: Array, seen: Array
) -> tuple[Array, Array, Array, Array, Array]:
    """Each change's day, type, records before and after (positions, or `NO_RECORD`) and line
    number, in no particular order."""
    size = len(order)
    line = np.repeat(np.arange(len(bounds) - 1, dtype=np.uint32), np.diff(bounds))
    start, end = starts[order], ends[order]  # days, in line order (an open end: NO_END)
    first = np.zeros(size, dtype=bool)
    first[bounds[:-1]] = True
    # A record follows the previous one of its line when it starts the day after it ends.
    follows = np.zeros(size, dtype=bool)
    follows[1:] = ~first[1:] & (start[1:] - 1 == end[:-1])
    del first
    followed = np.append(follows[1:], False)
    shown = seen[order]
    differs = np.zeros(size, dtype=bool)
    differs[1:] = shown[1:] != shown[:-1]
    del shown
    added = np.flatnonzero(~follows)
    changed = np.flatnonzero(follows & differs)
    removed = np.flatnonzero((end != NO_END) & ~followed)
    del follows, followed, differs
    positions = order.astype(np.int32)
    previous = np.concatenate(([NO_RECORD], positions[:-1])).astype(np.int32)

    picked = (added, changed, removed)
    return (
        np.concatenate((start[added], start[changed], end[removed] + 1)),
        np.repeat(np.array([ADDED, CHANGED, REMOVED], np.uint8), [len(p) for p in picked]),
        np.concatenate((_none(len(added)), previous[changed], positions[removed])),
        np.concatenate((positions[added], positions[changed], _none(len(removed)))),
        np.concatenate([line[p] for p in picked]),
    )


def _none(count: int) -> Array:
    return np.full(count, NO_RECORD, dtype=np.int32)
