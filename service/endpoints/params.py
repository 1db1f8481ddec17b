"""Reading query parameters strictly: a value that is not exactly right is a 400 naming it."""

import re
from collections.abc import Iterable
from datetime import date
from typing import Any

from starlette.requests import Request

from service.accounts import Account
from service.edge.call import CALL, Call
from service.errors import BadRequest, ValidationError, invalid_date
from service.numbers import whole_number

DATE = re.compile(r"[0-9]{4}-[0-9]{2}-[0-9]{2}")


def declared(request: Request) -> tuple[str, ...]:
    """The query parameters the matched endpoint declares (`service.api`: the route knows
    them), in their documented order."""
    names: tuple[str, ...] = request.scope["route"].query
    return names


def only(request: Request) -> None:
    """Refuse parameters the endpoint does not take, and any parameter given twice."""
    allowed = declared(request)
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


def echo_window(start: date | None, end: date | None) -> dict[str, str | None] | None:
    """The window as the supplier family echoes it: null sides kept, null when no window."""
    if start is None and end is None:
        return None
    return {
        "start_date": start.isoformat() if start else None,
        "end_date": end.isoformat() if end else None,
    }


# A listing's page: `page_size` records by default, at most `MAX_PAGE_SIZE`.
PAGE_SIZE = 20
MAX_PAGE_SIZE = 100
# The most days `max_age_days` takes: a century, more than any dataset spans.
MAX_AGE_DAYS = 36_500


class Query:
    """The exchange family's parameters: every problem is collected, then one 422 names all.

    Each reader returns a usable default for a bad value so reading can go on; `check()` raises
    `ValidationError` with `details` = one `{field, message, allowed?}` per offending parameter.
    """

    def __init__(self, request: Request) -> None:
        self._params = request.query_params
        self.problems: list[dict[str, Any]] = []
        accepted = declared(request)
        for name in self._params:
            if name not in accepted:
                self.fail(name, "unknown parameter", sorted(accepted))

    def fail(self, field: str, message: str, allowed: Any = None) -> None:
        problem: dict[str, Any] = {"field": field, "message": message}
        if allowed is not None:
            problem["allowed"] = allowed
        self.problems.append(problem)

    def _single(self, name: str) -> str | None:
        values = self._params.getlist(name)
        if len(values) > 1:
            self.fail(name, "given more than once")
        return values[0] if values else None

    def values(self, name: str) -> list[str] | None:
        """A repeatable parameter's values as given; None when absent."""
        return self._params.getlist(name) or None

    def choices(self, name: str, allowed: Iterable[str]) -> list[str] | None:
        """A repeatable filter: None when absent, else its values (each must be allowed)."""
        values = self.values(name)
        if values is None:
            return None
        known = list(allowed)
        unknown = [value for value in values if value not in known]
        if unknown:
            self.fail(name, f"unknown value(s): {', '.join(unknown)}", known)
        return values

    def choice(self, name: str, allowed: tuple[str, ...], default: str = "") -> str:
        value = self._single(name)
        if value is None:
            return default
        if value not in allowed:
            self.fail(name, "not an allowed value", list(allowed))
            return default
        return value

    def integer(self, name: str, *, default: int, low: int, high: int | None = None) -> int:
        value = self._single(name)
        if value is None:
            return default
        number = whole_number(value, low, high)
        if number is None:
            bounds = f"from {low} to {high}" if high is not None else f"of at least {low}"
            self.fail(name, f"must be a whole number {bounds}")
            return default
        return number

    def boolean(self, name: str) -> bool:
        value = self._single(name)
        if value is None:
            return False
        if value.lower() not in ("true", "false"):
            self.fail(name, "must be true or false", ["true", "false"])
            return False
        return value.lower() == "true"

    def day(self, name: str) -> date | None:
        value = self._single(name)
        if value is None:
            return None
        if DATE.fullmatch(value):
            try:
                return date.fromisoformat(value)
            except ValueError:
                pass
        self.fail(name, "must be a real date in the form YYYY-MM-DD")
        return None

    def max_age_days(self, day: date | None, default: int | None = None) -> int | None:
        """`max_age_days`: how many days before the answer's day a record's last confirmation
        may be (`docs/raw-format.md`, "Confirmed through, or presumed"); only an answer for a
        day (`day`) takes it."""
        if self.values("max_age_days") is None:
            return default
        days = self.integer("max_age_days", default=0, low=0, high=MAX_AGE_DAYS)
        if day is None:
            self.fail("max_age_days", "needs as_of: an age is counted back from the answer's day")
        return days

    def page(self) -> tuple[int, int]:
        """`page_size` (1-100, default 20) and `page_number` (from 0): a page of a listing."""
        size = self.integer("page_size", default=PAGE_SIZE, low=1, high=MAX_PAGE_SIZE)
        return size, self.integer("page_number", default=0, low=0)

    def window(self) -> tuple[date | None, date | None]:
        start, end = self.day("start_date"), self.day("end_date")
        if start is not None and end is not None and end < start:
            self.fail("end_date", "is before start_date")
        return start, end

    def check(self) -> None:
        if self.problems:
            raise ValidationError("Invalid query parameters.", self.problems)


def exchange_request(request: Request) -> tuple[Call, Account, Query]:
    """An exchange-family request's call, its caller and its query parameters, read in that
    order: a request without a valid key is the family's 401 before any parameter is read."""
    call = CALL.get()
    return call, call.account, Query(request)


def supplier_request(request: Request) -> tuple[Call, Account]:
    """A supplier-family request's call and its caller (the family's 401 first), once no
    parameter is unknown or given twice (400)."""
    call = CALL.get()
    account = call.account
    only(request)
    return call, account
