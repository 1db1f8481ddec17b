"""The supplier family: discovery endpoints 1-5 of the spec (Bearer key, `success`/`data`)."""

from typing import Any

from starlette.requests import Request

from service.dataset.venues import Venue
from service.edge.access import visible_venue
from service.endpoints import params
from service.endpoints.envelope import success
from service.errors import BadRequest, NotFound
from service.responses import JSON
from service.vocabulary import DIMENSIONS, Term

# Per endpoint: the item's identifier key, its extra field, and the name of the total counter.
SHAPES = {
    "participants": ("participant", "typical_fee_structure", "total_participants"),
    "fee_categories": ("category", "applicable_fee_types", "total_categories"),
    "actions": ("action", "liquidity_type", "total_actions"),
    "fee_types": ("type", None, "total_types"),
}


def participants(request: Request) -> JSON:
    return discovery(request, "participants")


def fee_categories(request: Request) -> JSON:
    return discovery(request, "fee_categories")


def actions(request: Request) -> JSON:
    return discovery(request, "actions")


def fee_types(request: Request) -> JSON:
    return discovery(request, "fee_types")


def discovery(request: Request, endpoint: str) -> JSON:
    """Every value the supplier has any record for, with its records in the date window."""
    call, account = params.supplier_request(request)
    start, end = params.date_window(request)
    dataset = call.dataset
    code = visible_venue(
        dataset, account, request.path_params["supplier_name"], NotFound("supplier not found")
    )
    column, terms = DIMENSIONS[endpoint]
    counts = dataset.counts(column, code, start, end)
    venue = dataset.venues[code]
    items = [_item(endpoint, term, counts, venue) for term in terms if _present(term, counts)]
    date_range = params.echo_window(start, end)
    data: dict[str, Any] = {"supplier": code, "date_range": date_range, endpoint: items}
    data[SHAPES[endpoint][2]] = len(items)
    return success(data)


def _present(term: Term, counts: dict[str, int]) -> bool:
    return not counts.keys().isdisjoint(term.stored)


def _item(endpoint: str, term: Term, counts: dict[str, int], venue: Venue) -> dict[str, Any]:
    key, extra, _ = SHAPES[endpoint]
    records = sum(counts.get(value, 0) for value in term.stored)
    item: dict[str, Any] = {
        key: term.identifier,
        "display_name": term.display_name,
        "description": term.description,
        "available": records > 0,
        "record_count": records,
    }
    if extra == "applicable_fee_types":
        item[extra] = list(venue.categories.get(term.stored[0], ()))
    elif extra is not None:
        item[extra] = term.extra
    return item


def date_ranges(request: Request) -> JSON:
    """The supplier's coverage as maximal contiguous periods, with the data types in each."""
    call, account = params.supplier_request(request)
    dataset = call.dataset
    code = visible_venue(
        dataset,
        account,
        request.path_params["supplier_name"],
        BadRequest("invalid supplier name"),
    )
    ranges = [
        {
            "start_date": f"{run.starts.isoformat()}T00:00:00Z",
            "end_date": f"{run.ends.isoformat()}T23:59:59Z",
            "data_types": list(run.data_types),
        }
        for run in dataset.coverage.get(code, [])
    ]
    return success({"supplier": code, "date_ranges": ranges})
