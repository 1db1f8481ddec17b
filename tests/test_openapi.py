"""The OpenAPI document: served verbatim, structurally sound, and true to real responses.

Every real response in `CASES` must have a status and a media type the document lists for its
operation, and a JSON body that validates against the documented schema (a CSV or Parquet
download is checked for its media type and file name only). `#/components/...` references
resolve through a `referencing.Registry` that holds the whole document.
"""

import json
import re
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, NamedTuple
from urllib.parse import urlsplit

import httpx
import orjson
import pytest
from jsonschema import Draft202012Validator
from referencing import Registry
from referencing.jsonschema import DRAFT202012

from ingest.pipeline import IngestResult
from service import api
from service.api import ENDPOINTS, OPENAPI_FILE
from service.app import create_app
from service.settings import Settings
from tests.conftest import KEYS, LiveServer, account_key, exchange_headers, supplier_headers

DOCUMENT_URI = "urn:exchange-fees:openapi"
DOCUMENT: dict[str, Any] = json.loads(OPENAPI_FILE.read_text(encoding="utf-8"))
REGISTRY: Registry[Any] = Registry().with_resource(
    DOCUMENT_URI, DRAFT202012.create_resource(DOCUMENT)
)
HTTP_METHODS = ("get", "put", "post", "delete", "options", "head", "patch", "trace")
UNTRIGGERABLE = {"500", "503"}  # no failure or empty warehouse in the shared fixture
JSON = "application/json"
DOWNLOADS = {"text/csv", "application/vnd.apache.parquet"}  # 200 of the two lists only
# Collections are documented with a trailing slash, as the compatible service declares them.


# ------------------------------------------------------------------------------ helpers


def escape(token: str) -> str:
    """A JSON pointer token for a key (`/` and `~` escaped)."""
    return token.replace("~", "~0").replace("/", "~1")


def walk(node: Any, location: str = "") -> Iterator[tuple[str, Any]]:
    """Every node of a JSON value with its JSON pointer, depth first."""
    yield location, node
    if isinstance(node, dict):
        children: Iterator[tuple[str, Any]] = iter(node.items())
    elif isinstance(node, list):
        children = ((str(index), child) for index, child in enumerate(node))
    else:
        return
    for key, child in children:
        yield from walk(child, f"{location}/{escape(key)}")


def lookup(location: str) -> Any:
    """The node of the document at a JSON pointer (KeyError or IndexError when absent)."""
    node: Any = DOCUMENT
    for token in location.split("/")[1:]:
        token = token.replace("~1", "/").replace("~0", "~")
        node = node[int(token)] if isinstance(node, list) else node[token]
    return node


def follow(location: str) -> tuple[str, Any]:
    """A response, parameter or example object and its location, after any `$ref`s."""
    node = lookup(location)
    while isinstance(node, dict) and "$ref" in node:
        location = node["$ref"].removeprefix("#")
        node = lookup(location)
    return location, node


def schema_errors(instance: Any, schema_location: str) -> list[str]:
    """Why `instance` does not match the schema at `schema_location` (empty when it does)."""
    validator = Draft202012Validator(
        {"$ref": f"{DOCUMENT_URI}#{schema_location}"},
        registry=REGISTRY,
        format_checker=Draft202012Validator.FORMAT_CHECKER,
    )
    return [
        f"{error.json_path}: {error.message}"
        for error in sorted(validator.iter_errors(instance), key=lambda e: e.json_path)
    ]


def documented_path(url_path: str) -> str:
    """The documented template a request path answers to: `/v1/...` is `/api/v1/...`, and a
    trailing slash does not matter. A literal segment wins over a parameter, as in the app's
    routes (`.../filters` is not a `{record_id}`)."""
    if url_path.startswith("/v1/"):
        url_path = "/api" + url_path
    segments = url_path.rstrip("/").split("/")
    matches: list[str] = []
    for template in DOCUMENT["paths"]:
        expected = template.rstrip("/").split("/")
        if len(expected) == len(segments) and all(
            want == got or (want.startswith("{") and want.endswith("}"))
            for want, got in zip(expected, segments, strict=True)
        ):
            matches.append(template)
    if not matches:
        raise AssertionError(f"{url_path} matches no documented path")
    return min(matches, key=lambda template: template.count("{"))


class Operation(NamedTuple):
    template: str
    method: str  # lower case, as in the document

    @property
    def name(self) -> str:
        return f"{self.method.upper()} {self.template}"

    @property
    def location(self) -> str:
        return f"/paths/{escape(self.template)}/{self.method}"

    @property
    def responses(self) -> dict[str, Any]:
        responses: dict[str, Any] = lookup(self.location)["responses"]
        return responses


def operations() -> Iterator[Operation]:
    """Every operation in the document."""
    for template, item in DOCUMENT["paths"].items():
        for method in HTTP_METHODS:
            if method in item:
                yield Operation(template, method)


def operation_for(method: str, url_path: str) -> Operation:
    """The documented operation a request is answered by.

    A method the path does not document is answered 405, and that 405 is documented on the
    path's own operation (its GET, or its POST: OpenAPI has no place for "any other method")."""
    template = documented_path(url_path)
    item = DOCUMENT["paths"][template]
    documented = method.lower() in item
    return Operation(template, method.lower() if documented else next(iter(item)))


def media_types() -> Iterator[tuple[str, dict[str, Any]]]:
    """Every object that pairs a `schema` with examples: media types, parameters, headers."""
    holder = re.compile(r"/(content|parameters|headers)/[^/]+$")
    for location, node in walk(DOCUMENT):
        if holder.search(location) and isinstance(node, dict) and "schema" in node:
            yield location, node


def examples() -> Iterator[tuple[str, str]]:
    """(example location, schema location) for every example in the document."""
    for location, holder in media_types():
        schema = f"{location}/schema"
        if "example" in holder:
            yield f"{location}/example", schema
        for name in holder.get("examples", {}):
            example, _ = follow(f"{location}/examples/{name}")
            yield f"{example}/value", schema


