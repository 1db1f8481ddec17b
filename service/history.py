"""Fee history: one fee line and every record of it (`GET /fee-lines/{line_id}`).

A fee line is one schedule item followed through time (`docs/raw-format.md`, "Fee lines"); the
version's line index finds its records' positions, in effective order, and the serving copy
holds them.
"""

from starlette.requests import Request

from service.call import CALL
from service.dataset import queries
from service.errors import Forbidden, NotFound
from service.params import Query
from service.responses import JSON
from service.results import HIDDEN_DATA


def fee_line(request: Request) -> JSON:
    """The line's identity and its records, oldest first (404: no such line; 403: a venue
    outside the key's scope)."""
    call = CALL.get()
    account = call.account
    Query(request, ()).check()
    dataset = call.dataset
    positions = dataset.lines.positions(request.path_params["line_id"])
    if positions is None:
        raise NotFound("Fee line not found.")
    found = dataset.rows_at(*queries.line_history(positions))
    line = {name: found[0][name] for name in queries.LINE_FIELDS}
    if not account.may_see(line["exchange_name"]):
        raise Forbidden(HIDDEN_DATA)
    records = [{name: row[name] for name in queries.HISTORY_FIELDS} for row in found]
    return JSON(
        {
            "data": line | {"records": records},
            "meta": {"record_count": len(records), "query_time_ms": call.elapsed_ms()},
        }
    )
