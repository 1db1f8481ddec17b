"""The supplier family's detailed data query and its count, in the display vocabulary."""

from typing import Any

import httpx
import pytest

from ingest.pipeline import IngestResult
from ingest.query import open_version
from tests.conftest import KEYS, supplier_headers


def data(client: httpx.Client, supplier: str = "nasdaq", **params: Any) -> httpx.Response:
    return client.get(
        f"/api/v1/suppliers/{supplier}/data", params=params, headers=supplier_headers()
    )


def test_records_in_the_display_vocabulary_with_amounts(client: httpx.Client) -> None:
    body = data(client, "memx", action="Routed & Other").json()
    [record] = body["data"]["records"]
    assert body["data"] | {"records": []} == {
        "supplier": "memx",
        "fee_type": None,
        "fee_category": None,
        "action": "Routed & Other",
        "participant": None,
        "date_range": None,
        "as_of": None,
        "records": [],
        "total_records": 1,
        "returned_records": 1,
        "pagination": {"offset": 0, "limit": 100, "has_more": False, "next_offset": None},
    }
    assert record | {"record_id": "x"} == {
        "record_id": "x",
        "line_id": "62b5c64c-38e8-b783-ce4b-d47f760727ce",
        "effective_start": "2021-06-01",
        "effective_end": None,
        "fee_type": "equity",
        "fee_category": "Market Data Fees",
        "action": "Routed & Other",
        "participant": "All",
        "description": "Routed",
        "fee_amount": "$0.0030",
        "amount": 0.003,
        "currency": "USD",
        "unit": "per_share",
        "fee_basis": "per share",
        "source_kind": "primary",
        "date_basis": "stated",
        "uncertain": False,
        "standard": False,
        "confirmed_through": "2021-06-01",
        "presumed": None,
        "source_document": "MEMX Fee Schedule",
        "source_link": "https://example.test/memx-fee-schedule",
    }


def test_merged_participants_map_back_to_their_display_term(client: httpx.Client) -> None:
    body = data(client, "memx", participant="Professional & Other").json()["data"]
    assert sorted((r["action"], r["participant"]) for r in body["records"]) == [
        ("Make", "Professional & Other"),
        ("Take", "Professional & Other"),
    ]


@pytest.mark.parametrize(
    ("params", "where"),
    [
        ({"fee_type": "option"}, "fee_type = 'option'"),
        ({"fee_category": "Fee And Rebates"}, "fee_category = 'fees_and_rebates'"),
        ({"action": "Routed & Other"}, "action IN ('routed', 'other')"),
        ({"participant": "All", "fee_type": "equity"},
         "participant = 'all' AND fee_type = 'equity'"),
        ({"start_date": "2022-01-01"},
         "coalesce(effective_end, DATE '9999-12-31') >= DATE '2022-01-01'"),
    ],
    ids=["type", "category", "merged-action", "combined", "window"],
)  # fmt: skip
def test_filters_and_count_agree_with_a_direct_query(
    client: httpx.Client, fixture_version: IngestResult, params: dict[str, str], where: str
) -> None:
    con = open_version(fixture_version.version_dir)
    rows = con.execute(f"SELECT record_id FROM fees WHERE exchange = 'nasdaq' AND {where}")
    expected = sorted(row[0] for row in rows.fetchall())
    body = data(client, **params).json()["data"]
    assert sorted(r["record_id"] for r in body["records"]) == expected
    count = client.get(
        "/api/v1/suppliers/nasdaq/data/count", params=params, headers=supplier_headers()
    ).json()["data"]
    assert (count["total_count"], count["pagination_info"]) == (
        len(expected),
        {"max_records_per_request": 100, "total_pages": 1 if expected else 0},
    )


