"""The exchange family (`x-service-api-access-key`, `data`/`meta`): the venue list and details."""

from typing import Any

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import Response

from service.dataset.venues import DETAIL_DIMENSIONS
from service.endpoints.envelope import answer
from service.endpoints.params import exchange_request
from service.errors import Forbidden, NotFound


async def list_exchanges(request: Request) -> Response:
    """Every venue the key may see that has records, sorted by code."""
    call, account, query = exchange_request(request)
    query.check()
    dataset = call.dataset
    data = [
        {
            "name": venue.code,
            "display_name": venue.display_name,
            "fee_types": list(venue.fee_types),
            "record_count": venue.records,
        }
        for venue in dataset.venues.values()
        if venue.records and account.may_see(venue.code)
    ]
    return answer(call, data, {"record_count": len(data)})


async def exchange_detail(request: Request) -> Response:
    """One venue: its span and the values of every filter dimension in its records, or in its
    records in force on one day (`as_of`; those confirmed at most `max_age_days` before it, when
    given). A venue of the registry with no records (on that
    day) is not found, as it is absent from the list: the compatible service's record has no
    way to say "no span" (its SDK requires both dates)."""
    call, account, query = exchange_request(request)
    as_of = query.get("as_of")
    max_age = query.max_age_days(as_of)
    query.check()
    dataset = call.dataset
    code = dataset.resolve(request.path_params["exchange_name"])
    if code is None:
        raise NotFound("Exchange not found.")
    if not account.may_see(code):
        raise Forbidden("You do not have access to the requested exchange.")
    venue = dataset.venues[code]
    if as_of is not None:  # the index's arrays: a thread, so the event loop never waits on them
        holding = await run_in_threadpool(dataset.in_force, [code], as_of, max_age)
        values, span = holding.values, (holding.earliest, holding.latest)
        records = holding.count
    else:
        values, span, records = venue.values, (venue.earliest, venue.latest), venue.records
    earliest, latest = span
    if earliest is None or latest is None:
        raise NotFound("Exchange has no fee schedule records.")
    data: dict[str, Any] = {
        "name": venue.code,
        "display_name": venue.display_name,
        "date_range": {"earliest": earliest.isoformat(), "latest": latest.isoformat()},
    }
    data |= {dimension: list(values.get(dimension, ())) for dimension in DETAIL_DIMENSIONS}
    return answer(call, data, {"record_count": records})
