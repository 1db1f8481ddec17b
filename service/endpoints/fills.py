"""Fills, as callers give them: each checked on its own (a bad fill is answered with its error and
never fails the others), the good ones handed to the pricing engine (`service.dataset.pricing`),
and every fill answered in its place. `fees price` and the fee-estimates endpoint read and
answer fills through this one module, so they agree on every fill.

Fills are columns, not rows: a batch is a table of its fields' text (`text_of`, `from_objects`,
`from_mappings`), each check is a column operation, and what needs Python (a venue's name, a
date, a number) runs once per distinct value, not once per fill (1M fills: 6.3 s of `fees
price`'s 13.9 s went to a check per fill).
"""

from collections import deque
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation
from typing import Any, Final, TypeVar

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ingest.schema import CLOSED_VALUES, TAPES
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
    "fee_code",
    "display",
    "tape",
    "tier",
)
# Required of every fill; and one of these two, which say what the execution did.
REQUIRED: Final = ("exchange_name", "trade_date", "quantity", "price")
WHAT_IT_DID: Final = ("fee_action", "fee_code")
# What a fill may leave out and be refused for, as its error names it.
MISSABLE: Final = (*REQUIRED, " or ".join(WHAT_IT_DID))
# A fee code as the raw format holds one (`ingest.rules.FEE_CODE`).
FEE_CODE: Final = "^[0-9A-Za-z]{1,8}$"
STRING: Final = pa.string()
TEXT: Final = pa.schema([(name, STRING) for name in FIELDS])
# What each fill is answered with, in order (the CSV's columns after the fill's own).
ANSWERS: Final = pa.schema(
    [
        ("fee", pa.float64()),
        ("amount", pa.float64()),
        ("unit", pa.string()),
        ("record_id", pa.string()),
        ("line_id", pa.string()),
        ("label", pa.string()),
        ("line_tier", pa.string()),
        ("confirmed_through", pa.string()),
        ("presumed", pa.bool_()),
        ("source_link", pa.string()),
        ("error", pa.string()),
    ]
)
ANSWER_FIELDS: Final = tuple(ANSWERS.names)
# The closed fields: a fill's field -> the values it takes.
CHOICES: Final = {
    "fee_action": CLOSED_VALUES["action"],
    "fee_participant": CLOSED_VALUES["participant"],
    "fee_type": CLOSED_VALUES["fee_type"],
    "symbol_type": ("penny", "non_penny"),
    "display": ("displayed", "non_displayed", "midpoint"),
    "tape": TAPES,
}
# Numbers as the engine holds them (`FILLS_SCHEMA`): at most these places, below these bounds.
NUMBERS: Final = {"quantity": (6, Decimal(10**12), False), "price": (8, Decimal(10**10), True)}
NO_TEXT: Final = pa.scalar(None, STRING)
# Fills given as objects read by Arrow at a time (`from_objects`): reading them holds the GIL,
# and so a server's event loop, until it ends (100,000 fills at once: about 0.2 s).
OBJECTS_AT_ONCE: Final = 8_192
# Blocks of fills checked and priced at once (`in_order`), a thread each: the engine's NumPy and
# Arrow work releases the GIL, so a second core prices the next block while the first checks
# and prices its own, or while the caller makes the answers of the block before.
PRICERS: Final = 2

Block = TypeVar("Block")
Priced = TypeVar("Priced")


@dataclass
class Fills:
    """Fills checked: their fields' text, each fill's error (null: it reads), the tier each is
    priced under (its own, else its venue's of the batch), and the rows the engine prices
    (`FILLS_SCHEMA`, `fill` its place)."""

    text: pa.Table
    errors: pa.Array
    tiers: pa.Array
    engine: pa.Table

    @property
    def count(self) -> int:
        rows: int = self.text.num_rows
        return rows


def from_mappings(given: Sequence[Mapping[str, Any]]) -> pa.Table:
    """Fills given as mappings (a JSON body): their fields' text, a number as it is written
    (a field at a time: 100,000 fills, 0.5 s less than a fill at a time)."""
    columns = {}
    for name in FIELDS:
        values = [fill.get(name) for fill in given]
        try:
            columns[name] = pa.array(values, STRING)
        except (pa.ArrowInvalid, pa.ArrowTypeError):  # numbers among them: each as its text
            columns[name] = _written(values)
    return text_of(pa.table(columns, schema=TEXT))


