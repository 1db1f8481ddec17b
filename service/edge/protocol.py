"""The HTTP/1.1 protocol the service runs under: uvicorn's httptools protocol, with bounds on
the request head and every refusal at that level in the family's envelope.

httptools puts no limit on a request target or on headers: uvicorn would gather a megabyte of
URL or ten thousand header lines and hand them to the app. Here the parser stops as soon as a
bound is passed (414 for the target, 431 for the headers), before the rest is read, and the
connection is closed. A request the parser cannot read at all gets a 400 in the exchange
family's envelope instead of uvicorn's plain text. Every such answer carries the headers every
answer does (`X-Request-ID`, `nosniff`).

An answer's head and the first part of its body leave in one write (`_HeadWithBody`).

A request whose answer the response cache holds, or any GET or HEAD of a quick endpoint (a
discovery list, answered from memory), is answered as soon as its head is read
(`FrontDoor.at_once`), and written here as uvicorn writes an answer (its date, the headers in
order, `connection: close` when the connection ends): no ASGI cycle or task (and for a cached
answer no `Response` object), which is most of what even a static answer costs under uvicorn
(`docs/benchmarks.md`).
"""

import asyncio
import logging
from typing import Any, Final

import httptools
from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol, RequestResponseCycle

from service.edge import wire
from service.edge.call import REQUEST_ID, new_request_id
from service.edge.reply import NOSNIFF
from service.errors import ApiError, BadRequest, HeadersTooLarge, UriTooLong, family_of, render

log = logging.getLogger(__name__)

MAX_TARGET_BYTES: Final = 8192  # path and query, as most servers and proxies bound them
MAX_HEAD_BYTES: Final = 16384  # every header name and value together
MAX_HEADERS: Final = 100
CLOSE: Final = wire.lines([(b"connection", b"close")])


class _Refused(Exception):
    """Stops the parser: raised from a parser callback, it reaches uvicorn as a parse error,
    which makes it answer through `send_400_response`."""


class _Answered:
    """What uvicorn's protocol reads of the cycle of a request answered at once: a finished
    one, so the next request starts at once (a lost connection sets its event; nothing waits
    on it)."""

    response_complete = True
    message_event = asyncio.Event()


ANSWERED: Final = _Answered()


def _front_door(app: Any) -> Any:
    """The front door inside the wrappers uvicorn puts around the app (its proxy headers
    middleware), or None when the app answers nothing at once (a test's plain app, or a door
    with no cache or with rate limits in Redis): then no request is parsed for it."""
    while app is not None and not hasattr(app, "at_once"):
        app = getattr(app, "app", None)
    return app if app is not None and app.answers_at_once else None


class BoundedHttpToolsProtocol(HttpToolsProtocol):
    # The default headers last written, and their lines (`_default_lines`): shared by every
    # connection, as uvicorn's server state is.
    _defaults: tuple[list[tuple[bytes, bytes]] | None, bytes] = (None, b"")

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._door = _front_door(self.app)

    def on_headers_complete(self) -> None:
        if self._door is not None and self._answered_at_once():
            return
        super().on_headers_complete()
        cycle = self.cycle  # the request's, unless it asked for an upgrade (then left as it was)
        if cycle and cycle.transport is self.transport and cycle.scope["method"] != "HEAD":
            cycle.transport = _HeadWithBody(self.transport, cycle)  # type: ignore[assignment]

    def _answered_at_once(self) -> bool:
        """Answer the request now, if the front door can (`FrontDoor.at_once`: its answer is
        cached, or its endpoint quick), with no ASGI cycle and no task: fixed bytes written
        here took a fifth of the CPU the same bytes took through them (`docs/benchmarks.md`).
        The scope is filled as uvicorn fills it."""
        parser, scope = self.parser, self.scope
        idle = self.cycle is None or self.cycle.response_complete  # none pipelined before it
        if (
            not idle
            or self.expect_100_continue
            or parser.should_upgrade()
            or self.limit_concurrency is not None
            or self.flow.write_paused
            or self.transport.is_closing()
        ):
            return False
        url = httptools.parse_url(self.url)
        raw_path = url.path
        if b"%" in raw_path:  # uvicorn decodes it: left to uvicorn
            return False
        version = parser.get_http_version()
        scope["method"] = parser.get_method().decode("ascii")
        if version != "1.1":
            scope["http_version"] = version
        scope["path"] = self.root_path + raw_path.decode("ascii")
        scope["raw_path"] = self.root_path.encode("ascii") + raw_path
        scope["query_string"] = url.query or b""
        try:
            answer = self._door.at_once(scope)
        except Exception:
            log.exception("answering at once failed; answering as usual")
            return False
        if answer is None:
            return False
        status, header_lines, body = answer
        keep_alive = version != "1.0" and parser.should_keep_alive()
        first = self._default_lines()  # the date, as on every answer
        last = b"" if keep_alive else CLOSE
        head = wire.head(status, b"%s%s%s" % (first, header_lines, last))
        self.transport.write(head if scope["method"] == "HEAD" else head + body)
        self.cycle = ANSWERED  # type: ignore[assignment]
        if not keep_alive:
            self.transport.close()
        self.on_response_complete()
        return True

    def _default_lines(self) -> bytes:
        """The server's default headers (the date) as written, rendered once for each list of
        them: uvicorn makes a new list each second, and answers made at once come by the
        thousand in between."""
        defaults = self.server_state.default_headers
        rendered = BoundedHttpToolsProtocol._defaults
        if rendered[0] is not defaults:
            rendered = BoundedHttpToolsProtocol._defaults = (defaults, wire.lines(defaults))
        return rendered[1]

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
        ]
        self.transport.write(wire.head(error.status, wire.lines(head) + CLOSE) + response.body)
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
