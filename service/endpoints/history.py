"""Fee history: one fee line and every record of it (`GET /fee-lines/{line_id}`), and the changes
of the lines (`GET /fee-changes/`).

A fee line is one schedule item followed through time (`docs/raw-format.md`, "Fee lines"); the
version's line index finds its records, its change list the changes (`ingest.changes` has the
rules), and the record summary prints them (`service.dataset.records`). No SQL runs.
"""

from collections.abc import Iterable, Iterator
from typing import Any, Final

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from starlette.requests import Request
from starlette.responses import Response

from ingest.layout import CHANGE_TYPES, CLASSED
from ingest.schema import CLASSIFYING, DIMENSION_COLUMNS
from service.dataset import queries
from service.dataset.index import Array
from service.dataset.version import Dataset
from service.endpoints import export
from service.endpoints.envelope import answer, page_meta
from service.endpoints.exchange_family import (
    HIDDEN_DATA,
    refuse_hidden,
    scope,
    venue_codes,
    vocabulary_filters,
)
from service.endpoints.params import exchange_request
from service.errors import Forbidden, NotFound

# A line's identity under the results' names (the same on each of its records), then each
# record's figure, period and source: answer name -> record summary column
# (`service.dataset.records`).
LINE_FIELDS: Final = {
    "line_id": "line_id",
    **{name: column for name, column in queries.RESULT_FILTERS.items() if column in CLASSIFYING},
    "label": "label",
    "fee_monthly_volume": "volume_tier",
}
RECORD_FIELDS: Final = {
    "record_id": "record_id",
    "fee_charge_type": "fee_name",
    "fee_amount": "fee_amount",
    "amount": "amount",
    "currency": "currency",
    "unit": "unit",
    "fee_basis": "fee_basis",
    "effective_start": "effective_start",
    "effective_end": "effective_end",
    "confirmed_through": "confirmed_through",
    "ended_by": "ended_by",
    "standard": "standard",
    "source_kind": "source_kind",
    "date_basis": "date_basis",
    "uncertain": "uncertain",
    "source_document": "source_document",
    "source_link": "source_url",
}

# The filters of the change list: the venue, the line's classifying columns it codes, whether
# the record the change leads to is a standard rate, and its display, price band, tapes, tier.
CHANGE_FILTERS: Final = tuple(
    name for name, column in queries.RESULT_FILTERS.items()
    if column in ("exchange", "standard", *DIMENSION_COLUMNS) or column in CLASSED
)  # fmt: skip
CHANGE_NAMES: Final = pa.array(CHANGE_TYPES)
SIDES: Final = ("before", "after")


def fee_line(request: Request) -> Response:
    """The line's identity and its records, oldest first (404: no such line; 403: a venue
    outside the key's scope)."""
    call, account, query = exchange_request(request)
    query.check()
    dataset = call.dataset
    line_rows = dataset.line_records(request.path_params["line_id"])
    if line_rows is None:
        raise NotFound("Fee line not found.")
    line = {name: line_rows[0][column] for name, column in LINE_FIELDS.items()}
    if not account.may_see(line["exchange_name"]):
        raise Forbidden(HIDDEN_DATA)
    records = [_record(row) for row in line_rows]
    return answer(call, line | {"records": records}, {"record_count": len(records)})


def fee_changes(request: Request) -> Response:
    """Every change of the matching lines in effective-date order, a page at a time (or all of
    them, as a download)."""
    call, account, query = exchange_request(request)
    dataset = call.dataset
    values = vocabulary_filters(query, CHANGE_FILTERS)
    named = venue_codes(query, dataset, account)
    first, last = query.window()
    types = query.get("change_type")
    descending = query.get("order_dir") == "desc"
    size, number = query.page()
    kind = query.get("format")
    query.check()
    refuse_hidden(named, account)
    selection = queries.Selection(
        venues=named if named is not None else scope(dataset, account), values=values
    )
    chosen = dataset.change_filter(selection, types, first, last)
    kind = export.wanted_format(kind, request.headers.get("accept", ""))
    if kind != "json":
        chunks = dataset.changes_ordered(chosen, descending, export.BATCH_ROWS)
        name = f"fee-changes-{dataset.version_id}"
        return export.download(_change_batches(dataset, chunks), kind, name)
    total, entries = dataset.changes_page(chosen, descending, size * number, size)
    items = [_change(row) for row in _change_table(dataset, entries).to_pylist()]
    return answer(call, items, page_meta(total, size, number))


def _change_table(dataset: Dataset, entries: Array) -> pa.Table:
    """The changes at `entries` of the change list, flat: the line's identity, the change's
    type and day, then each field of the record before and after it (`before_<field>`,
    `after_<field>`; nulls where there is none), as a download carries them."""
    changes, records = dataset.change_sides(entries)
    sides = dict(zip(SIDES, records, strict=True))
    # A line's identity is the same on both sides; a side with no record is a row of nulls.
    columns: dict[str, Any] = {
        name: pc.coalesce(sides["after"][column], sides["before"][column])
        for name, column in LINE_FIELDS.items()
    }
    columns["change_type"] = CHANGE_NAMES.take(pa.array(changes["type"].astype(np.int64) - 1))
    columns["effective_date"] = pa.array(changes["day"], pa.int32()).cast(pa.date32())
    for side, records in sides.items():
        columns |= {f"{side}_{name}": records[column] for name, column in RECORD_FIELDS.items()}
    return pa.table(columns)


def _change_batches(dataset: Dataset, chunks: Iterable[Array]) -> Iterator[pa.RecordBatch]:
    empty = True
    for entries in chunks:
        empty = False
        yield from _change_table(dataset, entries).to_batches()
    if empty:  # still one (empty) batch, so a download always carries its columns
        schema = _change_table(dataset, np.empty(0, np.int64)).schema
        yield pa.RecordBatch.from_pylist([], schema=schema)


def _change(row: dict[str, Any]) -> dict[str, Any]:
    """A change as JSON answers it: the line, the change, and the records before and after it
    (each null when there is none)."""
    item = {name: row[name] for name in LINE_FIELDS}
    item |= {"change_type": row["change_type"], "effective_date": row["effective_date"]}
    for side in SIDES:
        record = {name: row[f"{side}_{name}"] for name in RECORD_FIELDS}
        item[side] = record if record["record_id"] is not None else None
    return item


def _record(row: dict[str, Any]) -> dict[str, Any]:
    return {name: row[column] for name, column in RECORD_FIELDS.items()}
