"""Detailed data: exchange details and fee-schedule results (list, one, by version, filters)."""

import csv
import io
import itertools
from typing import Any

import httpx
import pyarrow.parquet as pq
import pytest

from ingest.layout import read_manifest
from ingest.pipeline import IngestResult
from ingest.query import open_version
from service.endpoints import export
from tests.conftest import KEYS, exchange_headers

RESULTS = "/api/v1/fee-schedule-results/"


def results(client: httpx.Client, key: str = KEYS["full"], **params: Any) -> httpx.Response:
    return client.get(RESULTS, params=params, headers=exchange_headers(key))


def direct(version: IngestResult, where: str = "true", **parameters: Any) -> list[str]:
    """Record ids matching a condition, straight from the Parquet."""
    con = open_version(version.version_dir)
    rows = con.execute(f"SELECT record_id FROM fees WHERE {where} ORDER BY 1", parameters)
    return [row[0] for row in rows.fetchall()]


def all_ids(client: httpx.Client, **params: Any) -> list[str]:
    """Walk every page; returns the ids in the order served."""
    ids: list[str] = []
    number = 0
    while True:
        body = results(client, page_size=3, page_number=number, **params).json()
        ids += [item["record_id"] for item in body["data"]]
        number += 1
        if number >= body["meta"]["total_pages"]:
            return ids


def test_list_meta_and_one_whole_item(client: httpx.Client, fixture_version: IngestResult) -> None:
    body = results(client, exchange_name="memx", fee_action="routed", include_source="true").json()
    assert body["meta"] | {"query_time_ms": 0} == {
        "record_count": 1,
        "total_pages": 1,
        "current_page": 0,
        "page_size": 20,
        "query_time_ms": 0,
    }
    [item] = body["data"]
    # The compatible service's record, its fields in its order, then ours.
    assert list(item.items()) == list(
        {
            "record_id": item["record_id"],
            "exchange_name": "memx",
            "scraped_time": item["scraped_time"],
            "version_id": fixture_version.version_id,
            "fee_type": "equity",
            "source_document": "MEMX Fee Schedule",
            "source_link": "https://example.test/memx-fee-schedule",
            "page_number": 2,
            "fee_category": "market_data_fees",
            "fee_charge_type": "Routed",
            "fee_amount": "$0.0030",
            "fee_action": "routed",
            "fee_action_details": "Routed to away markets",
            "fee_basis": "per share",
            "fee_participant": "all",
            "fee_participant_details": "Members with a routing agreement",
            "fee_monthly_volume": "Tier 2",
            "fee_monthly_volume_criteria": "Consolidated ADV",
            "fee_symbol_classification": None,
            "fee_symbol_type": None,
            "fee_trade_type": None,
            "fee_symbol": "SPY, QQQ",
            "fee_excluded_symbols": "TSLA",
            "fee_conditions": None,
            "fee_exclusions": "Excludes ISOs",
            "fee_notes": None,
            "fee_extra_info": "Payable monthly",
            "relationships": None,
            "line_id": "62b5c64c-38e8-b783-ce4b-d47f760727ce",
            "amount": 0.003,
            "currency": "USD",
            "unit": "per_share",
            "effective_start": "2021-06-01",
            "effective_end": None,
            "confirmed_through": "2021-06-01",  # its own start: no later reading
            "presumed": None,  # the answer is not for a day
            "ended_by": None,
            "standard": False,
            "fee_codes": [],  # an older layout's row states no dimension
            "display": None,
            "price_band": None,
            "tapes": [],
            "tier": None,
            "source_kind": "primary",
            "date_basis": "stated",
            "uncertain": False,
            "complete_scope": None,
            "complete_as_of": None,
            "source_file": "memx.csv",
            "source_line": 4,
        }.items()
    )
    manifest = read_manifest(fixture_version.version_dir)
    created = manifest["created_at"].replace("+00:00", "Z")  # when the version was built
    assert item["scraped_time"] == created


def test_provenance_is_hidden_unless_asked_for(client: httpx.Client) -> None:
    [item] = results(client, exchange_name="memx", fee_action="routed").json()["data"]
    sources = ("source_document", "source_link", "page_number", "source_file", "source_line")
    assert [item[name] for name in sources] == [None] * 5


