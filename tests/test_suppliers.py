"""The supplier family (spec endpoints 1-5) over the fixture dataset, through real HTTP."""

from datetime import date

import duckdb
import httpx
import pytest

from ingest.pipeline import IngestResult
from service.vocabulary import DIMENSIONS
from tests.conftest import KEYS, supplier_headers

UNAUTHORIZED = {"error": "Unauthorized", "message": "invalid or missing API key"}
NOT_FOUND = {"error": "Not Found", "message": "supplier not found"}


def get(client: httpx.Client, path: str, **params: str) -> httpx.Response:
    return client.get(f"/api/v1/suppliers/{path}", params=params, headers=supplier_headers())


def test_participants_lists_every_value_with_its_records(client: httpx.Client) -> None:
    response = get(client, "memx/participants")
    assert response.status_code == 200
    assert response.json() == {
        "success": True,
        "data": {
            "supplier": "memx",
            "date_range": None,
            "participants": [
                {
                    "participant": "All",
                    "display_name": "All Participants",
                    "description": "Fees that apply to every participant type.",
                    "available": True,
                    "record_count": 1,
                    "typical_fee_structure": "Aggregated",
                },
                {
                    "participant": "Professional & Other",
                    "display_name": "Professional & Other",
                    "description": "Professional customers and any other participant type.",
                    "available": True,
                    "record_count": 2,
                    "typical_fee_structure": "Variable",
                },
            ],
            "total_participants": 2,
        },
    }


def test_fee_categories_carry_their_fee_types(client: httpx.Client) -> None:
    data = get(client, "nasdaq/fee-categories").json()["data"]
    assert [
        (c["category"], c["record_count"], c["applicable_fee_types"])
        for c in data["fee_categories"]
    ] == [
        ("Fee And Rebates", 6, ["equity", "option"]),
        ("Legal Regulatory Fees", 1, ["equity"]),
        ("Port Fees And Other Services", 1, ["option"]),
    ]
    assert data["total_categories"] == 3
    assert data["fee_categories"][1]["display_name"] == "Legal & Regulatory Fees"


def test_actions_merge_routed_and_other(client: httpx.Client) -> None:
    data = get(client, "memx/actions").json()["data"]
    assert [(a["action"], a["record_count"], a["liquidity_type"]) for a in data["actions"]] == [
        ("Make", 1, "adding"),
        ("Take", 1, "removing"),
        ("Routed & Other", 1, "neutral"),
    ]
    assert data["total_actions"] == 3


def test_fee_types(client: httpx.Client) -> None:
    assert get(client, "nasdaq/fee-types").json() == {
        "success": True,
        "data": {
            "supplier": "nasdaq",
            "date_range": None,
            "fee_types": [
                {
                    "type": "equity",
                    "display_name": "Equity",
                    "description": "Fees for trading cash equities (stocks and ETPs).",
                    "available": True,
                    "record_count": 4,
                },
                {
                    "type": "option",
                    "display_name": "Options",
                    "description": "Fees for trading listed options contracts.",
                    "available": True,
                    "record_count": 4,
                },
            ],
            "total_types": 2,
        },
    }


def test_a_window_inside_a_gap_lists_values_with_no_records(client: httpx.Client) -> None:
    data = get(client, "memx/actions", start_date="2021-02-01", end_date="2021-05-31").json()[
        "data"
    ]
    assert data["date_range"] == {"start_date": "2021-02-01", "end_date": "2021-05-31"}
    assert [(a["action"], a["available"], a["record_count"]) for a in data["actions"]] == [
        ("Make", False, 0),
        ("Take", False, 0),
        ("Routed & Other", False, 0),
    ]


@pytest.mark.parametrize(
    ("window", "make", "routed", "echo"),
    [
        ({"end_date": "2020-12-01"}, 1, 0, {"start_date": None, "end_date": "2020-12-01"}),
        ({"end_date": "2020-11-30"}, 0, 0, {"start_date": None, "end_date": "2020-11-30"}),
        ({"start_date": "2021-01-31"}, 1, 1, {"start_date": "2021-01-31", "end_date": None}),
        ({"start_date": "2021-02-01"}, 0, 1, {"start_date": "2021-02-01", "end_date": None}),
        (
            {"start_date": "2021-06-01", "end_date": "2021-06-01"},
            0,
            1,
            {"start_date": "2021-06-01", "end_date": "2021-06-01"},
        ),
        (
            {"start_date": "2021-01-31", "end_date": "2021-01-31"},
            1,
            0,
            {"start_date": "2021-01-31", "end_date": "2021-01-31"},
        ),
    ],
    ids=["end-touches-start", "end-before", "start-touches-end", "start-after", "one-day", "last"],
)
def test_window_boundaries_are_inclusive(
    client: httpx.Client, window: dict[str, str], make: int, routed: int, echo: dict[str, str]
) -> None:
    data = get(client, "memx/actions", **window).json()["data"]
    counts = {a["action"]: a["record_count"] for a in data["actions"]}
    assert (counts["Make"], counts["Routed & Other"], data["date_range"]) == (make, routed, echo)


