"""The API, declared once: each endpoint's path, handler, OpenAPI operation and parameters.

The front door's dispatch table (`table`), the query parameters each handler accepts and how
each reads (its type, allowed values, bounds and default: `service.endpoints.params.Parameter`,
which the route that matched hands the handler) and the OpenAPI document's paths and parameter
lists (`document`) are all made from `ENDPOINTS`. What a declaration names stands in
`service/operations.json`: each operation's tags, summary, description, security and responses
by `operationId`, and the components (parameters, schemas, responses, headers) they refer to,
but for the closed lists the code holds, which `service.closed_lists` writes in.
`service/openapi.json`, which the service serves, is written from the two by `make openapi`
(`python -m service.api`); `tests/test_openapi.py` fails when it is stale.

Adding an endpoint: a handler, one `Endpoint` below, its operation (and any new parameter) in
`operations.json`, then `make openapi`.
"""

import inspect
import json
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

from starlette.requests import Request
from starlette.responses import Response

from service import closed_lists
from service.edge.dispatch import Handler, PathTable, Route
from service.endpoints import (
    compare,
    estimates,
    exchanges,
    health,
    history,
    results,
    supplier_data,
    suppliers,
)
from service.endpoints.params import Parameter
from service.urls import API_PREFIX, OPENAPI_PATH, PREFIXES

OPERATIONS_FILE: Final = Path(__file__).with_name("operations.json")
OPENAPI_FILE: Final = Path(__file__).with_name("openapi.json")
# operations.json with the closed lists the code holds written in (`service.closed_lists`).
SOURCE: Final[dict[str, Any]] = closed_lists.filled(
    json.loads(OPERATIONS_FILE.read_text(encoding="utf-8"))
)
PARAMETERS: Final[dict[str, dict[str, Any]]] = SOURCE["components"]["parameters"]
SCHEMAS: Final[dict[str, dict[str, Any]]] = SOURCE["components"]["schemas"]


@dataclass(frozen=True)
class Endpoint:
    """One endpoint. `path` is as documented after `/api/v1` (a listing's ends in `/`); it
    answers under both version prefixes, with and without the slash, to GET and HEAD (or to
    its `method` alone, POST). A `prefixed=False` path (the probes) answers at the root, as
    written."""

    path: str
    handler: Handler | None  # None: the OpenAPI document itself (`routes` serves the file)
    operation: str  # its `operationId` in operations.json
    parameters: tuple[str, ...] = ()  # the components it takes, in the documented order
    prefixed: bool = True
    method: str = "GET"  # GET (HEAD too), or POST for a question sent as a body
    # A plain function that answers from memory in microseconds, reading only the path, the
    # query, the headers and the call: run on the event loop, and made at once by the
    # connection even when its answer is not cached (`FrontDoor.at_once`).
    quick: bool = False

    @property
    def documented(self) -> str:
        return API_PREFIX + self.path if self.prefixed else self.path

    @property
    def query(self) -> dict[str, Parameter]:
        """How each query parameter it takes reads, by name, in the documented order."""
        declared = (PARAMETERS[component] for component in self.parameters)
        return {
            component["name"]: Parameter.of(component, SCHEMAS)
            for component in declared
            if component["in"] == "query"
        }


SUPPLIER = ("SupplierName",)
WINDOW = ("StartDate", "EndDate")
TERMS = ("FeeTypeTerm", "FeeCategoryTerm", "ActionTerm", "ParticipantTerm")
DAY = ("AsOf", "MaxAgeDays")
CONDITIONAL = ("IfNoneMatch",)
VENUES = ("ExchangeNameFilter",)
LINE = ("FeeCategoryFilter", "FeeActionFilter", "FeeParticipantFilter")
CLASSIFICATION = (
    "FeeSymbolClassificationFilter", "FeeSymbolTypeFilter", "FeeTradeTypeFilter",
)  # fmt: skip
PROVENANCE = ("SourceKindFilter", "DateBasisFilter", "UncertainFilter", "StandardFilter")
# What a fill must match to pay a line (schema 6): filters of the results, changes and compare.
DIMENSIONS = ("FeeCodeFilter", "DisplayFilter", "PriceBandFilter", "TapeFilter", "TierFilter")
PAGE = ("PageSize", "PageNumber")
ORDER = ("OrderBy", "OrderDir")
INCLUDED = ("IncludeSource", "IncludeFootnotes", "IncludeDefinitions")