def _written(values: Iterable[Any]) -> pa.Array:
    """Each value's text as Python writes it (a number as it was given), null kept."""
    return pa.array([None if value is None else str(value) for value in values], STRING)


def from_objects(given: Sequence[Any]) -> pa.Table | None:
    """Fills given as JSON objects, read by Arrow as arrays of structs, `OBJECTS_AT_ONCE` at a
    time: their fields' text as `from_mappings` reads it; None unless every fill is an object
    of `FIELDS` alone whose values are strings, numbers or null, each field's of one kind in
    each part (the caller then checks each fill and reads them with `from_mappings`). 100,000
    fills: 0.23 s, against 0.71 s checked and read a field at a time."""
    parts = []
    for start in range(0, len(given), OBJECTS_AT_ONCE):
        part = _objects_text(given[start : start + OBJECTS_AT_ONCE])
        if part is None:
            return None
        parts.append(part)
    return pa.concat_tables(parts) if parts else None


def _objects_text(given: Sequence[Any]) -> pa.Table | None:
    """`from_objects` of one part of the fills."""
    try:
        objects = pa.array(given)
    except (pa.ArrowException, TypeError, ValueError, OverflowError):  # not objects of one shape
        return None
    if not pa.types.is_struct(objects.type) or objects.null_count:
        return None
    table = pa.Table.from_struct_array(objects)
    for place, field in enumerate(table.schema):
        if field.name not in FIELDS or not _plain(field.type):
            return None
        if pa.types.is_floating(field.type):  # not Arrow's text of a double: Python's
            written = _written(fill.get(field.name) for fill in given)
            table = table.set_column(place, field.name, written)
    return text_of(table)


def _plain(kind: pa.DataType) -> bool:
    """A field's kind as Arrow reads a JSON field of strings, numbers or null (a boolean, a list
    or an object is none of these)."""
    plain: bool = kind == STRING or pa.types.is_integer(kind) or pa.types.is_floating(kind)
    return plain or pa.types.is_null(kind)


def text_of(table: pa.Table) -> pa.Table:
    """The fields of `table` as text (a field it lacks is null) with surrounding spaces
    removed; an empty value is not given."""
    columns = {}
    for name in FIELDS:
        if name not in table.column_names:
            columns[name] = pa.nulls(table.num_rows, STRING)
            continue
        trimmed = pc.utf8_trim_whitespace(table[name].cast(STRING))
        columns[name] = pc.if_else(pc.equal(trimmed, ""), NO_TEXT, trimmed)
    return pa.table(columns, schema=TEXT)


def in_order(work: Callable[[Block], Priced], blocks: Iterable[Block]) -> Iterator[Priced]:
    """`work` of each block, in the blocks' order, `PRICERS` of them running at once while the
    first is waited for; a block's failure is raised when its turn comes."""
    running: deque[Future[Priced]] = deque()
    with ThreadPoolExecutor(PRICERS, thread_name_prefix="pricer") as pricers:
        for block in blocks:
            running.append(pricers.submit(work, block))
            if len(running) == PRICERS:
                yield running.popleft().result()
        while running:
            yield running.popleft().result()


def checked(
    text: pa.Table,
    dataset: Dataset,
    may_see: Callable[[str], bool],
    tiers: Mapping[str, str] | None = None,
) -> Fills:
    """Each fill checked on its own, its first problem its error; a venue the caller may not see
    is unknown, as is one that does not exist (the answer never says which). `tiers`: the tier
    of each venue (by its code) that the batch's fills without one of their own are in."""
    codes = _by_value(text["exchange_name"], lambda name: _visible(dataset, name, may_see))
    tier = pc.coalesce(text["tier"], _by_value(codes, (tiers or {}).get))
    days = _by_value(text["trade_date"], real_date, pa.date32())
    fee_type = pc.coalesce(
        text["fee_type"], _by_value(codes, lambda code: _asset_class(dataset, code))
    )
    numbers = {name: _by_value(text[name], _number(name), NUMBER_READ) for name in NUMBERS}
    problems = [
        _missing(text),
        _where(pc.is_null(codes), _joined("unknown exchange: ", text["exchange_name"])),
        _where(pc.is_null(days), "trade_date must be a real date in the form YYYY-MM-DD"),
        *(_where(_outside(text[name], allowed), f"{name} must be one of: {', '.join(allowed)}")
          for name, allowed in CHOICES.items()),
        _where(pc.and_(pc.equal(fee_type, "option"), pc.is_null(text["fee_participant"])),
               "an option fill needs fee_participant"),
        _where(pc.invert(pc.match_substring_regex(text["fee_code"], FEE_CODE)),
               "fee_code must be letters and digits, at most 8"),
        *(pc.struct_field(numbers[name], "error") for name in NUMBERS),
    ]  # fmt: skip
    errors = pc.coalesce(*problems)
    read = {"exchange": codes, "fee_type": fee_type, "trade_date": days, "tier": tier}
    read |= {name: pc.struct_field(numbers[name], "value") for name in NUMBERS}
    return Fills(text, errors, tier, _engine_rows(text, read).filter(pc.is_null(errors)))


