"""Reading query parameters strictly, each as its endpoint declares it (`Parameter`): a value that
is not exactly right is the family's error naming it (the supplier family's 400 at the first,
the exchange family's 422 listing all)."""

import re
from dataclasses import dataclass
from datetime import date
from typing import Any, Literal

from starlette.requests import Request

from service import remembered
from service.accounts import Account
from service.edge.call import CALL, Call
from service.errors import BadRequest, ValidationError, invalid_date
from service.numbers import LARGEST_WHOLE, whole_number

DATE = re.compile(r"[0-9]{4}-[0-9]{2}-[0-9]{2}")


@dataclass(frozen=True)
class Parameter:
    """How one declared query parameter reads: made from its OpenAPI component
    (`service/operations.json`, with the code's closed lists written in), so the document and
    the reading are one declaration. `kind` is what its schema says a value is: a whole
    number (`low` to `high`; None: as many digits as `numbers.WHOLE` takes), a boolean, a date,
    one of `allowed` (`choice`), any number of `allowed` (`choices`), or any number of free
    values (a venue's names: the handler checks them). A schema of none of these is refused
    when the routes are made, so a new parameter is declared as one of them."""

    name: str
    kind: Literal["integer", "boolean", "date", "choice", "choices", "values"]
    allowed: tuple[str, ...] = ()
    default: Any = None
    low: int = 0
    high: int | None = None
    required: bool = False

    @classmethod
    def of(cls, component: dict[str, Any], schemas: dict[str, Any]) -> "Parameter":
        schema = _resolved(component["schema"], schemas)
        name, required = component["name"], component.get("required", False)
        default = schema.get("default")
        if schema.get("type") == "array":
            allowed = tuple(_resolved(schema["items"], schemas).get("enum", ()))
            return cls(name, "choices" if allowed else "values", allowed, required=required)
        if schema.get("type") == "integer":
            high = schema.get("maximum")
            high = None if high == LARGEST_WHOLE else high
            return cls(name, "integer", (), default, schema["minimum"], high, required)
        if schema.get("type") == "boolean":
            return cls(name, "boolean", ("true", "false"), default, required=required)
        if schema.get("format") == "date":
            return cls(name, "date", required=required)
        if "enum" in schema:
            return cls(name, "choice", tuple(schema["enum"]), default, required=required)
        raise ValueError(f"query parameter {name}: no way to read a schema of {schema}")

    def read(self, text: str) -> Any:
        """The value one given `text` is, or None when it is not one this parameter takes."""
        if self.kind == "integer":
            return whole_number(text, self.low, self.high)
        if self.kind == "boolean":
            return {"true": True, "false": False}.get(text.lower())
        if self.kind == "date":
            return real_date(text)
        return text if text in self.allowed else None

    @property
    def problem(self) -> str:
        """What a value it does not take is told."""
        if self.kind == "integer":
            bounds = (
                f"from {self.low} to {self.high}"
                if self.high is not None
                else f"of at least {self.low}"
            )
            return f"must be a whole number {bounds}"
        return {
            "boolean": "must be true or false",
            "date": "must be a real date in the form YYYY-MM-DD",
        }.get(self.kind, "not an allowed value")


def _resolved(schema: dict[str, Any], schemas: dict[str, Any]) -> dict[str, Any]:
    """A schema, or the named schema it refers to."""
    reference = schema.get("$ref")
    return schema if reference is None else schemas[reference.rsplit("/", 1)[1]]


def declared(request: Request) -> dict[str, Parameter]:
    """The query parameters the matched endpoint declares (`service.api`: the route knows
    them), by name, in their documented order."""
    parameters: dict[str, Parameter] = request.scope["route"].parameters
    return parameters


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


