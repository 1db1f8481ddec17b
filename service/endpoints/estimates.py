"""`POST /api/v1/fee-estimates`: what each fill of a batch cost, on the venue and day it names
(`docs/pricing.md`). Read-only: nothing is stored; same keys, scope and rate limit as the rest
of the exchange family, and a batch is one request against the rate limit.

The body is bounded before it costs much: a `Content-Length` over `MAX_BODY_BYTES` is refused
unread, a body that grows past it is refused as soon as it does (413), and so is a batch of more
than `MAX_FILLS` fills. A body the endpoint cannot read as fills is a 422 naming its first
problems (a fill by its place, `fills[3]`, and the field); a fill that reads but cannot be
priced (an unknown venue, a bad number, no line in force) is that fill's `error` alone.
"""

import csv
import io
from collections.abc import Callable, Iterator
from decimal import Decimal
from itertools import chain
from typing import Any, Final

import orjson
import pyarrow as pa
import pyarrow.compute as pc
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import Response

from service.dataset.version import Dataset
from service.edge.call import Call
from service.endpoints import export, fills
from service.endpoints.envelope import answer
from service.endpoints.params import exchange_request
from service.errors import PayloadTooLarge, UnsupportedMedia, ValidationError

MAX_FILLS: Final = 100_000
# A fee as summed: exact to its 8 places, with room for the sum of a batch.
EXACT: Final = pa.decimal128(38, 8)
# 100,000 fills of JSON with every field take about 20 MB.
MAX_BODY_BYTES: Final = 32 * 2**20
MEDIA_TYPES: Final = ("application/json", "text/csv")
FORMATS: Final = ("json", "csv")
# The fields of a JSON body: the fills, and the tier of each venue that fills without a tier of
# their own are priced in.
BODY_FIELDS: Final = ("fills", "tiers")
# A fill's field names, and the types of the values it may give (JSON's strings, numbers and
# null; not a boolean, which JSON parsers give as `bool`, a subclass of `int`).
FIELD_NAMES: Final = frozenset(fills.FIELDS)
SCALARS: Final = frozenset({str, int, float, type(None)})
# The most problems a 422 lists: the first ones are what a caller needs to mend the body.
MAX_PROBLEMS: Final = 10
# The answers made Python objects at once (`_answered`): about 15 ms of holding the GIL.
ANSWERS_AT_ONCE: Final = 4_096
# A batch's fills checked and priced at a time (`_priced`): the next block is priced while
# this one's answers are made.
BLOCK_FILLS: Final = 25_000


async def fee_estimates(request: Request) -> Response:
    call, account, query = exchange_request(request)
    kind = query.get("format") or "json"
    query.check()
    body = await _body(request)
    content_type = request.headers.get("content-type")
    # Reading, checking and pricing a batch is work of up to a second: off the event loop.
    if kind == "csv":
        text, answers = await run_in_threadpool(
            _priced_whole, content_type, body, call.dataset, account.may_see
        )
        table = pa.Table.from_arrays(
            [*text.columns, *answers.columns], names=[*text.column_names, *answers.column_names]
        )
        return export.download_table(table, "csv", "fee-estimates")
    return await run_in_threadpool(_answered, call, content_type, body, account.may_see)


def _answered(
    call: Call, content_type: str | None, body: bytes, may_see: Callable[[str], bool]
) -> Response:
    """The JSON answer, made in the same thread as the pricing: 100,000 fills' answers are 1.1
    million values made Python objects, then 27 MB of JSON (0.3-0.45 s at 10M synthetic
    records), which held the event loop, and every other request, while they were made. Made a
    batch at a time, since Arrow's `to_pylist` holds the GIL, and so the loop, until it ends;
    and a block at a time, as the next block is priced."""
    rows: list[dict[str, Any]] = []  # one a fill, in order
    fees: list[pa.Table] = []
    for checked, answers in _priced(content_type, body, call.dataset, may_see):
        batches = answers.to_batches(ANSWERS_AT_ONCE)
        rows += chain.from_iterable(batch.to_pylist() for batch in batches)
        fees.append(_fees(checked, answers))
    return answer(call, rows, _meta(len(rows), pa.concat_tables(fees), call.dataset))