def schemas() -> Iterator[str]:
    """The location of every schema the document defines or uses directly."""
    yield from (f"/components/schemas/{name}" for name in DOCUMENT["components"]["schemas"])
    yield from (f"{location}/schema" for location, _ in media_types())


# ------------------------------------------------------------------------------ the document


@pytest.mark.parametrize("path", ["/api/v1/openapi.json", "/v1/openapi.json"])
def test_the_served_document_is_the_file(client: httpx.Client, path: str) -> None:
    response = client.get(path)
    assert response.status_code == 200
    assert response.headers["content-type"] == "application/json"
    assert response.content == OPENAPI_FILE.read_bytes()


def test_the_file_is_pretty_printed_json() -> None:
    text = OPENAPI_FILE.read_text(encoding="utf-8")
    assert text == json.dumps(DOCUMENT, indent=2, ensure_ascii=False) + "\n"


def test_the_document_is_openapi_3_1() -> None:
    assert DOCUMENT["openapi"] == "3.1.0"
    # No jsonSchemaDialect: the default (OpenAPI 3.1's base dialect) is the one Swagger UI
    # supports; any other value puts a warning box atop /docs.
    assert "jsonSchemaDialect" not in DOCUMENT
    assert {"title": "Exchange fee data service", "version": "1.0.0"}.items() <= DOCUMENT[
        "info"
    ].items()
    assert DOCUMENT["servers"][0]["url"] == "http://127.0.0.1:8000"
    assert set(DOCUMENT["components"]["securitySchemes"]) == {
        "bearerAuth",
        "apiKeyHeader",
        "rulebookKeyHeader",
    }


def test_the_file_is_what_the_declarations_make() -> None:
    """`service/openapi.json` is written by `make openapi` from `service.api` and
    `service/operations.json`; after a change to either, this fails until it is rewritten."""
    assert OPENAPI_FILE.read_text(encoding="utf-8") == api.rendered()


def test_the_document_has_every_route_of_the_app(
    fixture_version: IngestResult, accounts_file: Path
) -> None:
    assert list(DOCUMENT["paths"]) == [endpoint.documented for endpoint in ENDPOINTS]
    methods = {endpoint.documented: endpoint.method.lower() for endpoint in ENDPOINTS}
    assert {operation.template: operation.method for operation in operations()} == methods
    # Starlette routes only the pages and the scrape: the API's paths are the front door's.
    settings = Settings(data_dir=fixture_version.version_dir.parent.parent,
                        accounts_file=accounts_file)  # fmt: skip
    served = {route.path for route in create_app(settings).app.routes}
    assert {path for path in served
            if not path.startswith(("/docs", "/explore", "/metrics"))} == set()  # fmt: skip


@pytest.mark.parametrize("operation", list(operations()), ids=lambda o: o.name)
def test_every_operation_is_complete(operation: Operation) -> None:
    spec = lookup(operation.location)
    for key in ("operationId", "summary", "description", "security", "responses"):
        assert key in spec, f"{key} missing"
    assert "200" in operation.responses
    for status in operation.responses:
        assert re.fullmatch(r"[1-5][0-9]{2}", status)
        _, response = follow(f"{operation.location}/responses/{status}")
        assert response["description"]
        if status == "304":
            assert "content" not in response  # a 304 has no body
            continue
        assert JSON in response["content"]
        others = set(response["content"]) - {JSON}
        assert others <= (DOWNLOADS if status == "200" else set()), others
    schemes = DOCUMENT["components"]["securitySchemes"]
    for requirement in spec["security"]:
        assert set(requirement) <= set(schemes)
    parameters = [
        follow(f"{operation.location}/parameters/{index}")[1]
        for index in range(len(spec.get("parameters", [])))
    ]
    in_path = {parameter["name"] for parameter in parameters if parameter["in"] == "path"}
    assert in_path == set(re.findall(r"\{(\w+)\}", operation.template))


def test_operation_ids_are_unique() -> None:
    ids = [lookup(operation.location)["operationId"] for operation in operations()]
    assert len(ids) == len(set(ids))


def test_every_ref_resolves() -> None:
    refs = [
        (location, node["$ref"])
        for location, node in walk(DOCUMENT)
        if isinstance(node, dict) and isinstance(node.get("$ref"), str)
    ]
    assert refs
    unresolved = []
    for location, ref in refs:
        try:
            assert ref.startswith("#/")
            lookup(ref.removeprefix("#"))
        except (AssertionError, KeyError, IndexError, ValueError):
            unresolved.append(f"{location}: {ref}")
    assert unresolved == []


@pytest.mark.parametrize("location", list(schemas()))
def test_every_schema_is_valid_draft_2020_12(location: str) -> None:
    Draft202012Validator.check_schema(lookup(location))


@pytest.mark.parametrize(
    ("example", "schema"), list(examples()), ids=[example for example, _ in examples()]
)
def test_every_example_matches_its_schema(example: str, schema: str) -> None:
    assert schema_errors(lookup(example), schema) == []


# ------------------------------------------------------------------------------ real responses


class Case(NamedTuple):
    method: str
    url: str  # path and query, as sent once `{version_id}`, `{record_id}`, `{line_id}` are filled
    headers: dict[str, str]
    status: int
    media_type: str = JSON
    server: str = "client"  # the fixture that answers it
    body: bytes | None = None  # a POST's question


CSV, PARQUET = "text/csv", "application/vnd.apache.parquet"
OUT_OF_SCOPE_KEY = "test-key-cboe-only-0123456789abcdef"  # only on `out_of_scope_client`
LIMITED_KEY = "test-key-one-a-minute-0123456789abcdef"  # only on `limited_client`
SUPPLIER = supplier_headers()
EXCHANGE = exchange_headers()
NYSE_ONLY = supplier_headers(KEYS["nyse"])
EXCHANGE_NYSE = exchange_headers(KEYS["nyse"])
OUT_OF_SCOPE = exchange_headers(OUT_OF_SCOPE_KEY)
NO_KEY: dict[str, str] = {}
SUPPLIERS = "/api/v1/suppliers"
RESULTS = "/api/v1/fee-schedule-results/"
VERSION = RESULTS + "versions/{version_id}"  # the fixture's version
RECORD = RESULTS + "{record_id}"  # a nasdaq record
LINE = "/api/v1/fee-lines/{line_id}"  # that record's fee line
CHANGES = "/api/v1/fee-changes/"
COMPARE = "/api/v1/compare/"

