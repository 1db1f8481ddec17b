"""Where it is cheapest (`GET /compare/`): each venue's lines in force on a day, and its lowest
and highest amounts in one unit, against plain SQL over the Parquet files (window functions
ranking each venue's records in force), then over HTTP: order, shape, downloads, scope and
refusals."""

import io
import random
import re
from datetime import date, timedelta
from pathlib import Path
from typing import Any

import duckdb
import httpx
import numpy as np
import pyarrow.csv as pacsv
import pytest

from ingest.classes import amount_order
from ingest.layout import NO_RECORD
from ingest.schema import CLASSIFYING, CLOSED_VALUES, PROVENANCE_COLUMNS, UNITS
from service.dataset import queries
from service.dataset.classes import Spread
from service.dataset.version import Dataset
from tests.conftest import KEYS, Indexed, exchange_headers

COMPARE = "/api/v1/compare/"
REQUESTS = 200

# Each venue's matching records in force on $day: those with an amount in $unit are compared
# (counted as lines: one record per line on a day), ranked both ways; the others are counted.
# Records last confirmed before $oldest (when it is given) are left out, counted apart.
SPREADS = """
WITH matching AS (
    SELECT exchange, line_id, record_id, amount,
           coalesce(unit = $unit AND amount IS NOT NULL, false) AS compared,
           coalesce(confirmed_through < $oldest, false) AS stale
    FROM fees
    WHERE {where} AND effective_start <= $day AND (effective_end IS NULL OR effective_end >= $day)
), ranked AS (
    SELECT *,
        row_number() OVER (PARTITION BY exchange, compared, stale ORDER BY amount, record_id)
            AS up,
        row_number() OVER (PARTITION BY exchange, compared, stale ORDER BY amount DESC, record_id)
            AS down
    FROM matching
)
SELECT exchange,
    count(DISTINCT line_id) FILTER (WHERE compared AND NOT stale),
    any_value(record_id) FILTER (WHERE compared AND NOT stale AND up = 1),
    any_value(record_id) FILTER (WHERE compared AND NOT stale AND down = 1),
    count(*) FILTER (WHERE NOT compared AND NOT stale),
    count(*) FILTER (WHERE stale)
FROM ranked
GROUP BY exchange
ORDER BY exchange
"""
FILTERED = {
    name: column
    for name, column in queries.RESULT_FILTERS.items()
    if column in (*CLASSIFYING, *PROVENANCE_COLUMNS, "standard") and column != "exchange"
}


def sql_spreads(
    plain: duckdb.DuckDBPyConnection, selection: queries.Selection, unit: str
) -> dict[str, tuple[Any, ...]]:
    clauses, parameters = ["list_contains($venues, exchange)"], {"venues": selection.venues}
    for name, wanted in selection.values.items():
        clauses.append(f"list_contains(${name}, CAST({FILTERED[name]} AS VARCHAR))")
        parameters[name] = wanted
    sql = SPREADS.format(where=" AND ".join(clauses))
    day, oldest = selection.in_force_on, selection.oldest_confirmation()
    rows = plain.execute(sql, parameters | {"day": day, "unit": unit, "oldest": oldest}).fetchall()
    return {row[0]: tuple(row[1:]) for row in rows}


def index_spreads(dataset: Dataset, spreads: dict[str, Spread]) -> dict[str, tuple[Any, ...]]:
    """The index's spreads as the SQL above answers them (record ids for positions)."""
    found = {}
    for venue, spread in spreads.items():
        positions = [NO_RECORD if at is None else at for at in (spread.lowest, spread.highest)]
        lowest, highest = dataset.summary.table(positions)["record_id"].to_pylist()
        found[venue] = (spread.compared, lowest, highest, spread.elsewhere, spread.stale)
    return found


def test_spreads_are_exactly_what_sql_finds(indexed: Indexed) -> None:
    """Seeded random days, venues, filters and units against the SQL definition."""
    rng = random.Random(20261127)
    dataset = indexed.dataset
    compared = 0
    for _ in range(REQUESTS):
        venues = rng.sample(indexed.venues, rng.randrange(1, len(indexed.venues) + 1))
        values = {"fee_type": [rng.choice(CLOSED_VALUES["fee_type"])]}
        for name, column in FILTERED.items():
            if column != "fee_type" and rng.random() < 0.25:
                values[name] = rng.sample(CLOSED_VALUES[column], rng.randrange(1, 3))
        day = (
            rng.choice(indexed.days) + timedelta(days=rng.choice([-1, 0, 1]))
            if rng.random() < 0.4
            else date(2018, 6, 1) + timedelta(days=rng.randrange(3500))
        )
        usual = {"equity": "per_share", "option": "per_contract"}[values["fee_type"][0]]
        unit = usual if rng.random() < 0.7 else rng.choice(UNITS)
        max_age = rng.choice([None, None, 0, 365, 730, 3650])
        selection = queries.Selection(
            venues=venues, values=values, in_force_on=day, max_age_days=max_age
        )
        found = index_spreads(dataset, dataset.classes.spreads(selection, unit))
        assert found == sql_spreads(indexed.plain, selection, unit), (venues, values, day, max_age)
        compared += sum(spread[0] > 0 for spread in found.values())
    assert compared > REQUESTS // 2  # real comparisons, not only empty ones