def whole(request: Request, name: str) -> int:
    """A supplier-family whole number, its bounds and default as declared; 400 otherwise."""
    parameter = declared(request)[name]
    text = request.query_params.get(name)
    if text is None:
        return int(parameter.default or 0)
    number: int | None = parameter.read(text)
    if number is not None:
        return number
    low, high = parameter.low, parameter.high
    allowed = f"{low}-{high}" if high is not None else f">= {low}"
    raise BadRequest(
        "invalid parameter value", {"field": name, "provided": text, "allowed": allowed}
    )


def parse_date(request: Request, field: str) -> date | None:
    """A real calendar date in the form YYYY-MM-DD, or None when the parameter is absent."""
    text = request.query_params.get(field)
    if text is None:
        return None
    day = real_date(text)
    if day is None:
        raise invalid_date(field)
    return day


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


class Query:
    """The exchange family's parameters, each read as declared (`Parameter`): every problem is
    collected, then one 422 names all.

    A bad value reads as the parameter's default so reading can go on; `check()` raises
    `ValidationError` with `details` = one `{field, message, allowed?}` per offending parameter.
    """

    def __init__(self, request: Request) -> None:
        self._params = request.query_params
        self._declared = declared(request)
        self.problems: list[dict[str, Any]] = []
        for name in self._params:
            if name not in self._declared:
                self.fail(name, "unknown parameter", sorted(self._declared))

    def fail(self, field: str, message: str, allowed: Any = None) -> None:
        problem: dict[str, Any] = {"field": field, "message": message}
        if allowed is not None:
            problem["allowed"] = allowed
        self.problems.append(problem)

    def values(self, name: str) -> list[str] | None:
        """A parameter's values as given, unchecked; None when absent."""
        return self._params.getlist(name) or None

    def get(self, name: str) -> Any:
        """The parameter's value read as its declaration says (its default when absent or bad;
        a bad value, or a required one absent, is a problem)."""
        parameter = self._declared[name]
        values = self._params.getlist(name)
        if not values:
            if parameter.required:
                self.fail(name, "is required", list(parameter.allowed))
            return parameter.default
        if parameter.kind in ("choices", "values"):
            return self._choices(parameter, values)
        if len(values) > 1:
            self.fail(name, "given more than once")
        value = parameter.read(values[0])
        if value is None:
            self.fail(name, parameter.problem, list(parameter.allowed) or None)
            return parameter.default
        return value

    def _choices(self, parameter: Parameter, values: list[str]) -> list[str]:
        """A repeatable parameter's values (each must be allowed, when it has a list)."""
        unknown = [value for value in values if value not in parameter.allowed]
        if parameter.allowed and unknown:
            self.fail(parameter.name, f"unknown value(s): {', '.join(unknown)}",
                      list(parameter.allowed))  # fmt: skip
        return values

    def max_age_days(self, day: date | None) -> int | None:
        """`max_age_days`: how many days before the answer's day a record's last confirmation
        may be (`docs/raw-format.md`, "Confirmed through, or presumed"); only an answer for a
        day (`day`) takes it."""
        days: int | None = self.get("max_age_days")
        if day is None and self.values("max_age_days") is not None:
            self.fail("max_age_days", "needs as_of: an age is counted back from the answer's day")
        return days

    def page(self) -> tuple[int, int]:
        """`page_size` and `page_number`: a page of a listing."""
        size: int = self.get("page_size")
        number: int = self.get("page_number")
        return size, number

    def window(self) -> tuple[date | None, date | None]:
        start, end = self.get("start_date"), self.get("end_date")
        if start is not None and end is not None and end < start:
            self.fail("end_date", "is before start_date")
        return start, end

    def check(self) -> None:
        if self.problems:
            raise ValidationError("Invalid query parameters.", self.problems)


@remembered.for_short(len("YYYY-MM-DD"))  # windows share their days: 2% of a cold answer
def real_date(text: str) -> date | None:
    """The day `text` writes as YYYY-MM-DD, when it is a real one."""
    if DATE.fullmatch(text):
        try:
            return date.fromisoformat(text)
        except ValueError:
            pass
    return None


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
