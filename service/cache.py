"""Answers kept per dataset version, so a repeated request costs a lookup, not a query.

A published version never changes, so a successful JSON answer to the same caller scope, path,
parameters and Accept header stays right until the next version; the cache is keyed by
version and emptied when a request first sees a newer one. The one part of a body that
changes per call, the exchange family's `meta.query_time_ms`, is stored cut out and filled
in with the current figure on every hit, so a cached answer is the answer, byte for byte.

Bounded by the bytes of the bodies it holds (least recently used out first); 0 turns it off.
"""

import re
import threading
import time
from collections.abc import Awaitable, Callable, Hashable
from dataclasses import dataclass
from operator import itemgetter
from typing import Any

from cachetools import LRUCache
from starlette.concurrency import run_in_threadpool
from starlette.datastructures import Headers, QueryParams
from starlette.requests import Request
from starlette.responses import Response, StreamingResponse
from starlette.types import ASGIApp, Receive, Scope, Send

from service.access import AUTHENTICATED, EXCHANGE_KEY_HEADER, caller, presented_key
from service.accounts import Account, Keystore
from service.dataset import DatasetHolder
from service.errors import ApiError, render, server_timing

VERSION_HEADER = b"x-dataset-version"
QUERY_TIME = re.compile(rb'"query_time_ms":(\d+)')
KEPT_HEADERS = frozenset({b"content-type", VERSION_HEADER})  # content-length: per answer
# The request headers a cache key is made of: the key, as either family presents it, and Accept.
KEYED_HEADERS = frozenset({b"authorization", EXCHANGE_KEY_HEADER.encode(), b"accept"})
RECENT_REQUESTS = 4096
CACHE_KEY = "cache_key"  # the request's key, in its state, once `FromCache` has made it


@dataclass(frozen=True)
class Stored:
    head: bytes  # the body up to the query time (all of it when there is none)
    tail: bytes | None  # the body after the query time; None when there is no query time
    headers: tuple[tuple[bytes, bytes], ...]

    @classmethod
    def of(cls, response: Response) -> "Stored":
        body = bytes(response.body)
        # The envelope's `meta` comes last; a string value cannot match (its quotes are escaped).
        found = next(reversed(list(QUERY_TIME.finditer(body))), None)
        headers = tuple((k, v) for k, v in response.raw_headers if k in KEPT_HEADERS)
        if found is None:
            return cls(body, None, headers)
        return cls(body[: found.start(1)], body[found.end(1) :], headers)

    def body(self, query_time_ms: int) -> bytes:
        return self.head if self.tail is None else b"%s%d%s" % (self.head, query_time_ms, self.tail)

    @property
    def size(self) -> int:
        return len(self.head) + len(self.tail or b"")


def cache_key(account: Account, scope: Scope, headers: Headers) -> Hashable:
    """What makes two requests the same: caller scope, path, parameters and Accept header.

    Parameters are sorted by name; a name's repeated values keep their order (echoes show it).
    A query with nothing to decode is sorted as raw `name=value` pairs, which mean exactly what
    the decoded ones do at a tenth of the cost; one with escapes is decoded as the handler
    decodes it (two raw names can decode to one, so their raw order would not be enough).
    """
    query: bytes = scope["query_string"]
    parameters: list[Any]
    if b"%" in query or b"+" in query:
        parameters = sorted(QueryParams(query).multi_items(), key=itemgetter(0))
    else:
        parameters = sorted(query.split(b"&"), key=lambda pair: pair.partition(b"=")[0])
    return (account, scope["path"], tuple(parameters), headers.get("accept"))


class ResponseCache:
    """Thread-safe: handlers run on the event loop and in the thread pool."""

    def __init__(self, max_bytes: int) -> None:
        self._max_bytes = max_bytes
        self._entries: LRUCache[Hashable, Stored] = self._empty()
        self._version: str | None = None
        self._lock = threading.Lock()
        self.hits = 0
        self.misses = 0

    def _empty(self) -> "LRUCache[Hashable, Stored]":
        return LRUCache(maxsize=max(self._max_bytes, 1), getsizeof=lambda stored: stored.size)

    def get(self, version: str, key: Hashable) -> Stored | None:
        with self._lock:
            if version != self._version:
                self._entries, self._version = self._empty(), version
            stored = self._entries.get(key)
            if stored is None:
                self.misses += 1
            else:
                self.hits += 1
            return stored

    def put(self, version: str, key: Hashable, response: Response) -> None:
        """Keep a successful answer of `version` (ignored once a newer version is seen)."""
        if self._max_bytes <= 0:
            return
        stored = Stored.of(response)
        if stored.size > self._max_bytes:
            return
        with self._lock:
            if version == self._version:
                self._entries[key] = stored