@pytest.mark.parametrize("action", ["routed", "make", "take"])
def test_an_age_limit_counts_stale_records_apart_as_sql_does(indexed: Indexed, action: str) -> None:
    """NYSE's standard rates of the fixture (`tests.conftest.STANDARD_ROWS`): the routed fee a
    complete schedule ended on 2023-05-31, last confirmed 2020-01-02, is stale in force on
    2022-06-01 a year back; the open ones are stale by their own readings."""
    for day, age in ((date(2022, 6, 1), 365), (date(2025, 6, 1), 730), (date(2023, 6, 1), 0)):
        selection = queries.Selection(
            venues=["nyse"],
            values={"fee_type": ["equity"], "fee_action": [action]},
            in_force_on=day,
            max_age_days=age,
        )
        spreads = indexed.dataset.classes.spreads(selection, "per_share")
        found = index_spreads(indexed.dataset, spreads)
        assert found == sql_spreads(indexed.plain, selection, "per_share"), (day, age)
        if action == "routed" and day.year == 2022:
            assert found["nyse"][4] >= 1  # the schedule-ended routed fee, stale


def get(client: httpx.Client, key: str = KEYS["full"], **params: Any) -> httpx.Response:
    return client.get(COMPARE, params=params, headers=exchange_headers(key))


def test_the_venue_best_for_the_member_comes_first(client: httpx.Client) -> None:
    """Adding displayed equity liquidity on 2022-01-01 in the fixture: rebates are negative, so
    the biggest rebate is the lowest amount, first; a venue with no line comes last."""
    body = get(client, fee_type="equity", fee_action="make", as_of="2022-01-01").json()
    assert body["meta"] | {"query_time_ms": 0} == {
        "as_of": "2022-01-01", "fee_type": "equity", "unit": "per_share", "max_age_days": 730,
        "left_out_stale": 0, "record_count": 3, "query_time_ms": 0,
    }  # fmt: skip
    items = body["data"]
    lowest = [item["lowest"]["amount"] for item in items if item["lowest"]]
    assert lowest == sorted(lowest) and len(lowest) >= 2
    assert all(item["lowest"] for item in items[: len(lowest)])
    nasdaq = next(item for item in items if item["exchange_name"] == "nasdaq")
    assert nasdaq["display_name"] and nasdaq["lines"] >= 1
    assert nasdaq["lowest"]["fee_amount"] == "($0.0021)"
    assert nasdaq["lowest"]["source_document"] == "Nasdaq Price List 2021"
    assert set(nasdaq["lowest"]) == {
        "amount", "unit", "fee_amount", "label", "record_id", "line_id", "effective_start",
        "effective_end", "confirmed_through", "presumed", "standard", "source_document",
        "source_link", "source_kind", "date_basis", "uncertain",
    }  # fmt: skip
    assert (nasdaq["lowest"]["confirmed_through"], nasdaq["lowest"]["presumed"]) == (
        "2021-07-01", True,
    )  # fmt: skip
    empty = [item for item in items if item["lowest"] is None]
    assert all(item["highest"] is None and item["lines"] == 0 for item in empty)
    assert items[len(lowest) :] == empty


def test_provenance_filters_keep_the_comparison_to_figures_not_in_doubt(
    client: httpx.Client,
) -> None:
    """MEMX's one removal fee of the fixture in force on 2021-01-15 is uncertain, read in a
    broker's copy: compared unfiltered, and with `uncertain=false` or `source_kind=primary` not
    counted; as on the results, a record that does not say (schema 1) matches neither value."""
    params = {"fee_type": "equity", "fee_action": "take", "as_of": "2021-01-15"}

    def memx(**provenance: str) -> dict[str, Any]:
        items = get(client, **params, **provenance).json()["data"]
        return next(item for item in items if item["exchange_name"] == "memx")

    doubted = memx()["lowest"]
    assert (doubted["uncertain"], doubted["source_kind"], doubted["date_basis"]) == (
        True, "secondary", "observed",
    )  # fmt: skip
    assert memx(uncertain="true")["lowest"] == doubted
    for provenance in ({"uncertain": "false"}, {"source_kind": "primary"}):
        assert memx(**provenance) | {"display_name": ""} == {
            "exchange_name": "memx", "display_name": "", "lines": 0, "lines_in_other_units": 0,
            "left_out_stale": 0, "lowest": None, "highest": None,
        }, provenance  # fmt: skip
    others = get(client, **params, uncertain="true").json()["data"]
    assert all(item["lowest"] is None for item in others if item["exchange_name"] != "memx")


