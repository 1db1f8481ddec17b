"""The service's errors, and one renderer per endpoint family.

    ApiError                      status, a short label, a message, optional details
     +-- Unauthorized      401    missing, unknown or revoked key (indistinguishable)
     +-- BadRequest        400    a parameter is malformed (InvalidDate, UnknownParameter, ...)
     +-- Forbidden         403    a named venue exists but is outside the key's scope
     +-- NotFound          404    unknown supplier or path (or one outside the key's scope)
     +-- MethodNotAllowed  405
     +-- PayloadTooLarge   413    a request body over its bound (fee estimates: bytes or fills)
     +-- UriTooLong        414    the request target (path and query) is over 8 KiB
     +-- UnsupportedMedia  415    a request body in a media type the endpoint does not read
     +-- ValidationError   422    exchange family: every bad parameter, listed in `details`
     +-- RateLimited       429    the key's token bucket is empty (`Retry-After` says when)
     +-- HeadersTooLarge   431    over 100 header lines, or over 16 KiB of them
     +-- Unavailable       503    no version loaded, a data file unreadable, a query too long

Handlers raise these; `render` turns any of them into the family's documented body. Anything
else that escapes a handler becomes a 500 in the same envelope, with nothing internal shown.
"""

import time
from enum import Enum
from typing import Any

from service import remembered
from service.responses import JSON


class Family(Enum):
    SUPPLIER = "supplier"  # {"error": "<label>", "message": ..., "details"?: {...}}
    EXCHANGE = "exchange"  # {"error": {"code", "message", "details"?: [...]}, "meta": {...}}


class ApiError(Exception):
    status = 500
    label = "Internal Server Error"
    code = "INTERNAL_ERROR"

    def __init__(self, message: str, details: dict[str, Any] | list[Any] | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.details = details
        self.headers: dict[str, str] = {}


class Unauthorized(ApiError):
    status, label, code = 401, "Unauthorized", "UNAUTHORIZED"

    def __init__(self, message: str, challenge: str) -> None:
        super().__init__(message)
        self.headers = {"WWW-Authenticate": challenge}


class BadRequest(ApiError):
    status, label, code = 400, "Bad Request", "BAD_REQUEST"


class Forbidden(ApiError):
    status, label, code = 403, "Forbidden", "FORBIDDEN"


class NotFound(ApiError):
    status, label, code = 404, "Not Found", "NOT_FOUND"


class MethodNotAllowed(ApiError):
    status, label, code = 405, "Method Not Allowed", "METHOD_NOT_ALLOWED"

    def __init__(self, allowed: str) -> None:
        methods = sorted((method.strip() for method in allowed.split(",")), key=_get_first)
        super().__init__(f"method not allowed; use {' or '.join(methods)}")
        self.headers = {"Allow": allowed}


def _get_first(method: str) -> tuple[bool, str]:
    return method != "GET", method


class UriTooLong(ApiError):
    status, label, code = 414, "URI Too Long", "URI_TOO_LONG"


class PayloadTooLarge(ApiError):
    status, label, code = 413, "Content Too Large", "PAYLOAD_TOO_LARGE"


class UnsupportedMedia(ApiError):
    status, label, code = 415, "Unsupported Media Type", "UNSUPPORTED_MEDIA_TYPE"


class ValidationError(ApiError):
    status, label, code = 422, "Unprocessable Entity", "VALIDATION_ERROR"


class RateLimited(ApiError):
    status, label, code = 429, "Too Many Requests", "RATE_LIMITED"

    def __init__(self, retry_after: int) -> None:
        super().__init__(
            f"rate limit exceeded; retry after {retry_after} s",
            {"retry_after_seconds": retry_after},
        )


class HeadersTooLarge(ApiError):
    status, label, code = 431, "Request Header Fields Too Large", "HEADERS_TOO_LARGE"


class Unavailable(ApiError):
    status, label, code = 503, "Service Unavailable", "UNAVAILABLE"


def invalid_date(field: str) -> BadRequest:
    return BadRequest("invalid date format", {"field": field, "expected_format": "YYYY-MM-DD"})


# A request asks its family two or three times: 2% of a cold answer.
@remembered.for_short(remembered.PATH_CHARS)
def family_of(path: str) -> Family:
    """Which envelope a path speaks: the supplier family owns `/…/v1/suppliers/…`."""
    parts = path.strip("/").split("/")
    if parts[:1] == ["api"]:
        parts = parts[1:]
    return Family.SUPPLIER if parts[1:2] == ["suppliers"] else Family.EXCHANGE


def server_timing(started: float) -> tuple[bytes, bytes]:
    """The `Server-Timing` header of an answer to a request that arrived at `started`."""
    return b"server-timing", b"app;dur=%.3f" % ((time.perf_counter() - started) * 1000)


def render(error: ApiError, family: Family, elapsed_ms: int = 0) -> JSON:
    """`error` in `family`'s envelope; `elapsed_ms` is the exchange family's query time."""
    if family is Family.SUPPLIER:
        body: dict[str, Any] = {"error": error.label, "message": error.message}
        if error.details is not None:
            body["details"] = error.details
    else:
        inner: dict[str, Any] = {"code": error.code, "message": error.message}
        if error.details is not None:
            # Always a list in this family, as the compatible service (and its SDK) reads it.
            details = error.details
            inner["details"] = details if isinstance(details, list) else [details]
        body = {"error": inner, "meta": {"query_time_ms": elapsed_ms}}
    return JSON(body, status_code=error.status, headers=error.headers)