@pytest.mark.parametrize("day", ["2019-01-01", "2021-07-01", "2023-06-01"])
def test_as_of_keeps_the_records_in_force_on_that_day(
    client: httpx.Client, fixture_version: IngestResult, day: str
) -> None:
    con = open_version(fixture_version.version_dir)
    rows = con.execute(
        "SELECT record_id FROM fees WHERE exchange = 'nasdaq'"
        " AND effective_start <= CAST($day AS DATE)"
        " AND (effective_end IS NULL OR effective_end >= CAST($day AS DATE))",
        {"day": day},
    ).fetchall()
    expected = sorted(str(record_id) for (record_id,) in rows)
    body = data(client, as_of=day).json()["data"]
    assert sorted(r["record_id"] for r in body["records"]) == expected
    assert (body["as_of"], body["date_range"]) == (day, None)
    count = client.get(
        "/api/v1/suppliers/nasdaq/data/count", params={"as_of": day}, headers=supplier_headers()
    ).json()["data"]
    assert (count["total_count"], count["as_of"]) == (len(expected), day)


@pytest.mark.parametrize("path", ["data", "data/count"])
def test_as_of_with_a_date_window_is_400_naming_both(client: httpx.Client, path: str) -> None:
    response = client.get(
        f"/api/v1/suppliers/nasdaq/{path}",
        params={"as_of": "2023-06-01", "end_date": "2023-12-31"},
        headers=supplier_headers(),
    )
    assert (response.status_code, response.json()) == (
        400,
        {
            "error": "Bad Request",
            "message": "as_of cannot be combined with a date window",
            "details": {"field": "as_of", "conflicts_with": ["end_date"]},
        },
    )


def test_offset_paging_visits_every_record_once_in_order(client: httpx.Client) -> None:
    seen: list[tuple[str, str]] = []
    offset: int | None = 0
    while offset is not None:
        body = data(client, offset=offset, limit=3).json()["data"]
        seen += [(r["effective_start"], r["record_id"]) for r in body["records"]]
        assert body["returned_records"] == len(body["records"]) <= 3
        offset = body["pagination"]["next_offset"]
    assert len(seen) == len({record_id for _, record_id in seen}) == 8
    assert seen == sorted(seen)


@pytest.mark.parametrize(
    ("params", "details"),
    [
        ({"fee_type": "bond"},
         {"field": "fee_type", "provided": "bond", "allowed": ["equity", "option"]}),
        ({"action": "Routed"}, {"field": "action", "provided": "Routed",
                                "allowed": ["Make", "Take", "Open", "Routed & Other"]}),
        ({"limit": "101"}, {"field": "limit", "provided": "101", "allowed": "1-100"}),
        ({"limit": "0"}, {"field": "limit", "provided": "0", "allowed": "1-100"}),
        ({"offset": "-5"}, {"field": "offset", "provided": "-5", "allowed": ">= 0"}),
    ],
    ids=["fee-type", "action", "limit-high", "limit-zero", "offset"],
)  # fmt: skip
def test_a_bad_value_is_400_with_what_is_allowed(
    client: httpx.Client, params: dict[str, str], details: dict[str, Any]
) -> None:
    response = data(client, **params)
    assert (response.status_code, response.json()) == (
        400,
        {"error": "Bad Request", "message": "invalid parameter value", "details": details},
    )


@pytest.mark.parametrize("path", ["data", "data/count"])
@pytest.mark.parametrize(("supplier", "key"), [("nowhere", KEYS["full"]), ("nasdaq", KEYS["nyse"])])
def test_unknown_or_hidden_supplier_is_404(
    client: httpx.Client, path: str, supplier: str, key: str
) -> None:
    response = client.get(f"/api/v1/suppliers/{supplier}/{path}", headers=supplier_headers(key))
    assert (response.status_code, response.json()) == (
        404,
        {"error": "Not Found", "message": "supplier not found"},
    )


def test_bad_dates_are_400_as_in_discovery(client: httpx.Client) -> None:
    response = data(client, start_date="2024-02-30")
    assert response.json()["details"] == {"field": "start_date", "expected_format": "YYYY-MM-DD"}
