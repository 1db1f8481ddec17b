"""Every matching result as a CSV or Parquet download, in constant memory.

Rows arrive as Arrow record batches (`results` chooses how they are found) and are encoded one
batch at a time, so an export of a million rows never holds a million rows in Python; the
response streams as batches arrive, unless it ends within `WHOLE_BYTES`: then it is sent whole.
"""

import io
from collections.abc import Iterator
from typing import Any

import pyarrow as pa
import pyarrow.csv as pacsv
import pyarrow.parquet as pq
from starlette.responses import StreamingResponse
from starlette.types import Send

from service import memory
from service.dataset.engine import batches_of

BATCH_ROWS = 65_536
WHOLE_BYTES = 1 << 20  # a download up to this size is sent in one piece, with its length
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


class Download(StreamingResponse):
    """A download sent whole with its Content-Length when it ends within `WHOLE_BYTES`, else
    streamed as it is made. Sent whole, an answer is never cut off half-sent when its process
    stops: until its first byte leaves, a load balancer may try the request on another replica
    (`make cluster-soak` lost a small export streamed by a replica it killed)."""

    async def stream_response(self, send: Send) -> None:
        start = {"type": "http.response.start", "status": self.status_code,
                 "headers": self.raw_headers}  # fmt: skip
        parts = aiter(self.body_iterator)
        head: list[bytes] = []
        size = 0
        async for part in parts:
            head.append(_bytes(part))
            size += len(head[-1])
            if size > WHOLE_BYTES:
                break
        else:
            body = b"".join(head)
            self.raw_headers.append((b"content-length", b"%d" % len(body)))
            await send(start)
            await send({"type": "http.response.body", "body": body, "more_body": False})
            return
        await send(start)
        for part in head:
            await send({"type": "http.response.body", "body": part, "more_body": True})
        async for part in parts:
            await send({"type": "http.response.body", "body": _bytes(part), "more_body": True})
        await send({"type": "http.response.body", "body": b"", "more_body": False})


def _bytes(part: str | bytes | memoryview) -> bytes:
    return part.encode() if isinstance(part, str) else bytes(part)


def download(batches: Iterator[pa.RecordBatch], kind: str, name: str) -> Download:
    body = _released(_csv(batches) if kind == "csv" else _parquet(batches))
    return Download(
        body,
        media_type=MEDIA_TYPES[kind],
        headers={"Content-Disposition": f'attachment; filename="{name}.{kind}"'},
    )


def download_table(table: pa.Table, kind: str, name: str) -> Download:
    """A table made whole before it is sent; one of no rows still carries its columns."""
    return download(iter(batches_of(table)), kind, name)


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
