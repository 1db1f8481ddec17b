"""The exchange family (`x-service-api-access-key`, `data`/`meta`): endpoint 6, the venue list."""

from starlette.requests import Request
from starlette.responses import JSONResponse

from service import params
from service.access import current_dataset, key_header_account
from service.errors import elapsed_ms


def list_exchanges(request: Request) -> JSONResponse:
    """Every venue the key may see that has records, sorted by code."""
    account = key_header_account(request)
    params.only(request, ())
    dataset = current_dataset(request)
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
    return JSONResponse(
        {"data": data, "meta": {"record_count": len(data), "query_time_ms": elapsed_ms(request)}}
    )