@pytest.mark.parametrize(
    "flags",
    [{"include_footnotes": "true"}, {"include_definitions": "true"},
     {"include_footnotes": "true", "include_definitions": "false"}],
    ids=["footnotes", "definitions", "one-of-two"],
)  # fmt: skip
def test_relationships_are_null_unless_asked_for_then_both_lists(
    client: httpx.Client, flags: dict[str, str]
) -> None:
    [plain] = results(client, exchange_name="memx", fee_action="routed").json()["data"]
    assert plain["relationships"] is None
    [item] = results(client, exchange_name="memx", fee_action="routed", **flags).json()["data"]
    assert item["relationships"] == {"footnotes": [], "definitions": []}  # the data holds none
    one = client.get(f"{RESULTS}{item['record_id']}", params=flags, headers=exchange_headers())
    assert one.json()["data"]["relationships"] == {"footnotes": [], "definitions": []}


@pytest.mark.parametrize(
    ("params", "where"),
    [
        ({}, "true"),
        ({"exchange_name": ["nasdaq", "MEMX"]}, "exchange IN ('nasdaq', 'memx')"),
        ({"fee_type": "option"}, "fee_type = 'option'"),
        ({"fee_category": ["market_data_fees", "legal_regulatory_fee"]},
         "fee_category IN ('market_data_fees', 'legal_regulatory_fee')"),
        ({"fee_action": "make"}, "action = 'make'"),
        ({"fee_participant": ["customer", "firm"]}, "participant IN ('customer', 'firm')"),
        ({"fee_symbol_classification": "equity_class"}, "symbol_classification = 'equity_class'"),
        ({"fee_symbol_type": "penny"}, "symbol_type = 'penny'"),
        ({"fee_trade_type": "complex_order"}, "trade_type = 'complex_order'"),
        ({"fee_type": "equity", "fee_action": ["make", "take"], "exchange_name": "nasdaq"},
         "fee_type = 'equity' AND action IN ('make', 'take') AND exchange = 'nasdaq'"),
        ({"start_date": "2021-02-01", "end_date": "2021-05-31"},
         "effective_start <= DATE '2021-05-31' AND coalesce(effective_end, DATE '9999-12-31') "
         ">= DATE '2021-02-01'"),
        ({"end_date": "2019-12-31"}, "effective_start <= DATE '2019-12-31'"),
        ({"source_kind": "primary", "date_basis": "stated"},
         "source_kind = 'primary' AND date_basis = 'stated'"),
        ({"source_kind": ["secondary", "illustrative"]},
         "source_kind IN ('secondary', 'illustrative')"),
        ({"date_basis": "observed"}, "date_basis = 'observed'"),
        ({"uncertain": "true"}, "uncertain"),
        ({"uncertain": ["false", "true"]}, "uncertain IS NOT NULL"),
    ],
    ids=["all", "venues", "type", "categories", "action", "participants", "classification",
         "symbol-type", "trade-type", "combined", "window", "open-start", "primary-stated",
         "secondary", "observed", "uncertain", "either-flag"],
)  # fmt: skip
def test_filters_match_a_direct_query_and_every_page_walk_sees_each_once(
    client: httpx.Client, fixture_version: IngestResult, params: dict[str, Any], where: str
) -> None:
    expected = direct(fixture_version, where)
    assert results(client, **params).json()["meta"]["record_count"] == len(expected)
    walked = all_ids(client, **params)
    assert sorted(walked) == expected  # every record exactly once


@pytest.mark.parametrize("order_by", ["effective_start", "exchange_name", "fee_type", "amount"])
@pytest.mark.parametrize("order_dir", ["asc", "desc"])
def test_ordering_is_stable_with_record_id_breaking_ties(
    client: httpx.Client, order_by: str, order_dir: str
) -> None:
    first = all_ids(client, order_by=order_by, order_dir=order_dir)
    assert first == all_ids(client, order_by=order_by, order_dir=order_dir)
    body = results(client, order_by=order_by, order_dir=order_dir, page_size=100).json()
    keys = [(item[order_by], item["record_id"]) for item in body["data"]]
    assert [item["record_id"] for item in body["data"]] == first
    values = [key for key, _ in keys if key is not None]
    assert values == sorted(values, reverse=order_dir == "desc")  # nulls last
    for (a, id_a), (b, id_b) in itertools.pairwise(keys):
        if a == b:
            assert id_a < id_b


