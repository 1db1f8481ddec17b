"""An answer on its way out of the front door (`service.edge.front`).

Every answer gets the headers every answer carries (`X-Request-ID`, `nosniff`, the rate
limit's, `Server-Timing`, `Cache-Control: private` for a caller with a key). An API handler's
answer also names the version it came from; a successful one carries its validators
(`Cache-Control: private, max-age`, a weak ETag), or is replaced by a 304 when `If-None-Match`
names that tag; and a successful one in one piece is kept for the response cache.
"""

from starlette.responses import Response
from starlette.types import Message, Scope, Send

from service.edge import wire
from service.edge.cache import (
    CACHE_CONTROL,
    ETAG,
    NOT_MODIFIED_HEADERS,
    VERSION_HEADER,
    Stored,
    entity_tag,
    not_modified,
    stored_body,
    stored_etag,
)
from service.edge.call import REQUEST_ID, Call
from service.edge.ratelimit import Decision
from service.errors import server_timing

NOSNIFF = (b"x-content-type-options", b"nosniff")
PRIVATE = (b"cache-control", b"private")
NOSNIFF_LINE = wire.lines([NOSNIFF])
# An answer made in one piece: its status, its headers and its body.
Answer = tuple[int, list[tuple[bytes, bytes]], bytes]
# An answer made at once: its status, its headers as written (`service.edge.wire`), its body.
Written = tuple[int, bytes, bytes]


class NotSent(OSError):
    """Stops an answer the door replaced with a 304 before its body is made: raised from its
    first `send`, which a streamed answer takes for a client gone (an OSError), so a download
    not sent is not made either."""


class Reply:
    """An answer on its way out. Every answer gets the headers every answer carries; an API
    handler's also the version it came from and, when it succeeded, its validators
    (`Cache-Control: private, max-age`, a weak ETag) or a 304 in its place when
    `If-None-Match` names that tag. A successful answer in one piece is kept for the cache."""

    def __init__(self, send: Send, call: Call, scope: Scope, *, max_age: bytes) -> None:
        self._send = send
        self._call = call
        self._scope = scope
        self._max_age = max_age
        self.headers = [(REQUEST_ID, call.request_id), NOSNIFF]
        self.status = 0
        self.started = self.finished = False  # started: the head has been sent
        self.replaced = False  # by a 304 (`NotSent` stops the answer it replaced)
        self.route: str | None = None  # the endpoint's template, when the path names one
        self.cacheable: tuple[bytes, list[tuple[bytes, bytes]]] | None = None  # body and headers
        self._head: list[tuple[bytes, bytes]] | None = None  # while a body may be kept
        self._pending: Message | None = None  # the head, until the body's first part

    async def send(self, message: Message) -> None:
        if message["type"] == "http.response.start":
            message = self._start(message["status"], message.get("headers", []))
            if not self.replaced:
                # The head waits for the body's first part and is sent just before it, so a
                # handler that fails before its first part (a download whose query fails)
                # still gets a clean 500, not a head without a body. `service.edge.protocol` then
                # writes the two in one go.
                self._pending = message
                return
            self.started = True
        elif message["type"] == "http.response.body":
            more = message.get("more_body", False)
            if self._head is not None and not more:  # one body in one piece: not a download
                self.cacheable = (bytes(message.get("body", b"")), self._head)
            self._head = None
            self.finished = not more
            if self._pending is not None:
                self.started, pending, self._pending = True, self._pending, None
                await self._send(pending)
        await self._send(message)
        if self.replaced and not self.finished:
            await self._send({"type": "http.response.body", "body": b""})
            self.finished = True
            raise NotSent

    @property
    def headed(self) -> bool:
        """Whether the answer has begun: its head is sent, or held for its body."""
        return self.started or self._pending is not None

    def _start(self, status: int, given: list[tuple[bytes, bytes]]) -> Message:
        self.status, self._head = status, None
        call = self._call
        validators = self._validators(status) if self._from_handler() else []
        if status == 200 and validators[:1] and validators[0][0] == ETAG:  # the ETag first
            if not_modified(call.if_none_match, validators[0][1]):
                self.status, given, self.replaced = 304, [], True
            else:
                self._head = [*given, *validators]  # a candidate for the cache
        names = {name for name, _ in given} | {name for name, _ in validators}
        # Private unless the answer says more (a successful one: private, max-age).
        private = [PRIVATE] if call.caller and CACHE_CONTROL not in names else []
        timing = server_timing(call.started)
        head = [*given, *validators, *self.headers, *private, timing]
        return {"type": "http.response.start", "status": self.status, "headers": head}

    def _from_handler(self) -> bool:
        """Whether an API handler answered a caller with a key (a route took the request, and
        its method: not a 405): a 401 names no version."""
        route = self._scope.get("route")
        return (
            self._call.version is not None
            and self._call.caller is not None
            and route is not None
            and self._scope["method"] in (getattr(route, "methods", None) or ())
        )

    def _validators(self, status: int) -> list[tuple[bytes, bytes]]:
        """The version an answer came from, with its ETag and `Cache-Control` if it is a 200
        to a caller with a key (the ETag first)."""
        call = self._call
        assert call.version is not None
        version = (VERSION_HEADER, call.version.version_id.encode())
        if status != 200 or call.key is None or self._scope["method"] == "POST":
            return [version]  # a POST's answer is neither validated nor kept: a body asked it
        etag = entity_tag(call.version.version_id, call.key).encode()
        return [(ETAG, etag), (CACHE_CONTROL, b"private, max-age=" + self._max_age), version]

    def cached(self, stored: Stored) -> Answer:
        """A cached answer (or 304), with its own `Cache-Control` (private, with max-age)
        and no `Server-Timing`: its few microseconds are not worth measuring, and measuring
        and writing them cost 4% of its throughput."""
        _, _, kept, _ = stored
        if not_modified(self._call.if_none_match, stored_etag(stored)):
            self.status, body = 304, b""
            headers_304 = [pair for pair in kept if pair[0] in NOT_MODIFIED_HEADERS]
            out = [*headers_304, *self.headers]
        else:
            self.status = 200
            body = stored_body(stored, self._call.elapsed_ms())
            out = [*kept, (b"content-length", b"%d" % len(body)), *self.headers]
        self.started = self.finished = True
        return self.status, out, body

    def whole(self, response: Response) -> Answer:
        """A response made whole (an error's, or a quick handler's answer made at once), as
        `send` gives it: its headers, a 304 in its place when `If-None-Match` names its tag,
        and a successful one kept for the cache."""
        start = self._start(response.status_code, response.raw_headers)
        body = b"" if self.replaced else bytes(response.body)
        if self._head is not None:
            self.cacheable, self._head = (body, self._head), None
        self.started = self.finished = True
        return self.status, start["headers"], body

    async def deliver(self, answer: Answer) -> None:
        """Send an answer `cached` or `whole` made."""
        status, headers, body = answer
        await self._send({"type": "http.response.start", "status": status, "headers": headers})
        await self._send({"type": "http.response.body", "body": body})


def cached_lines(stored: Stored, body: bytes, request_id: bytes, decision: Decision) -> bytes:
    """The headers of a cached answer's 200 (`Reply.cached`) as written, the stored ones
    rendered once when it was kept: what the connection writes for an answer made at once
    (`tests/test_at_once.py` holds the two byte for byte)."""
    _, _, _, lines = stored
    return b"%scontent-length: %d\r\n%s: %s\r\n%s%s" % (
        lines,
        len(body),
        REQUEST_ID,
        request_id,
        NOSNIFF_LINE,
        decision.lines(),
    )
