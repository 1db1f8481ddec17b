"""The exchange family's detailed data: fee-schedule results (list, one, by version, filters).

Paths and shapes follow the public service ours is compatible with (`anchor-api.md`, G3); the
semantics are ours and documented in the README: effective-period windows, numeric amounts,
a stable order, and 422 answers that list every bad parameter.
"""

from collections.abc import Iterator, Mapping, Sequence
from datetime import UTC, date, datetime

import pyarrow as pa
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import Response

from service.dataset import queries
from service.dataset.venues import DETAIL_DIMENSIONS
from service.dataset.version import Dataset
from service.edge.call import Call
from service.endpoints import export
from service.endpoints.envelope import answer, page_meta
from service.endpoints.exchange_family import (
    HIDDEN_DATA,
    refuse_hidden,
    scope,
    venue_codes,
    vocabulary_filters,
)
from service.endpoints.params import Query, exchange_request
from service.errors import Forbidden, NotFound

INCLUDE_PARAMS = ("include_source", "include_footnotes", "include_definitions")
# `as_of` asks for one day; these ask for a window, or for the latest: not both.
NOT_WITH_AS_OF = ("start_date", "end_date", "latest_only")


def list_results(request: Request) -> Response:
    """Every matching record, a page at a time (or all of them, as a download)."""
    call, account, query = exchange_request(request)
    dataset = call.dataset
    filters = vocabulary_filters(query, tuple(queries.RESULT_FILTERS))
    named = venue_codes(query, dataset, account)
    start, end = query.window()
    latest = query.get("latest_only")
    day = _as_of(query) or ((end or datetime.now(UTC).date()) if latest else None)
    max_age = query.max_age_days(day)
    kind = query.get("format")
    page = _Page(query, day)
    query.check()
    refuse_hidden(named, account)
    selection = queries.Selection(
        venues=named if named is not None else scope(dataset, account),
        values=filters,
        start_date=start,
        end_date=end,
        in_force_on=day,
        max_age_days=max_age,
    )
    kind = export.wanted_format(kind, request.headers.get("accept", ""))
    if kind == "json":
        return _page_response(call, dataset, selection, page)
    name = f"fee-schedule-results-{dataset.version_id}"
    return export.download(_every_match(dataset, selection, page, kind), kind, name)


def result_by_id(request: Request) -> Response:
    call, account, query = exchange_request(request)
    included = _included(query)
    query.check()
    record = call.dataset.record(request.path_params["record_id"], included)
    if record is None:
        raise NotFound("Fee schedule result not found.")
    if not account.may_see(record["exchange_name"]):
        raise Forbidden(HIDDEN_DATA)
    return answer(call, record, {"record_count": 1})


def results_by_version(request: Request) -> Response:
    """The records a version first published (those still present in the current data)."""
    call, account, query = exchange_request(request)
    page = _Page(query)
    query.check()
    dataset = call.dataset
    version_id = request.path_params["version_id"]
    venues = dataset.versions.get(version_id)
    if venues is None:
        raise NotFound("Version not found.")
    if not any(account.may_see(code) for code in venues):
        raise Forbidden(HIDDEN_DATA)
    selection = queries.Selection(venues=scope(dataset, account), version_id=version_id)
    return _page_response(call, dataset, selection, page)


async def filters(request: Request) -> Response:
    """The values of every filter dimension across the key's venues (or the named ones), or
    across their records in force on one day (`as_of`)."""
    call, account, query = exchange_request(request)
    dataset = call.dataset
    named = venue_codes(query, dataset, account)
    as_of = query.get("as_of")
    max_age = query.max_age_days(as_of)
    query.check()
    refuse_hidden(named, account)
    codes = named or dataset.visible(account)
    if as_of is None:
        venues = [dataset.venues[code] for code in codes if dataset.venues[code].records]
        records = sum(venue.records for venue in venues)
        values: Mapping[str, Sequence[str]] = {
            "exchange": sorted(venue.code for venue in venues),
            **{
                dimension: sorted({value for venue in venues for value in venue.values[dimension]})
                for dimension in DETAIL_DIMENSIONS
            },
        }
    else:  # the index's arrays: a thread, so the event loop never waits on them
        holding = await run_in_threadpool(dataset.in_force, codes, as_of, max_age)
        records, values = holding.count, holding.values
    data = {"exchange_names": list(values["exchange"])}
    for dimension in DETAIL_DIMENSIONS:
        key = dimension if dimension in ("fee_types", "fee_categories") else f"fee_{dimension}"
        data[key] = list(values[dimension])
    return answer(call, data, {"record_count": records})


class _Page:
    def __init__(self, query: Query, day: date | None = None) -> None:
        self.size, self.number = query.page()
        self.order_by = query.get("order_by")
        self.order_dir = query.get("order_dir")
        self.included = _included(query, day)


def _page_response(
    call: Call, dataset: Dataset, selection: queries.Selection, page: _Page
) -> Response:
    """One page of the matches, and how many there are."""
    order = (page.order_by, page.order_dir)
    offset = page.size * page.number
    total, items = dataset.results_page(selection, order, offset, page.size, page.included)
    return answer(call, items, page_meta(total, page.size, page.number))


def _every_match(
    dataset: Dataset, selection: queries.Selection, page: _Page, kind: str
) -> Iterator[pa.RecordBatch]:
    """Every match in the page order, as Arrow batches shaped for the download `kind`."""
    order = (page.order_by, page.order_dir)
    return dataset.results_batches(selection, order, kind, page.included, export.BATCH_ROWS)


def _as_of(query: Query) -> date | None:
    """The day whose records in force are asked for; naming a window or the latest too is a
    problem of each parameter given with it."""
    as_of: date | None = query.get("as_of")
    if query.values("as_of") is not None:
        for name in NOT_WITH_AS_OF:
            if query.values(name) is not None:
                query.fail(name, "cannot be combined with as_of")
    return as_of


def _included(query: Query, day: date | None = None) -> queries.Included:
    """The optional parts a request asks for, and the day its answer is for. The compatible
    service answers either relationships flag with both lists (`include_footnotes` alone
    still lists definitions)."""
    source, footnotes, definitions = (query.get(name) for name in INCLUDE_PARAMS)
    return queries.Included(source=source, relationships=footnotes or definitions, day=day)
