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

import numpy as np
import pyarrow as pa

from ingest.layout import CODED, SUMMARY_FILE
from service.dataset.index import Array, ResultsIndex
from service.dataset.mapped import MappedTable


class Records:
    def __init__(self, directory: Path, index: ResultsIndex) -> None:
        self._summary = MappedTable(directory / SUMMARY_FILE)
        self.columns = self._summary.columns
        self.size = self._summary.size  # records, as many as the version holds
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
        records = self._summary.take(positions, summary)
        for name, values in self._index.decoded(positions, coded).items():
            records = records.append_column(name, values)
        return records