WINDOWS = [
    {},
    {"start_date": "2021-01-01"},
    {"end_date": "2020-06-30"},
    {"start_date": "2021-07-01", "end_date": "2022-12-31"},
    {"start_date": "2030-01-01"},
]


@pytest.mark.parametrize("window", WINDOWS, ids=lambda w: "-".join(w.values()) or "all")
@pytest.mark.parametrize("endpoint", list(DIMENSIONS))
@pytest.mark.parametrize("supplier", ["nasdaq", "nyse", "memx"])
def test_every_record_count_equals_a_direct_count_over_the_parquet(
    client: httpx.Client,
    fixture_version: IngestResult,
    supplier: str,
    endpoint: str,
    window: dict[str, str],
) -> None:
    column, terms = DIMENSIONS[endpoint]
    body = get(client, f"{supplier}/{endpoint.replace('_', '-')}", **window).json()["data"]
    key = {"participants": "participant", "fee_categories": "category", "actions": "action"}
    identifier = key.get(endpoint, "type")
    answered = {item[identifier]: item["record_count"] for item in body[endpoint]}
    expected = {}
    for term in terms:
        ever = _direct_count(fixture_version, supplier, column, term.stored, {})
        if ever:
            expected[term.identifier] = _direct_count(
                fixture_version, supplier, column, term.stored, window
            )
    assert answered == expected
    assert body[f"total_{'types' if endpoint == 'fee_types' else endpoint.split('_')[-1]}"] == len(
        expected
    )


def _direct_count(
    version: IngestResult,
    supplier: str,
    column: str,
    values: tuple[str, ...],
    window: dict[str, str],
) -> int:
    start = date.fromisoformat(window.get("start_date", "0001-01-01"))
    end = date.fromisoformat(window.get("end_date", "9999-12-31"))
    sql = f"""
        SELECT count(*) FROM read_parquet($pattern, hive_partitioning = true)
        WHERE exchange = $supplier AND list_contains($values, {column})
        AND effective_start <= $end AND (effective_end IS NULL OR effective_end >= $start)
    """
    pattern = str(version.version_dir / "fees" / "**" / "*.parquet")
    parameters = {"pattern": pattern, "supplier": supplier, "values": list(values)}
    row = duckdb.connect().execute(sql, parameters | {"start": start, "end": end}).fetchone()
    assert row is not None
    return int(row[0])


def test_date_ranges_merge_adjacent_periods_and_keep_gaps(
    client: httpx.Client, fixture_version: IngestResult
) -> None:
    as_of = fixture_version.version_dir.name  # created today; "as_of" is its date
    response = get(client, "memx/date-ranges")
    today = f"{as_of[0:4]}-{as_of[4:6]}-{as_of[6:8]}"
    assert response.json() == {
        "success": True,
        "data": {
            "supplier": "memx",
            "date_ranges": [
                {
                    "start_date": "2020-12-01T00:00:00Z",
                    "end_date": "2021-01-31T23:59:59Z",
                    "data_types": ["fees_and_rebates"],
                },
                {
                    "start_date": "2021-06-01T00:00:00Z",
                    "end_date": f"{today}T23:59:59Z",
                    "data_types": ["market_data_fees"],
                },
            ],
        },
    }


def test_date_ranges_join_touching_periods_into_one(client: httpx.Client) -> None:
    ranges = get(client, "nasdaq/date-ranges").json()["data"]["date_ranges"]
    assert [(r["start_date"][:10], r["data_types"]) for r in ranges] == [
        ("2019-01-01", ["fees_and_rebates", "legal_regulatory_fees", "port_fees"])
    ]


@pytest.mark.parametrize("name", ["NASDAQ", "Nasdaq Stock Market", "nom", "  nasdaq  "])
def test_a_supplier_is_found_by_code_name_or_alias_in_any_case(
    client: httpx.Client, name: str
) -> None:
    response = get(client, f"{name}/fee-types")
    assert (response.status_code, response.json()["data"]["supplier"]) == (200, "nasdaq")


