"""The records as a JSON answer prints them: a results page, a supplier `/data` page, a record by
id. A record is one row of the printed records (`ingest.layout.PRINTED_FILE`): its JSON array
of the fields the index does not code, as the ingest rendered them, and its structured row of
the index's codes, decoded here. Printing 20 scattered records reads about 60 pages of disk;
by column (the record summary's way) it read about 30 per record, and from the serving copy
DuckDB decoded a 2,048-row vector of every column per record and kept it in its buffers.
"""

import bisect
from collections.abc import Sequence
from datetime import date
from pathlib import Path
from typing import Any, Final

import numpy as np
import orjson

from ingest.layout import PRINTED_CODES_FILE, PRINTED_COLUMNS, PRINTED_FILE, RECORD_ORDER
from service.dataset.index import DAYS, EPOCH, ResultsIndex
from service.dataset.mapped import MappedTable, mapped_array
from service.dataset.queries import SOURCE_FIELDS, Included

TEXT: Final = "record"  # the printed file's one column
PLACE: Final = {column: place for place, column in enumerate(PRINTED_COLUMNS)}


class PrintedRecords:
    def __init__(self, directory: Path, index: ResultsIndex) -> None:
        self._texts = MappedTable(directory / PRINTED_FILE)
        self._codes = mapped_array(directory / PRINTED_CODES_FILE)
        self._by_id = mapped_array(directory / f"{RECORD_ORDER}.npy")
        self._index = index
        self.columns = self._texts.columns
        self.code_columns = list(self._codes.dtype.names or ())
        self.sizes = {
            "printed records": self._texts.size,
            "printed codes": len(self._codes),
            "record order": len(self._by_id),
        }

    def records(
        self, positions: Sequence[int], fields: Sequence[tuple[str, str]], included: Included
    ) -> list[dict[str, Any]]:
        """The records at `positions`, in their order, each of `fields` (name in the answer,
        dataset column or one of `queries.DERIVED`) in that order."""
        at = np.asarray(positions, dtype=np.int64)
        rows = [orjson.loads(text) for text in self._texts.take(at).column(TEXT).to_pylist()]
        codes = self._codes.take(at)  # `ndarray.take`: 7x faster than fancy indexing here
        values: list[list[Any]] = []
        for name, column in fields:
            if name in SOURCE_FIELDS and not included.source:
                values.append([None] * len(rows))
            elif column == "relationships":
                values.append([_relationships() if included.relationships else None] * len(rows))
            elif column == "presumed":
                values.append(_presumed(codes["confirmed_through"], included.day))
            elif column in PLACE:
                place = PLACE[column]
                values.append([row[place] for row in rows])
            else:  # a code, or a day (printed as `YYYY-MM-DD`)
                decoded = self._index.decode(column, codes[column]).to_pylist()
                values.append([_text(value) for value in decoded] if column in DAYS else decoded)
        names = [name for name, _ in fields]
        return [dict(zip(names, record, strict=True)) for record in zip(*values, strict=True)]

    def position_of(self, record_id: str) -> int | None:
        """The position of the record with this id (ids are unique in a version), if any: a
        binary search over the printed ids in id order."""

        def id_at(position: int) -> str:
            return str(orjson.loads(self._texts.value(TEXT, int(position)))[PLACE["record_id"]])

        rank = bisect.bisect_left(self._by_id, record_id, key=id_at)
        if rank < len(self._by_id) and id_at(self._by_id[rank]) == record_id:
            return int(self._by_id[rank])
        return None


def _presumed(confirmed_through: Any, day: date | None) -> list[bool | None]:
    """Whether no source shows each record's figure on the answer's day (`None`: no day)."""
    if day is None:
        return [None] * len(confirmed_through)
    presumed: list[bool | None] = (confirmed_through < (day - EPOCH).days).tolist()
    return presumed


def _text(day: date | None) -> str | None:
    return None if day is None else day.isoformat()


def _relationships() -> dict[str, list[Any]]:
    """A record's footnotes and definitions, in the compatible service's shape. The dataset
    holds none yet (the raw format has no column for them: `docs/raw-format.md`)."""
    return {"footnotes": [], "definitions": []}