@pytest.mark.parametrize(
    ("window", "expected_start"),
    [
        ({"end_date": "2021-06-30"}, "2019-01-01"),
        ({"end_date": "2021-07-01"}, "2021-07-01"),
        ({"start_date": "2020-01-01"}, "2021-07-01"),  # open end: in force today
        ({}, "2021-07-01"),
    ],
    ids=["day-before-change", "day-of-change", "start-only", "today"],
)
def test_latest_only_keeps_what_is_in_force_at_the_end_of_the_window(
    client: httpx.Client, window: dict[str, str], expected_start: str
) -> None:
    body = results(
        client, exchange_name="nasdaq", fee_type="equity", fee_action="make", latest_only="true",
        **window,
    ).json()  # fmt: skip
    assert [item["effective_start"] for item in body["data"]] == [expected_start]


@pytest.mark.parametrize("day", ["2019-01-01", "2021-06-30", "2021-07-01", "2023-06-01"])
def test_as_of_answers_the_records_in_force_on_that_day(
    client: httpx.Client, fixture_version: IngestResult, day: str
) -> None:
    """Each venue's records whose effective period holds the day, as plain SQL finds them,
    in the JSON pages and the CSV download alike."""
    con = open_version(fixture_version.version_dir)
    rows = con.execute(
        "SELECT record_id FROM fees WHERE effective_start <= CAST($day AS DATE)"
        " AND (effective_end IS NULL OR effective_end >= CAST($day AS DATE))",
        {"day": day},
    ).fetchall()
    expected = sorted(str(record_id) for (record_id,) in rows)
    body = results(client, as_of=day, page_size=100).json()
    assert sorted(item["record_id"] for item in body["data"]) == expected
    assert body["meta"]["record_count"] == len(expected)
    download = results(client, as_of=day, format="csv")
    assert sorted(row["record_id"] for row in csv.DictReader(io.StringIO(download.text))) == (
        expected
    )


IN_FORCE = (
    "effective_start <= CAST($day AS DATE)"
    " AND (effective_end IS NULL OR effective_end >= CAST($day AS DATE))"
)
DETAIL_COLUMNS = {
    "fee_types": "fee_type",
    "fee_categories": "fee_category",
    "actions": "action",
    "participants": "participant",
    "symbol_classifications": "symbol_classification",
    "symbol_types": "symbol_type",
    "trade_types": "trade_type",
}


def distinct(con: Any, column: str, where: str, day: str) -> list[str]:
    rows = con.execute(
        f"SELECT DISTINCT {column} FROM fees WHERE {where} AND {column} IS NOT NULL", {"day": day}
    ).fetchall()
    return sorted(str(value) for (value,) in rows)


@pytest.mark.parametrize("day", ["2019-01-01", "2021-07-01", "2023-06-01"])
def test_as_of_narrows_the_filters_and_exchange_details_to_that_day(
    client: httpx.Client, fixture_version: IngestResult, day: str
) -> None:
    con = open_version(fixture_version.version_dir)
    [(count,)] = con.execute(f"SELECT count(*) FROM fees WHERE {IN_FORCE}", {"day": day}).fetchall()
    body = client.get(
        "/api/v1/fee-schedule-results/filters", params={"as_of": day}, headers=exchange_headers()
    ).json()
    assert body["meta"]["record_count"] == count
    assert body["data"]["exchange_names"] == distinct(con, "exchange", IN_FORCE, day)
    assert body["data"]["fee_actions"] == distinct(con, "action", IN_FORCE, day)
    assert body["data"]["fee_trade_types"] == distinct(con, "trade_type", IN_FORCE, day)
    where = f"exchange = 'nasdaq' AND {IN_FORCE}"
    detail = client.get(
        "/api/v1/exchanges/nasdaq", params={"as_of": day}, headers=exchange_headers()
    )
    [(records, earliest, latest)] = con.execute(
        "SELECT count(*), min(effective_start), max(coalesce(effective_end,"
        f" greatest(effective_start, CAST($as_of AS DATE)))) FROM fees WHERE {where}",
        {"day": day, "as_of": read_manifest(fixture_version.version_dir)["as_of"]},
    ).fetchall()
    if records == 0:
        assert detail.status_code == 404
        return
    data = detail.json()["data"]
    assert detail.json()["meta"]["record_count"] == records
    assert data["date_range"] == {"earliest": str(earliest), "latest": str(latest)}
    for key, column in DETAIL_COLUMNS.items():
        assert data[key] == distinct(con, column, where, day), key


