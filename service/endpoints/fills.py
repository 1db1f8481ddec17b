"""Fills, as callers give them: each checked on its own (a bad fill is answered with its error and
never fails the others), the good ones handed to the pricing engine (`service.dataset.pricing`),
and every fill answered in its place. `fees price` and the fee-estimates endpoint read and
answer fills through this one module, so they agree on every fill.
"""

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from datetime import date
from decimal import Decimal, InvalidOperation
from typing import Any, Final

import pyarrow as pa

from ingest.schema import CLOSED_VALUES
from service.dataset.pricing import FILLS_SCHEMA
from service.dataset.version import Dataset
from service.endpoints.params import real_date

# A fill's fields, in the order a CSV of fills is written back.
FIELDS: Final = (
    "exchange_name",
    "trade_date",
    "quantity",
    "price",
    "fee_action",
    "fee_participant",
    "fee_type",
    "symbol_type",
)
REQUIRED: Final = ("exchange_name", "trade_date", "quantity", "price", "fee_action")
# What each fill is answered with, in order (the CSV's columns after the fill's own).
ANSWER_FIELDS: Final = (
    "fee",
    "amount",
    "unit",
    "record_id",
    "line_id",
    "label",
    "confirmed_through",
    "presumed",
    "source_link",
    "error",
)
# The closed fields: a fill's field -> the values it takes.
CHOICES: Final = {
    "fee_action": CLOSED_VALUES["action"],
    "fee_participant": CLOSED_VALUES["participant"],
    "fee_type": CLOSED_VALUES["fee_type"],
    "symbol_type": ("penny", "non_penny"),
}
# Numbers as the engine holds them (`FILLS_SCHEMA`): at most these places, below these bounds.
NUMBERS: Final = {"quantity": (6, Decimal(10**12), False), "price": (8, Decimal(10**10), True)}


@dataclass
class Fills:
    """Fills checked: those the engine prices (as its rows) and each other fill's error."""

    count: int = 0
    rows: list[dict[str, Any]] = field(default_factory=list)
    errors: dict[int, str] = field(default_factory=dict)


def checked(
    fills: Iterable[Mapping[str, Any]], dataset: Dataset, may_see: Callable[[str], bool]
) -> Fills:
    """Each fill checked on its own; a venue the caller may not see is unknown, as is one that
    does not exist (the answer never says which)."""
    result = Fills()
    for number, fill in enumerate(fills):
        result.count += 1
        try:
            result.rows.append(_engine_row(number, fill, dataset, may_see))
        except ValueError as problem:
            result.errors[number] = str(problem)
    return result


def _engine_row(
    number: int, fill: Mapping[str, Any], dataset: Dataset, may_see: Callable[[str], bool]
) -> dict[str, Any]:
    given = {name: _text(fill.get(name)) for name in FIELDS}
    missing = [name for name in REQUIRED if given[name] is None]
    if missing:
        raise ValueError(f"missing {', '.join(missing)}")
    code = dataset.resolve(str(given["exchange_name"]))
    if code is None or not may_see(code):
        raise ValueError(f"unknown exchange: {given['exchange_name']}")
    day = real_date(str(given["trade_date"]))
    if day is None:
        raise ValueError("trade_date must be a real date in the form YYYY-MM-DD")
    for name, allowed in CHOICES.items():
        if given[name] is not None and given[name] not in allowed:
            raise ValueError(f"{name} must be one of: {', '.join(allowed)}")
    fee_type = given["fee_type"] or _asset_class(dataset, code)
    if fee_type == "option" and given["fee_participant"] is None:
        raise ValueError("an option fill needs fee_participant")
    return {
        "fill": number,
        "exchange": code,
        "fee_type": fee_type,
        "trade_date": day,
        "quantity": _number("quantity", given["quantity"]),
        "price": _number("price", given["price"]),
        "action": given["fee_action"],
        "participant": given["fee_participant"],
        "symbol_type": given["symbol_type"],
    }


def _text(value: Any) -> str | None:
    """A field as text; an empty one (or null) is not given."""
    if value is None or (isinstance(value, str) and not value.strip()):
        return None
    return value.strip() if isinstance(value, str) else str(value)


def _asset_class(dataset: Dataset, code: str) -> str:
    """A fill without `fee_type`: the venue's only asset class, equity for a venue with both."""
    classes = dataset.venues[code].fee_types
    return classes[0] if len(classes) == 1 else "equity"


def _number(name: str, text: str | None) -> Decimal:
    places, bound, zero_allowed = NUMBERS[name]
    try:
        number = Decimal(str(text))
    except InvalidOperation:
        number = Decimal("NaN")
    least = "at least 0" if zero_allowed else "more than 0"
    if not number.is_finite() or number < 0 or (number == 0 and not zero_allowed):
        raise ValueError(f"{name} must be a number {least}")
    exponent = number.normalize().as_tuple().exponent  # 1.50 has 1 place, 100 none
    assert isinstance(exponent, int)  # a finite number's
    if number >= bound or -exponent > places:
        raise ValueError(f"{name} must be below {bound:,} with at most {places} decimal places")
    return number.quantize(Decimal(10) ** -places)


def priced(fills: Fills, dataset: Dataset) -> list[dict[str, Any]]:
    """Every fill's answer, in order: its fee and line (`ANSWER_FIELDS`), or its error."""
    table = pa.Table.from_pylist(fills.rows, schema=FILLS_SCHEMA)
    engine = {row["fill"]: row for row in dataset.price(table).to_pylist()} if fills.rows else {}
    days = {row["fill"]: row["trade_date"] for row in fills.rows}
    return [
        _refused(fills.errors[number]) if number in fills.errors
        else _answer(engine[number], days[number])
        for number in range(fills.count)
    ]  # fmt: skip


def _refused(error: str) -> dict[str, Any]:
    return {name: None for name in ANSWER_FIELDS} | {"error": error}


def _answer(row: dict[str, Any], day: date) -> dict[str, Any]:
    if row["lines"] == 0:
        return _refused(f"no standard line of this venue for this fill is in force on {day}")
    if row["lines"] > 1:
        ids = ", ".join(row["candidates"])
        return _refused(
            f"{row['lines']} standard lines apply (record ids {ids}): give symbol_type or "
            "fee_participant to choose"
        )
    answer = {name: row.get(name) for name in ANSWER_FIELDS} | {"error": None}
    answer["fee"], answer["amount"] = float(row["fee"]), float(row["amount"])
    answer["confirmed_through"] = row["confirmed_through"].isoformat()
    return answer
