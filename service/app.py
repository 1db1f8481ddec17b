"""The application factory: the URL space, start-up and shut-down, and error rendering."""

import copy
import logging
import sys
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import uvicorn
from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.exceptions import HTTPException
from starlette.middleware.cors import CORSMiddleware
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute, Route
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from service import docs, exchanges, health, results, supplier_data, suppliers
from service.access import EXCHANGE_KEY_ALIAS, EXCHANGE_KEY_HEADER
from service.accounts import Keystore
from service.cache import ResponseCache, cached
from service.dataset import DatasetHolder, VersionWatcher
from service.errors import ApiError, MethodNotAllowed, NotFound, render
from service.front import FrontDoor
from service.metrics import RequestStats, RouteTemplates, ServiceCollector, metrics, registry_for
from service.protocol import BoundedHttpToolsProtocol
from service.ratelimit import Limiter
from service.settings import Settings
from service.urls import OPENAPI_PATH, PREFIXES

log = logging.getLogger(__name__)

# The whole URL space, top to bottom. Each path answers under both version prefixes, with and
# without a trailing slash (no redirects), to GET and HEAD.
ENDPOINTS: list[tuple[str, Callable[[Request], Response]]] = [
    ("/suppliers/{supplier_name}/participants", suppliers.participants),
    ("/suppliers/{supplier_name}/fee-categories", suppliers.fee_categories),
    ("/suppliers/{supplier_name}/actions", suppliers.actions),
    ("/suppliers/{supplier_name}/fee-types", suppliers.fee_types),
    ("/suppliers/{supplier_name}/date-ranges", suppliers.date_ranges),
    ("/suppliers/{supplier_name}/data", supplier_data.supplier_data),
    ("/suppliers/{supplier_name}/data/count", supplier_data.supplier_data_count),
    ("/exchanges", exchanges.list_exchanges),
    ("/exchanges/{exchange_name}", exchanges.exchange_detail),
    ("/fee-schedule-results", results.list_results),
    # `filters` and `versions/...` before `{record_id}`, which would otherwise match them.
    ("/fee-schedule-results/filters", results.filters),
    ("/fee-schedule-results/versions/{version_id}", results.results_by_version),
    ("/fee-schedule-results/{record_id}", results.result_by_id),
]
# Answered on the event loop, without a worker thread: they read only what the version holds in
# memory (rollups, venue summaries, coverage), never a file or a query.
IN_MEMORY = frozenset(
    {
        suppliers.participants,
        suppliers.fee_categories,
        suppliers.actions,
        suppliers.fee_types,
        suppliers.date_ranges,
        exchanges.list_exchanges,
        exchanges.exchange_detail,
        results.filters,
    }
)
# The probes an orchestrator calls, at the root, without a key (`service.health`).
PROBES: dict[str, Callable[[Request], Awaitable[Response]]] = {
    "/healthz": health.healthz,
    "/readyz": health.readyz,
}
# Served at the root without a key, outside the OpenAPI document: Prometheus's scrape (its own
# text format) and the interactive reference (`service.docs`).
UNDOCUMENTED = ("/metrics", "/docs")
OPENAPI_FILE = Path(__file__).with_name("openapi.json")


def routes() -> list[BaseRoute]:
    document = OPENAPI_FILE.read_bytes()

    def openapi(request: Request) -> Response:
        """The OpenAPI 3.1 document (no key needed: it describes, it holds no data)."""
        return Response(document, media_type="application/json")

    return (
        [
            Route(
                prefix + path + slash,
                cached(endpoint, on_loop=endpoint in IN_MEMORY),
                methods=["GET", "HEAD"],
            )
            for path, endpoint in ENDPOINTS
            for prefix in PREFIXES
            for slash in ("", "/")
        ]
        + [
            Route(prefix + OPENAPI_PATH + slash, openapi, methods=["GET", "HEAD"])
            for prefix in PREFIXES
            for slash in ("", "/")
        ]
        + [Route(path, probe, methods=["GET", "HEAD"]) for path, probe in PROBES.items()]
        + [Route("/metrics", metrics, methods=["GET", "HEAD"])]
        + docs.routes()  # the interactive reference at /docs, with its files
    )


