"""The front door: what every request meets before its handler, and what every answer carries
on its way out, in one place. It is the ASGI app the server runs, with Starlette behind it.

In order: the request is stamped into a `Call` (arrival, request id); an API request's key is
checked once, and the call holds its account, its cache key and the version it is answered
from; the key's rate limit is taken (429 when its bucket is empty); a GET or HEAD whose answer
is cached is answered here, with no routing or `Response` object. Most such answers never come
this far: the connection asks `at_once` for them as soon as a request's head is read, and
writes them with no ASGI cycle at all (`service.edge.protocol`); it does the same for a quick
endpoint's request whose answer is not cached (`service.api.Endpoint.quick`), whose handler
runs there.
Everything else is dispatched here: the API's paths by a table of their segments
(`service.edge.dispatch`), whose handler runs on the event loop (`async def`: it never blocks)
or in a worker thread (`def`), what it raises rendered in the family's envelope; any other path
(the pages, the metrics scrape, a 404) goes on to Starlette. Each handler reads the call
(`CALL.get()`), its account first: the family's 401 without a key. On the way out
(`service.edge.reply.Reply`) every answer gets its headers, its validators or a 304, and a
successful JSON answer is kept for the cache.
Anything unexpected becomes a logged 500 in the envelope, with the connection kept. One
access-log line per request names the key by its fingerprint, never the key, and the request
is counted by the endpoint it named, for `/metrics`.
"""

import logging
import time
from typing import Any

from starlette.applications import Starlette
from starlette.datastructures import Headers
from starlette.responses import Response
from starlette.routing import BaseRoute, Match, Mount, Route
from starlette.types import Message, Receive, Scope, Send

from service import remembered
from service.accounts import Account, Keystore
from service.dataset.version import Dataset
from service.dataset.watcher import DatasetHolder
from service.edge import dispatch, wire
from service.edge.access import challenge, presented_key
from service.edge.accesslog import AccessLog
from service.edge.cache import (
    KEYED_HEADERS,
    CacheKey,
    ResponseCache,
    Stored,
    cache_key,
    not_modified,
    stored_answer,
    stored_body,
    stored_etag,
)
from service.edge.call import CALL, Call, arrival, elapsed_ms, identified
from service.edge.cors import with_cors
from service.edge.metrics import OTHER, RequestStats
from service.edge.ratelimit import Decision, Limiter
from service.edge.reply import Answer, Reply, Written, cached_lines
from service.edge.request import ApiRequest
from service.errors import ApiError, MethodNotAllowed, RateLimited, family_of
from service.urls import OPENAPI_PATH, PREFIXES

log = logging.getLogger(__name__)

API_PREFIXES = tuple(f"{prefix}/" for prefix in PREFIXES)
RECENT_REQUESTS = 4096  # raw requests whose account and cache key are remembered
# The longest raw request remembered (path, query and its keyed headers' values): a request
# can carry 24 KB of them: 4,096 such, with their cache keys, could hold about 130 MB.
RECENT_CHARS = 1024
CACHED_METHODS = ("GET", "HEAD")
ORIGIN = b"origin"


def _raw_request(scope: Scope) -> tuple[Any, ...]:
    """What a request's account and cache key are made of: its path, query and the headers
    the key is made of, as they came."""
    return (
        scope["path"],
        scope["query_string"],
        *(pair for pair in scope["headers"] if pair[0] in KEYED_HEADERS),
    )


def _short(raw: tuple[Any, ...]) -> bool:
    """Whether a raw request (`_raw_request`) is short enough to remember (`RECENT_CHARS`)."""
    path, query, *headers = raw
    return len(path) + len(query) + sum(len(value) for _, value in headers) <= RECENT_CHARS


async def _unsent(message: Message) -> None:
    raise RuntimeError("an answer made at once is returned, not sent")


def needs_key(path: str) -> bool:
    """API paths need a key; the OpenAPI document and the service's own probes do not."""
    return path.startswith(API_PREFIXES) and not path.rstrip("/").endswith(OPENAPI_PATH)