ENDPOINTS = ["participants", "fee-categories", "actions", "fee-types", "date-ranges"]


@pytest.mark.parametrize("endpoint", ENDPOINTS)
@pytest.mark.parametrize(
    "headers",
    [
        {},
        {"Authorization": "Bearer"},
        {"Authorization": "Bearer wrong-key"},
        {"Authorization": "Bearer revoked-key"},
        {"Authorization": f"Basic {KEYS['full']}"},
        {"x-service-api-access-key": KEYS["full"]},
    ],
    ids=["missing", "empty", "unknown", "revoked", "wrong-scheme", "other-family-header"],
)
def test_missing_or_invalid_key_is_401(
    client: httpx.Client, endpoint: str, headers: dict[str, str]
) -> None:
    response = client.get(f"/api/v1/suppliers/nasdaq/{endpoint}", headers=headers)
    assert (response.status_code, response.json()) == (401, UNAUTHORIZED)


def test_the_key_is_checked_before_any_parameter(client: httpx.Client) -> None:
    response = client.get("/api/v1/suppliers/nowhere/actions?start_date=bad")
    assert (response.status_code, response.json()) == (401, UNAUTHORIZED)


@pytest.mark.parametrize("field", ["start_date", "end_date"])
@pytest.mark.parametrize("value", ["2024-13-01", "2024-02-30", "20240101", "2024-1-1", ""])
@pytest.mark.parametrize("endpoint", ENDPOINTS[:4])
def test_malformed_date_is_400_naming_the_field(
    client: httpx.Client, endpoint: str, field: str, value: str
) -> None:
    response = get(client, f"nasdaq/{endpoint}", **{field: value})
    assert (response.status_code, response.json()) == (
        400,
        {
            "error": "Bad Request",
            "message": "invalid date format",
            "details": {"field": field, "expected_format": "YYYY-MM-DD"},
        },
    )


def test_end_before_start_is_400_naming_end_date(client: httpx.Client) -> None:
    response = get(client, "nasdaq/actions", start_date="2024-05-02", end_date="2024-05-01")
    assert (response.status_code, response.json()) == (
        400,
        {
            "error": "Bad Request",
            "message": "invalid date range",
            "details": {"field": "end_date", "reason": "end_date is before start_date"},
        },
    )


@pytest.mark.parametrize("endpoint", ENDPOINTS[:4])
def test_unknown_supplier_is_404_on_endpoints_1_to_4(client: httpx.Client, endpoint: str) -> None:
    response = get(client, f"nowhere/{endpoint}")
    assert (response.status_code, response.json()) == (404, NOT_FOUND)


def test_unknown_supplier_is_400_on_date_ranges(client: httpx.Client) -> None:
    response = get(client, "nowhere/date-ranges")
    assert (response.status_code, response.json()) == (
        400,
        {"error": "Bad Request", "message": "invalid supplier name"},
    )


@pytest.mark.parametrize("endpoint", ENDPOINTS)
def test_a_venue_outside_the_keys_scope_is_answered_as_unknown(
    client: httpx.Client, endpoint: str
) -> None:
    hidden = client.get(
        f"/api/v1/suppliers/nasdaq/{endpoint}", headers=supplier_headers(KEYS["nyse"])
    )
    unknown = client.get(
        f"/api/v1/suppliers/nowhere/{endpoint}", headers=supplier_headers(KEYS["nyse"])
    )
    assert (hidden.status_code, hidden.json()) == (unknown.status_code, unknown.json())
    visible = client.get(
        f"/api/v1/suppliers/NYSE/{endpoint}", headers=supplier_headers(KEYS["nyse"])
    )
    assert visible.status_code == 200


@pytest.mark.parametrize(
    ("path", "field"),
    [
        ("nasdaq/actions?start=2024-01-01", "start"),
        ("nasdaq/actions?start_date=2024-01-01&start_date=2024-02-01", "start_date"),
        ("nasdaq/date-ranges?start_date=2024-01-01", "start_date"),
    ],
)
def test_unknown_or_repeated_parameters_are_400(
    client: httpx.Client, path: str, field: str
) -> None:
    response = client.get(f"/api/v1/suppliers/{path}", headers=supplier_headers())
    assert response.status_code == 400
    assert response.json()["details"]["field"] == field
