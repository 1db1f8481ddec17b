"""CORS: off unless FEES_CORS_ORIGINS names origins; then a browser on one of them may call the
API (cached answers included), read the headers it needs, and preflight without a key."""

from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from ingest.pipeline import IngestResult
from service.settings import Settings
from tests.conftest import LiveServer, supplier_headers

ALLOWED, OTHER = "https://fees.example.com", "https://evil.example.net"
PATH = "/api/v1/suppliers/nasdaq/actions"


def served(version: IngestResult, accounts_file: Path, origins: tuple[str, ...]) -> LiveServer:
    return LiveServer(
        Settings(
            data_dir=version.version_dir.parent.parent,
            accounts_file=accounts_file,
            cors_origins=origins,
        )
    )


@pytest.fixture(scope="module")
def cors(fixture_version: IngestResult, accounts_file: Path) -> Iterator[httpx.Client]:
    server = served(fixture_version, accounts_file, (ALLOWED,))
    with server as live, httpx.Client(base_url=live.url, timeout=10) as http:
        yield http


def test_off_by_default(client: httpx.Client) -> None:
    answer = client.get(PATH, headers={**supplier_headers(), "Origin": ALLOWED})
    preflight = client.options(PATH, headers={"Origin": ALLOWED,
                                              "Access-Control-Request-Method": "GET"})  # fmt: skip
    assert answer.status_code == 200
    assert not [name for name in answer.headers if name.startswith("access-control-")]
    assert preflight.status_code == 405


def test_an_allowed_origin_gets_every_answer_with_its_headers_exposed(cors: httpx.Client) -> None:
    for _ in range(2):  # the second answer comes from the response cache
        answer = cors.get(PATH, headers={**supplier_headers(), "Origin": ALLOWED})
        assert answer.status_code == 200
        assert answer.headers["access-control-allow-origin"] == ALLOWED
        exposed = {
            name.strip() for name in answer.headers["access-control-expose-headers"].split(",")
        }
        assert {"etag", "x-ratelimit-remaining", "x-request-id", "retry-after"} <= exposed
    refused = cors.get("/api/v1/exchanges/", headers={"Origin": ALLOWED})
    assert refused.status_code == 401
    assert refused.headers["access-control-allow-origin"] == ALLOWED  # the browser may read why


def test_another_origin_gets_no_cors_headers_and_no_preflight(cors: httpx.Client) -> None:
    answer = cors.get(PATH, headers={**supplier_headers(), "Origin": OTHER})
    assert "access-control-allow-origin" not in answer.headers
    preflight = cors.options(
        PATH, headers={"Origin": OTHER, "Access-Control-Request-Method": "GET"}
    )
    assert preflight.status_code == 400


def test_a_preflight_needs_no_key_and_allows_the_key_headers(cors: httpx.Client) -> None:
    preflight = cors.options(
        "/api/v1/exchanges/",
        headers={
            "Origin": ALLOWED,
            "Access-Control-Request-Method": "GET",
            "Access-Control-Request-Headers": "x-service-api-access-key, if-none-match",
        },
    )
    assert preflight.status_code == 200
    assert preflight.headers["access-control-allow-origin"] == ALLOWED
    assert "GET" in preflight.headers["access-control-allow-methods"]
    allowed = preflight.headers["access-control-allow-headers"].lower()
    assert "x-service-api-access-key" in allowed and "if-none-match" in allowed
    post = cors.options(
        "/api/v1/exchanges/", headers={"Origin": ALLOWED, "Access-Control-Request-Method": "POST"}
    )
    assert post.status_code == 400
