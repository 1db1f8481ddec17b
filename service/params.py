"""Reading query parameters strictly: a value that is not exactly right is a 400 naming it."""

import re
from datetime import date

from starlette.requests import Request

from service.errors import BadRequest, invalid_date

DATE = re.compile(r"[0-9]{4}-[0-9]{2}-[0-9]{2}")


def only(request: Request, allowed: tuple[str, ...]) -> None:
    """Refuse parameters the endpoint does not take, and any parameter given twice."""
    for name in request.query_params:
        if name not in allowed:
            raise BadRequest(
                "unknown query parameter",
                {"field": name, "allowed": list(allowed)},
            )
        if len(request.query_params.getlist(name)) > 1:
            raise BadRequest("query parameter given more than once", {"field": name})


def parse_date(request: Request, field: str) -> date | None:
    """A real calendar date in the form YYYY-MM-DD, or None when the parameter is absent."""
    text = request.query_params.get(field)
    if text is None:
        return None
    if not DATE.fullmatch(text):
        raise invalid_date(field)
    try:
        return date.fromisoformat(text)
    except ValueError:
        raise invalid_date(field) from None


def date_window(request: Request) -> tuple[date | None, date | None]:
    start, end = parse_date(request, "start_date"), parse_date(request, "end_date")
    if start is not None and end is not None and end < start:
        raise BadRequest(
            "invalid date range",
            {"field": "end_date", "reason": "end_date is before start_date"},
        )
    return start, end
