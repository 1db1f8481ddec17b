"""A version's files as the service maps them: a `.npy` array (`mapped_array`), and an
uncompressed Arrow IPC file whose rows are taken by position across its record batches
(`MappedTable`: the record summary, `records.py`, and the price answers, `price_keys.py`).

The ingest streams such a file batch by batch, so its columns are never whole in memory there;
here a take never concatenates the batches either (a take across chunks copies every chunk's
offsets: 108 MB for 1,000 rows of the price answers at 10M synthetic records).
"""

import mmap
from pathlib import Path
from typing import Any, Final

import numpy as np
import numpy.typing as npt
import pyarrow as pa

from ingest.layout import NO_RECORD

# The most rows a batch gives as one-row slices rather than by one take.
FEW: Final = 32


def mapped_array(path: Path) -> npt.NDArray[Any]:
    """A `.npy` file, mapped read-only, as a plain array over the mapping: a `np.memmap` runs
    Python code on every index and slice (its `__getitem__` and `__array_finalize__`), which
    cost 3 µs a slice of the changes index and about 5 µs of a cold discovery answer."""
    return np.asarray(np.load(path, mmap_mode="r"))


def mapped_file(path: Path) -> pa.Buffer:
    """A file mapped read-only, as an Arrow buffer over the mapping (no copy). Not Arrow's own
    `memory_map`: reading from it advises the kernel that each batch's whole body will be needed
    (a `MADV_WILLNEED` call per batch, 82 for the printed records at 10M synthetic records), so
    opening such a file took 19 ms against 3 read through this buffer; under load the three
    files took 0.3 s of a new version's 1.5 s open (#40 part 11). The mapping lasts as long as a
    buffer taken from it."""
    with path.open("rb") as file:
        return pa.py_buffer(mmap.mmap(file.fileno(), 0, access=mmap.ACCESS_READ))


class MappedTable:
    def __init__(self, path: Path) -> None:
        table = pa.ipc.open_file(pa.BufferReader(mapped_file(path))).read_all()
        self.columns = table.column_names
        self.size = table.num_rows
        self._schema = table.schema
        self._batches = table.to_batches()
        self._starts = np.cumsum([0, *(batch.num_rows for batch in self._batches)])

    def value(self, column: str, position: int) -> Any:
        """One row's value of one column."""
        batch = int(np.searchsorted(self._starts, position, side="right")) - 1
        return self._batches[batch].column(column)[position - int(self._starts[batch])].as_py()

    def take(
        self, positions: npt.NDArray[np.int64], columns: tuple[str, ...] | None = None
    ) -> pa.Table:
        """The rows at `positions`, in their order (a row of nulls for `NO_RECORD`), of
        `columns` (default: every one; fewer columns, fewer copies)."""
        present = positions != NO_RECORD
        # The present positions in order (sorted, not made unique: 400,000 positions, 269 ms
        # against 528 with `np.unique` and a search to place them); one slice per batch.
        order = np.argsort(positions)
        order = order[present[order]]
        wanted = positions[order]
        cuts = np.searchsorted(wanted, self._starts).tolist()
        taken: list[pa.RecordBatch] = []
        names = self.columns if columns is None else list(columns)
        schema = pa.schema([self._schema.field(name) for name in names])
        for whole, start, begin, end in zip(
            self._batches, self._starts.tolist(), cuts, cuts[1:], strict=False
        ):
            if begin == end:
                continue
            batch = whole if columns is None else whole.select(names)
            if end - begin > FEW:
                taken.append(batch.take(pa.array(wanted[begin:end] - start)))
            else:  # a take costs 90 µs a batch; a one-row slice, 1 µs
                taken.extend(batch.slice(at - start, 1) for at in wanted[begin:end].tolist())
        wanted_rows = pa.Table.from_batches(taken, schema=schema).combine_chunks()
        place = np.zeros(len(positions), np.int64)  # each position's row among `wanted_rows`
        place[order] = np.arange(len(order))
        return wanted_rows.take(pa.array(place, mask=~present))
