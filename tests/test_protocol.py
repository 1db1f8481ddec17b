"""The connection's writes (`service.edge.protocol._HeadWithBody`): an answer's head leaves with the
first part of its body, in one write; nothing else is held."""

import asyncio
from types import SimpleNamespace
from typing import Any

import httpx

from service.edge.protocol import _HeadWithBody
from tests.conftest import LiveServer, exchange_headers


class Recorded(asyncio.Transport):
    """What reached the socket, write by write."""

    def __init__(self) -> None:
        super().__init__()
        self.writes: list[bytes] = []
        self.closed = False

    def write(self, data: Any) -> None:
        self.writes.append(bytes(data))

    def close(self) -> None:
        self.closed = True

    def is_closing(self) -> bool:
        return self.closed


def connection() -> tuple[_HeadWithBody, Recorded, SimpleNamespace]:
    transport, cycle = Recorded(), SimpleNamespace(response_started=False)
    return _HeadWithBody(transport, cycle), transport, cycle  # type: ignore[arg-type]


def test_the_head_leaves_with_the_first_part_of_the_body_in_one_write() -> None:
    held, transport, cycle = connection()
    held.write(b"HTTP/1.1 100 Continue\r\n\r\n")  # before the answer: passes at once
    cycle.response_started = True
    held.write(b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\n")
    assert transport.writes == [b"HTTP/1.1 100 Continue\r\n\r\n"]
    held.write(b"{}")
    held.write(b"more")  # a later part of a streamed body passes at once
    assert transport.writes[1:] == [b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\n{}", b"more"]


def test_a_connection_closed_after_a_head_still_sends_it() -> None:
    held, transport, cycle = connection()
    cycle.response_started = True
    held.write(b"HTTP/1.1 200 OK\r\n\r\n")
    held.close()
    assert (transport.writes, transport.closed) == ([b"HTTP/1.1 200 OK\r\n\r\n"], True)
    assert held.is_closing() is True  # anything else is the transport's own


def test_answers_and_head_requests_arrive_whole_over_a_real_connection(server: LiveServer) -> None:
    with httpx.Client(base_url=server.url, headers=exchange_headers()) as http:
        answers = [http.get("/api/v1/exchanges/") for _ in range(3)]  # a miss, then the cache
        head = http.head("/api/v1/exchanges/")
        probe = http.get("/healthz")
    assert [a.status_code for a in answers] == [200, 200, 200]
    assert answers[0].json()["data"] == answers[2].json()["data"]
    assert int(head.headers["content-length"]) > 0
    assert (head.status_code, head.content) == (200, b"")
    assert probe.json() == {"status": "alive"}
