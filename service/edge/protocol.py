"""The HTTP/1.1 protocol the service runs under: uvicorn's httptools protocol, with bounds on
the request head and every refusal at that level in the family's envelope.

httptools puts no limit on a request target or on headers: uvicorn would gather a megabyte of
URL or ten thousand header lines and hand them to the app. Here the parser stops as soon as a
bound is passed (414 for the target, 431 for the headers), before the rest is read, and the
connection is closed. A request the parser cannot read at all gets a 400 in the exchange
family's envelope instead of uvicorn's plain text. Every such answer carries the headers every
answer does (`X-Request-ID`, `nosniff`).

An answer's head and the first part of its body leave in one write (`_HeadWithBody`).
"""

import asyncio
from typing import Any, Final

from uvicorn.protocols.http.httptools_impl import (
    STATUS_LINE,
    HttpToolsProtocol,
    RequestResponseCycle,
)

from service.edge.call import REQUEST_ID, new_request_id
from service.edge.reply import NOSNIFF
from service.errors import ApiError, BadRequest, HeadersTooLarge, UriTooLong, family_of, render

MAX_TARGET_BYTES: Final = 8192  # path and query, as most servers and proxies bound them
MAX_HEAD_BYTES: Final = 16384  # every header name and value together
MAX_HEADERS: Final = 100


class _Refused(Exception):
    """Stops the parser: raised from a parser callback, it reaches uvicorn as a parse error,
    which makes it answer through `send_400_response`."""


class BoundedHttpToolsProtocol(HttpToolsProtocol):
    def on_headers_complete(self) -> None:
        super().on_headers_complete()
        cycle = self.cycle  # the request's, unless it asked for an upgrade (then left as it was)
        if cycle and cycle.transport is self.transport and cycle.scope["method"] != "HEAD":
            cycle.transport = _HeadWithBody(self.transport, cycle)  # type: ignore[assignment]

    def on_message_begin(self) -> None:
        super().on_message_begin()
        self._head_bytes = 0
        self._refusal: ApiError | None = None

    def on_url(self, url: bytes) -> None:
        super().on_url(url)
        if len(self.url) > MAX_TARGET_BYTES:
            self._refuse(UriTooLong(f"request target longer than {MAX_TARGET_BYTES} bytes"))

    def on_header(self, name: bytes, value: bytes) -> None:
        self._head_bytes += len(name) + len(value)
        if len(self.headers) >= MAX_HEADERS or self._head_bytes > MAX_HEAD_BYTES:
            self._refuse(
                HeadersTooLarge(
                    f"more than {MAX_HEADERS} header lines or {MAX_HEAD_BYTES} bytes of headers"
                )
            )
        super().on_header(name, value)

    def _refuse(self, error: ApiError) -> None:
        self._refusal = error
        raise _Refused

    def send_400_response(self, msg: str) -> None:
        """Answer what the parser refused, in the envelope of the family the path names so far,
        and close the connection."""
        error = getattr(self, "_refusal", None) or BadRequest("malformed HTTP request")
        path = self.url.partition(b"?")[0].decode("latin-1")
        response = render(error, family_of(path))
        head = [
            *self.server_state.default_headers,  # the date, as on every answer
            *response.raw_headers,
            (REQUEST_ID, new_request_id()),
            NOSNIFF,
            (b"connection", b"close"),
        ]
        self.transport.write(
            b"".join([STATUS_LINE[error.status], *(b"%s: %s\r\n" % pair for pair in head), b"\r\n"])
            + response.body
        )
        self.transport.close()


class _HeadWithBody:
    """One answer's view of its connection: uvicorn writes an answer's head, then its body, in
    two writes; here the head waits for the body's first write and both leave in one. A process
    killed between the two writes (descheduled there, under load) had sent a head without its
    body, which no load balancer may try again elsewhere (`make cluster-soak`: 1 request in
    326,855); and an answer in one piece costs one system call, not two. A HEAD answer has no
    body to wait for and is not held. Everything else is the transport's own."""

    def __init__(self, transport: asyncio.Transport, cycle: RequestResponseCycle) -> None:
        self._transport = transport
        self._cycle = cycle
        self._head: bytes | None = None
        self._headed = False

    def write(self, data: bytes) -> None:
        if not self._headed and self._cycle.response_started:  # not a `100 Continue`
            self._headed, self._head = True, data
            return
        if self._head is not None:
            data, self._head = self._head + data, None
        self._transport.write(data)

    def close(self) -> None:
        """Close after what is held (an answer cut short still sends the head it had)."""
        if self._head is not None:
            self._transport.write(self._head)
            self._head = None
        self._transport.close()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._transport, name)
