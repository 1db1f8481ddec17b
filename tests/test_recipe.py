"""Adding an endpoint is one declaration and one handler (`docs/architecture.md`, "Each endpoint
declared once"): an endpoint declared in this test alone is served through the whole front
door (key, parameters, envelope, cache, both prefixes) and documented, with nothing else
touched."""

from pathlib import Path
from typing import Any

import httpx
from starlette.requests import Request
from starlette.responses import Response

from ingest.pipeline import IngestResult
from service import api
from service.endpoints.envelope import answer
from service.endpoints.params import exchange_request
from service.settings import Settings
from tests.conftest import LiveServer, exchange_headers


def page_size(request: Request) -> Response:
    """A handler as every handler is written: its caller, its parameters, its answer."""
    call, _, query = exchange_request(request)
    size = query.get("page_size")  # read as `PageSize` declares it: 1-100, 20 when absent
    query.check()
    return answer(call, {"page_size": size}, {"record_count": 1})


ECHO = api.Endpoint("/page-size", page_size, "getPageSize", ("PageSize", "IfNoneMatch"))
OPERATION: dict[str, Any] = {
    "tags": ["exchanges"],
    "summary": "The page size asked for",
    "description": "Echoes `page_size`: an endpoint declared by a test.",
    "security": [{"apiKeyHeader": []}],
    "responses": {"200": {"description": "The page size."}},
}


def test_an_endpoint_declared_here_alone_is_served_and_documented(
    fixture_version: IngestResult, accounts_file: Path
) -> None:
    endpoints = (*api.ENDPOINTS, ECHO)
    settings = Settings(
        data_dir=fixture_version.version_dir.parent.parent, accounts_file=accounts_file
    )
    with LiveServer(settings, endpoints=endpoints) as live:
        asked = [
            httpx.get(f"{live.url}{path}?page_size=7", headers=exchange_headers())
            for path in ("/api/v1/page-size", "/v1/page-size/", "/api/v1/page-size")
        ]
        unknown = httpx.get(f"{live.url}/api/v1/page-size?zz=1", headers=exchange_headers())
        absent = httpx.get(f"{live.url}/api/v1/page-size", headers=exchange_headers())
        too_many = httpx.get(
            f"{live.url}/api/v1/page-size?page_size=101", headers=exchange_headers()
        )
        keyless = httpx.get(f"{live.url}/api/v1/page-size")
    assert [response.status_code for response in asked] == [200, 200, 200]
    assert asked[0].json()["data"] == {"page_size": 7}
    # The same request again is answered from the response cache (which writes no timing).
    assert asked[2].json()["data"] == {"page_size": 7}
    assert "server-timing" in asked[0].headers and "server-timing" not in asked[2].headers
    assert unknown.status_code == 422
    assert unknown.json()["error"]["details"] == [
        {"field": "zz", "message": "unknown parameter", "allowed": ["page_size"]}
    ]
    # The parameter reads as its component declares it: its default, its bounds.
    assert absent.json()["data"] == {"page_size": 20}
    assert too_many.json()["error"]["details"] == [
        {"field": "page_size", "message": "must be a whole number from 1 to 100"}
    ]
    assert keyless.status_code == 401 and "ApiKey" in keyless.headers["www-authenticate"]

    source = {**api.SOURCE, "operations": {**api.SOURCE["operations"], "getPageSize": OPERATION}}
    documented = api.document(endpoints, source)["paths"]["/api/v1/page-size"]["get"]
    assert documented["operationId"] == "getPageSize"
    assert documented["parameters"] == [
        {"$ref": "#/components/parameters/PageSize"},
        {"$ref": "#/components/parameters/IfNoneMatch"},
    ]
    # The API's own document is untouched by the test's declaration.
    assert "/api/v1/page-size" not in api.document()["paths"]
