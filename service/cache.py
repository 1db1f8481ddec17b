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

from cachetools import LRUCache
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import Response, StreamingResponse

from service.access import caller
from service.dataset import DatasetHolder
from service.errors import elapsed_ms

QUERY_TIME = re.compile(rb'"query_time_ms":(\d+)')
KEPT_HEADERS = frozenset({"content-type"})  # content-length is recomputed per answer


@dataclass(frozen=True)
class Stored:
    head: bytes  # the body up to the query time (all of it when there is none)
    tail: bytes | None  # the body after the query time; None when there is no query time
    headers: tuple[tuple[str, str], ...]

    @classmethod
    def of(cls, response: Response) -> "Stored":
        body = bytes(response.body)
        # The envelope's `meta` comes last; a string value cannot match (its quotes are escaped).
        found = next(reversed(list(QUERY_TIME.finditer(body))), None)
        headers = tuple((k, v) for k, v in response.headers.items() if k in KEPT_HEADERS)
        if found is None:
            return cls(body, None, headers)
        return cls(body[: found.start(1)], body[found.end(1) :], headers)

    def response(self, query_time_ms: int) -> Response:
        body = self.head if self.tail is None else b"%s%d%s" % (self.head, query_time_ms, self.tail)
        return Response(body, headers=dict(self.headers))

    @property
    def size(self) -> int:
        return len(self.head) + len(self.tail or b"")


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


def cached(endpoint: Callable[[Request], Response]) -> Callable[[Request], Awaitable[Response]]:
    """`endpoint`, answered from the cache where it can be. A hit is answered on the event loop,
    without waiting for a worker thread; the key is checked first either way."""

    async def answer(request: Request) -> Response:
        account = caller(request)
        holder: DatasetHolder = request.app.state.holder
        dataset = holder.current
        if dataset is None:
            return await run_in_threadpool(endpoint, request)
        request.state.dataset = dataset  # the handler answers from the version the key names
        cache: ResponseCache = request.app.state.cache
        # Parameters sorted by name (a name's repeated values keep their order: echoes show it).
        parameters = tuple(sorted(request.query_params.multi_items(), key=lambda item: item[0]))
        key = (account, request.url.path, parameters, request.headers.get("accept"))
        stored = cache.get(dataset.version_id, key)
        if stored is not None:
            return stored.response(elapsed_ms(request))
        response = await run_in_threadpool(endpoint, request)
        if response.status_code == 200 and not isinstance(response, StreamingResponse):
            cache.put(dataset.version_id, key, response)
        return response

    return answer