def _priced_whole(
    content_type: str | None, body: bytes, dataset: Dataset, may_see: Callable[[str], bool]
) -> tuple[pa.Table, pa.Table]:
    """The body's fills as their fields' text, and their answers, whole."""
    blocks = list(_priced(content_type, body, dataset, may_see))
    text = pa.concat_tables(checked.text for checked, _ in blocks)
    return text, pa.concat_tables(answers for _, answers in blocks)


def _priced(
    content_type: str | None, body: bytes, dataset: Dataset, may_see: Callable[[str], bool]
) -> Iterator[tuple[fills.Fills, pa.Table]]:
    """The body's fills checked, and their answers, `BLOCK_FILLS` at a time in order, two
    blocks priced at once (`fills.in_order`); a body that cannot be read is refused before
    any is priced."""
    text, named_tiers = _fills(content_type, body)
    tiers, unknown = fills.tiers_of(named_tiers, dataset, may_see)
    if unknown:
        problems = [_problem(f"tiers.{name}", "unknown exchange") for name in unknown]
        raise ValidationError("The body's tiers cannot be read.", problems[:MAX_PROBLEMS])

    def priced(block: pa.Table) -> tuple[fills.Fills, pa.Table]:
        checked = fills.checked(block, dataset, may_see, tiers)
        return checked, fills.priced(checked, dataset)

    # A batch of no fills is one block of none, answered as any other.
    starts = range(0, max(text.num_rows, 1), BLOCK_FILLS)
    return fills.in_order(priced, (text.slice(start, BLOCK_FILLS) for start in starts))


async def _body(request: Request) -> bytes:
    """The body, refused (413) once it is known to pass `MAX_BODY_BYTES`: from its
    `Content-Length` before a byte is read, else as it arrives."""
    length = request.headers.get("content-length", "")
    if length.isdigit() and int(length) > MAX_BODY_BYTES:
        raise _too_large()
    parts, size = [], 0
    async for part in request.stream():
        size += len(part)
        if size > MAX_BODY_BYTES:
            raise _too_large()
        parts.append(part)
    return b"".join(parts)


def _too_large() -> PayloadTooLarge:
    return PayloadTooLarge(
        f"the body is over {MAX_BODY_BYTES // 2**20} MiB ({MAX_BODY_BYTES:,} bytes); send at most "
        f"{MAX_FILLS:,} fills a request"
    )


def _fills(content_type: str | None, body: bytes) -> tuple[pa.Table, dict[str, str]]:
    """The fills of a JSON or CSV body as their fields' text (`fills.TEXT`), and the tiers the
    body names by venue (JSON only)."""
    media = (content_type or "application/json").split(";")[0].strip().lower()
    if media not in MEDIA_TYPES:
        raise UnsupportedMedia(f"a body of fills is {' or '.join(MEDIA_TYPES)}, not {media}")
    problems: list[dict[str, Any]] = []
    tiers: dict[str, str] = {}
    read = (
        _json_fills(body, problems, tiers)
        if media == "application/json"
        else _csv_fills(body, problems)
    )
    if len(read) > MAX_FILLS:
        raise PayloadTooLarge(f"{len(read):,} fills: at most {MAX_FILLS:,} a request")
    # Read whole when every fill is plain; else each is checked, so the 422 names its problems.
    text = None if problems else fills.from_objects(read)
    if text is not None:
        return text, tiers
    for number, fill in enumerate(read):
        problems += _fill_problems(f"fills[{number}]", fill)
        if len(problems) >= MAX_PROBLEMS:
            break
    if problems:
        raise ValidationError("The body's fills cannot be read.", problems[:MAX_PROBLEMS])
    return fills.from_mappings(read), tiers


def _fill_problems(place: str, fill: Any) -> list[dict[str, Any]]:
    """What keeps one fill from being read: not an object, a field not of `fills.FIELDS`, a
    value other than a string, a number or null."""
    if not isinstance(fill, dict):
        return [_problem(place, "must be an object")]
    # The common case in two set operations (100,000 fills: a test per value cost 0.5 s).
    if fill.keys() <= FIELD_NAMES and set(map(type, fill.values())) <= SCALARS:
        return []
    unknown = [name for name in fill if name not in FIELD_NAMES]
    wrong = [name for name, value in fill.items() if type(value) not in SCALARS]
    return [_problem(f"{place}.{name}", "unknown field") for name in unknown] + [
        _problem(f"{place}.{name}", "must be a string or a number") for name in wrong
    ]


