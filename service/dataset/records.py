"""Records by position as the history answers print them (a fee line, its changes, a
comparison): the record summary's fields (`ingest.layout.SUMMARY_COLUMNS`), then the results
index's codes decoded (`ResultsIndex.decoded`).

The summary is an uncompressed Arrow IPC file, memory-mapped: taking a few records reads a few
pages of it. The serving copy would decode a whole vector of each column per record, and keep
the vectors in DuckDB's buffers (random line lookups took the server from 274 to 935 MB).
"""

import itertools
from collections.abc import Sequence
from pathlib import Path
from typing import Final

import numpy as np
import pyarrow as pa

from ingest.layout import CODED, NO_RECORD, SUMMARY_FILE
from service.dataset.index import Array, ResultsIndex

# The most records a batch of the summary gives as one-row slices rather than by one take.
FEW: Final = 32


class Records:
    def __init__(self, directory: Path, index: ResultsIndex) -> None:
        table = pa.ipc.open_file(pa.memory_map(str(directory / SUMMARY_FILE))).read_all()
        self.columns = table.column_names
        self.size = table.num_rows  # records, as many as the version holds
        self._schema = table.schema
        self._batches = table.to_batches()
        self._starts = np.cumsum([0, *(batch.num_rows for batch in self._batches)])
        self._index = index

    def tables(self, parts: Sequence[Array]) -> list[pa.Table]:
        """`table` of each list of positions, read in one go: a read of the summary costs more
        per call than per record."""
        every = self.table(np.concatenate([np.asarray(part, dtype=np.int64) for part in parts]))
        starts = np.cumsum([0, *(len(part) for part in parts)]).tolist()
        return [every.slice(start, stop - start) for start, stop in itertools.pairwise(starts)]

    def table(
        self,
        positions: Array,
        coded: tuple[str, ...] = ("exchange", *CODED),
        summary: tuple[str, ...] | None = None,
    ) -> pa.Table:
        """The records at `positions`, in their order (a row of nulls for `NO_RECORD`): the
        summary's columns (those of `summary` when given: fewer columns, fewer copies), then
        the `coded` ones (`ResultsIndex.decoded`)."""
        positions = np.asarray(positions, dtype=np.int64)
        present = positions != NO_RECORD
        wanted = np.unique(positions[present])
        # Where each batch's positions begin among the wanted (sorted): one slice per batch.
        cuts = np.searchsorted(wanted, self._starts).tolist()
        taken: list[pa.RecordBatch] = []
        schema = self._schema if summary is None else pa.schema(
            [self._schema.field(name) for name in summary]
        )
        for whole, start, begin, end in zip(
            self._batches, self._starts.tolist(), cuts, cuts[1:], strict=False
        ):
            if begin == end:
                continue
            batch = whole if summary is None else whole.select(list(summary))
            if end - begin > FEW:
                taken.append(batch.take(pa.array(wanted[begin:end] - start)))
            else:  # a take costs 90 µs a batch; a one-row slice, 1 µs
                taken.extend(batch.slice(at - start, 1) for at in wanted[begin:end].tolist())
        wanted_rows = pa.Table.from_batches(taken, schema=schema).combine_chunks()
        place = pa.array(np.searchsorted(wanted, positions), mask=~present)
        records = wanted_rows.take(place)
        for name, values in self._index.decoded(positions, coded).items():
            records = records.append_column(name, values)
        return records