def test_as_of_with_a_window_or_latest_only_is_a_422_naming_each(client: httpx.Client) -> None:
    response = results(
        client,
        as_of="2023-06-01",
        start_date="2023-01-01",
        latest_only="true",
        end_date="2024-01-01",
    )
    assert response.status_code == 422
    assert response.json()["error"]["details"] == [
        {"field": name, "message": "cannot be combined with as_of"}
        for name in ("start_date", "end_date", "latest_only")
    ]
    bad = results(client, as_of="2023-02-30").json()["error"]["details"]
    assert bad == [{"field": "as_of", "message": "must be a real date in the form YYYY-MM-DD"}]


def test_a_scoped_key_sees_only_its_venues_and_is_refused_others(client: httpx.Client) -> None:
    body = results(client, KEYS["nyse"], page_size=100).json()
    assert {item["exchange_name"] for item in body["data"]} == {"nyse"}
    refused = results(client, KEYS["nyse"], exchange_name="nasdaq")
    assert (refused.status_code, refused.json()["error"]) == (
        403,
        {"code": "FORBIDDEN", "message": "You do not have access to this exchange's data."},
    )


@pytest.mark.parametrize(
    ("params", "field", "message"),
    [
        ({"fee_type": "bond"}, "fee_type", "unknown value(s): bond"),
        ({"fee_action": ["make", "sell"]}, "fee_action", "unknown value(s): sell"),
        ({"exchange_name": "lse"}, "exchange_name", "unknown exchange(s): lse"),
        ({"source_kind": "official"}, "source_kind", "unknown value(s): official"),
        ({"date_basis": "guessed"}, "date_basis", "unknown value(s): guessed"),
        ({"uncertain": "yes"}, "uncertain", "unknown value(s): yes"),
        ({"page_size": "0"}, "page_size", "must be a whole number from 1 to 100"),
        ({"page_size": "101"}, "page_size", "must be a whole number from 1 to 100"),
        ({"page_number": "-1"}, "page_number", "must be a whole number of at least 0"),
        ({"page_number": "1.5"}, "page_number", "must be a whole number of at least 0"),
        ({"page_number": "abc"}, "page_number", "must be a whole number of at least 0"),
        ({"start_date": "2024-02-30"}, "start_date", "must be a real date in the form YYYY-MM-DD"),
        ({"end_date": "2024-1-1"}, "end_date", "must be a real date in the form YYYY-MM-DD"),
        (
            {"start_date": "2024-02-02", "end_date": "2024-02-01"},
            "end_date",
            "is before start_date",
        ),
        ({"order_by": "created"}, "order_by", "not an allowed value"),
        ({"include_footnotes": "1"}, "include_footnotes", "must be true or false"),
        ({"order_dir": "up"}, "order_dir", "not an allowed value"),
        ({"latest_only": "yes"}, "latest_only", "must be true or false"),
        ({"format": "xlsx"}, "format", "not an allowed value"),
        ({"page_size": ["5", "6"]}, "page_size", "given more than once"),
        ({"colour": "red"}, "colour", "unknown parameter"),
    ],
    ids=lambda value: str(value),
)
def test_bad_parameters_are_422_naming_each(
    client: httpx.Client, params: dict[str, Any], field: str, message: str
) -> None:
    response = results(client, **params)
    assert response.status_code == 422
    error = response.json()["error"]
    assert (error["code"], error["message"]) == ("VALIDATION_ERROR", "Invalid query parameters.")
    assert [(d["field"], d["message"]) for d in error["details"]] == [(field, message)]


def test_every_bad_parameter_is_listed_at_once(client: httpx.Client) -> None:
    response = results(client, fee_type="bond", page_size="0", order_by="x", start_date="bad")
    fields = sorted(detail["field"] for detail in response.json()["error"]["details"])
    assert fields == ["fee_type", "order_by", "page_size", "start_date"]
    allowed = {d["field"]: d.get("allowed") for d in response.json()["error"]["details"]}
    assert allowed["fee_type"] == ["equity", "option"]