def server_options(settings: Settings) -> dict[str, Any]:
    """How uvicorn runs the app, for `python -m service serve` and the tests alike: bounds on
    the request head (`service.protocol`), no `Server` header (it names the software and its
    version to anyone probing), none of uvicorn's own access lines (the front door writes one
    per request, with its route, id and the key's fingerprint), and the service's loggers at
    the configured level, as JSON lines unless they go to a terminal."""
    logging_config = copy.deepcopy(uvicorn.config.LOGGING_CONFIG)
    # One JSON object a line for log collectors; uvicorn's own coloured lines in a terminal.
    logging_config["formatters"]["json"] = {
        "()": "pythonjsonlogger.json.JsonFormatter",
        "fmt": "%(asctime)s %(levelname)s %(name)s %(message)s",
        "rename_fields": {"asctime": "time", "levelname": "level", "name": "logger"},
    }
    logging_config["handlers"]["service"] = {
        "formatter": "default" if sys.stderr.isatty() else "json",
        "class": "logging.StreamHandler",
        "stream": "ext://sys.stderr",
    }
    logging_config["loggers"]["service"] = {
        "handlers": ["service"],
        "level": settings.log_level.upper(),
        "propagate": True,  # the root has no handler of uvicorn's; pytest's caplog listens there
    }
    return {
        "http": BoundedHttpToolsProtocol,
        "server_header": False,
        "access_log": False,
        "log_config": logging_config,
        "log_level": settings.log_level,
    }


def create_app(settings: Settings | None = None) -> Starlette:
    settings = settings or Settings.from_environ()
    holder = DatasetHolder()
    watcher = VersionWatcher(holder, settings)
    limiter = Limiter(settings.redis_url)

    @asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        await run_in_threadpool(watcher.load_now)
        watcher.start()
        yield
        watcher.stop()
        await limiter.close()

    app = Service(
        routes=routes(),
        lifespan=lifespan,
        exception_handlers={
            ApiError: api_error,
            HTTPException: http_error,
        },
    )
    app.router.redirect_slashes = False
    app.state.settings = settings
    app.state.keystore = Keystore(settings.accounts_file)
    app.state.holder = holder
    app.state.watcher = watcher
    app.state.cache = ResponseCache(settings.cache_mb * 2**20)
    app.state.limiter = limiter
    stats = RequestStats()
    app.state.metrics = registry_for(ServiceCollector(stats, holder, app.state.cache, limiter))
    app.add_middleware(ErrorBoundary)
    app.front = with_cors(
        FrontDoor(
            app.inner,
            cache=app.state.cache,
            holder=holder,
            keystore=app.state.keystore,
            limiter=limiter,
            stats=stats,
            routes=RouteTemplates(
                [path for path, _ in ENDPOINTS] + [OPENAPI_PATH], [*PROBES, *UNDOCUMENTED]
            ),
        ),
        settings.cors_origins,
    )
    return app


def with_cors(app: ASGIApp, origins: tuple[str, ...]) -> ASGIApp:
    """`app` answering browsers of `origins` (off, and free, when there are none). Outside the
    front door, so cached answers carry the CORS headers too and a preflight needs no key."""
    if not origins:
        return app
    return CORSMiddleware(
        app,
        allow_origins=list(origins),
        allow_methods=["GET", "HEAD"],
        allow_headers=[
            "authorization",
            EXCHANGE_KEY_HEADER,
            EXCHANGE_KEY_ALIAS,
            "if-none-match",
            "x-request-id",
        ],
        expose_headers=[
            "etag",
            "retry-after",
            "x-dataset-version",
            "x-ratelimit-limit",
            "x-ratelimit-remaining",
            "x-ratelimit-reset",
            "x-request-id",
            "content-disposition",
        ],
        max_age=600,
    )


class Service(Starlette):
    """The app: Starlette with `FrontDoor` outside even Starlette's own outermost layer, so a
    cached answer passes through nothing else (that layer cost 0.6 us of a cached answer's 6 us
    of Python). The front door's key check already turns any failure into "no account" (the
    app behind answers it); everything it passes on meets Starlette's layers and
    `ErrorBoundary` as before."""

    front: ASGIApp

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        scope["app"] = self
        await self.front(scope, receive, send)

    async def inner(self, scope: Scope, receive: Receive, send: Send) -> None:
        """What the front door passes requests on to: Starlette as it is."""
        await super().__call__(scope, receive, send)


async def api_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, ApiError)
    return render(request, exc)


async def http_error(request: Request, exc: Exception) -> Response:
    """Starlette's own 404 (no route) and 405 (wrong method), in the family's envelope."""
    assert isinstance(exc, HTTPException)
    if exc.status_code == 405:
        return render(request, MethodNotAllowed((exc.headers or {}).get("Allow", "GET, HEAD")))
    return render(request, NotFound("not found"))


class ErrorBoundary:
    """Anything a handler did not expect becomes a logged 500 in the family's envelope.

    Starlette's own last-resort handler re-raises after answering, which makes the server drop
    the client's keep-alive connection; this answers and keeps the connection usable.
    """

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = False

        async def tracking_send(message: Message) -> None:
            nonlocal started
            started = started or message["type"] == "http.response.start"
            await send(message)

        try:
            await self.app(scope, receive, tracking_send)
        except Exception:
            request = Request(scope)
            log.exception("unhandled error on %s %s", request.method, request.url.path)
            if started:
                raise  # too late for a clean answer; let the server close the connection
            await render(request, ApiError("internal error"))(scope, receive, send)
