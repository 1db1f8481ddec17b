"""Browsers of other origins: CORS, on when origins are configured (`FEES_CORS_ORIGINS`)."""

from starlette.middleware.cors import CORSMiddleware
from starlette.types import ASGIApp

from service.edge.access import EXCHANGE_KEY_ALIAS, EXCHANGE_KEY_HEADER


def with_cors(app: ASGIApp, origins: tuple[str, ...]) -> ASGIApp:
    """`app` answering browsers of `origins` (off, and free, when there are none)."""
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