def test_a_page_past_the_end_is_empty(client: httpx.Client) -> None:
    body = results(client, page_number=99).json()
    assert (body["data"], body["meta"]["current_page"], body["meta"]["total_pages"]) == ([], 99, 1)


def test_a_result_by_id_equals_its_list_item(client: httpx.Client) -> None:
    [item] = results(client, exchange_name="memx", fee_action="routed").json()["data"]
    response = client.get(f"{RESULTS}{item['record_id']}", headers=exchange_headers())
    assert response.json()["data"] == item
    assert response.json()["meta"]["record_count"] == 1
    hidden = client.get(f"{RESULTS}{item['record_id']}", headers=exchange_headers(KEYS["nyse"]))
    assert (hidden.status_code, hidden.json()["error"]["code"]) == (403, "FORBIDDEN")
    missing = client.get(f"{RESULTS}no-such-id", headers=exchange_headers())
    assert (missing.status_code, missing.json()["error"]) == (
        404,
        {"code": "NOT_FOUND", "message": "Fee schedule result not found."},
    )


def test_results_by_version(client: httpx.Client, fixture_version: IngestResult) -> None:
    path = f"{RESULTS}versions/{fixture_version.version_id}"
    body = client.get(path, params={"page_size": 100}, headers=exchange_headers()).json()
    assert body["meta"]["record_count"] == 13
    assert {item["version_id"] for item in body["data"]} == {fixture_version.version_id}
    scoped = client.get(path, params={"page_size": 100}, headers=exchange_headers(KEYS["nyse"]))
    assert {item["exchange_name"] for item in scoped.json()["data"]} == {"nyse"}
    missing = client.get(f"{RESULTS}versions/nope", headers=exchange_headers())
    assert (missing.status_code, missing.json()["error"]["message"]) == (404, "Version not found.")


def test_filters_list_every_value_across_visible_venues(client: httpx.Client) -> None:
    body = client.get(f"{RESULTS}filters", headers=exchange_headers()).json()
    assert body["data"]["exchange_names"] == ["memx", "nasdaq", "nyse"]
    assert body["data"]["fee_actions"] == ["make", "open", "other", "routed", "take"]
    assert body["data"]["fee_trade_types"] == ["complex_order", "not_applicable", "simple_order"]
    assert body["meta"]["record_count"] == 13
    narrowed = client.get(
        f"{RESULTS}filters", params={"exchange_name": "memx"}, headers=exchange_headers()
    ).json()
    assert narrowed["data"] == {
        "exchange_names": ["memx"],
        "fee_types": ["equity"],
        "fee_categories": ["fees_and_rebates", "market_data_fees"],
        "fee_actions": ["make", "routed", "take"],
        "fee_participants": ["all", "other", "professional"],
        "fee_symbol_classifications": [],
        "fee_symbol_types": [],
        "fee_trade_types": [],
    }
    assert narrowed["meta"]["record_count"] == 3
    scoped = client.get(f"{RESULTS}filters", headers=exchange_headers(KEYS["nyse"])).json()
    assert scoped["data"]["exchange_names"] == ["nyse"]


def test_exchange_details(client: httpx.Client, fixture_version: IngestResult) -> None:
    response = client.get("/api/v1/exchanges/memx", headers=exchange_headers())
    as_of = read_manifest(fixture_version.version_dir)["as_of"]
    body = response.json()
    assert body["data"] == {
        "name": "memx",
        "display_name": "MEMX",
        "date_range": {"earliest": "2020-12-01", "latest": as_of},  # one record still in force
        "fee_types": ["equity"],
        "fee_categories": ["fees_and_rebates", "market_data_fees"],
        "actions": ["make", "routed", "take"],
        "participants": ["all", "other", "professional"],
        "symbol_classifications": [],
        "symbol_types": [],
        "trade_types": [],
    }
    assert body["meta"]["record_count"] == 3