# (name, URL, the headers that carry a key) of every operation but the OpenAPI document.
OPERATIONS: list[tuple[str, str, Callable[..., dict[str, str]]]] = [
    ("participants", f"{SUPPLIERS}/nasdaq/participants", supplier_headers),
    ("fee-categories", f"{SUPPLIERS}/nasdaq/fee-categories", supplier_headers),
    ("actions", f"{SUPPLIERS}/nasdaq/actions", supplier_headers),
    ("fee-types", f"{SUPPLIERS}/nasdaq/fee-types", supplier_headers),
    ("date-ranges", f"{SUPPLIERS}/nasdaq/date-ranges", supplier_headers),
    ("data", f"{SUPPLIERS}/nasdaq/data", supplier_headers),
    ("data-count", f"{SUPPLIERS}/nasdaq/data/count", supplier_headers),
    ("exchanges", "/api/v1/exchanges/", exchange_headers),
    ("exchange", "/api/v1/exchanges/nasdaq", exchange_headers),
    ("results", RESULTS, exchange_headers),
    ("filters", f"{RESULTS}filters", exchange_headers),
    ("by-version", VERSION, exchange_headers),
    ("result", RECORD, exchange_headers),
    ("line", LINE, exchange_headers),
    ("changes", CHANGES, exchange_headers),
    ("compare", f"{COMPARE}?fee_type=equity", exchange_headers),
]
MANY_HEADERS = {f"x-filler-{number}": "v" for number in range(101)}
# POST /fee-estimates: a body of fills (JSON unless said), at every status it documents.
ESTIMATES = "/api/v1/fee-estimates"
FILLS = orjson.dumps({"fills": [
    {"exchange_name": "nasdaq", "trade_date": "2024-01-02", "quantity": 100, "price": 10,
     "fee_action": "make"},
    {"exchange_name": "nowhere", "trade_date": "2024-01-02", "quantity": 1, "price": 1,
     "fee_action": "take"},
]})  # fmt: skip
AS_JSON = {"content-type": "application/json"}
ESTIMATE_CASES = {
    "estimates": Case("POST", ESTIMATES, {**exchange_headers(), **AS_JSON}, 200, body=FILLS),
    "estimates-csv": Case(
        "POST", f"{ESTIMATES}?format=csv", {**exchange_headers(), "content-type": "text/csv"},
        200, CSV, body=b"exchange_name,trade_date,quantity,price,fee_action\n"
        b"nasdaq,2024-01-02,1,1,take\n",
    ),
    "estimates-no-key": Case("POST", ESTIMATES, AS_JSON, 401, body=FILLS),
    "estimates-get": Case("GET", ESTIMATES, exchange_headers(), 405),
    "estimates-too-many": Case(
        "POST", ESTIMATES, {**exchange_headers(), **AS_JSON}, 413,
        body=orjson.dumps({"fills": [{}] * 100_001}),
    ),
    "estimates-xml": Case(
        "POST", ESTIMATES, {**exchange_headers(), "content-type": "application/xml"}, 415,
        body=b"<fills/>",
    ),
    "estimates-unknown-field": Case(
        "POST", ESTIMATES, {**exchange_headers(), **AS_JSON}, 422,
        body=b'{"fills": [{"quantty": 1}]}',
    ),
    "estimates-rate-limited": Case(
        "POST", ESTIMATES, {**exchange_headers(LIMITED_KEY), **AS_JSON}, 429,
        server="limited_client", body=FILLS,
    ),
    "estimates-malformed": Case(
        "POST", ESTIMATES, {**exchange_headers(), **AS_JSON, "X-Junk": "\x7f"}, 400, body=FILLS
    ),
    "estimates-target-too-long": Case(
        "POST", f"{ESTIMATES}?x={'a' * 8200}", {**exchange_headers(), **AS_JSON}, 414, body=FILLS
    ),
    "estimates-too-many-headers": Case(
        "POST", ESTIMATES, {**exchange_headers(), **AS_JSON, **MANY_HEADERS}, 431, body=FILLS
    ),
}  # fmt: skip
KEYLESS: list[tuple[str, str, Callable[..., dict[str, str]]]] = [
    ("openapi", "/api/v1/openapi.json", dict),
    ("healthz", "/healthz", dict),
    ("readyz", "/readyz", dict),
]

