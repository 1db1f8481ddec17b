"""Each family's successful answer, built in one place: the exchange family's `{"data": ...,
"meta": {...}}` with `meta.query_time_ms` last (and a page's `meta`), the supplier family's
`{"success": true, "data": ...}`. Errors have their renderer (`service.errors.render`).

The body is rendered once (orjson) with the query time spliced in at its end, and where those
digits stand is kept on the request's `Call` (`timed`), so the response cache can re-time a
stored answer by slicing it (`service.edge.cache.Stored`), never by searching its bytes.
"""

from typing import Any

import orjson
from starlette.responses import Response

from service.edge.call import Call
from service.responses import JSON

CLOSE = b"}}"  # the end of `meta`, then of the envelope


def answer(call: Call, data: Any, meta: dict[str, Any]) -> Response:
    """`data` and `meta` in the family's envelope, the query time (ms since the request
    arrived) last in `meta`."""
    head = orjson.dumps({"data": data, "meta": meta})[: -len(CLOSE)]
    head += b',"query_time_ms":' if meta else b'"query_time_ms":'
    time = b"%d" % call.elapsed_ms()
    call.timed = (len(head), len(head) + len(time))
    return Response(head + time + CLOSE, media_type="application/json")


def success(data: Any) -> JSON:
    """`data` in the supplier family's envelope."""
    return JSON({"success": True, "data": data})


def page_meta(total: int, size: int, number: int) -> dict[str, int]:
    """A page's `meta` (before its query time): how many match, in how many pages of `size`,
    and which page this is."""
    return {
        "record_count": total,
        "total_pages": -(-total // size),
        "current_page": number,
        "page_size": size,
    }