@pytest.mark.parametrize(
    ("name", "key", "status", "message"),
    [
        ("nowhere", KEYS["full"], 404, "Exchange not found."),
        ("cboe", KEYS["full"], 404, "Exchange has no fee schedule records."),  # in the registry
        ("nasdaq", KEYS["nyse"], 403, "You do not have access to the requested exchange."),
    ],
)
def test_exchange_details_errors(
    client: httpx.Client, name: str, key: str, status: int, message: str
) -> None:
    response = client.get(f"/api/v1/exchanges/{name}", headers=exchange_headers(key))
    assert (response.status_code, response.json()["error"]["message"]) == (status, message)


def test_csv_export_matches_a_direct_query_row_for_row(
    client: httpx.Client, fixture_version: IngestResult
) -> None:
    response = results(client, format="csv", order_by="amount", order_dir="asc")
    assert response.headers["content-type"].startswith("text/csv")
    assert "attachment" in response.headers["content-disposition"]
    rows = list(csv.DictReader(io.StringIO(response.text)))
    con = open_version(fixture_version.version_dir)
    expected = con.execute(
        "SELECT record_id, fee_amount, amount FROM fees ORDER BY amount ASC NULLS LAST, record_id"
    ).fetchall()
    assert [(r["record_id"], r["fee_amount"]) for r in rows] == [(i, f) for i, f, _ in expected]
    assert [r["amount"] or None for r in rows] == [
        None if a is None else f"{a:.8f}" for _, _, a in expected
    ]


@pytest.mark.parametrize("kind", ["csv", "parquet"])
def test_a_download_within_whole_bytes_is_sent_in_one_piece_with_its_length(
    client: httpx.Client, kind: str
) -> None:
    response, again = results(client, format=kind), results(client, format=kind)
    assert int(response.headers["content-length"]) == len(response.content) > 0
    assert "transfer-encoding" not in response.headers
    # Kept in the response cache, it is given again as it was, an attachment with its name.
    assert again.content == response.content
    assert again.headers["content-disposition"] == response.headers["content-disposition"]


def test_a_larger_download_streams_as_it_is_made_and_holds_the_same_rows(
    client: httpx.Client, monkeypatch: pytest.MonkeyPatch
) -> None:
    whole = results(client, format="csv", exchange_name="nasdaq", order_by="amount")
    monkeypatch.setattr(export, "WHOLE_BYTES", 100)
    # The same rows in another order: the answer above is in the response cache now.
    streamed = results(client, format="csv", exchange_name="nasdaq", order_dir="desc")
    assert streamed.headers["transfer-encoding"] == "chunked"
    assert "content-length" not in streamed.headers
    assert len(whole.content) > 100
    assert sorted(streamed.text.splitlines()) == sorted(whole.text.splitlines())


def test_csv_export_prints_scraped_time_as_the_json_answer_does(client: httpx.Client) -> None:
    page = results(client, exchange_name="nasdaq", page_size=100).json()["data"]
    rows = csv.DictReader(io.StringIO(results(client, exchange_name="nasdaq", format="csv").text))
    as_csv = {row["record_id"]: row["scraped_time"] for row in rows}
    assert as_csv == {item["record_id"]: item["scraped_time"] for item in page}
    assert all(value.endswith("Z") and "T" in value for value in as_csv.values())


@pytest.mark.parametrize("kind", ["csv", "parquet"])
def test_a_download_carries_the_json_items_fields_in_the_same_order(
    client: httpx.Client, kind: str
) -> None:
    params = {"exchange_name": "memx", "include_footnotes": "true"}
    names = list(results(client, **params).json()["data"][0])
    response = results(client, **params, format=kind)
    if kind == "csv":
        assert next(csv.reader(io.StringIO(response.text))) == names
    else:
        assert pq.read_table(io.BytesIO(response.content)).column_names == names


def test_exports_carry_the_provenance_the_json_answer_does_and_obey_its_filters(
    client: httpx.Client,
) -> None:
    params = {"exchange_name": "memx", "source_kind": "secondary", "uncertain": "true"}
    [item] = results(client, **params).json()["data"]
    assert (
        item["fee_charge_type"],
        item["source_kind"],
        item["date_basis"],
        item["uncertain"],
    ) == (
        "Remove",
        "secondary",
        "observed",
        True,
    )
    [row] = list(csv.DictReader(io.StringIO(results(client, **params, format="csv").text)))
    assert (row["record_id"], row["source_kind"], row["date_basis"], row["uncertain"]) == (
        item["record_id"],
        "secondary",
        "observed",
        "true",
    )
    table = pq.read_table(io.BytesIO(results(client, **params, format="parquet").content))
    assert table.select(["record_id", "source_kind", "date_basis", "uncertain"]).to_pylist() == [
        {"record_id": item["record_id"], "source_kind": "secondary", "date_basis": "observed",
         "uncertain": True}
    ]  # fmt: skip