CASES = {
    # 200: each endpoint, with and without a date window, under every path form
    "participants": Case("GET", f"{SUPPLIERS}/nasdaq/participants", SUPPLIER, 200),
    "participants-window": Case(
        "GET",
        f"{SUPPLIERS}/nasdaq/participants?start_date=2020-01-01&end_date=2021-12-31",
        SUPPLIER,
        200,
    ),
    "participants-by-display-name": Case(
        "GET", f"{SUPPLIERS}/Nasdaq%20Stock%20Market/participants", SUPPLIER, 200
    ),
    "fee-categories": Case("GET", f"{SUPPLIERS}/nasdaq/fee-categories", SUPPLIER, 200),
    "fee-categories-start-only": Case(
        "GET", f"{SUPPLIERS}/memx/fee-categories?start_date=2021-01-01", SUPPLIER, 200
    ),
    "actions": Case("GET", f"{SUPPLIERS}/memx/actions", SUPPLIER, 200),
    "actions-window-in-gap": Case(
        "GET", f"{SUPPLIERS}/memx/actions?start_date=2021-02-01&end_date=2021-05-31", SUPPLIER, 200
    ),
    "actions-v1-alias-slash": Case("GET", "/v1/suppliers/NOM/actions/", SUPPLIER, 200),
    "fee-types": Case("GET", f"{SUPPLIERS}/nasdaq/fee-types", SUPPLIER, 200),
    "fee-types-end-only": Case(
        "GET", f"{SUPPLIERS}/nasdaq/fee-types?end_date=2020-06-30", SUPPLIER, 200
    ),
    "fee-types-venue-without-records": Case("GET", f"{SUPPLIERS}/cboe/fee-types", SUPPLIER, 200),
    "date-ranges": Case("GET", f"{SUPPLIERS}/nasdaq/date-ranges", SUPPLIER, 200),
    "date-ranges-with-gap": Case("GET", "/v1/suppliers/memx/date-ranges/", SUPPLIER, 200),
    "date-ranges-venue-without-records": Case(
        "GET", f"{SUPPLIERS}/cboe/date-ranges", SUPPLIER, 200
    ),
    "exchanges": Case("GET", "/api/v1/exchanges/", EXCHANGE, 200),
    "exchanges-scoped-key": Case("GET", "/api/v1/exchanges", exchange_headers(KEYS["nyse"]), 200),
    "exchanges-v1": Case("GET", "/v1/exchanges", EXCHANGE, 200),
    "openapi": Case("GET", "/api/v1/openapi.json", NO_KEY, 200),
    "openapi-v1": Case("GET", "/v1/openapi.json", NO_KEY, 200),
    "data": Case("GET", f"{SUPPLIERS}/nasdaq/data", SUPPLIER, 200),
    "data-every-filter": Case(
        "GET",
        f"{SUPPLIERS}/memx/data?fee_type=equity&fee_category=Market%20Data%20Fees"
        "&action=Routed%20%26%20Other&participant=All&start_date=2021-01-01&end_date=2022-01-01",
        SUPPLIER,
        200,
    ),
    "data-first-page": Case("GET", f"{SUPPLIERS}/nasdaq/data?limit=2", SUPPLIER, 200),
    "data-last-page": Case("GET", f"{SUPPLIERS}/nasdaq/data?offset=6&limit=2", SUPPLIER, 200),
    "data-past-the-end": Case("GET", f"{SUPPLIERS}/memx/data?offset=5", SUPPLIER, 200),
    "data-combined-term": Case(
        "GET", f"{SUPPLIERS}/memx/data?participant=Professional%20%26%20Other", SUPPLIER, 200
    ),
    "data-v1-alias-slash": Case("GET", "/v1/suppliers/NOM/data/?fee_type=option", SUPPLIER, 200),
    "data-venue-without-records": Case("GET", f"{SUPPLIERS}/cboe/data", SUPPLIER, 200),
    "data-count": Case("GET", f"{SUPPLIERS}/nasdaq/data/count", SUPPLIER, 200),
    "data-count-filters": Case(
        "GET", f"{SUPPLIERS}/nasdaq/data/count?fee_type=option&start_date=2020-01-01", SUPPLIER, 200
    ),
    "data-count-v1-slash": Case("GET", "/v1/suppliers/memx/data/count/", SUPPLIER, 200),
    "data-count-venue-without-records": Case("GET", f"{SUPPLIERS}/cboe/data/count", SUPPLIER, 200),
    "exchange": Case("GET", "/api/v1/exchanges/nasdaq", EXCHANGE, 200),
    "exchange-v1-alias-slash": Case("GET", "/v1/exchanges/nom/", EXCHANGE, 200),
    "exchange-scoped-key": Case("GET", "/api/v1/exchanges/NYSE", EXCHANGE_NYSE, 200),
    "exchange-alias-header": Case(
        "GET", "/api/v1/exchanges/memx", {"x-rulebook-api-access-key": KEYS["full"]}, 200
    ),
    "results": Case("GET", RESULTS, EXCHANGE, 200),
    "results-v1-no-slash": Case("GET", "/v1/fee-schedule-results", EXCHANGE, 200),
    "results-filtered": Case(
        "GET",
        f"{RESULTS}?exchange_name=NOM&exchange_name=memx&fee_type=equity&fee_action=make"
        "&fee_action=take&latest_only=true&order_by=amount&order_dir=asc&page_size=2&page_number=1",
        EXCHANGE,
        200,
    ),
    "results-every-filter-with-source": Case(
        "GET",
        f"{RESULTS}?fee_category=fees_and_rebates&fee_participant=firm&fee_participant=all"
        "&fee_symbol_classification=etf&fee_symbol_type=both&fee_trade_type=complex_order"
        "&start_date=2020-01-01&end_date=2025-12-31&include_source=TRUE",
        EXCHANGE,
        200,
    ),
    "results-past-the-end": Case("GET", f"{RESULTS}?page_number=100", EXCHANGE, 200),
    "results-as-the-sdk-sends-them": Case(
        "GET",
        f"{RESULTS}?order_by=created_on&order_dir=desc&page_size=20&page_number=0"
        "&include_footnotes=True&include_definitions=True",
        {"x-rulebook-api-access-key": KEYS["full"], "User-Agent": "rulebook-python/0.3.0"},
        200,
    ),
    "results-by-scraped-time": Case(
        "GET",
        f"{RESULTS}?order_by=scraped_time&order_dir=asc&include_definitions=true",
        EXCHANGE,
        200,
    ),
    "results-scoped-key": Case("GET", RESULTS, EXCHANGE_NYSE, 200),
    "results-format-wins-over-accept": Case(
        "GET", f"{RESULTS}?format=json", {**EXCHANGE, "Accept": CSV}, 200
    ),
    "results-csv": Case("GET", f"{RESULTS}?format=csv&include_source=true", EXCHANGE, 200, CSV),
    "results-parquet": Case("GET", f"{RESULTS}?format=parquet", EXCHANGE, 200, PARQUET),
    "results-accept-csv": Case("GET", RESULTS, {**EXCHANGE, "Accept": CSV}, 200, CSV),
    "results-accept-parquet": Case(
        "GET", f"{RESULTS}?exchange_name=nyse", {**EXCHANGE, "Accept": PARQUET}, 200, PARQUET
    ),
    "results-empty-csv": Case(
        "GET", f"{RESULTS}?exchange_name=cboe&format=csv", EXCHANGE, 200, CSV
    ),
    "filters": Case("GET", f"{RESULTS}filters", EXCHANGE, 200),
    "filters-named-v1-slash": Case(
        "GET",
        "/v1/fee-schedule-results/filters/?exchange_name=memx&exchange_name=NYSE",
        EXCHANGE,
        200,
    ),
    "filters-scoped-key": Case("GET", f"{RESULTS}filters", EXCHANGE_NYSE, 200),
    "filters-venue-without-records": Case(
        "GET", f"{RESULTS}filters?exchange_name=cboe", EXCHANGE, 200
    ),
    "by-version": Case("GET", VERSION, EXCHANGE, 200),
    "by-version-paged-with-source": Case(
        "GET",
        VERSION + "?page_size=1&page_number=2&order_by=exchange_name&order_dir=asc"
        "&include_source=true",
        EXCHANGE,
        200,
    ),
    "by-version-scoped-key": Case("GET", VERSION, EXCHANGE_NYSE, 200),
    "by-version-with-relationships": Case(
        "GET", VERSION + "?include_footnotes=true&order_by=created_on", EXCHANGE, 200
    ),
    "result": Case("GET", RECORD, EXCHANGE, 200),
    "result-with-source-v1-slash": Case(
        "GET", "/v1/fee-schedule-results/{record_id}/?include_source=true", EXCHANGE, 200
    ),
    "line": Case("GET", LINE, EXCHANGE, 200),
    "line-v1-slash": Case("GET", "/v1/fee-lines/{line_id}/", EXCHANGE, 200),
    "changes": Case("GET", CHANGES, EXCHANGE, 200),
    "changes-v1-no-slash": Case("GET", "/v1/fee-changes", EXCHANGE, 200),
    "changes-every-filter": Case(
        "GET",
        f"{CHANGES}?exchange_name=nasdaq&exchange_name=MEMX&fee_type=equity&fee_category="
        "fees_and_rebates&fee_action=make&fee_participant=all&start_date=2019-01-01"
        "&end_date=2030-12-31&change_type=added&change_type=changed&order_dir=desc"
        "&page_size=3&page_number=1",
        EXCHANGE,
        200,
    ),
    "changes-scoped-key": Case("GET", CHANGES, EXCHANGE_NYSE, 200),
    "changes-past-the-end": Case("GET", f"{CHANGES}?page_number=100", EXCHANGE, 200),
    "changes-csv": Case("GET", f"{CHANGES}?format=csv", EXCHANGE, 200, CSV),
    "changes-parquet": Case("GET", f"{CHANGES}?format=parquet", EXCHANGE, 200, PARQUET),
    "changes-accept-csv": Case("GET", CHANGES, {**EXCHANGE, "Accept": CSV}, 200, CSV),
    "compare": Case("GET", f"{COMPARE}?fee_type=equity", EXCHANGE, 200),
    "compare-v1-no-slash": Case("GET", "/v1/compare?fee_type=option", EXCHANGE, 200),
    "compare-every-parameter": Case(
        "GET",
        f"{COMPARE}?fee_type=equity&as_of=2022-01-01&unit=per_share&exchange_name=nasdaq"
        "&exchange_name=memx&fee_category=fees_and_rebates&fee_action=make&fee_action=take"
        "&fee_participant=all&fee_symbol_classification=all&fee_symbol_type=not_applicable"
        "&fee_trade_type=not_applicable",
        EXCHANGE,
        200,
    ),
    "compare-scoped-key": Case("GET", f"{COMPARE}?fee_type=equity", EXCHANGE_NYSE, 200),
    "compare-csv": Case("GET", f"{COMPARE}?fee_type=equity&format=csv", EXCHANGE, 200, CSV),
    "compare-parquet": Case(
        "GET", f"{COMPARE}?fee_type=option&format=parquet", EXCHANGE, 200, PARQUET
    ),
    "result-with-everything": Case(
        "GET",
        RECORD + "?include_source=true&include_footnotes=true&include_definitions=true",
        EXCHANGE,
        200,
    ),
    # 400: each variant
    "participants-impossible-month": Case(
        "GET", f"{SUPPLIERS}/nasdaq/participants?start_date=2024-13-01", SUPPLIER, 400
    ),
    "fee-categories-impossible-day": Case(
        "GET", f"{SUPPLIERS}/nasdaq/fee-categories?end_date=2024-02-30", SUPPLIER, 400
    ),
    "actions-compact-date": Case(
        "GET", f"{SUPPLIERS}/nasdaq/actions?start_date=20240101", SUPPLIER, 400
    ),
    "fee-types-empty-date": Case("GET", f"{SUPPLIERS}/nasdaq/fee-types?end_date=", SUPPLIER, 400),
    "participants-unpadded-date": Case(
        "GET", f"{SUPPLIERS}/nasdaq/participants?end_date=2024-1-1", SUPPLIER, 400
    ),
    "actions-end-before-start": Case(
        "GET",
        f"{SUPPLIERS}/nasdaq/actions?start_date=2024-05-02&end_date=2024-05-01",
        SUPPLIER,
        400,
    ),
    "fee-categories-unknown-parameter": Case(
        "GET", f"{SUPPLIERS}/nasdaq/fee-categories?start=2024-01-01", SUPPLIER, 400
    ),
    "fee-types-repeated-parameter": Case(
        "GET",
        f"{SUPPLIERS}/nasdaq/fee-types?start_date=2024-01-01&start_date=2024-02-01",
        SUPPLIER,
        400,
    ),
    "date-ranges-unknown-supplier": Case("GET", f"{SUPPLIERS}/nowhere/date-ranges", SUPPLIER, 400),
    "date-ranges-hidden-supplier": Case("GET", f"{SUPPLIERS}/nasdaq/date-ranges", NYSE_ONLY, 400),
    "date-ranges-any-parameter": Case(
        "GET", f"{SUPPLIERS}/nasdaq/date-ranges?start_date=2024-01-01", SUPPLIER, 400
    ),
    "exchanges-any-parameter": Case("GET", "/api/v1/exchanges/?page=2", EXCHANGE, 422),
    "data-fee-type-outside-vocabulary": Case(
        "GET", f"{SUPPLIERS}/nasdaq/data?fee_type=stock", SUPPLIER, 400
    ),
    "data-stored-category-name": Case(
        "GET", f"{SUPPLIERS}/nasdaq/data?fee_category=fees_and_rebates", SUPPLIER, 400
    ),
    "data-limit-above-100": Case("GET", f"{SUPPLIERS}/nasdaq/data?limit=101", SUPPLIER, 400),
    "data-negative-offset": Case("GET", f"{SUPPLIERS}/nasdaq/data?offset=-1", SUPPLIER, 400),
    "data-impossible-date": Case(
        "GET", f"{SUPPLIERS}/nasdaq/data?start_date=2024-02-30", SUPPLIER, 400
    ),
    "data-end-before-start": Case(
        "GET",
        f"{SUPPLIERS}/nasdaq/data?start_date=2024-05-02&end_date=2024-05-01",
        SUPPLIER,
        400,
    ),
    "data-unknown-parameter": Case("GET", f"{SUPPLIERS}/nasdaq/data?page=2", SUPPLIER, 400),
    "data-repeated-parameter": Case(
        "GET", f"{SUPPLIERS}/nasdaq/data?limit=1&limit=2", SUPPLIER, 400
    ),
    "data-count-offset": Case("GET", f"{SUPPLIERS}/nasdaq/data/count?offset=0", SUPPLIER, 400),
    "data-count-unknown-participant": Case(
        "GET", f"{SUPPLIERS}/nasdaq/data/count?participant=Nobody", SUPPLIER, 400
    ),
    "data-count-compact-date": Case(
        "GET", f"{SUPPLIERS}/nasdaq/data/count?end_date=20240101", SUPPLIER, 400
    ),
    # 401: each family, missing and invalid keys
    "participants-no-key": Case("GET", f"{SUPPLIERS}/nasdaq/participants", NO_KEY, 401),
    "fee-categories-unknown-key": Case(
        "GET", f"{SUPPLIERS}/nasdaq/fee-categories", supplier_headers("wrong-key"), 401
    ),
    "actions-revoked-key": Case(
        "GET", f"{SUPPLIERS}/nasdaq/actions", supplier_headers("revoked-key"), 401
    ),
    "fee-types-basic-scheme": Case(
        "GET", f"{SUPPLIERS}/nasdaq/fee-types", {"Authorization": f"Basic {KEYS['full']}"}, 401
    ),
    "date-ranges-exchange-header": Case("GET", f"{SUPPLIERS}/nasdaq/date-ranges", EXCHANGE, 401),
    "exchanges-no-key": Case("GET", "/api/v1/exchanges/", NO_KEY, 401),
    "exchanges-unknown-key": Case("GET", "/api/v1/exchanges/", exchange_headers("wrong"), 401),
    "exchanges-bearer-header": Case("GET", "/api/v1/exchanges/", SUPPLIER, 401),
    "exchanges-alias-header-unknown-key": Case(
        "GET", "/api/v1/exchanges/", {"x-rulebook-api-access-key": "wrong"}, 401
    ),
    "data-no-key": Case("GET", f"{SUPPLIERS}/nasdaq/data", NO_KEY, 401),
    "data-count-exchange-header": Case("GET", f"{SUPPLIERS}/nasdaq/data/count", EXCHANGE, 401),
    "exchange-no-key": Case("GET", "/api/v1/exchanges/nasdaq", NO_KEY, 401),
    "exchange-bearer-header": Case("GET", "/api/v1/exchanges/nasdaq", SUPPLIER, 401),
    "results-revoked-key": Case("GET", RESULTS, exchange_headers("revoked-key"), 401),
    "filters-no-key": Case("GET", f"{RESULTS}filters", NO_KEY, 401),
    "by-version-unknown-key": Case("GET", VERSION, exchange_headers("wrong"), 401),
    "result-no-key": Case("GET", RECORD, NO_KEY, 401),
    "line-no-key": Case("GET", LINE, NO_KEY, 401),
    "changes-no-key": Case("GET", CHANGES + "?change_type=moved", NO_KEY, 401),
    "compare-no-key": Case("GET", COMPARE, NO_KEY, 401),
    # 429: every operation, with the key whose one token the test spends first
    **{
        f"{name}-rate-limited": Case("GET", url, headers(LIMITED_KEY), 429, server="limited_client")
        for name, url, headers in OPERATIONS
    },
    # 304: every operation, with `If-None-Match: *` (any answer the client holds is this one)
    **{
        f"{name}-not-modified": Case("GET", url, {**headers(), "If-None-Match": "*"}, 304, "")
        for name, url, headers in OPERATIONS
    },
    # 400: not HTTP (a control character in a header), where the operation has no 400 of its own
    **{
        f"{name}-malformed": Case("GET", url, {**headers(), "X-Junk": "\x7f"}, 400)
        for name, url, headers in [*OPERATIONS, *KEYLESS]
        if headers is not supplier_headers  # the supplier family documents its own 400s
    },
    # 414 and 431: every operation, a request target or headers past the protocol's bounds
    **{
        f"{name}-target-too-long": Case("GET", f"{url}?x={'a' * 8200}", headers(), 414)
        for name, url, headers in [*OPERATIONS, *KEYLESS]
    },
    **{
        f"{name}-too-many-headers": Case("GET", url, {**headers(), **MANY_HEADERS}, 431)
        for name, url, headers in [*OPERATIONS, *KEYLESS]
    },
    # the probes: no key, and any other method is 405
    "healthz": Case("GET", "/healthz", NO_KEY, 200),
    "readyz": Case("GET", "/readyz", NO_KEY, 200),
    "healthz-post": Case("POST", "/healthz", NO_KEY, 405),
    "readyz-delete": Case("DELETE", "/readyz", NO_KEY, 405),
    # 403: the exchange family, naming a venue, record or version outside the key's scope
    "exchange-hidden": Case("GET", "/api/v1/exchanges/nasdaq", EXCHANGE_NYSE, 403),
    "results-hidden-venue": Case("GET", f"{RESULTS}?exchange_name=nasdaq", EXCHANGE_NYSE, 403),
    "results-hidden-venue-download": Case(
        "GET", f"{RESULTS}?exchange_name=NOM&format=csv", EXCHANGE_NYSE, 403
    ),
    "filters-hidden-venue": Case(
        "GET", f"{RESULTS}filters?exchange_name=nyse&exchange_name=nasdaq", EXCHANGE_NYSE, 403
    ),
    "by-version-out-of-scope": Case(
        "GET", VERSION, OUT_OF_SCOPE, 403, server="out_of_scope_client"
    ),
    "result-hidden": Case("GET", RECORD, EXCHANGE_NYSE, 403),
    "line-hidden": Case("GET", LINE, EXCHANGE_NYSE, 403),
    "changes-hidden-venue": Case("GET", f"{CHANGES}?exchange_name=nasdaq", EXCHANGE_NYSE, 403),
    "compare-hidden-venue": Case(
        "GET", f"{COMPARE}?fee_type=equity&exchange_name=nasdaq", EXCHANGE_NYSE, 403
    ),
    # 404: unknown supplier on endpoints 1-4, and a venue outside the key's scope
    "participants-unknown-supplier": Case(
        "GET", f"{SUPPLIERS}/nowhere/participants", SUPPLIER, 404
    ),
    "fee-categories-unknown-supplier": Case(
        "GET", f"{SUPPLIERS}/nowhere/fee-categories", SUPPLIER, 404
    ),
    "actions-unknown-supplier": Case("GET", f"{SUPPLIERS}/nowhere/actions", SUPPLIER, 404),
    "fee-types-unknown-supplier": Case("GET", f"{SUPPLIERS}/nowhere/fee-types", SUPPLIER, 404),
    "participants-hidden-supplier": Case("GET", f"{SUPPLIERS}/nasdaq/participants", NYSE_ONLY, 404),
    "data-unknown-supplier": Case("GET", f"{SUPPLIERS}/nowhere/data", SUPPLIER, 404),
    "data-hidden-supplier": Case("GET", f"{SUPPLIERS}/nasdaq/data", NYSE_ONLY, 404),
    "data-count-unknown-supplier": Case("GET", f"{SUPPLIERS}/nowhere/data/count", SUPPLIER, 404),
    "data-count-hidden-supplier": Case("GET", f"{SUPPLIERS}/memx/data/count", NYSE_ONLY, 404),
    "exchange-unknown": Case("GET", "/api/v1/exchanges/nowhere", EXCHANGE, 404),
    "exchange-venue-without-records": Case("GET", "/api/v1/exchanges/cboe", EXCHANGE, 404),
    "by-version-unknown": Case("GET", f"{RESULTS}versions/nope", EXCHANGE, 404),
    "result-unknown": Case("GET", f"{RESULTS}00000000-0000-0000-0000-000000000000", EXCHANGE, 404),
    "result-not-an-id": Case("GET", f"{RESULTS}versions", EXCHANGE, 404),
    "line-unknown": Case(
        "GET", "/api/v1/fee-lines/00000000-0000-0000-0000-000000000000", EXCHANGE, 404
    ),
    "line-not-an-id": Case("GET", "/api/v1/fee-lines/nasdaq", EXCHANGE, 404),
    # 405: any method other than GET and HEAD, on every path
    "participants-post": Case("POST", f"{SUPPLIERS}/nasdaq/participants", SUPPLIER, 405),
    "fee-categories-put": Case("PUT", f"{SUPPLIERS}/nasdaq/fee-categories", SUPPLIER, 405),
    "actions-post": Case("POST", f"{SUPPLIERS}/nasdaq/actions", NO_KEY, 405),
    "fee-types-delete": Case("DELETE", f"{SUPPLIERS}/nasdaq/fee-types", SUPPLIER, 405),
    "date-ranges-patch": Case("PATCH", "/v1/suppliers/nasdaq/date-ranges/", SUPPLIER, 405),
    "exchanges-post": Case("POST", "/api/v1/exchanges/", EXCHANGE, 405),
    "openapi-post": Case("POST", "/api/v1/openapi.json", NO_KEY, 405),
    "data-post": Case("POST", f"{SUPPLIERS}/nasdaq/data", SUPPLIER, 405),
    "data-count-put": Case("PUT", f"{SUPPLIERS}/nasdaq/data/count", SUPPLIER, 405),
    "exchange-delete": Case("DELETE", "/api/v1/exchanges/nasdaq", EXCHANGE, 405),
    "results-post": Case("POST", RESULTS, EXCHANGE, 405),
    "filters-patch": Case("PATCH", f"{RESULTS}filters", EXCHANGE, 405),
    "by-version-post": Case("POST", VERSION, NO_KEY, 405),
    "result-put": Case("PUT", RECORD, EXCHANGE, 405),
    "line-post": Case("POST", LINE, EXCHANGE, 405),
    "changes-delete": Case("DELETE", CHANGES, EXCHANGE, 405),
    "compare-post": Case("POST", COMPARE, EXCHANGE, 405),
    # 422: the exchange family but its venue list, every refused parameter at once
    "exchange-any-parameter": Case("GET", "/api/v1/exchanges/nasdaq?page=2", EXCHANGE, 422),
    "results-every-problem": Case(
        "GET",
        f"{RESULTS}?fee_type=stock&exchange_name=nowhere&start_date=2024-13-01&latest_only=maybe"
        "&format=xml&page_size=0&page_number=-1&order_by=price&order_dir=up&include_source=1",
        EXCHANGE,
        422,
    ),
    "results-end-before-start": Case(
        "GET", f"{RESULTS}?start_date=2024-05-02&end_date=2024-05-01", EXCHANGE, 422
    ),
    "results-unknown-parameter": Case("GET", f"{RESULTS}?page=1", EXCHANGE, 422),
    "results-repeated-parameter": Case("GET", f"{RESULTS}?page_size=1&page_size=2", EXCHANGE, 422),
    "results-download-bad-page-size": Case(
        "GET", f"{RESULTS}?format=csv&page_size=101", EXCHANGE, 422
    ),
    "filters-unknown-venue": Case("GET", f"{RESULTS}filters?exchange_name=nowhere", EXCHANGE, 422),
    "filters-unknown-parameter": Case("GET", f"{RESULTS}filters?fee_type=equity", EXCHANGE, 422),
    "by-version-filter-parameter": Case(
        "GET", VERSION + "?fee_type=equity&page_size=101", EXCHANGE, 422
    ),
    "result-not-a-boolean": Case("GET", RECORD + "?include_source=yes", EXCHANGE, 422),
    "result-unknown-parameter": Case("GET", RECORD + "?include_everything=true", EXCHANGE, 422),
    "line-any-parameter": Case("GET", LINE + "?include_source=true", EXCHANGE, 422),
    "changes-every-problem": Case(
        "GET",
        f"{CHANGES}?change_type=moved&start_date=2023-02-30&order_dir=up&as_of=2023-01-01"
        "&fee_symbol_type=both&page_size=0",
        EXCHANGE,
        422,
    ),
    "compare-no-fee-type": Case("GET", COMPARE, EXCHANGE, 422),
    **ESTIMATE_CASES,
    "compare-every-problem": Case(
        "GET",
        f"{COMPARE}?fee_type=futures&unit=per_bushel&as_of=2024-02-30&page_size=1",
        EXCHANGE,
        422,
    ),
    "changes-end-before-start": Case(
        "GET", f"{CHANGES}?start_date=2023-02-01&end_date=2023-01-01", EXCHANGE, 422
    ),
    "result-relationships-not-a-boolean": Case(
        "GET", RECORD + "?include_footnotes=yes", EXCHANGE, 422
    ),
}