# A fill's fields the engine takes as given, by the engine's name (`FILLS_SCHEMA`).
AS_GIVEN: Final = {
    "action": "fee_action",
    "participant": "fee_participant",
    "symbol_type": "symbol_type",
    "fee_code": "fee_code",
    "display": "display",
    "tape": "tape",
}


def _engine_rows(text: pa.Table, read: dict[str, pa.Array]) -> pa.Table:
    """Every fill as the engine takes it (`FILLS_SCHEMA`): `fill` its place, the values
    `read` from its text, the rest as given."""
    columns = {"fill": pa.array(np.arange(text.num_rows, dtype=np.int64)), **read}
    columns |= {name: text[field] for name, field in AS_GIVEN.items()}
    return pa.table({field.name: columns[field.name] for field in FILLS_SCHEMA}).cast(FILLS_SCHEMA)


def _by_value(
    column: pa.Array | pa.ChunkedArray,
    read: Callable[[Any], Any],
    kind: pa.DataType = STRING,
) -> pa.Array:
    """`read` of each fill's value, called once per distinct value (null stays null)."""
    column = column.combine_chunks() if isinstance(column, pa.ChunkedArray) else column
    distinct = pc.unique(column).drop_null()
    results = pa.array([read(value) for value in distinct.to_pylist()], kind)
    return results.take(pc.index_in(column, value_set=distinct))


def tiers_of(
    given: Mapping[str, str], dataset: Dataset, may_see: Callable[[str], bool]
) -> tuple[dict[str, str], list[str]]:
    """A batch's tiers by venue name (`{"memx": "Liquidity Provision Tier 1"}`) as `checked`
    takes them, by venue code; and the names that are no venue the caller may see."""
    tiers, unknown = {}, []
    for name, tier in given.items():
        code = _visible(dataset, name, may_see)
        if code is None:
            unknown.append(name)
        else:
            tiers[code] = tier
    return tiers, unknown


def _visible(dataset: Dataset, name: str, may_see: Callable[[str], bool]) -> str | None:
    code = dataset.resolve(name)
    return code if code is not None and may_see(code) else None


def _asset_class(dataset: Dataset, code: str) -> str:
    """A fill without `fee_type`: the venue's only asset class, equity for a venue with both."""
    classes = dataset.venues[code].fee_types
    return classes[0] if len(classes) == 1 else "equity"


def _missing(text: pa.Table) -> pa.Array:
    """`missing <fields>` for a fill that leaves required fields empty, else null."""
    flags = [pc.is_null(text[name]) for name in REQUIRED]
    flags.append(pc.and_(*(pc.is_null(text[name]) for name in WHAT_IT_DID)))
    flags = [flag.cast(pa.int8()) for flag in flags]
    mask = flags[0]
    for place, flag in enumerate(flags[1:], start=1):
        mask = pc.add(mask, pc.multiply(flag, 2**place))
    return _by_value(mask, _missing_message)


def _missing_message(mask: int) -> str | None:
    names = [name for place, name in enumerate(MISSABLE) if mask >> place & 1]
    return f"missing {', '.join(names)}" if names else None


def _where(condition: pa.Array, error: str | pa.Array) -> pa.Array:
    """`error` for the fills `condition` holds (a null condition holds none, and a null
    `error`, a value not given, says nothing), else null."""
    return pc.if_else(pc.fill_null(condition, False), error, NO_TEXT)