def test_another_unit_is_counted_not_compared(client: httpx.Client) -> None:
    share = get(client, fee_type="equity", as_of="2022-01-01").json()["data"]
    contract = get(client, fee_type="equity", as_of="2022-01-01", unit="per_contract").json()
    for per_share, per_contract in zip(
        sorted(share, key=lambda item: item["exchange_name"]),
        sorted(contract["data"], key=lambda item: item["exchange_name"]),
        strict=True,
    ):
        in_force = per_share["lines"] + per_share["lines_in_other_units"]
        assert per_contract["lines"] + per_contract["lines_in_other_units"] == in_force
    assert contract["meta"]["unit"] == "per_contract"


def test_the_csv_download_is_the_json_answer_flat(client: httpx.Client) -> None:
    params = {"fee_type": "equity", "as_of": "2022-01-01"}
    items = get(client, **params).json()["data"]
    response = get(client, format="csv", **params)
    assert response.status_code == 200 and response.headers["content-type"].startswith("text/csv")
    assert 'filename="compare-2022-01-01-' in response.headers["content-disposition"]
    rows = pacsv.read_csv(io.BytesIO(response.content)).to_pylist()
    assert [row["exchange_name"] for row in rows] == [item["exchange_name"] for item in items]
    for row, item in zip(rows, items, strict=True):
        assert row["lines"] == item["lines"]
        assert (row["lowest_record_id"] or None) == (item["lowest"] and item["lowest"]["record_id"])


def test_a_scoped_key_compares_only_its_venues(client: httpx.Client) -> None:
    items = get(client, KEYS["nyse"], fee_type="equity").json()["data"]
    assert [item["exchange_name"] for item in items] == ["nyse"]
    response = get(client, KEYS["nyse"], fee_type="equity", exchange_name="nasdaq")
    assert response.status_code == 403


@pytest.mark.parametrize(
    ("params", "fields"),
    [
        ({}, ["fee_type"]),
        ({"fee_type": "futures", "unit": "per_bushel"}, ["fee_type", "unit"]),
        ({"fee_type": "equity", "as_of": "2024-02-30", "start_date": "2024-01-01"},
         ["as_of", "start_date"]),
        ({"fee_type": "equity", "fee_category": "cheap"}, ["fee_category"]),
    ],
    ids=["no-fee-type", "unknown-values", "bad-day-and-unknown-parameter", "unknown-category"],
)  # fmt: skip
def test_bad_parameters_are_a_422_naming_each(
    client: httpx.Client, params: dict[str, str], fields: list[str]
) -> None:
    response = get(client, **params)
    assert response.status_code == 422
    assert sorted(detail["field"] for detail in response.json()["error"]["details"]) == fields


@pytest.mark.parametrize("widest", [1_000, 2**40], ids=["one-64-bit-key", "lexsorted"])
def test_the_class_index_orders_by_group_amount_and_record(widest: int) -> None:
    """Both ways the ingest orders the class index (one packed key, or a lexsort when the
    three numbers are too wide for one) give the order a lexsort gives."""
    rng = np.random.default_rng(5)
    size = 5_000
    group = rng.integers(0, 40, size)
    amount = rng.integers(0, widest, size, dtype=np.uint64)
    amount[rng.random(size) < 0.3] = 7  # ties on the amount, decided by the record
    record = rng.permutation(size).astype(np.uint32)
    expected = np.lexsort((record, amount, group))
    assert (amount_order(group, amount, record) == expected).all()


def test_the_readme_names_every_field_of_an_item(client: httpx.Client) -> None:
    """README's table of a `/compare/` item lists exactly the fields of a real answer (issue
    37: `lines` read like a list where the answer has a count)."""
    readme = (Path(__file__).parent.parent / "README.md").read_text(encoding="utf-8")
    table = readme.split("| field of an item | type | what it holds |", 1)[1].split("\n\n", 1)[0]
    rows = [line.strip().split("|") for line in table.splitlines()[2:]]
    listed = {name for row in rows for name in re.findall(r"`(\w+)`", row[1])}
    record = set(re.findall(r"`(\w+)`", rows[-1][3].split("Each has", 1)[1]))
    answer = get(client, fee_type="equity", fee_action="make", as_of="2022-01-01").json()
    item = next(item for item in answer["data"] if item["lowest"] is not None)
    assert listed == set(item)
    assert record == set(item["lowest"]) == set(item["highest"])