def cached(
    endpoint: Callable[[Request], Response], *, on_loop: bool = False
) -> Callable[[Request], Awaitable[Response]]:
    """`endpoint`, with its successful JSON answers kept for `FromCache` to give again. The
    key is checked first; the request is pinned to the version it is answered from, which the
    answer names in `X-Dataset-Version`. `on_loop`: the endpoint never blocks (it reads only
    memory), so it is called on the event loop instead of in a worker thread."""

    async def answer(request: Request) -> Response:
        account = caller(request)
        dataset = request.app.state.holder.current
        if dataset is None:
            return await run_in_threadpool(endpoint, request)
        request.state.dataset = dataset  # the handler answers from the version the key names
        try:
            response = endpoint(request) if on_loop else await run_in_threadpool(endpoint, request)
        except ApiError as error:  # rendered here, so an error names its version too
            response = render(request, error)
        response.headers[VERSION_HEADER.decode()] = dataset.version_id
        if response.status_code == 200 and not isinstance(response, StreamingResponse):
            cache: ResponseCache = request.app.state.cache
            key = request.scope.get("state", {}).get(CACHE_KEY)
            if key is None:
                key = cache_key(account, request.scope, request.headers)
            cache.put(dataset.version_id, key, response)
        return response

    return answer


class FromCache:
    """The outermost layer before the router: a GET or HEAD whose answer is cached is answered
    here, without routing, middleware or a `Response` object (what a static file costs). The
    key is checked first; anything not answered here goes on to the app unchanged."""

    def __init__(
        self, app: ASGIApp, *, cache: ResponseCache, holder: DatasetHolder, keystore: Keystore
    ) -> None:
        self.app = app
        self._cache = cache
        self._holder = holder
        self._keystore = keystore
        # The cache key of recent raw requests (path, query and the headers the key is made
        # of), for the key store's generation it was made under: under load the key check
        # and the key cost a fifth of a cached answer (a hash, a header parse, a sort). Only
        # valid keys are remembered, and a re-read of the accounts file forgets them all.
        self._recent: dict[tuple[Any, ...], tuple[int, Account, Hashable]] = {}

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        started = time.perf_counter()
        try:
            stored = self._lookup(scope) if scope["type"] == "http" else None
        except Exception:
            # The app behind meets the same failure (an unreadable accounts file, say) and
            # answers it in the family's envelope; this layer only ever saves work.
            stored = None
        if stored is None:
            await self.app(scope, receive, send)
            return
        body = stored.body(round((time.perf_counter() - started) * 1000))
        headers = [
            *stored.headers,
            (b"content-length", b"%d" % len(body)),
            server_timing(started),
        ]
        await send({"type": "http.response.start", "status": 200, "headers": headers})
        await send({"type": "http.response.body", "body": body})

    def _lookup(self, scope: Scope) -> Stored | None:
        dataset = self._holder.current
        if dataset is None or scope["method"] not in ("GET", "HEAD"):
            return None
        generation = self._keystore.refresh()
        raw = (
            scope["path"],
            scope["query_string"],
            *(pair for pair in scope["headers"] if pair[0] in KEYED_HEADERS),
        )
        known = self._recent.get(raw)
        if known is None or known[0] != generation:
            found = self._key_of(scope)
            if found is None:
                return None  # the app gives the family's 401
            known = (generation, *found)
            if len(self._recent) >= RECENT_REQUESTS:
                self._recent.clear()
            self._recent[raw] = known
        _, account, key = known
        # Checked once: the handlers and `cached` read the caller and the key from the state.
        state = scope.setdefault("state", {})
        state[AUTHENTICATED], state[CACHE_KEY] = account, key
        return self._cache.get(dataset.version_id, key)

    def _key_of(self, scope: Scope) -> tuple[Account, Hashable] | None:
        """The account and cache key of a request whose key is valid; None when it is not."""
        headers = Headers(scope=scope)
        account = self._keystore.authenticate(presented_key(scope["path"], headers))
        return None if account is None else (account, cache_key(account, scope, headers))
