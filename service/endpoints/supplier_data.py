"""The supplier family's detailed data query (`/suppliers/{name}/data`) and its count.

Filters speak the spec's display vocabulary (`Fee And Rebates`, `Routed & Other`, ...); each
maps to the stored values it covers. Records come in effective-start order, then by id, so
offset paging is stable; pages and counts come from the results index, as the results list's.
"""

import math
from typing import Any

from starlette.requests import Request

from service.dataset import queries
from service.edge.access import visible_venue
from service.endpoints import params
from service.endpoints.envelope import success
from service.errors import BadRequest, NotFound
from service.responses import JSON
from service.vocabulary import DIMENSIONS, IDENTIFIER_OF

# The most records a page holds: `limit`'s declared maximum (tests/test_openapi_code.py).
MAX_LIMIT = 100
# Query parameter -> (the discovery dimension whose terms it takes, the results filter that
# selects the same column).
TERM_PARAMS = {
    "fee_type": ("fee_types", "fee_type"),
    "fee_category": ("fee_categories", "fee_category"),
    "action": ("actions", "fee_action"),
    "participant": ("participants", "fee_participant"),
}
WINDOW_PARAMS = ("start_date", "end_date")  # a window: `as_of`, one day, is not given with it


def supplier_data(request: Request) -> JSON:
    call, account = params.supplier_request(request)
    offset = params.whole(request, "offset")
    limit = params.whole(request, "limit")
    selection = _Selection(request)
    dataset = call.dataset
    code = visible_venue(
        dataset, account, request.path_params["supplier_name"], NotFound("supplier not found")
    )
    total, rows = dataset.supplier_page(selection.of(code), offset, limit, selection.as_of)
    records = [_displayed(row) for row in rows]
    data = selection.echo(code) | _page(records, total, offset, limit)
    return success(data)


def _displayed(record: dict[str, Any]) -> dict[str, Any]:
    """A record with its vocabulary values in the family's identifiers."""
    for column in ("fee_type", "fee_category", "action", "participant"):
        record[column] = IDENTIFIER_OF[column][record[column]]
    return record


def _page(records: list[dict[str, Any]], total: int, offset: int, limit: int) -> dict[str, Any]:
    has_more = offset + len(records) < total
    return {
        "records": records,
        "total_records": total,
        "returned_records": len(records),
        "pagination": {
            "offset": offset,
            "limit": limit,
            "has_more": has_more,
            "next_offset": offset + len(records) if has_more else None,
        },
    }


def supplier_data_count(request: Request) -> JSON:
    call, account = params.supplier_request(request)
    selection = _Selection(request)
    dataset = call.dataset
    code = visible_venue(
        dataset, account, request.path_params["supplier_name"], NotFound("supplier not found")
    )
    total = dataset.count(selection.of(code))
    data = selection.echo(code) | {
        "total_count": total,
        "pagination_info": {
            "max_records_per_request": MAX_LIMIT,
            "total_pages": math.ceil(total / MAX_LIMIT),
        },
    }
    return success(data)


class _Selection:
    """The display-vocabulary filters and the date window (or the one day, `as_of`, with the
    oldest confirmation kept: `max_age_days`) of one request, checked."""

    def __init__(self, request: Request) -> None:
        self.start, self.end = params.date_window(request)
        self.as_of = params.parse_date(request, "as_of")
        given = [name for name in WINDOW_PARAMS if name in request.query_params]
        if self.as_of is not None and given:
            raise BadRequest(
                "as_of cannot be combined with a date window",
                {"field": "as_of", "conflicts_with": given},
            )
        self.max_age_days = None
        if "max_age_days" in request.query_params:
            self.max_age_days = params.whole(request, "max_age_days")
            if self.as_of is None:
                raise BadRequest(
                    "max_age_days needs as_of", {"field": "max_age_days", "requires": "as_of"}
                )
        self.given: dict[str, str | None] = {}
        self.stored: dict[str, list[str] | None] = {}
        for name, (dimension, _) in TERM_PARAMS.items():
            value = request.query_params.get(name)
            self.given[name] = value
            self.stored[name] = None if value is None else _stored_values(name, dimension, value)

    def of(self, code: str) -> queries.Selection:
        """These filters on one venue, in the results' filter names."""
        values = {
            TERM_PARAMS[name][1]: stored
            for name, stored in self.stored.items()
            if stored is not None
        }
        return queries.Selection(
            venues=[code],
            values=values,
            start_date=self.start,
            end_date=self.end,
            in_force_on=self.as_of,
            max_age_days=self.max_age_days,
        )

    def echo(self, code: str) -> dict[str, Any]:
        window = params.echo_window(self.start, self.end)
        as_of = self.as_of.isoformat() if self.as_of else None
        return {"supplier": code, **self.given, "date_range": window, "as_of": as_of}


def _stored_values(name: str, dimension: str, value: str) -> list[str]:
    _, terms = DIMENSIONS[dimension]
    for term in terms:
        if term.identifier == value:
            return list(term.stored)
    allowed = [term.identifier for term in terms]
    raise BadRequest(
        "invalid parameter value", {"field": name, "provided": value, "allowed": allowed}
    )
