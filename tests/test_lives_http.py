"""A fee line's life over HTTP, on NYSE's standard rates read in a complete schedule of
2023-06-01 and before (`tests.conftest.STANDARD_ROWS`): `presumed` on the answers for a day,
`max_age_days` on each of them, `standard` as a filter, and the changes and ends the schedule
gives."""

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from ingest.pipeline import run_ingest
from service.settings import Settings
from tests.conftest import (
    REGISTRY,
    SCHEDULE,
    STANDARD_ROWS,
    LiveServer,
    exchange_headers,
    supplier_headers,
    write_raw,
)

RESULTS = "/api/v1/fee-schedule-results/"


@pytest.fixture(scope="module")
def nyse(tmp_path_factory: pytest.TempPathFactory, accounts_file: Path) -> Iterator[httpx.Client]:
    root = tmp_path_factory.mktemp("lives")
    write_raw(root / "raw" / "nyse.csv", STANDARD_ROWS)
    run_ingest(root / "raw", root / "data", registry=REGISTRY)
    settings = Settings(data_dir=root / "data", accounts_file=accounts_file)
    with LiveServer(settings) as live, httpx.Client(base_url=live.url, timeout=10) as http:
        yield http


def get(client: httpx.Client, path: str, **params: Any) -> httpx.Response:
    return client.get(path, params=params, headers=exchange_headers())


def lives(items: list[dict[str, Any]]) -> list[tuple[Any, ...]]:
    return sorted(
        (item["fee_charge_type"], item["fee_amount"], item["confirmed_through"], item["presumed"])
        for item in items
    )


def test_an_answer_for_a_day_marks_what_no_source_shows_that_day(nyse: httpx.Client) -> None:
    body = get(nyse, RESULTS, as_of="2023-06-01").json()
    assert lives(body["data"]) == [
        ("Base add", "($0.0016)", "2023-06-01", False),  # confirmed by the schedule that day
        ("Base take", "$0.0030", "2023-06-01", False),
        ("Tier 1 add", "($0.0020)", "2021-03-01", True),  # last shown two years before
    ]
    undated = get(nyse, RESULTS, fee_action="routed").json()["data"]
    assert {item["presumed"] for item in undated} == {None}  # not an answer for a day


def test_max_age_days_leaves_out_what_was_last_confirmed_too_long_before(
    nyse: httpx.Client,
) -> None:
    kept = get(nyse, RESULTS, as_of="2023-06-01", max_age_days="365").json()
    assert sorted(item["fee_charge_type"] for item in kept["data"]) == ["Base add", "Base take"]
    assert kept["meta"]["record_count"] == 2
    latest = get(nyse, RESULTS, latest_only="true", end_date="2023-06-01", max_age_days="365")
    assert lives(latest.json()["data"]) == lives(kept["data"])
    refused = get(nyse, RESULTS, max_age_days="365")
    assert refused.status_code == 422
    assert refused.json()["error"]["details"] == [
        {
            "field": "max_age_days",
            "message": "needs as_of: an age is counted back from the answer's day",
        }
    ]
    assert get(nyse, RESULTS, as_of="2023-06-01", max_age_days="-1").status_code == 422


def test_the_filters_and_the_exchange_take_max_age_days(nyse: httpx.Client) -> None:
    every = get(nyse, f"{RESULTS}filters", as_of="2023-06-01").json()
    recent = get(nyse, f"{RESULTS}filters", as_of="2023-06-01", max_age_days="365").json()
    assert every["meta"]["record_count"] == 3 and recent["meta"]["record_count"] == 2
    detail = get(nyse, "/api/v1/exchanges/nyse", as_of="2026-01-02", max_age_days="365")
    assert detail.status_code == 404  # nothing confirmed within a year of that day


def test_the_supplier_data_marks_and_ages_records_for_a_day(nyse: httpx.Client) -> None:
    path = "/api/v1/suppliers/nyse/data"
    body = nyse.get(path, params={"as_of": "2023-06-01"}, headers=supplier_headers()).json()
    assert sorted((r["description"], r["presumed"]) for r in body["data"]["records"]) == [
        ("Base add", False),
        ("Base take", False),
        ("Tier 1 add", True),
    ]
    recent = {"as_of": "2023-06-01", "max_age_days": "30"}
    body = nyse.get(path, params=recent, headers=supplier_headers()).json()
    assert body["data"]["total_records"] == 2
    refused = nyse.get(path, params={"max_age_days": "30"}, headers=supplier_headers())
    assert (refused.status_code, refused.json()["details"]) == (
        400,
        {"field": "max_age_days", "requires": "as_of"},
    )


def test_standard_keeps_the_venues_standard_rates(nyse: httpx.Client) -> None:
    body = get(nyse, RESULTS, standard="true", as_of="2021-06-01").json()
    assert sorted(item["fee_charge_type"] for item in body["data"]) == [
        "Base add",
        "Base take",
        "Routed",
    ]
    rest = get(nyse, RESULTS, standard="false").json()["data"]
    assert [item["fee_charge_type"] for item in rest] == ["Tier 1 add"]


def test_the_changes_show_a_rate_changed_and_a_line_the_schedule_ended(
    nyse: httpx.Client,
) -> None:
    body = get(nyse, "/api/v1/fee-changes/", standard="true", change_type=["changed", "removed"])
    changes = [
        (item["change_type"], item["effective_date"], item["label"], item["before"]["fee_amount"])
        for item in body.json()["data"]
    ]
    assert changes == [
        ("removed", "2017-01-01", "Old base add", "($0.0012)"),
        ("changed", "2022-01-03", "Base add", "($0.0012)"),
        ("removed", "2023-06-01", "Routed", "$0.0030"),
    ]
    none = get(nyse, "/api/v1/fee-changes/", standard="false", change_type="changed").json()
    assert none["data"] == []


def test_a_line_s_history_names_the_schedule_that_ended_it(nyse: httpx.Client) -> None:
    [routed] = get(nyse, RESULTS, fee_action="routed").json()["data"]
    body = get(nyse, f"/api/v1/fee-lines/{routed['line_id']}").json()
    [record] = body["data"]["records"]
    assert (
        record["effective_end"],
        record["ended_by"],
        record["confirmed_through"],
        record["date_basis"],
        record["standard"],
    ) == ("2023-05-31", SCHEDULE, "2020-01-02", "stated", True)


def test_a_comparison_leaves_out_figures_not_confirmed_for_two_years(nyse: httpx.Client) -> None:
    params = {"fee_type": "equity", "fee_action": "make", "as_of": "2025-06-01"}
    [item] = get(nyse, "/api/v1/compare/", exchange_name="nyse", **params).json()["data"]
    # Base add and Tier 1 add were last confirmed 2023-06-01 and 2021-03-01: both stale.
    assert (item["lines"], item["left_out_stale"], item["lowest"]) == (0, 2, None)
    body = get(nyse, "/api/v1/compare/", exchange_name="nyse", max_age_days="800", **params)
    [item] = body.json()["data"]
    assert (item["lines"], item["left_out_stale"]) == (1, 1)
    assert (item["lowest"]["label"], item["lowest"]["presumed"]) == ("Base add", True)
    assert body.json()["meta"]["max_age_days"] == 800
    standard = get(nyse, "/api/v1/compare/", standard="false", max_age_days="36500", **params)
    [item] = standard.json()["data"]
    assert item["lowest"]["label"] == "Tier 1 add"
