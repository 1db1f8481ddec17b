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
from collections.abc import Awaitable, Callable, Hashable
from dataclasses import dataclass
from operator import itemgetter
from typing import Any

from cachetools import LRUCache
from starlette.concurrency import run_in_threadpool
from starlette.datastructures import Headers, QueryParams
from starlette.requests import Request
from starlette.responses import Response, StreamingResponse
from starlette.types import Scope

from service.access import EXCHANGE_KEY_HEADER, caller
from service.accounts import Account
from service.errors import ApiError, render

VERSION_HEADER = b"x-dataset-version"
QUERY_TIME = re.compile(rb'"query_time_ms":(\d+)')
KEPT_HEADERS = frozenset({b"content-type", VERSION_HEADER})  # content-length: per answer
# The request headers a cache key is made of: the key, as either family presents it, and Accept.
KEYED_HEADERS = frozenset({b"authorization", EXCHANGE_KEY_HEADER.encode(), b"accept"})
CACHE_KEY = "cache_key"  # the request's key, in its state, once `FrontDoor` has made it


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
