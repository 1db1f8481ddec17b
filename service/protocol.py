"""The HTTP/1.1 protocol the service runs under: uvicorn's httptools protocol, with bounds on
the request head and every refusal at that level in the family's envelope.

httptools puts no limit on a request target or on headers: uvicorn would gather a megabyte of
URL or ten thousand header lines and hand them to the app. Here the parser stops as soon as a
bound is passed (414 for the target, 431 for the headers), before the rest is read, and the
connection is closed. A request the parser cannot read at all gets a 400 in the exchange
family's envelope instead of uvicorn's plain text. Every such answer carries the headers every
answer does (`X-Request-ID`, `nosniff`).
"""

from typing import Final

from uvicorn.protocols.http.httptools_impl import STATUS_LINE, HttpToolsProtocol

from service.call import REQUEST_ID, new_request_id
from service.errors import ApiError, BadRequest, HeadersTooLarge, UriTooLong, family_of, render
from service.reply import NOSNIFF

MAX_TARGET_BYTES: Final = 8192  # path and query, as most servers and proxies bound them
MAX_HEAD_BYTES: Final = 16384  # every header name and value together
MAX_HEADERS: Final = 100


class _Refused(Exception):
    """Stops the parser: raised from a parser callback, it reaches uvicorn as a parse error,
    which makes it answer through `send_400_response`."""


class BoundedHttpToolsProtocol(HttpToolsProtocol):
    def on_message_begin(self) -> None:
        super().on_message_begin()
        self._head_bytes = 0
        self._refusal: ApiError | None = None

    def on_url(self, url: bytes) -> None:
        super().on_url(url)
        if len(self.url) > MAX_TARGET_BYTES:
            self._refuse(UriTooLong(f"request target longer than {MAX_TARGET_BYTES} bytes"))

    def on_header(self, name: bytes, value: bytes) -> None:
        self._head_bytes += len(name) + len(value)
        if len(self.headers) >= MAX_HEADERS or self._head_bytes > MAX_HEAD_BYTES:
            self._refuse(
                HeadersTooLarge(
                    f"more than {MAX_HEADERS} header lines or {MAX_HEAD_BYTES} bytes of headers"
                )
            )
        super().on_header(name, value)

    def _refuse(self, error: ApiError) -> None:
        self._refusal = error
        raise _Refused

    def send_400_response(self, msg: str) -> None:
        """Answer what the parser refused, in the envelope of the family the path names so far,
        and close the connection."""
        error = getattr(self, "_refusal", None) or BadRequest("malformed HTTP request")
        path = self.url.partition(b"?")[0].decode("latin-1")
        response = render(error, family_of(path))
        head = [
            *self.server_state.default_headers,  # the date, as on every answer
            *response.raw_headers,
            (REQUEST_ID, new_request_id()),
            NOSNIFF,
            (b"connection", b"close"),
        ]
        self.transport.write(
            b"".join([STATUS_LINE[error.status], *(b"%s: %s\r\n" % pair for pair in head), b"\r\n"])
            + response.body
        )
        self.transport.close()
