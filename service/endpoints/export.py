"""Every matching result as a CSV or Parquet download, in constant memory.

Rows arrive as Arrow record batches (`results` chooses how they are found) and are encoded one
batch at a time, so an export of a million rows never holds a million rows in Python; the
response streams as batches arrive, unless it ends within `WHOLE_BYTES`: then it is sent whole.
The next batch is read while one is encoded (`_made_ahead`).
"""

import contextvars
import io
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
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
# The one thread that reads the batches of every download, so downloads at once take turns a
# batch at a time. Not a thread per download: Arrow's allocator (mimalloc) keeps a heap per
# thread, and a thread that ends abandons its heap with the freed pages of the batches it read
# (a thread per download left the server about 50 MB larger after each export).
_READER = ThreadPoolExecutor(1, thread_name_prefix="download-reader")


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
    rows = _made_ahead(batches)
    body = _released(_csv(rows) if kind == "csv" else _parquet(rows))
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
    finally:  # here, and in the reader's heap, which held the batches (after any read queued)
        memory.release()
        _READER.submit(memory.release)


def _made_ahead(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    """The batches, each next one read by `_READER` while the one given is encoded: reading a
    batch (DuckDB, then Arrow's take) and encoding it (Arrow's CSV or Parquet writer) both
    release the GIL, so on two cores they overlap. One batch at most waits read."""
    context = contextvars.copy_context()  # the request's, as the handler's thread has it

    def read() -> pa.RecordBatch | None:
        return context.run(next, batches, None)

    upcoming = _READER.submit(read)
    while (batch := upcoming.result()) is not None:
        upcoming = _READER.submit(read)
        yield batch


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
