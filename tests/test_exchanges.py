"""The exchange family's list endpoint (spec endpoint 6)."""

import httpx
import pytest

from tests.conftest import KEYS, exchange_headers

UNAUTHORIZED_ERROR = {"code": "UNAUTHORIZED", "message": "missing or invalid API key"}


@pytest.mark.parametrize("path", ["/api/v1/exchanges/", "/api/v1/exchanges", "/v1/exchanges/"])
def test_lists_every_visible_venue_with_records(client: httpx.Client, path: str) -> None:
    response = client.get(path, headers=exchange_headers())
    body = response.json()
    assert response.status_code == 200
    assert body["data"] == [
        {"name": "memx", "display_name": "MEMX", "fee_types": ["equity"], "record_count": 3},
        {
            "name": "nasdaq",
            "display_name": "Nasdaq Stock Market",
            "fee_types": ["equity", "option"],
            "record_count": 8,
        },
        {
            "name": "nyse",
            "display_name": "New York Stock Exchange",
            "fee_types": ["equity"],
            "record_count": 2,
        },
    ]
    assert body["meta"]["record_count"] == 3
    assert isinstance(body["meta"]["query_time_ms"], int)


def test_a_scoped_key_sees_only_its_venues(client: httpx.Client) -> None:
    body = client.get("/api/v1/exchanges/", headers=exchange_headers(KEYS["nyse"])).json()
    assert [venue["name"] for venue in body["data"]] == ["nyse"]
    assert body["meta"]["record_count"] == 1


@pytest.mark.parametrize(
    "headers",
    [
        {},
        {"x-service-api-access-key": "wrong"},
        {"x-service-api-access-key": "revoked-key"},
        {"Authorization": f"Bearer {KEYS['full']}"},
    ],
    ids=["missing", "unknown", "revoked", "other-family-header"],
)
def test_missing_or_invalid_key_is_401(client: httpx.Client, headers: dict[str, str]) -> None:
    response = client.get("/api/v1/exchanges/", headers=headers)
    body = response.json()
    assert (response.status_code, body["error"]) == (401, UNAUTHORIZED_ERROR)
    assert set(body) == {"error", "meta"}
    assert isinstance(body["meta"]["query_time_ms"], int)


def test_parameters_are_refused(client: httpx.Client) -> None:
    response = client.get("/api/v1/exchanges/?page=2", headers=exchange_headers())
    assert response.status_code == 422
    assert response.json()["error"] == {
        "code": "VALIDATION_ERROR",
        "message": "Invalid query parameters.",
        "details": [{"field": "page", "message": "unknown parameter", "allowed": []}],
    }