def _outside(values: pa.ChunkedArray, allowed: tuple[str, ...]) -> pa.Array:
    """A value given that is not one of `allowed`."""
    return pc.and_(pc.is_valid(values), pc.invert(pc.is_in(values, pa.array(allowed))))


def _joined(*parts: str | pa.Array | pa.ChunkedArray) -> pa.Array:
    """Each fill's text of `parts` (null where a part is null)."""
    return pc.binary_join_element_wise(*parts, "")


NUMBER_READ: Final = pa.struct([("value", pa.decimal128(38, 8)), ("error", pa.string())])


def _number(name: str) -> Callable[[str], dict[str, Any]]:
    places, bound, zero_allowed = NUMBERS[name]
    least = "at least 0" if zero_allowed else "more than 0"

    def read(text: str) -> dict[str, Any]:
        try:
            number = Decimal(text)
        except InvalidOperation:
            number = Decimal("NaN")
        if not number.is_finite() or number < 0 or (number == 0 and not zero_allowed):
            return {"value": None, "error": f"{name} must be a number {least}"}
        exponent = number.normalize().as_tuple().exponent  # 1.50 has 1 place, 100 none
        assert isinstance(exponent, int)  # a finite number's
        if number >= bound or -exponent > places:
            error = f"{name} must be below {bound:,} with at most {places} decimal places"
            return {"value": None, "error": error}
        return {"value": number.quantize(Decimal(10) ** -places), "error": None}

    return read


def priced(fills: Fills, dataset: Dataset) -> pa.Table:
    """Every fill's answer, in order (`ANSWERS`): its fee and line, or its error."""
    engine = (
        dataset.price(fills.engine)
        if fills.engine.num_rows
        else pa.Table.from_pylist([], schema=pa.schema([("fill", pa.int64())]))
    )
    # Each fill's row among the engine's (null: refused before it). When none was refused, the
    # rows are the fills' own, in order, and are not taken again (a million answers' text).
    place = (
        None
        if engine.num_rows == fills.count
        else pc.index_in(pa.array(np.arange(fills.count, dtype=np.int64)), value_set=engine["fill"])
    )

    def column(name: str, kind: pa.DataType) -> pa.Array:
        if name not in engine.column_names:
            return pa.nulls(fills.count, kind)
        values = engine[name].combine_chunks()
        values = values if place is None else values.take(place)
        if pa.types.is_decimal(values.type):  # through its text: Arrow's own cast is not
            values = values.cast(STRING)  # correctly rounded (-0.0012 became -0.00120...01)
        return values.cast(kind)

    answers = {name: column(name, ANSWERS.field(name).type) for name in ANSWER_FIELDS[:-1]}
    answers["error"] = pc.coalesce(
        fills.errors,
        _unpriced(fills, column("lines", pa.int64()), column("tier_known", pa.bool_())),
        _several(column("lines", pa.int64()), column("candidates", pa.list_(STRING))),
    )
    return pa.table(answers, schema=ANSWERS)


def _unpriced(fills: Fills, lines: pa.Array, tier_known: pa.Array) -> pa.Array:
    """Why a fill that reads has no line: its tier is none of its venue's that day, no line
    carries its code, or its venue has no standard line for it (column operations: every fill
    of a venue may have none)."""
    day = fills.text["trade_date"]
    code = fills.text["fee_code"]
    return pc.coalesce(
        _where(pc.invert(tier_known), _joined(
            "no line of this venue is in tier \"", fills.tiers, "\" on ", day)),
        _where(pc.and_(pc.equal(lines, 0), pc.is_valid(code)), _joined(
            "no line of this venue with fee code ", code, " is in force for this fill on ", day)),
        _where(pc.equal(lines, 0), _joined(
            "no standard line of this venue for this fill is in force on ", day)),
    )  # fmt: skip


def _several(lines: pa.Array, candidates: pa.Array) -> pa.Array:
    """A fill several lines would price: their records, so the caller can choose (a few fills
    at most, one by one)."""
    several: list[str | None] = [None] * len(lines)
    for at in pc.indices_nonzero(pc.fill_null(pc.greater(lines, 1), False)).to_pylist():
        records = candidates[at].as_py()
        several[at] = (
            f"{len(records)} lines apply (record ids {', '.join(records)}): give fee_code, "
            "display, symbol_type, fee_participant or tape to choose"
        )
    return pa.array(several, STRING)
