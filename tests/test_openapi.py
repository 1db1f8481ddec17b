"""The OpenAPI document: served verbatim, structurally sound, and true to real responses.

Every real response in `CASES` must have a status the document lists for its operation, and a
body that validates against the documented schema. `#/components/...` references resolve
through a `referencing.Registry` that holds the whole document.
"""

import json
import re
from collections.abc import Iterator
from typing import Any, NamedTuple
from urllib.parse import urlsplit

import httpx
import pytest
from jsonschema import Draft202012Validator
from referencing import Registry
from referencing.jsonschema import DRAFT202012

from service.app import ENDPOINTS, OPENAPI_FILE
from tests.conftest import KEYS, exchange_headers, supplier_headers

DOCUMENT_URI = "urn:exchange-fees:openapi"
DOCUMENT: dict[str, Any] = json.loads(OPENAPI_FILE.read_text(encoding="utf-8"))
REGISTRY: Registry[Any] = Registry().with_resource(
    DOCUMENT_URI, DRAFT202012.create_resource(DOCUMENT)
)
HTTP_METHODS = ("get", "put", "post", "delete", "options", "head", "patch", "trace")
UNTRIGGERABLE = {"500", "503"}  # no failure or empty warehouse in the shared fixture


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
    trailing slash does not matter."""
    if url_path.startswith("/v1/"):
        url_path = "/api" + url_path
    segments = url_path.rstrip("/").split("/")
    templates: list[str] = list(DOCUMENT["paths"])
    for template in templates:
        expected = template.rstrip("/").split("/")
        if len(expected) == len(segments) and all(
            want == got or (want.startswith("{") and want.endswith("}"))
            for want, got in zip(expected, segments, strict=True)
        ):
            return template
    raise AssertionError(f"{url_path} matches no documented path")


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
    path's GET operation (OpenAPI has no place for "any other method")."""
    template = documented_path(url_path)
    documented = method.lower() in DOCUMENT["paths"][template]
    return Operation(template, method.lower() if documented else "get")


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
    assert DOCUMENT["jsonSchemaDialect"] == "https://json-schema.org/draft/2020-12/schema"
    assert {"title": "Exchange fee data service", "version": "1.0.0"}.items() <= DOCUMENT[
        "info"
    ].items()
    assert DOCUMENT["servers"][0]["url"] == "http://127.0.0.1:8000"
    assert set(DOCUMENT["components"]["securitySchemes"]) == {"bearerAuth", "apiKeyHeader"}


def test_the_document_has_every_route_of_the_app() -> None:
    expected = {"/api/v1" + path + ("/" if path == "/exchanges" else "") for path, _ in ENDPOINTS}
    assert set(DOCUMENT["paths"]) == expected | {"/api/v1/openapi.json"}
    assert {operation.method for operation in operations()} == {"get"}


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
        assert set(response["content"]) == {"application/json"}
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
    url: str  # path and query, as sent
    headers: dict[str, str]
    status: int


SUPPLIER = supplier_headers()
EXCHANGE = exchange_headers()
NYSE_ONLY = supplier_headers(KEYS["nyse"])
NO_KEY: dict[str, str] = {}
SUPPLIERS = "/api/v1/suppliers"

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
    "exchanges-any-parameter": Case("GET", "/api/v1/exchanges/?page=2", EXCHANGE, 400),
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
    # 405: any method other than GET and HEAD, on every path
    "participants-post": Case("POST", f"{SUPPLIERS}/nasdaq/participants", SUPPLIER, 405),
    "fee-categories-put": Case("PUT", f"{SUPPLIERS}/nasdaq/fee-categories", SUPPLIER, 405),
    "actions-post": Case("POST", f"{SUPPLIERS}/nasdaq/actions", NO_KEY, 405),
    "fee-types-delete": Case("DELETE", f"{SUPPLIERS}/nasdaq/fee-types", SUPPLIER, 405),
    "date-ranges-patch": Case("PATCH", "/v1/suppliers/nasdaq/date-ranges/", SUPPLIER, 405),
    "exchanges-post": Case("POST", "/api/v1/exchanges/", EXCHANGE, 405),
    "openapi-post": Case("POST", "/api/v1/openapi.json", NO_KEY, 405),
}


@pytest.mark.parametrize("case", list(CASES.values()), ids=list(CASES))
def test_a_real_response_matches_the_document(client: httpx.Client, case: Case) -> None:
    response = client.request(case.method, case.url, headers=case.headers)
    assert response.status_code == case.status, response.text
    operation = operation_for(case.method, urlsplit(case.url).path)
    if operation.method != case.method.lower():
        assert response.status_code == 405, "a method the path does not document must be 405"
    status = str(response.status_code)
    assert status in operation.responses, f"{status} is not documented for {operation.name}"
    location, documented = follow(f"{operation.location}/responses/{status}")
    media_type = response.headers["content-type"].split(";")[0]
    assert media_type in documented["content"], f"{media_type} is not documented"
    schema = f"{location}/content/{escape(media_type)}/schema"
    assert schema_errors(response.json(), schema) == []
    for header in documented.get("headers", {}):
        assert header in response.headers, f"documented header {header} is missing"
        assert schema_errors(response.headers[header], f"{location}/headers/{header}/schema") == []


def test_the_cases_cover_every_documented_status() -> None:
    documented = {
        (operation.name, status)
        for operation in operations()
        for status in operation.responses
        if status not in UNTRIGGERABLE
    }
    exercised = {
        (operation_for(case.method, urlsplit(case.url).path).name, str(case.status))
        for case in CASES.values()
    }
    assert documented - exercised == set()
