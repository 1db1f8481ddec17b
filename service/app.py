"""The application factory: the URL space, start-up and shut-down, Starlette's own errors in
the family's envelope, and how uvicorn runs it all."""

import copy
import sys
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from functools import partial
from typing import Any

import uvicorn
from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute, Route

from service import api
from service.accounts import Keystore
from service.dataset.watcher import DatasetHolder, VersionWatcher
from service.edge.accesslog import AccessLog
from service.edge.cache import ResponseCache
from service.edge.call import CALL
from service.edge.front import FrontDoor
from service.edge.metrics import RequestStats, ServiceCollector, metrics, registry_for
from service.edge.protocol import BoundedHttpToolsProtocol
from service.edge.ratelimit import Limiter
from service.errors import ApiError, MethodNotAllowed, NotFound
from service.pages import docs, explore
from service.settings import VERBOSE, Settings


def routes() -> list[BaseRoute]:
    """What Starlette routes: what lies outside the OpenAPI document (the front door dispatches
    the API's own endpoints, `service.edge.dispatch`)."""
    return [
        Route("/metrics", metrics, methods=["GET", "HEAD"]),  # Prometheus's own text format
        *docs.routes(),  # the interactive reference at /docs, with its files
        *explore.routes(),  # the fee explorer at /explore, with its script and style
    ]


def server_options(settings: Settings) -> dict[str, Any]:
    """How uvicorn runs the app, for `python -m service serve` and the tests alike: bounds on
    the request head (`service.edge.protocol`), no `Server` header (it names the software and its
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


def create_app(
    settings: Settings | None = None, endpoints: Sequence[api.Endpoint] = api.ENDPOINTS
) -> FrontDoor:
    """The service, answering `endpoints` (the API's own unless a test declares more)."""
    settings = settings or Settings.from_environ()
    holder = DatasetHolder()
    watcher = VersionWatcher(holder, settings)
    limiter = Limiter(settings.redis_url)
    # The access lines are INFO: a quieter level writes none.
    access = AccessLog.open(settings.access_log) if settings.log_level in VERBOSE else None

    app = Starlette(
        routes=routes(),
        lifespan=partial(lifespan, watcher, limiter, access),
        exception_handlers={
            ApiError: api_error,
            HTTPException: http_error,
            Exception: internal_error,
        },
    )
    app.router.redirect_slashes = False
    cache = ResponseCache(settings.cache_mb * 2**20)
    stats = RequestStats()
    app.state.settings, app.state.holder, app.state.watcher = settings, holder, watcher
    app.state.cache, app.state.limiter = cache, limiter
    app.state.metrics = registry_for(ServiceCollector(stats, holder, cache, limiter))
    return FrontDoor(
        app,
        paths=api.table(endpoints),
        cache=cache,
        holder=holder,
        keystore=Keystore(settings.accounts_file),
        limiter=limiter,
        stats=stats,
        max_age=settings.max_age_seconds,
        cors_origins=settings.cors_origins,
        access=access,
    )


# How long a thread holding the GIL may run while another waits for it (CPython's default is
# 5 ms), set in each worker's interpreter as its app starts. A new version is opened by the
# watcher's thread while the event loop serves: each time that thread comes back from C code
# (DuckDB, Arrow, NumPy) it waited up to 5 ms behind a loaded loop. Publish to served at 10M
# records under wrk's load, 3 alternating rounds: 0.91 s against 1.17 s (medians), with the
# loaded case's throughput unchanged (`docs/benchmarks.md`, issue 40).
SWITCH_INTERVAL_SECONDS = 0.0005


@asynccontextmanager
async def lifespan(
    watcher: VersionWatcher, limiter: Limiter, access: AccessLog | None, app: Starlette
) -> AsyncIterator[None]:
    """Serve once the current version is open; stop watching, let Redis go and write the
    access lines held, at the end."""
    sys.setswitchinterval(SWITCH_INTERVAL_SECONDS)
    await run_in_threadpool(watcher.load_now)
    watcher.start()
    if access is not None:
        access.start()
    yield
    watcher.stop()
    await limiter.close()
    if access is not None:
        access.stop()


async def api_error(request: Request, exc: Exception) -> Response:
    """What a handler raised, in its family's envelope."""
    assert isinstance(exc, ApiError)
    return CALL.get().render(exc)


async def http_error(request: Request, exc: Exception) -> Response:
    """Starlette's own 404 (no route) and 405 (wrong method), in the family's envelope."""
    assert isinstance(exc, HTTPException)
    if exc.status_code == 405:
        allowed = (exc.headers or {}).get("Allow", "GET, HEAD")
        return CALL.get().render(MethodNotAllowed(allowed))
    return CALL.get().render(NotFound("not found"))


async def internal_error(request: Request, exc: Exception) -> Response:
    """What Starlette's last-resort layer sends for an exception no handler expected (the
    front door logs it, and keeps the connection)."""
    return CALL.get().render(ApiError("internal error"))
