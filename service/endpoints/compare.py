"""Where it is cheapest: the venues side by side on one day (`GET /compare/`).

For one fee type and a selection of lines, each venue the key can see gets its matching lines
in force on `as_of`, and the lowest and highest of their amounts in one unit: a lowest amount
is the biggest rebate or the smallest fee, so the venue best for the member comes first.
Amounts are only comparable in one unit; the lines counted in another (or with no figure) are
counted, not compared. The results index finds the lines and their extremes by amount rank
(`ClassIndex.spreads`); the record summary prints them.
"""

from datetime import UTC, date, datetime
from typing import Any, Final

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from starlette.requests import Request
from starlette.responses import Response

from ingest.schema import CLASSIFYING, DIMENSION_COLUMNS, PROVENANCE_COLUMNS
from service.dataset import queries
from service.dataset.classes import Spread
from service.dataset.version import Dataset
from service.endpoints import export
from service.endpoints.envelope import answer
from service.endpoints.exchange_family import refuse_hidden, venue_codes, vocabulary_filters
from service.endpoints.params import exchange_request

# The line filters (repeatable, as on the results) besides `fee_type`, which is one value: it
# decides the unit compared unless `unit` does. The provenance filters too, so a comparison can
# keep to figures read in a primary source, with stated dates, or not in doubt: a line with no
# known end counts as in force on any later day, and may lead a comparison only for that. And
# what a fill must match (display, price band, tape, tier), so a comparison can be of them.
LINE_FILTERS: Final = tuple(
    name for name, column in queries.RESULT_FILTERS.items()
    if column in (*CLASSIFYING, *PROVENANCE_COLUMNS, "standard", *DIMENSION_COLUMNS)
    and column != "fee_type"
)  # fmt: skip
DEFAULT_CATEGORY: Final = "fees_and_rebates"
DEFAULT_UNIT: Final = {"equity": "per_share", "option": "per_contract"}
# `max_age_days` defaults to 730 here (its declaration, CompareMaxAgeDays): a figure no source
# has shown for two years does not lead a ranking unless asked for.
# The fields of the lowest and the highest record: answer name -> record summary column.
EXTREME_FIELDS: Final = {
    "amount": "amount",
    "unit": "unit",
    "fee_amount": "fee_amount",
    "label": "label",
    "record_id": "record_id",
    "line_id": "line_id",
    "effective_start": "effective_start",
    "effective_end": "effective_end",
    "confirmed_through": "confirmed_through",
    "presumed": "presumed",
    "standard": "standard",
    "source_document": "source_document",
    "source_link": "source_url",
    "source_kind": "source_kind",
    "date_basis": "date_basis",
    "uncertain": "uncertain",
}
EXTREMES: Final = ("lowest", "highest")


def compare(request: Request) -> Response:
    """One item per venue the key can see (or per venue named), best for the member first."""
    call, account, query = exchange_request(request)
    dataset = call.dataset
    values = vocabulary_filters(query, LINE_FILTERS)
    named = venue_codes(query, dataset, account)
    fee_type = query.get("fee_type")
    unit = query.get("unit") or DEFAULT_UNIT.get(fee_type, "")
    as_of = query.get("as_of") or datetime.now(UTC).date()
    max_age = query.max_age_days(as_of)
    kind = query.get("format")
    query.check()
    refuse_hidden(named, account)
    venues = named or [code for code in dataset.visible(account) if dataset.venues[code].records]
    values = {"fee_type": [fee_type], "fee_category": [DEFAULT_CATEGORY]} | values
    selection = queries.Selection(
        venues=venues, values=values, in_force_on=as_of, max_age_days=max_age
    )
    spreads = dataset.spreads(selection, unit)
    table = _table(dataset, sorted(set(venues)), spreads, as_of)
    kind = export.wanted_format(kind, request.headers.get("accept", ""))
    if kind != "json":
        name = f"compare-{as_of.isoformat()}-{dataset.version_id}"
        return export.download_table(table, kind, name)
    items = [_item(row) for row in table.to_pylist()]
    meta = {
        "as_of": as_of.isoformat(),
        "fee_type": fee_type,
        "unit": unit,
        "max_age_days": max_age,
        "left_out_stale": sum(item["left_out_stale"] for item in items),
        "record_count": len(items),
    }
    return answer(call, items, meta)


def _table(dataset: Dataset, venues: list[str], spreads: dict[str, Spread], day: date) -> pa.Table:
    """One row per venue, best first, flat as a download carries it: the venue, its counts, then
    each field of its lowest and highest record (`lowest_<field>`, `highest_<field>`; nulls for
    a venue with no line compared), `presumed` when `day` is after its last confirmation. The
    order: the lowest amount, then the venue's code; the venues with none compared last, by
    code."""
    none = Spread(0, None, None, 0)
    venue_spreads = {code: spreads.get(code, none) for code in venues}
    compared = [code for code in venues if venue_spreads[code].compared]
    parts = [
        np.array([getattr(venue_spreads[code], side) for code in compared], np.int64)
        for side in EXTREMES
    ]
    extremes = {
        side: records.append_column("presumed", pc.less(records["confirmed_through"], day))
        for side, records in zip(EXTREMES, dataset.records_at(parts), strict=True)
    }
    lowest = extremes["lowest"].column("amount").to_pylist()
    order = sorted(range(len(compared)), key=lambda at: (lowest[at], compared[at]))
    rest = [code for code in venues if not venue_spreads[code].compared]
    ordered = [compared[at] for at in order] + rest
    # The records of the venues compared, in the answer's order, then null rows for the rest.
    rows = pa.array([*order, *[None] * len(rest)], pa.int64())
    columns: dict[str, Any] = {
        "exchange_name": ordered,
        "display_name": [dataset.venues[code].display_name for code in ordered],
        "lines": [venue_spreads[code].compared for code in ordered],
        "lines_in_other_units": [venue_spreads[code].elsewhere for code in ordered],
        "left_out_stale": [venue_spreads[code].stale for code in ordered],
    }
    for side, records in extremes.items():
        taken = records.take(rows)
        columns |= {f"{side}_{name}": taken[column] for name, column in EXTREME_FIELDS.items()}
    return pa.table(columns)


def _item(row: dict[str, Any]) -> dict[str, Any]:
    """A venue as JSON answers it: its counts, and its lowest and highest records (each null
    when no line of it was compared)."""
    names = ("exchange_name", "display_name", "lines", "lines_in_other_units", "left_out_stale")
    item = {name: row[name] for name in names}
    for side in EXTREMES:
        record = {name: row[f"{side}_{name}"] for name in EXTREME_FIELDS}
        item[side] = record if record["record_id"] is not None else None
    return item
