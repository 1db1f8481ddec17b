"""The outermost layer: what every request passes through before routing, and every answer
carries on its way out.

In order: the request is stamped (arrival time, request id); an API request's key is checked
once, before any parameter is looked at, and leaves its account in the request's state; the
key's rate limit is taken (429 when its bucket is empty); a GET or HEAD whose answer is cached
is answered here, with no routing, middleware or `Response` object (what a static file costs).
Everything else goes on to the app. Every answer then carries `X-Request-ID` and
`X-Content-Type-Options: nosniff`, and every answer not from the cache `Server-Timing`; an
authenticated one also carries `Cache-Control: private` and the `X-RateLimit-*` headers. One
access-log line per request names the key by its fingerprint, never the key.
"""

import itertools
import logging
import os
import re
import secrets
import time
from typing import Any

from starlette.datastructures import Headers
from starlette.requests import Request
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from service.access import AUTHENTICATED, presented_key
from service.accounts import Account, Keystore
from service.cache import (
    CACHE_CONTROL,
    CACHE_KEY,
    KEYED_HEADERS,
    NOT_MODIFIED_HEADERS,
    CacheKey,
    ResponseCache,
    Stored,
    cache_key,
    not_modified,
)
from service.dataset import DatasetHolder
from service.errors import STARTED, RateLimited, render, server_timing
from service.metrics import RequestStats, RouteTemplates
from service.ratelimit import Limiter
from service.urls import OPENAPI_PATH, PREFIXES

access_log = logging.getLogger("service.access")

API_PREFIXES = tuple(f"{prefix}/" for prefix in PREFIXES)
NOSNIFF = (b"x-content-type-options", b"nosniff")
PRIVATE = (b"cache-control", b"private")
REQUEST_ID = b"x-request-id"
IF_NONE_MATCH = b"if-none-match"
# A caller's own request id is echoed when it is a plain token; anything else is replaced, so
# a log line or a header never carries what a caller smuggled into it.
GIVEN_REQUEST_ID = re.compile(rb"[A-Za-z0-9._:-]{1,128}")
RECENT_REQUESTS = 4096  # raw requests whose account and cache key are remembered
# A made id is this process's random 20 hex digits and a 12-digit count: unique across
# processes and replicas without a system call per request (`uuid4` cost a tenth of a cached
# answer under load). An id names a request; it is not a secret.
_process_prefix = secrets.token_hex(10).encode()
_request_numbers = itertools.count()


def _new_prefix() -> None:
    global _process_prefix
    _process_prefix = secrets.token_hex(10).encode()


os.register_at_fork(after_in_child=_new_prefix)  # a forked worker makes ids of its own


def needs_key(path: str) -> bool:
    """API paths need a key; the OpenAPI document and the service's own probes do not."""
    return path.startswith(API_PREFIXES) and not path.rstrip("/").endswith(OPENAPI_PATH)


def _request_headers(scope: Scope) -> tuple[bytes | None, bytes | None]:
    """The caller's own request id (when it is a plain token) and `If-None-Match`, in one
    pass over the headers."""
    given = if_none_match = None
    for name, value in scope["headers"]:
        if name == REQUEST_ID and GIVEN_REQUEST_ID.fullmatch(value):
            given = bytes(value)
        elif name == IF_NONE_MATCH:
            if_none_match = value
    return given, if_none_match


def new_request_id() -> bytes:
    return b"%s%012x" % (_process_prefix, next(_request_numbers))


