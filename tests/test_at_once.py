"""Answers the connection makes at once from the response cache (`FrontDoor.at_once`, written by
`service.edge.protocol`): byte for byte what the ordinary ASGI path answers, counted, in order
on a pipelined connection, and closed when HTTP/1.0 asks for it."""

import itertools
import json
import re
import socket
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest

from ingest.pipeline import IngestResult
from service.dataset import watcher as watching
from service.dataset.version import Dataset
from service.dataset.watcher import DatasetHolder, VersionWatcher
from service.settings import Settings
from tests.conftest import KEYS, LiveServer, account_key

PARTICIPANTS = "/api/v1/suppliers/memx/participants?start_date=2020-01-01"
# The same request, percent-encoded: uvicorn decodes it to the same path, and so the same cache
# entry, but a path with `%` always takes the ordinary path.
ENCODED = "/api/v1/suppliers/mem%78/participants?start_date=2020-01-01"
KEY = f"Authorization: Bearer {KEYS['full']}\r\n"
TRICKLE = "test-key-at-once-trickle-0123456789abcdef"  # burst 1, then one a minute
DAYS = itertools.count(1)  # a day of a window no test asked for before: not cached
# What differs between two answers to the same request: the second of the date, and the
# bucket's tokens after each.
VARYING = (b"date", b"x-ratelimit-remaining", b"x-ratelimit-reset", b"server-timing")

Answer = tuple[bytes, list[tuple[bytes, bytes]], bytes]  # status line, headers, body


def request(
    target: str, *, method: str = "GET", version: str = "1.1", more: str = "", key: str = KEY
) -> bytes:
    return f"{method} {target} HTTP/{version}\r\nHost: test\r\n{key}{more}\r\n".encode()


@contextmanager
def connected(server: LiveServer) -> Iterator[socket.socket]:
    host, port = server.url.removeprefix("http://").split(":")
    with socket.create_connection((host, int(port)), timeout=10) as connection:
        yield connection


def answers(connection: socket.socket, methods: list[str]) -> list[Answer]:
    """Read one answer per request sent (HEAD and 304 answers have no body)."""
    data, read = b"", []
    for method in methods:
        while b"\r\n\r\n" not in data:
            data += connection.recv(65536) or pytest.fail("connection closed early")
        head, _, data = data.partition(b"\r\n\r\n")
        status, *lines = head.split(b"\r\n")
        headers = [(name, value) for name, _, value in (line.partition(b": ") for line in lines)]
        length = dict(headers).get(b"content-length", b"0")
        size = 0 if method == "HEAD" or b" 304 " in status else int(length)
        while len(data) < size:
            data += connection.recv(65536) or pytest.fail("connection closed early")
        read.append((status, headers, data[:size]))
        data = data[size:]
    assert data == b""
    return read


def exchange(server: LiveServer, *sent: tuple[bytes, str]) -> list[Answer]:
    """Send every request in one write (pipelined), and read their answers."""
    with connected(server) as connection:
        connection.sendall(b"".join(raw for raw, _ in sent))
        return answers(connection, [method for _, method in sent])


def at_once(client: httpx.Client) -> int:
    text = client.get("/metrics").text
    return int(float(re.search(r"^fees_answered_at_once_total (\S+)$", text, re.M)[1]))  # type: ignore[index]


def steady(answer: Answer) -> Answer:
    status, headers, body = answer
    return status, [(n, b"*" if n in VARYING else v) for n, v in headers], body


@pytest.mark.parametrize(
    ("method", "more"),
    [("GET", ""), ("HEAD", ""), ("GET", "If-None-Match: {etag}\r\n")],
    ids=["get", "head", "not-modified"],
)
def test_an_answer_made_at_once_is_the_ordinary_paths_byte_for_byte(
    server: LiveServer, client: httpx.Client, method: str, more: str
) -> None:
    (first,) = exchange(server, (request(PARTICIPANTS), "GET"))  # cached, if it was not
    etag = dict(first[1])[b"etag"].decode()
    asked = more.format(etag=etag) + "X-Request-ID: same-id\r\n"
    before = at_once(client)
    (made_at_once,) = exchange(server, (request(PARTICIPANTS, method=method, more=asked), method))
    made_at_once_count = at_once(client) - before
    (ordinary,) = exchange(server, (request(ENCODED, method=method, more=asked), method))
    assert (made_at_once_count, at_once(client) - before) == (1, 1)  # the encoded one: not
    assert steady(made_at_once) == steady(ordinary)
    status = made_at_once[0]
    assert status == (b"HTTP/1.1 304 Not Modified" if more else b"HTTP/1.1 200 OK")
    assert (made_at_once[2] == b"") is (method == "HEAD" or bool(more))
    if not more:
        assert dict(made_at_once[1])[b"content-length"] == dict(first[1])[b"content-length"]


def test_a_429_made_at_once_is_the_ordinary_paths_byte_for_byte(
    fixture_version: IngestResult, tmp_path: Path
) -> None:
    """A key that has spent its burst is refused at once, as the ordinary path refuses it."""
    document = {
        "accounts": {
            "trickle": {
                "exchanges": None,
                "rate_limit": {"burst": 1, "per_minute": 1},
                "keys": [account_key(TRICKLE)],
            }
        }
    }
    accounts = tmp_path / "accounts.json"
    accounts.write_text(json.dumps(document), encoding="utf-8")
    data = fixture_version.version_dir.parent.parent
    key = f"Authorization: Bearer {TRICKLE}\r\nX-Request-ID: same-id\r\n"
    settings = Settings(data_dir=data, accounts_file=accounts)
    with LiveServer(settings) as live, httpx.Client(base_url=live.url) as http:
        (first,) = exchange(live, (request(PARTICIPANTS, key=key), "GET"))  # its token
        (made_at_once,) = exchange(live, (request(PARTICIPANTS, key=key), "GET"))
        assert at_once(http) == 2  # the first, made by a quick endpoint's handler, too
        (ordinary,) = exchange(live, (request(ENCODED, key=key), "GET"))
        assert at_once(http) == 2
    assert (first[0], made_at_once[0]) == (b"HTTP/1.1 200 OK", b"HTTP/1.1 429 Too Many Requests")
    assert steady(made_at_once) == steady(ordinary)


