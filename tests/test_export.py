"""A download's next batch is read while one is encoded and sent, without changing a byte or
losing an error."""

import asyncio
import io
import threading
from collections.abc import Iterator
from contextvars import ContextVar
from typing import Any

import pyarrow as pa
import pyarrow.csv as pacsv
import pytest

from service.endpoints import export

BATCHES = [pa.record_batch({"n": [i, i + 1], "word": ["a,b", f"c{i}"]}) for i in range(0, 50, 10)]
WAIT_SECONDS = 10  # a bound for a test that fails, never reached by one that passes
REQUEST: ContextVar[str] = ContextVar("request")


class Source:
    """Batches that say which of them has been asked for, and whether the source was closed."""

    def __init__(self, failing_at: int | None = None) -> None:
        self.asked = [threading.Event() for _ in BATCHES]
        self.closed = threading.Event()
        self.contexts: list[str | None] = []
        self.failing_at = failing_at

    def __iter__(self) -> Iterator[pa.RecordBatch]:
        try:
            for number, batch in enumerate(BATCHES):
                self.asked[number].set()
                self.contexts.append(REQUEST.get(None))
                if number == self.failing_at:
                    raise RuntimeError("the dataset failed")
                yield batch
        finally:
            self.closed.set()


def delivered(source: Source, sent: list[dict[str, Any]], on_send: Any = None) -> None:
    """Run the download of `source`'s batches as the server would, its messages into `sent`."""

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)
        if on_send is not None:
            await on_send(message)

    async def receive() -> dict[str, Any]:
        raise AssertionError("a download never reads the request")

    async def run() -> None:
        REQUEST.set("request 1")
        response = export.download(iter(source), "csv", "rows")
        await response({"type": "http", "asgi": {"spec_version": "2.4"}}, receive, send)

    asyncio.run(run())


def body(sent: list[dict[str, Any]]) -> bytes:
    return b"".join(message.get("body", b"") for message in sent[1:])


def as_csv(batches: list[pa.RecordBatch]) -> bytes:
    sink = io.BytesIO()
    pacsv.write_csv(pa.Table.from_batches(batches), sink)
    return sink.getvalue()


def test_the_next_batch_is_read_while_a_part_is_sent(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(export, "WHOLE_BYTES", 0)  # streamed from the first part
    source, sent = Source(), []
    seen_while_sending: list[bool] = []

    async def on_send(message: dict[str, Any]) -> None:
        # While part k is sent, batch k + 1 is being read. Made in turn, it would be asked
        # for only once part k is sent.
        part = len(sent) - 2  # this part's number: the start was sent first
        if message.get("more_body") and part + 1 < len(BATCHES):
            read = source.asked[part + 1]
            seen_while_sending.append(await asyncio.to_thread(read.wait, WAIT_SECONDS))

    delivered(source, sent, on_send)
    assert seen_while_sending == [True] * (len(BATCHES) - 1)
    assert body(sent) == as_csv(BATCHES)
    assert sent[-1] == {"type": "http.response.body", "body": b"", "more_body": False}
    # Read in other threads, each batch still ran in the request's context.
    assert source.contexts == ["request 1"] * len(BATCHES)


def test_a_batch_that_fails_fails_the_download_with_its_own_error(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(export, "WHOLE_BYTES", 0)
    source, sent = Source(failing_at=2), []
    with pytest.raises(RuntimeError, match="the dataset failed"):
        delivered(source, sent)
    # What was sent is whole rows, and the answer never says it ended.
    assert body(sent) == as_csv(BATCHES[:2])
    assert all(message.get("more_body", True) for message in sent)
    assert source.closed.is_set()


def test_a_download_closed_early_closes_its_source_once_the_batch_being_read_is() -> None:
    source = Source()
    batches = export._made_ahead(iter(source))
    assert next(batches) == BATCHES[0]
    assert source.asked[1].wait(WAIT_SECONDS)  # being read, or read, in its own thread
    batches.close()  # the client left: the reader finishes the batch, then drops the source
    assert source.closed.wait(WAIT_SECONDS)
    assert not source.asked[2].is_set()


def test_downloads_at_once_share_the_reader_and_each_gets_its_own_batches() -> None:
    sources = [Source(), Source()]
    downloads = [export._made_ahead(iter(source)) for source in sources]
    taken: list[list[pa.RecordBatch]] = [[], []]
    for _ in BATCHES:  # in turn, a batch of each
        for number, batches in enumerate(downloads):
            taken[number].append(next(batches))
    assert taken == [BATCHES, BATCHES]
    assert [next(batches, None) for batches in downloads] == [None, None]
    assert all(source.closed.wait(WAIT_SECONDS) for source in sources)
