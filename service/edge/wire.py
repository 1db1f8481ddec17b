"""An answer's head as it is written on the connection: the status line, then one
`name: value` line per header, as uvicorn writes them.

Written here for what the connection sends without uvicorn's help: its own refusals (400, 414,
431) and the answers made at once (`service.edge.protocol`), whose cached part is rendered once
per cached answer (`service.edge.cache.Stored`'s lines), not once per request.
"""

from collections.abc import Iterable

from uvicorn.protocols.http.httptools_impl import STATUS_LINE

Headers = Iterable[tuple[bytes, bytes]]


def lines(headers: Headers) -> bytes:
    """Headers as they are written: a `name: value` line each."""
    return b"".join([b"%s: %s\r\n" % pair for pair in headers])


def head(status: int, header_lines: bytes) -> bytes:
    """An answer's status line and its header lines, up to the blank line before its body."""
    return b"%s%s\r\n" % (STATUS_LINE[status], header_lines)