@pytest.fixture(scope="module")
def path_values(client: httpx.Client, fixture_version: IngestResult) -> dict[str, str]:
    """The real ids the cases name: the fixture's version, a nasdaq record and its line."""
    params: dict[str, str | int] = {"exchange_name": "nasdaq", "page_size": 1}
    page = client.get(RESULTS, params=params, headers=EXCHANGE).json()
    [record] = page["data"]
    return {
        "version_id": fixture_version.version_id,
        "record_id": record["record_id"],
        "line_id": record["line_id"],
    }


@contextmanager
def with_account(
    version: IngestResult, accounts_file: Path, folder: Path, name: str, account: dict[str, Any]
) -> Iterator[httpx.Client]:
    """The shared data under a second server whose accounts add one account."""
    document = json.loads(accounts_file.read_text(encoding="utf-8"))
    document["accounts"][name] = account
    accounts = folder / "accounts.json"
    accounts.write_text(json.dumps(document), encoding="utf-8")
    settings = Settings(data_dir=version.version_dir.parent.parent, accounts_file=accounts)
    with LiveServer(settings) as live, httpx.Client(base_url=live.url, timeout=10) as http:
        yield http


@pytest.fixture(scope="module")
def out_of_scope_client(
    fixture_version: IngestResult, accounts_file: Path, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[httpx.Client]:
    """A key for `cboe` alone, a venue without records: the fixture's version is outside its
    scope (no shared key's)."""
    account = {"exchanges": ["cboe"], "keys": [account_key(OUT_OF_SCOPE_KEY)]}
    folder = tmp_path_factory.mktemp("out-of-scope")
    with with_account(fixture_version, accounts_file, folder, "cboe-desk", account) as http:
        yield http


@pytest.fixture(scope="module")
def limited_client(
    fixture_version: IngestResult, accounts_file: Path, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[httpx.Client]:
    """A key with a one-request bucket that refills once a minute: its second request within
    a minute is 429."""
    account = {
        "exchanges": None,
        "rate_limit": {"burst": 1, "per_minute": 1},
        "keys": [account_key(LIMITED_KEY)],
    }
    folder = tmp_path_factory.mktemp("limited")
    with with_account(fixture_version, accounts_file, folder, "trickle", account) as http:
        yield http


@pytest.mark.parametrize("case", list(CASES.values()), ids=list(CASES))
def test_a_real_response_matches_the_document(
    request: pytest.FixtureRequest, path_values: dict[str, str], case: Case
) -> None:
    http: httpx.Client = request.getfixturevalue(case.server)
    url = case.url.format(**path_values)
    if case.status == 429:
        http.request(case.method, url, headers=case.headers, content=case.body)  # its one token
    response = http.request(case.method, url, headers=case.headers, content=case.body)
    assert response.status_code == case.status, response.text
    media_type = response.headers.get("content-type", "").split(";")[0]
    assert media_type == case.media_type
    operation = operation_for(case.method, urlsplit(url).path)
    if operation.method != case.method.lower():
        assert response.status_code == 405, "a method the path does not document must be 405"
    status = str(response.status_code)
    assert status in operation.responses, f"{status} is not documented for {operation.name}"
    location, documented = follow(f"{operation.location}/responses/{status}")
    assert media_type in documented.get("content", {"": None}), f"{media_type} is not documented"
    headers = documented.get("headers", {})
    for name in headers:
        header_location, header = follow(f"{location}/headers/{escape(name)}")
        if name in response.headers:
            value: Any = response.headers[name]
            if header["schema"].get("type") == "integer":
                value = int(value)  # a header is text; its schema says what the text holds
            assert schema_errors(value, f"{header_location}/schema") == []
        else:
            assert not header.get("required"), f"documented header {name} is missing"
    if response.status_code == 304:
        assert response.content == b""
    elif media_type == JSON:
        schema = f"{location}/content/{escape(media_type)}/schema"
        assert schema_errors(response.json(), schema) == []
    else:  # a download: its body is checked elsewhere, but it must name its file
        assert "Content-Disposition" in headers
        assert "Content-Disposition" in response.headers


def test_the_cases_cover_every_documented_status_and_media_type() -> None:
    documented = {
        (operation.name, status, media_type)
        for operation in operations()
        for status in operation.responses
        if status not in UNTRIGGERABLE
        for media_type in follow(f"{operation.location}/responses/{status}")[1].get("content", [""])
    }
    exercised = {
        (
            operation_for(case.method, urlsplit(case.url).path).name,
            str(case.status),
            case.media_type,
        )
        for case in CASES.values()
    }
    assert documented - exercised == set()