def _template(route: BaseRoute) -> str:
    assert isinstance(route, Route | Mount)  # the only kinds `service.app.routes` makes
    return route.path


def route_label(path: str) -> str:
    """A route's template as metrics and logs name it: without the version prefix or slash."""
    bare = path.rstrip("/")
    prefix = next((p for p in PREFIXES if bare.startswith(p + "/")), "")
    return bare[len(prefix) :]


class FrontDoor:
    """The ASGI app the server runs: the door, then `app` (browsers' CORS outside both, so
    cached answers carry it too and a preflight needs no key)."""

    def __init__(
        self,
        app: Starlette,
        *,
        paths: dispatch.PathTable,
        cache: ResponseCache,
        holder: DatasetHolder,
        keystore: Keystore,
        limiter: Limiter,
        stats: RequestStats,
        max_age: int,
        cors_origins: tuple[str, ...],
        access: AccessLog | None,
    ) -> None:
        self.app = app
        self.state = app.state
        self._paths = paths
        self._cache = cache
        self._access = access
        self._holder = holder
        self._keystore = keystore
        self._limiter = limiter
        self._stats = stats
        self._max_age = str(max_age).encode()
        self._labels = {path: route_label(path) for path in map(_template, app.routes)}
        # The account and cache key of recent raw requests (path, query and the headers the
        # key is made of), for the key store's generation they were made under: under load
        # the key check and the cache key cost a fifth of a cached answer (a hash, a header
        # parse, a sort). Only valid keys are remembered; a re-read of the accounts file
        # forgets them all.
        self._recent: dict[tuple[Any, ...], tuple[int, Account, CacheKey]] = {}
        self._entry = with_cors(self._serve, cors_origins)
        self._cors = bool(cors_origins)
        # Answers are made at once (`at_once`) only with the response cache on (with it off,
        # every request takes the ordinary path: what the tests compare them with) and the
        # rate limit taken in this process (a Redis round trip is awaited).
        self.answers_at_once = cache.enabled and limiter.local

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        await self._entry(scope, receive, send)

    async def _serve(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)  # the lifespan
            return
        call = arrival(scope)
        CALL.set(call)
        reply = Reply(send, call, scope, max_age=self._max_age)
        try:
            await self._answer(scope, receive, call, reply)
        except Exception:
            if reply.replaced:
                return  # `NotSent` stopped the answer the 304 replaced
            log.exception("unhandled error on %s %s", scope["method"], scope["path"])
            if not reply.started:
                await call.render(ApiError("internal error"))(scope, receive, reply.send)
            elif not reply.finished:
                raise  # too late for a clean answer; let the server close the connection
        finally:
            self._done(scope, call, reply)

    async def _answer(self, scope: Scope, receive: Receive, call: Call, reply: Reply) -> None:
        endpoint = self._paths.resolve(scope["path"])  # None: not the API's (Starlette's)
        if endpoint is not None:
            reply.route = endpoint[0].template
        if needs_key(scope["path"]):
            call.version = self._holder.current
            self._authenticate(scope, call)
        if call.caller is not None:
            decision = await self._limiter.take(call.caller.key_id, call.caller.limit)
            answer = self._refused_or_cached(decision, self._cached(scope, call), call, reply)
            if answer is not None:
                await reply.deliver(answer)
                return
        if endpoint is None:
            await self.app(scope, receive, reply.send)
        else:
            await self._dispatch(*endpoint, scope, receive, call, reply)

    def _refused_or_cached(
        self, decision: Decision, stored: Stored | None, call: Call, reply: Reply
    ) -> Answer | None:
        """The answer to a request its key's rate limit refuses (429), or to one whose answer
        is `stored`; None for any other."""
        reply.headers += decision.headers()
        if not decision.allowed:
            return reply.whole(call.render(RateLimited(decision.retry_after)))
        return None if stored is None else reply.cached(stored)

    def at_once(self, scope: Scope) -> Written | None:
        """The answer to a request made at once, with no ASGI cycle: `service.edge.protocol`
        writes it as uvicorn would. It is the answer the ordinary path gives (headers, 304,
        429, metrics and access line) to a request whose answer the response cache holds, its
        cached part written once per cached answer (`service.edge.cache.Stored`'s lines), or
        to a quick endpoint's request (`service.api.Endpoint.quick`) whose answer it does not
        hold (`_made`). None when the request takes the ordinary path: a method other than GET
        or HEAD, a path that needs no key, a key not checked recently under the key store in
        force (for an endpoint that is not quick), an answer not in the cache (likewise), a
        browser's request when CORS is on, or rate limits kept in Redis (their answer is
        awaited)."""
        if not self.answers_at_once or scope["method"] not in CACHED_METHODS:
            return None
        path = scope["path"]
        endpoint = self._paths.resolve(path)
        version = self._holder.current
        if endpoint is None or version is None or not needs_key(path):
            return None
        if self._cors and any(name == ORIGIN for name, _ in scope["headers"]):
            return None
        if self._holder.opening.is_set():
            # Answers made at once hold the GIL back to back: without a pause, the thread
            # opening a new version waited for it at every return from C, and a 10M-record
            # version opened in 1.0-1.3 s under load instead of 0.25 s (docs/benchmarks.md).
            time.sleep(0)
        route, path_params = endpoint
        raw = _raw_request(scope)
        known = self._recent.get(raw)
        if known is None or known[0] != self._keystore.refresh():
            return self._made(scope, route, path_params, version, raw) if route.quick else None
        _, account, key = known
        stored = self._cache.get(version.version_id, key)
        if stored is None and route.quick:
            return self._made(scope, route, path_params, version, raw, missed=True)
        if stored is None:
            return None
        started = time.perf_counter()
        request_id, if_none_match = identified(scope["headers"])
        decision = self._limiter.take_here(account.key_id, account.limit)
        if decision.allowed and not not_modified(if_none_match, stored_etag(stored)):
            # The answer nearly every such request gets, in a straight line: a `Call` and a
            # `Reply` cost a third of it (`docs/benchmarks.md`, #40 part 5).
            status, body = 200, stored_body(stored, elapsed_ms(started))
            header_lines = cached_lines(stored, body, request_id, decision)
        else:  # a 429 or a 304, as the ordinary path makes them
            call = Call(request_id, started, family_of(path), if_none_match, version, account, key)
            reply = Reply(_unsent, call, scope, max_age=self._max_age)
            answer = self._refused_or_cached(decision, stored, call, reply)
            assert answer is not None  # `stored` is an answer
            status, headers, body = answer
            header_lines = wire.lines(headers)
        self._count(scope, route.template, status, started, request_id, account.key_id)
        self._stats.at_once += 1
        return status, header_lines, body

    def _made(
        self,
        scope: Scope,
        route: dispatch.Route,
        path_params: dict[str, str],
        version: Dataset,
        raw: tuple[Any, ...],
        *,
        missed: bool = False,
    ) -> Written | None:
        """A quick endpoint's answer, made at once as the ordinary path makes it: the key
        checked, its rate limit taken, the cache read (unless it was `missed` already), then
        the handler run here, what it raises in the family's envelope. None for a request
        without a valid key (the ordinary path makes the family's 401). `raw` is the request
        as `_raw_request` gives it, made once."""
        call = arrival(scope)
        call.version = version
        self._authenticate(scope, call, raw)
        if call.caller is None:
            return None
        reply = Reply(_unsent, call, scope, max_age=self._max_age)
        reply.route = route.template
        token = CALL.set(call)  # the handler reads it, as on the ordinary path
        try:
            decision = self._limiter.take_here(call.caller.key_id, call.caller.limit)
            cached = None if missed else self._cached(scope, call)
            answer = self._refused_or_cached(decision, cached, call, reply)
            if answer is None:
                answer = reply.whole(self._handled(scope, route, path_params, call))
            self._done(scope, call, reply)
        finally:
            CALL.reset(token)
        self._stats.at_once += 1
        status, headers, body = answer
        return status, wire.lines(headers), body

    def _handled(
        self, scope: Scope, route: dispatch.Route, path_params: dict[str, str], call: Call
    ) -> Response:
        """A quick handler's answer; what it raises in the family's envelope, as `_dispatch`
        and `_serve` render it."""
        self._routed(scope, route, path_params)
        try:
            response = route.handler(ApiRequest(scope))
        except ApiError as error:
            return call.render(error)
        except Exception:
            log.exception("unhandled error on %s %s", scope["method"], scope["path"])
            return call.render(ApiError("internal error"))
        assert isinstance(response, Response)  # a quick handler is a plain function
        return response

    async def _dispatch(
        self,
        route: dispatch.Route,
        path_params: dict[str, str],
        scope: Scope,
        receive: Receive,
        call: Call,
        reply: Reply,
    ) -> None:
        """Run the endpoint's handler and send its answer; what it raises is rendered in the
        family's envelope, unless its answer had begun (then the door's 500, as Starlette's
        own handling did)."""
        if scope["method"] not in route.methods:
            await call.render(MethodNotAllowed(route.allow))(scope, receive, reply.send)
            return
        self._routed(scope, route, path_params)
        try:
            response = await route.answer(ApiRequest(scope, receive))
            await response(scope, receive, reply.send)
        except ApiError as error:
            if reply.headed:
                raise
            await call.render(error)(scope, receive, reply.send)

    def _routed(self, scope: Scope, route: dispatch.Route, path_params: dict[str, str]) -> None:
        """Put in the scope what Starlette's router gave a handler: the app (its state), the
        route (the parameters it declares) and the path's parameters."""
        scope["app"], scope["route"], scope["path_params"] = self.app, route, path_params

    def _authenticate(self, scope: Scope, call: Call, raw: tuple[Any, ...] | None = None) -> None:
        """The account of the key the request presents, and its cache key, into `call` (left
        None when the key is missing or invalid: the handler's 401). `raw`: the request as
        `_raw_request` gives it, when the caller made it already."""
        generation = self._keystore.refresh()
        raw = _raw_request(scope) if raw is None else raw
        known = self._recent.get(raw)
        if known is None or known[0] != generation:
            headers = Headers(scope=scope)
            account = self._keystore.authenticate(presented_key(scope["path"], headers))
            if account is None:
                call.challenge = challenge(scope["path"], headers)
                return
            known = (generation, account, cache_key(account, scope, headers))
            if _short(raw):
                remembered.keep(self._recent, raw, known, RECENT_REQUESTS)
        _, call.caller, call.key = known

    def _cached(self, scope: Scope, call: Call) -> Stored | None:
        if call.version is None or call.key is None or scope["method"] not in CACHED_METHODS:
            return None
        return self._cache.get(call.version.version_id, call.key)

    def _keep(self, call: Call, stored: Stored) -> None:
        if call.version is not None and call.key is not None:
            self._cache.put(call.version.version_id, call.key, stored)

    def _route(self, scope: Scope) -> str:
        """The template of the Starlette route the request answered to: the router's own
        match, made again for a request no route took (404)."""
        route: BaseRoute | None = scope.get("route")
        if route is None:
            route = next(
                (r for r in self.app.routes if r.matches(scope)[0] is not Match.NONE), None
            )
        return OTHER if route is None else self._labels[_template(route)]

    def _done(self, scope: Scope, call: Call, reply: Reply) -> None:
        """Keep a successful answer for the cache, then count and log it (`_count`)."""
        if reply.cacheable is not None and self._cache.enabled:
            self._keep(call, stored_answer(*reply.cacheable, call.timed))
        key = call.caller.key_id if call.caller is not None else None
        route = reply.route or self._route(scope)
        self._count(scope, route, reply.status, call.started, call.request_id, key)

    def _count(
        self,
        scope: Scope,
        route: str,
        status: int,
        started: float,
        request_id: bytes,
        key: str | None,
    ) -> None:
        """Count the answer by route and status, and write its access line
        (`service.edge.accesslog`)."""
        seconds = time.perf_counter() - started
        self._stats.observe(route, status, seconds)
        if self._access is not None:
            raw_path = scope.get("raw_path", b"")
            self._access.write(scope["method"], route, raw_path, status, seconds, request_id, key)