class FrontDoor:
    def __init__(
        self,
        app: ASGIApp,
        *,
        cache: ResponseCache,
        holder: DatasetHolder,
        keystore: Keystore,
        limiter: Limiter,
        stats: RequestStats,
        routes: RouteTemplates,
    ) -> None:
        self.app = app
        self._cache = cache
        self._holder = holder
        self._keystore = keystore
        self._limiter = limiter
        self._stats = stats
        self._routes = routes
        # The account and cache key of recent raw requests (path, query and the headers the
        # key is made of), for the key store's generation they were made under: under load
        # the key check and the cache key cost a fifth of a cached answer (a hash, a header
        # parse, a sort). Only valid keys are remembered; a re-read of the accounts file
        # forgets them all.
        self._recent: dict[tuple[Any, ...], tuple[int, Account, CacheKey]] = {}

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = time.perf_counter()
        state = scope.setdefault("state", {})
        state[STARTED] = started
        given_id, if_none_match = _request_headers(scope)
        headers = [(REQUEST_ID, given_id or new_request_id()), NOSNIFF]
        account = None
        limited = None  # the refusal, when the key's bucket is empty
        status = 0
        found = self._authenticate(scope) if needs_key(scope["path"]) else None
        if found is not None:
            account, key = found
            state[AUTHENTICATED], state[CACHE_KEY] = account, key
            decision = await self._limiter.take(account.key_id, account.limit)
            headers += decision.headers()
            if not decision.allowed:
                limited = RateLimited(decision.retry_after)
            stored = None if limited else self._cached(scope, key)
            if stored is not None:
                # A cached answer brings its own `Cache-Control` (private, with max-age), and no
                # `Server-Timing`: its few microseconds are not worth measuring, and measuring
                # and writing them cost 4% of its throughput.
                if if_none_match is not None and not_modified(if_none_match, stored.etag):
                    status, body = 304, b""
                    kept = [pair for pair in stored.headers if pair[0] in NOT_MODIFIED_HEADERS]
                    out = [*kept, *headers]
                else:
                    status = 200
                    body = stored.body(round((time.perf_counter() - started) * 1000))
                    out = [*stored.headers, (b"content-length", b"%d" % len(body)), *headers]
                await send({"type": "http.response.start", "status": status, "headers": out})
                await send({"type": "http.response.body", "body": body})
                self._done(scope, status, started, headers[0][1], account)
                return

        async def send_with_headers(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
                given = message.get("headers", [])
                # Private unless the answer says more (a cacheable one: private, max-age).
                private = [PRIVATE] if account and all(n != CACHE_CONTROL for n, _ in given) else []
                extra = [*given, *headers, *private, server_timing(started)]
                message = {**message, "headers": extra}
            await send(message)

        try:
            if limited is not None:
                await render(Request(scope), limited)(scope, receive, send_with_headers)
            else:
                await self.app(scope, receive, send_with_headers)
        finally:
            self._done(scope, status, started, headers[0][1], account)

    def _authenticate(self, scope: Scope) -> tuple[Account, CacheKey] | None:
        """The account of the key the request presents and the request's cache key; None when
        the key is missing or invalid, or cannot be checked (the app behind meets the same
        failure, an unreadable accounts file say, and answers it in its envelope)."""
        try:
            generation = self._keystore.refresh()
            raw = (
                scope["path"],
                scope["query_string"],
                *(pair for pair in scope["headers"] if pair[0] in KEYED_HEADERS),
            )
            known = self._recent.get(raw)
            if known is None or known[0] != generation:
                headers = Headers(scope=scope)
                account = self._keystore.authenticate(presented_key(scope["path"], headers))
                if account is None:
                    return None  # the app gives the family's 401
                known = (generation, account, cache_key(account, scope, headers))
                if len(self._recent) >= RECENT_REQUESTS:
                    self._recent.clear()
                self._recent[raw] = known
        except Exception:
            return None
        return known[1], known[2]

    def _cached(self, scope: Scope, key: CacheKey) -> Stored | None:
        dataset = self._holder.current
        if dataset is None or scope["method"] not in ("GET", "HEAD"):
            return None
        return self._cache.get(dataset.version_id, key)

    def _done(
        self, scope: Scope, status: int, started: float, request_id: bytes, account: Account | None
    ) -> None:
        """Count the answer by route and status, and write its access line (JSON fields when
        the log is not a terminal: `service.app.server_options`)."""
        seconds = time.perf_counter() - started
        route = self._routes.of(scope["path"])
        self._stats.observe(route, status, seconds)
        if access_log.isEnabledFor(logging.INFO):
            fields = {
                "method": scope["method"],
                "route": route,
                # The raw path as the request line carried it: a decoded `%0A` could forge lines.
                "path": scope.get("raw_path", b"").decode("latin-1"),
                "status": status,
                "duration_ms": round(seconds * 1000, 3),
                "request_id": request_id.decode("ascii"),
                "key": account.key_id if account is not None else None,
            }
            access_log.info(
                "%s %s %d %.2fms request_id=%s key=%s",
                fields["method"], fields["path"], status, seconds * 1000,
                fields["request_id"], fields["key"] or "-",
                extra=fields,
            )  # fmt: skip