@pytest.fixture(scope="module")
def uncached(fixture_version: IngestResult, accounts_file: Path) -> Iterator[LiveServer]:
    """A server with no response cache: it answers nothing at once."""
    data = fixture_version.version_dir.parent.parent
    with LiveServer(Settings(data_dir=data, accounts_file=accounts_file, cache_mb=0)) as live:
        yield live


QUICK = [  # method, target (a day in it, so that no test asked it before), If-None-Match, status
    ("GET", "/api/v1/suppliers/memx/fee-types?start_date=2020-01-{day:02d}", False, b"200"),
    ("HEAD", "/api/v1/suppliers/memx/actions?end_date=2024-02-{day:02d}", False, b"200"),
    ("GET", "/api/v1/suppliers/memx/date-ranges?day={day}", False, b"400"),  # not a parameter
    ("GET", "/api/v1/suppliers/nowhere/participants?end_date=2024-03-{day:02d}", False, b"404"),
    ("GET", "/api/v1/suppliers/memx/fee-categories?start_date=2020-02-{day:02d}", True, b"304"),
]


@pytest.mark.parametrize(
    ("method", "target", "tagged", "status"), QUICK, ids=["get", "head", "400", "404", "304"]
)
def test_a_quick_endpoints_answer_not_cached_is_made_at_once_as_the_ordinary_path_makes_it(
    server: LiveServer,
    uncached: LiveServer,
    client: httpx.Client,
    method: str,
    target: str,
    tagged: bool,
    status: bytes,
) -> None:
    """A discovery request whose answer is not cached is answered at once by the handler, byte
    for byte as a server with no cache (so no answer at once) answers it: its success, its
    errors in the family's envelope, HEAD and a 304 for its tag."""
    day = next(DAYS)
    path = target.format(day=day)
    asked = "X-Request-ID: same-id\r\n"
    if tagged:
        (first,) = exchange(uncached, (request(path, more=asked), "GET"))
        asked += f"If-None-Match: {dict(first[1])[b'etag'].decode()}\r\n"
    before = at_once(client)
    (made_at_once,) = exchange(server, (request(path, method=method, more=asked), method))
    assert at_once(client) - before == 1
    (ordinary,) = exchange(uncached, (request(path, method=method, more=asked), method))
    assert made_at_once[0].split(b" ")[1] == status
    assert steady(made_at_once) == steady(ordinary)


def test_pipelined_requests_are_answered_in_order_around_one_not_cached(
    server: LiveServer, client: httpx.Client
) -> None:
    exchange(server, (request(PARTICIPANTS), "GET"))
    unknown = "/api/v1/suppliers/no-such-venue/participants"  # a 404: errors are never cached
    before = at_once(client)
    sent = [
        (request(PARTICIPANTS, more="X-Request-ID: one\r\n"), "GET"),
        (request(unknown, more="X-Request-ID: two\r\n"), "GET"),
        (request(PARTICIPANTS, more="X-Request-ID: three\r\n"), "GET"),
    ]
    read = exchange(server, *sent)
    assert [dict(headers)[b"x-request-id"] for _, headers, _ in read] == [b"one", b"two", b"three"]
    assert [status.split(b" ")[1] for status, _, _ in read] == [b"200", b"404", b"200"]
    assert read[0][2] == read[2][2]
    assert at_once(client) - before >= 1  # the first; the third, unless it came behind the 404


def test_an_http_1_0_request_answered_at_once_closes_its_connection(
    server: LiveServer, client: httpx.Client
) -> None:
    exchange(server, (request(PARTICIPANTS), "GET"))
    before = at_once(client)
    with connected(server) as connection:
        connection.sendall(request(PARTICIPANTS, version="1.0"))
        ((status, headers, body),) = answers(connection, ["GET"])
        assert connection.recv(1) == b""  # closed after the answer
    assert at_once(client) - before == 1
    assert (status, headers[-1]) == (b"HTTP/1.1 200 OK", (b"connection", b"close"))
    assert len(body) == int(dict(headers)[b"content-length"])


def test_the_holder_says_when_a_version_is_opening(
    fixture_version: IngestResult, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Answers made at once give the GIL away while `opening` is set: it is set for the whole
    open, and cleared after it, whether the version opened or was refused."""
    holder = DatasetHolder()
    watcher = VersionWatcher(holder, Settings(data_dir=fixture_version.version_dir.parent.parent))
    seen: list[bool] = []
    real = watching.Dataset

    def opened(*args: Any) -> Dataset:
        seen.append(holder.opening.is_set())
        return real(*args)

    def broken(*args: Any) -> Dataset:
        seen.append(holder.opening.is_set())
        raise OSError("unreadable")

    monkeypatch.setattr(watching, "Dataset", opened)
    watcher.load_now()
    assert (seen, holder.opening.is_set(), holder.current is not None) == ([True], False, True)
    monkeypatch.setattr(watching, "Dataset", broken)
    watcher.load_now()
    assert (seen, holder.opening.is_set()) == ([True, True], False)
    assert watcher.refused is not None
