"""Streaming every matching result as a CSV or Parquet download, in constant memory.

Rows arrive as Arrow record batches (`results` chooses how they are found) and are encoded one
batch at a time, so an export of a million rows never holds a million rows in Python; the
response streams as batches arrive.
"""

import io
from collections.abc import Iterator
from typing import Any

import pyarrow as pa
import pyarrow.csv as pacsv
import pyarrow.parquet as pq
from starlette.responses import StreamingResponse

from service import memory

BATCH_ROWS = 65_536
MEDIA_TYPES = {"csv": "text/csv; charset=utf-8", "parquet": "application/vnd.apache.parquet"}
# The `format` values of the results listing: JSON pages, or one of the downloads.
FORMATS = ("json", *MEDIA_TYPES)
ACCEPTED = {"text/csv": "csv", "application/vnd.apache.parquet": "parquet"}


def wanted_format(format_param: str | None, accept: str) -> str:
    """`json`, `csv` or `parquet`: the `format` parameter wins, then the Accept header's
    most preferred of the three (by q-value, then order; JSON unless a download is preferred)."""
    if format_param is not None:
        return format_param
    best, best_q = "json", 0.0
    for media_range in accept.split(","):
        media, *options = (part.strip().lower() for part in media_range.split(";"))
        kind = ACCEPTED.get(media, "json" if media in ("application/json", "*/*") else None)
        q = _quality(options)
        if kind is not None and q > best_q:
            best, best_q = kind, q
    return best


def _quality(options: list[str]) -> float:
    for option in options:
        name, _, value = option.partition("=")
        if name.strip() == "q":
            try:
                return max(0.0, min(1.0, float(value)))
            except ValueError:
                return 0.0
    return 1.0


def download(batches: Iterator[pa.RecordBatch], kind: str, name: str) -> StreamingResponse:
    body = _released(_csv(batches) if kind == "csv" else _parquet(batches))
    return StreamingResponse(
        body,
        media_type=MEDIA_TYPES[kind],
        headers={"Content-Disposition": f'attachment; filename="{name}.{kind}"'},
    )


def _released(body: Iterator[bytes]) -> Iterator[bytes]:
    """The body, then the memory its batches took handed back (`service.memory`): a 942k-row
    export left the server about 100 MB larger than before it."""
    try:
        yield from body
    finally:
        memory.release()


def _csv(batches: Iterator[pa.RecordBatch]) -> Iterator[bytes]:
    header = True
    for batch in batches:
        sink = io.BytesIO()
        pacsv.write_csv(batch, sink, write_options=pacsv.WriteOptions(include_header=header))
        header = False
        yield sink.getvalue()


class _Chunks(io.RawIOBase):
    """A write-only file that hands over what was written since the last `take()`."""

    def __init__(self) -> None:
        self._parts: list[bytes] = []

    def writable(self) -> bool:
        return True

    def write(self, data: Any) -> int:
        self._parts.append(bytes(data))
        return len(data)

    def take(self) -> bytes:
        data, self._parts = b"".join(self._parts), []
        return data


def _parquet(batches: Iterator[pa.RecordBatch]) -> Iterator[bytes]:
    sink = _Chunks()
    writer: pq.ParquetWriter | None = None
    for batch in batches:
        if writer is None:
            writer = pq.ParquetWriter(sink, batch.schema, compression="zstd")
        writer.write_batch(batch)  # each batch becomes one row group, flushed to the sink
        yield sink.take()
    if writer is not None:
        writer.close()
    yield sink.take()