# The whole URL space of the API, top to bottom.
ENDPOINTS: Final = (
    Endpoint("/suppliers/{supplier_name}/participants", suppliers.participants,
             "listSupplierParticipants", (*SUPPLIER, *WINDOW, *CONDITIONAL), quick=True),
    Endpoint("/suppliers/{supplier_name}/fee-categories", suppliers.fee_categories,
             "listSupplierFeeCategories", (*SUPPLIER, *WINDOW, *CONDITIONAL), quick=True),
    Endpoint("/suppliers/{supplier_name}/actions", suppliers.actions,
             "listSupplierActions", (*SUPPLIER, *WINDOW, *CONDITIONAL), quick=True),
    Endpoint("/suppliers/{supplier_name}/fee-types", suppliers.fee_types,
             "listSupplierFeeTypes", (*SUPPLIER, *WINDOW, *CONDITIONAL), quick=True),
    Endpoint("/suppliers/{supplier_name}/date-ranges", suppliers.date_ranges,
             "listSupplierDateRanges", (*SUPPLIER, *CONDITIONAL), quick=True),
    Endpoint("/suppliers/{supplier_name}/data", supplier_data.supplier_data, "getSupplierData",
             (*SUPPLIER, *TERMS, *WINDOW, *DAY, "Offset", "Limit", *CONDITIONAL)),
    Endpoint("/suppliers/{supplier_name}/data/count", supplier_data.supplier_data_count,
             "countSupplierData", (*SUPPLIER, *TERMS, *WINDOW, *DAY, *CONDITIONAL)),
    Endpoint("/exchanges/", exchanges.list_exchanges, "listExchanges", CONDITIONAL),
    Endpoint("/exchanges/{exchange_name}", exchanges.exchange_detail, "getExchange",
             ("ExchangeName", *DAY, *CONDITIONAL)),
    Endpoint("/fee-schedule-results/", results.list_results, "listFeeScheduleResults",
             (*VENUES, "FeeTypeFilter", *LINE, *CLASSIFICATION, *PROVENANCE, *DIMENSIONS,
              "ResultsStartDate",
              "ResultsEndDate", "LatestOnly", *DAY, *ORDER, *PAGE, *INCLUDED, "Format",
              *CONDITIONAL)),
    # `filters` and `versions/...` are taken before `{record_id}`: a literal segment comes
    # before a parameter (`service.edge.dispatch`).
    Endpoint("/fee-schedule-results/filters", results.filters, "getFeeScheduleFilters",
             (*VENUES, *DAY, *CONDITIONAL)),
    Endpoint("/fee-schedule-results/versions/{version_id}", results.results_by_version,
             "getFeeScheduleResultsByVersion",
             ("VersionIdPath", *PAGE, *ORDER, *INCLUDED, *CONDITIONAL)),
    Endpoint("/fee-schedule-results/{record_id}", results.result_by_id, "getFeeScheduleResult",
             ("RecordIdPath", *INCLUDED, *CONDITIONAL)),
    Endpoint("/fee-lines/{line_id}", history.fee_line, "getFeeLine",
             ("LineIdPath", *CONDITIONAL)),
    Endpoint("/fee-changes/", history.fee_changes, "listFeeChanges",
             (*VENUES, "FeeTypeFilter", *LINE, "StandardFilter", *DIMENSIONS, "ChangeStartDate",
              "ChangeEndDate", "ChangeTypeFilter", "ChangeOrderDir", *PAGE, "Format",
              *CONDITIONAL)),
    Endpoint("/compare/", compare.compare, "compareVenues",
             ("CompareFeeType", "CompareAsOf", "CompareMaxAgeDays", "CompareUnit", *VENUES, *LINE,
              *CLASSIFICATION, *PROVENANCE, *DIMENSIONS, "Format", *CONDITIONAL)),
    Endpoint("/fee-estimates", estimates.fee_estimates, "estimateFees", ("EstimateFormat",),
             method="POST"),
    Endpoint(OPENAPI_PATH, None, "getOpenApiDocument"),
    # The probes an orchestrator calls, at the root, without a key.
    Endpoint("/healthz", health.healthz, "healthz", prefixed=False),
    Endpoint("/readyz", health.readyz, "readyz", prefixed=False),
)  # fmt: skip


def table(endpoints: Sequence[Endpoint] = ENDPOINTS) -> PathTable:
    """Every declared endpoint's paths, for the front door's dispatch (`service.edge.dispatch`)."""
    openapi = OPENAPI_FILE.read_bytes()

    async def serve_document(request: Request) -> Response:
        """The OpenAPI 3.1 document (no key needed: it describes, it holds no data)."""
        return Response(openapi, media_type="application/json")

    paths = PathTable()
    for endpoint in endpoints:
        handler = endpoint.handler or serve_document
        bare = endpoint.path.rstrip("/")
        route = Route(
            template=bare if endpoint.prefixed else endpoint.path,
            handler=handler,
            parameters=endpoint.query,
            methods=("GET", "HEAD") if endpoint.method == "GET" else (endpoint.method,),
            on_loop=endpoint.quick or inspect.iscoroutinefunction(handler),
            quick=endpoint.quick,
        )
        written = (
            [prefix + bare + slash for prefix in PREFIXES for slash in ("", "/")]
            if endpoint.prefixed
            else [endpoint.path]
        )
        for path in written:
            paths.add(path, route)
    return paths


def document(
    endpoints: Sequence[Endpoint] = ENDPOINTS, source: dict[str, Any] = SOURCE
) -> dict[str, Any]:
    """The OpenAPI document: `source`'s parts (operations.json), with the paths and each
    operation's parameters from `endpoints`."""
    paths: dict[str, Any] = {}
    for endpoint in endpoints:
        # In the document's order: tags, operationId, the prose and security, parameters,
        # responses.
        operation = source["operations"][endpoint.operation]
        described = {"tags": operation["tags"], "operationId": endpoint.operation}
        described |= {key: value for key, value in operation.items()
                      if key not in ("tags", "requestBody", "responses")}  # fmt: skip
        if endpoint.parameters:
            described["parameters"] = [
                {"$ref": f"#/components/parameters/{name}"} for name in endpoint.parameters
            ]
        if "requestBody" in operation:
            described["requestBody"] = operation["requestBody"]
        described["responses"] = operation["responses"]
        paths[endpoint.documented] = {endpoint.method.lower(): described}
    parts = {key: value for key, value in source.items() if key != "operations"}
    return {**{key: parts[key] for key in ("openapi", "info", "servers", "tags")}, "paths": paths,
            "components": parts["components"]}  # fmt: skip


def rendered() -> str:
    """The document as `service/openapi.json` holds it."""
    return json.dumps(document(), indent=2, ensure_ascii=False) + "\n"


if __name__ == "__main__":  # `make openapi`
    OPENAPI_FILE.write_text(rendered(), encoding="utf-8")
    print(f"wrote {OPENAPI_FILE}", file=sys.stderr)