def test_exports_carry_relationships_when_asked(client: httpx.Client) -> None:
    flagged = {"exchange_name": "memx", "include_definitions": "true"}
    rows = list(csv.DictReader(io.StringIO(results(client, format="csv", **flagged).text)))
    assert {row["relationships"] for row in rows} == {'{"footnotes":[],"definitions":[]}'}
    unflagged = results(client, format="csv", exchange_name="memx").text
    plain = list(csv.DictReader(io.StringIO(unflagged)))
    assert {row["relationships"] for row in plain} == {""}
    table = pq.read_table(io.BytesIO(results(client, format="parquet", **flagged).content))
    assert table.column("relationships").to_pylist() == [{"footnotes": [], "definitions": []}] * 3
    assert str(table.schema.field("relationships").type) == (
        "struct<footnotes: list<element: struct<text: string>>, "
        "definitions: list<element: struct<term: string, text: string>>>"
    )


def test_parquet_export_by_accept_header_keeps_types(
    client: httpx.Client, fixture_version: IngestResult
) -> None:
    response = client.get(
        RESULTS,
        params={"exchange_name": "nasdaq"},
        headers=exchange_headers() | {"Accept": "application/vnd.apache.parquet"},
    )
    assert response.headers["content-type"] == "application/vnd.apache.parquet"
    table = pq.read_table(io.BytesIO(response.content))
    assert table.num_rows == 8
    assert str(table.schema.field("amount").type) == "decimal128(20, 8)"
    assert str(table.schema.field("effective_start").type) == "date32[day]"
    ids = sorted(table.column("record_id").to_pylist())
    assert ids == direct(fixture_version, "exchange = 'nasdaq'")


def test_an_empty_export_still_carries_its_columns(client: httpx.Client) -> None:
    as_csv = results(client, format="csv", end_date="1999-01-01")
    assert as_csv.text.splitlines()[0].startswith('"record_id","exchange_name"')
    assert len(as_csv.text.splitlines()) == 1
    as_parquet = results(client, format="parquet", end_date="1999-01-01")
    table = pq.read_table(io.BytesIO(as_parquet.content))
    assert (table.num_rows, table.column_names[0]) == (0, "record_id")


@pytest.mark.parametrize(
    ("accept", "kind"),
    [
        ("text/csv", "csv"),
        ("application/json, text/csv;q=0.5", "json"),
        ("text/csv;q=0.1, application/json", "json"),
        ("application/vnd.apache.parquet;q=0.9, text/csv;q=0.8", "parquet"),
        ("*/*", "json"),
        ("", "json"),
    ],
)
def test_the_accept_header_chooses_by_preference(accept: str, kind: str) -> None:
    assert export.wanted_format(None, accept) == kind
    assert export.wanted_format("csv", accept) == "csv"  # the parameter wins


@pytest.mark.parametrize("order_by", ["effective_start", "exchange_name", "fee_type", "amount"])
@pytest.mark.parametrize("order_dir", ["asc", "desc"])
@pytest.mark.parametrize("params", [{}, {"fee_type": "equity"}], ids=["all", "equity"])
def test_a_page_walk_equals_duckdbs_own_order(
    client: httpx.Client,
    fixture_version: IngestResult,
    order_by: str,
    order_dir: str,
    params: dict[str, str],
) -> None:
    column = {"exchange_name": "exchange"}.get(order_by, order_by)
    where = "fee_type = 'equity'" if params else "true"
    con = open_version(fixture_version.version_dir)
    expected = con.execute(
        f"SELECT record_id FROM fees WHERE {where} "
        f"ORDER BY {column} {order_dir} NULLS LAST, record_id ASC"
    ).fetchall()
    walked = all_ids(client, order_by=order_by, order_dir=order_dir, **params)
    assert walked == [record_id for (record_id,) in expected]