def _problem(field: str, message: str, allowed: list[str] | None = None) -> dict[str, Any]:
    problem: dict[str, Any] = {"field": field, "message": message}
    if allowed is not None:
        problem["allowed"] = allowed
    return problem


def _json_fills(
    body: bytes, problems: list[dict[str, Any]], tiers: dict[str, str]
) -> list[Any]:
    try:
        document = orjson.loads(body)
    except orjson.JSONDecodeError as error:
        problems.append(_problem("body", f"not JSON: {error}"))
        return []
    if not isinstance(document, dict):
        problems.append(_problem("body", 'must be an object: {"fills": [...]}'))
        return []
    problems += [
        _problem(name, "unknown field", list(BODY_FIELDS))
        for name in document
        if name not in BODY_FIELDS
    ]
    named = document.get("tiers") or {}
    if isinstance(named, dict) and all(
        isinstance(tier, str) and tier.strip() for tier in named.values()
    ):
        tiers.update({name: tier.strip() for name, tier in named.items()})
    else:
        problems.append(_problem("tiers", 'must be an object of tier names: {"<venue>": "<tier>"}'))
    given = document.get("fills")
    if not isinstance(given, list):
        problems.append(_problem("fills", "must be a list of fills"))
        return []
    return given


def _csv_fills(body: bytes, problems: list[dict[str, Any]]) -> list[dict[str, Any]]:
    try:
        text = body.decode("utf-8-sig")
    except UnicodeDecodeError:
        problems.append(_problem("body", "not UTF-8 text"))
        return []
    reader = csv.DictReader(io.StringIO(text), restkey="\0extra")
    try:
        rows = list(reader)
    except csv.Error as error:
        problems.append(_problem("body", f"not CSV: {error}"))
        return []
    unknown = [name for name in reader.fieldnames or [] if name not in fills.FIELDS]
    problems += [_problem(name, "unknown column", list(fills.FIELDS)) for name in unknown]
    problems += [
        _problem(f"fills[{number}]", "more values than the header names")
        for number, row in enumerate(rows)
        if "\0extra" in row
    ][:MAX_PROBLEMS]
    return [] if problems else rows


def _fees(checked: fills.Fills, answers: pa.Table) -> pa.Table:
    """Each priced fill's venue, trade date and fee (as a decimal: each fee has at most 8
    places, and a double's decimal of 8 places is that fee)."""
    engine = checked.engine
    fees = answers["fee"].take(engine["fill"])
    return pa.table(
        {
            "exchange_name": engine["exchange"],
            # YYYY-MM-DD by a cast (strftime took 137 ms of 100,000 fills)
            "trade_date": engine["trade_date"].cast(pa.string()),
            "fee": fees.cast(EXACT),
        }
    ).filter(pc.is_valid(fees))


def _meta(count: int, priced: pa.Table, dataset: Dataset) -> dict[str, Any]:
    """How many of the `count` fills were priced and refused, and the fees of those `priced`
    (`_fees`) per venue and per trade date, summed as decimals."""
    return {
        "fills": count,
        "priced": priced.num_rows,
        "refused": count - priced.num_rows,
        "total_fee": _float(pc.sum(priced["fee"]).as_py()),
        "by_exchange": _totals(priced, "exchange_name"),
        "by_trade_date": _totals(priced, "trade_date"),
        "version_id": dataset.version_id,
        "record_count": count,
    }


def _totals(priced: pa.Table, key: str) -> list[dict[str, Any]]:
    """Per value of `key`, in order: the priced fills and their fees' sum (a sum as the double
    nearest it, read from its text: Arrow's own cast is not correctly rounded)."""
    groups = priced.group_by(key).aggregate([("fee", "count"), ("fee", "sum")]).sort_by(key)
    fees = groups["fee_sum"].cast(pa.string()).cast(pa.float64())
    totals: list[dict[str, Any]] = pa.table(
        {key: groups[key], "fills": groups["fee_count"], "fee": fees}
    ).to_pylist()
    return totals


def _float(total: Decimal | None) -> float:
    return float(total or 0)
