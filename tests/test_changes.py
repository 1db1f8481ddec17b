"""The changes of fee lines (`GET /fee-changes/`): the change list the ingest writes and the
pages the service finds in it, against the plain SQL definition of the rules (window functions
over `line_id` on the Parquet files), then over HTTP: the answer's shape, its downloads, its
scope and its refusals."""

import io
import random
from datetime import date, timedelta
from typing import Any

import duckdb
import httpx
import numpy as np
import pyarrow.csv as pacsv
import pyarrow.parquet as pq
import pytest

from ingest.layout import (
    CHANGE_FILES,
    CHANGE_TYPES,
    CLASS_FILES,
    CLASSED,
    CODE_TYPES,
    CODES_FILE,
    INDEX_DIR,
    LINE_FILES,
    PRICE_ANSWERS_FILE,
    PRICE_KEY_STARTS_FILE,
    PRICE_KEYS_FILE,
    PRICE_LINES_FILE,
    PRICE_ROWS_FILE,
    PRINTED_CODES_FILE,
    PRINTED_FILE,
    RECORD_ORDER,
    SUMMARY_FILE,
)
from ingest.pipeline import IngestResult
from ingest.query import open_version
from ingest.schema import CLOSED_VALUES
from service.dataset import changes, pager, queries
from service.dataset.version import Dataset
from tests.conftest import KEYS, Indexed, exchange_headers

CHANGES = "/api/v1/fee-changes/"
REQUESTS = 300

# The rules (`ingest.changes`), as plain SQL: each record's neighbours in its line, then one
# row per change, as (day, line, type, record before, record after).
CHANGE_LIST = """
WITH records AS (
    SELECT
        CAST(record_id AS VARCHAR) AS id, line_id, exchange, fee_type, fee_category, action,
        participant, effective_start AS starts, effective_end AS ends,
        CASE WHEN amount IS NULL THEN fee_amount
             ELSE CAST(amount AS VARCHAR) || ' ' || coalesce(currency, '') END AS figure,
        fee_basis, unit
    FROM fees
), neighbours AS (
    SELECT *,
        lag(id) OVER line AS before_id, lag(ends) OVER line AS before_ends,
        lag(figure) OVER line AS before_figure, lag(fee_basis) OVER line AS before_basis,
        lag(unit) OVER line AS before_unit, lead(starts) OVER line AS next_starts
    FROM records
    WINDOW line AS (PARTITION BY line_id ORDER BY starts)
), changes AS (
    SELECT starts AS day, 'added' AS change_type, NULL AS before_id, id AS after_id, *
        EXCLUDE (before_id)
    FROM neighbours WHERE before_id IS NULL OR starts > before_ends + 1
    UNION ALL BY NAME
    SELECT starts AS day, 'changed' AS change_type, before_id, id AS after_id, *
        EXCLUDE (before_id)
    FROM neighbours
    WHERE starts = before_ends + 1 AND (figure IS DISTINCT FROM before_figure
        OR fee_basis IS DISTINCT FROM before_basis OR unit IS DISTINCT FROM before_unit)
    UNION ALL BY NAME
    SELECT ends + 1 AS day, 'removed' AS change_type, id AS before_id, NULL AS after_id, *
        EXCLUDE (before_id)
    FROM neighbours WHERE ends IS NOT NULL AND (next_starts IS NULL OR next_starts > ends + 1)
)
SELECT strftime(day, '%Y-%m-%d'), change_type, before_id, after_id
FROM changes
WHERE {where}
ORDER BY day {direction}, line_id {direction}
"""
# The filter parameters the change list takes, and their dataset columns.
FILTERED = {name: column for name, column in queries.RESULT_FILTERS.items() if column in CLASSED}
Window = tuple[date | None, date | None]


def sql_changes(
    plain: duckdb.DuckDBPyConnection, venues: list[str] | None, values: dict[str, list[str]],
    types: list[str] | None, window: Window, descending: bool,
) -> list[tuple[Any, ...]]:  # fmt: skip
    clauses, parameters = ["true"], {}
    if venues is not None:
        clauses.append("list_contains($venues, exchange)")
        parameters["venues"] = venues
    for name, wanted in values.items():
        clauses.append(f"list_contains(${name}, {FILTERED[name]})")
        parameters[name] = wanted
    if types is not None:
        clauses.append("list_contains($types, change_type)")
        parameters["types"] = types
    for bound, name, condition in zip(
        window, ("first", "last"), ("day >= $first", "day <= $last"), strict=True
    ):
        if bound is not None:
            clauses.append(condition)
            parameters[name] = bound
    sql = CHANGE_LIST.format(where=" AND ".join(clauses), direction="DESC" if descending else "ASC")
    return [tuple(row) for row in plain.execute(sql, parameters).fetchall()]


def served_changes(dataset: Dataset, entries: list[int]) -> list[tuple[Any, ...]]:
    """The changes at `entries`, as (day, type, record id before, record id after)."""
    found = dataset.changes.columns(np.asarray(entries, dtype=np.int64))
    before, after = (
        dataset.summary.table(found[side]).column("record_id").to_pylist()
        for side in ("before", "after")
    )
    days = [(date(1970, 1, 1) + timedelta(days=int(day))).isoformat() for day in found["day"]]
    types = [CHANGE_TYPES[int(code) - 1] for code in found["type"]]
    return list(zip(days, types, before, after, strict=True))


def random_request(
    rng: random.Random, indexed: Indexed
) -> tuple[
    list[str] | None, dict[str, list[str]], list[str] | None, tuple[date | None, date | None]
]:
    def maybe_day() -> date | None:
        draw = rng.random()
        if draw < 0.25:  # a day some period starts or ends on, or the day after: the edges
            return rng.choice(indexed.days) + timedelta(days=rng.choice([0, 1]))
        return date(2018, 6, 1) + timedelta(days=rng.randrange(3500)) if draw < 0.5 else None

    venues = None
    if rng.random() < 0.6:
        venues = rng.sample(indexed.venues, rng.randrange(0, 4))
    values = {
        name: rng.sample(CLOSED_VALUES[column], rng.randrange(1, 3))
        for name, column in FILTERED.items()
        if rng.random() < 0.25
    }
    types = rng.sample(CHANGE_TYPES, rng.randrange(1, 3)) if rng.random() < 0.3 else None
    first, last = maybe_day(), maybe_day()
    if first is not None and last is not None and last < first:
        first, last = last, first
    return venues, values, types, (first, last)


@pytest.mark.parametrize(
    "grouping", ["cheaper", "by venue", "by class"], ids=lambda name: name.replace(" ", "-")
)
@pytest.mark.parametrize("merged", [changes.MERGED, 0], ids=["early-pages-merged", "bisected"])
def test_pages_of_changes_are_exactly_what_sql_finds(
    indexed: Indexed, grouping: str, merged: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Seeded random requests (venues, every filter, change types, windows, both directions,
    pages near and past the end) against the rules written as SQL windows: each grouping of
    the list, and pages found both ways."""
    monkeypatch.setattr(changes, "MERGED", merged)
    if grouping != "cheaper":
        monkeypatch.setattr(changes, "by_class", lambda *_: grouping == "by class")
    requests = REQUESTS if grouping == "cheaper" and merged else REQUESTS // 3
    rng = random.Random(20261126)
    dataset = indexed.dataset
    nonempty = 0
    for _ in range(requests):
        venues, values, types, window = random_request(rng, indexed)
        descending = rng.random() < 0.5
        expected = sql_changes(indexed.plain, venues, values, types, window, descending)
        selection = queries.Selection(venues=venues, values=values)
        chosen = dataset.change_filter(selection, types, *window)
        size = rng.choice([1, 7, 20, 100])
        last_page = max(len(expected) - 1, 0) // size
        number = rng.choice([0, 1, rng.randrange(last_page + 1), last_page, last_page + 1])
        if chosen is None:
            assert expected == []
            continue
        total, entries = pager.page(
            dataset.changes.ordering(chosen, descending), number * size, size
        )
        request = (venues, values, types, window, descending, number, size)
        assert total == len(expected), request
        assert served_changes(dataset, entries) == expected[number * size :][:size], request
        nonempty += bool(entries)
    assert nonempty > requests // 3  # real pages, not only empty ones


def test_the_synthetic_lines_hold_every_kind_of_change(indexed: Indexed) -> None:
    """So the comparison above meets each rule: gaps, ends, changes and unchanged renewals."""
    found = sql_changes(indexed.plain, None, {}, None, (None, None), False)
    kinds = {change_type for _, change_type, _, _ in found}
    assert kinds == set(CHANGE_TYPES)
    [(renewals,)] = indexed.plain.execute(
        """SELECT count(*) FROM (
               SELECT effective_start, lag(effective_end) OVER line AS before_ends,
                      fee_amount = lag(fee_amount) OVER line AS same
               FROM fees WINDOW line AS (PARTITION BY line_id ORDER BY effective_start)
           ) WHERE effective_start = before_ends + 1 AND same"""
    ).fetchall()
    assert renewals > 0  # a record following one with the same figure: no change listed


@pytest.mark.parametrize("chunk", [7, 1_000])
def test_ordered_chunks_walk_every_change_in_page_order(indexed: Indexed, chunk: int) -> None:
    dataset = indexed.dataset
    selection = queries.Selection(venues=indexed.venues[:4])
    for descending in (False, True):
        chosen = dataset.change_filter(selection, None, date(2020, 1, 1), None)
        assert chosen is not None
        total, _ = pager.page(dataset.changes.ordering(chosen, descending), 0, 1)
        chunks = list(pager.chunks(dataset.changes.ordering(chosen, descending), chunk))
        assert all(0 < len(entries) <= chunk for entries in chunks)
        walked = [int(entry) for entries in chunks for entry in entries]
        paged = [
            entry
            for offset in range(0, total, 100)
            for entry in pager.page(dataset.changes.ordering(chosen, descending), offset, 100)[1]
        ]
        assert walked == paged and len(walked) == total == len(set(walked)) > 1_000


def test_a_change_answers_the_line_and_its_records_before_and_after(
    client: httpx.Client, fixture_version: IngestResult
) -> None:
    """The fixture's Nasdaq rebate line: $0.0020 from 2019, $0.0021 from 2021-07-01."""
    params = {"exchange_name": "nasdaq", "fee_action": "make", "fee_type": "equity"}
    body = client.get(CHANGES, params=params, headers=exchange_headers()).json()
    changed = [item for item in body["data"] if item["change_type"] == "changed"]
    con = open_version(fixture_version.version_dir)
    [(line_id,)] = con.execute(
        "SELECT DISTINCT line_id FROM fees WHERE fee_name = 'Rebate to add displayed liquidity'"
    ).fetchall()
    [item] = [item for item in changed if item["line_id"] == line_id]
    assert {key: item[key] for key in ("exchange_name", "label", "effective_date")} == {
        "exchange_name": "nasdaq",
        "label": "Rebate to add displayed liquidity",
        "effective_date": "2021-07-01",
    }
    before, after = item["before"], item["after"]
    assert (before["fee_amount"], before["effective_end"]) == ("($0.0020)", "2021-06-30")
    assert (after["fee_amount"], after["effective_start"], after["amount"]) == (
        "($0.0021)", "2021-07-01", -0.0021,
    )  # fmt: skip
    assert after["source_document"] == "Nasdaq Price List 2021"
    assert [change["effective_date"] for change in body["data"]] == sorted(
        change["effective_date"] for change in body["data"]
    )
    assert body["meta"] | {"query_time_ms": 0} == {
        "record_count": len(body["data"]), "total_pages": 1, "current_page": 0,
        "page_size": 20, "query_time_ms": 0,
    }  # fmt: skip


def test_an_added_line_has_no_before_and_a_removed_one_no_after(client: httpx.Client) -> None:
    for change_type, empty in (("added", "before"), ("removed", "after")):
        params = {"change_type": change_type, "page_size": "100"}
        items = client.get(CHANGES, params=params, headers=exchange_headers()).json()["data"]
        assert items and all(item["change_type"] == change_type for item in items)
        assert all(item[empty] is None for item in items)
        full = "after" if empty == "before" else "before"
        assert all(item[full]["record_id"] for item in items)


@pytest.mark.parametrize("kind", ["csv", "parquet"])
def test_a_download_holds_every_change_as_the_pages_do(client: httpx.Client, kind: str) -> None:
    pages = client.get(CHANGES, params={"page_size": "100"}, headers=exchange_headers()).json()
    assert pages["meta"]["total_pages"] == 1
    response = client.get(CHANGES, params={"format": kind}, headers=exchange_headers())
    assert response.status_code == 200
    assert response.headers["content-disposition"].endswith(f'.{kind}"')
    table = (
        pacsv.read_csv(io.BytesIO(response.content))
        if kind == "csv"
        else pq.read_table(io.BytesIO(response.content))
    )
    assert table.num_rows == pages["meta"]["record_count"]
    rows = table.to_pylist()
    for row, item in zip(rows, pages["data"], strict=True):
        assert (row["line_id"], row["change_type"], str(row["effective_date"])) == (
            item["line_id"], item["change_type"], item["effective_date"],
        )  # fmt: skip
        for side in ("before", "after"):
            record = item[side]
            # (a CSV cell cannot tell null from empty text: both are empty)
            assert (row[f"{side}_record_id"] or None) == (record and record["record_id"])


def test_an_empty_download_still_carries_its_columns(client: httpx.Client) -> None:
    params = {"format": "csv", "start_date": "2099-01-01"}
    response = client.get(CHANGES, params=params, headers=exchange_headers())
    assert response.status_code == 200
    header = response.text.splitlines()[0]
    assert header.startswith('"line_id","exchange_name"') and '"after_source_link"' in header


def test_a_scoped_key_sees_only_its_venues_and_is_refused_others(client: httpx.Client) -> None:
    nyse = exchange_headers(KEYS["nyse"])
    body = client.get(CHANGES, params={"page_size": "100"}, headers=nyse).json()
    assert body["data"] and {item["exchange_name"] for item in body["data"]} == {"nyse"}
    response = client.get(CHANGES, params={"exchange_name": "nasdaq"}, headers=nyse)
    assert response.status_code == 403
    assert response.json()["error"]["code"] == "FORBIDDEN"


@pytest.mark.parametrize(
    ("params", "fields"),
    [
        ({"change_type": "moved"}, ["change_type"]),
        ({"start_date": "2023-02-30", "order_dir": "up"}, ["start_date", "order_dir"]),
        ({"start_date": "2023-02-01", "end_date": "2023-01-01"}, ["end_date"]),
        ({"fee_symbol_type": "both", "as_of": "2023-01-01"}, ["fee_symbol_type", "as_of"]),
        ({"exchange_name": "nowhere", "page_size": "101"}, ["exchange_name", "page_size"]),
    ],
    ids=["type", "date-and-direction", "window", "unknown-parameters", "venue-and-size"],
)
def test_bad_parameters_are_a_422_naming_each(
    client: httpx.Client, params: dict[str, str], fields: list[str]
) -> None:
    response = client.get(CHANGES, params=params, headers=exchange_headers())
    assert response.status_code == 422
    error = response.json()["error"]
    assert error["code"] == "VALIDATION_ERROR"
    assert sorted(detail["field"] for detail in error["details"]) == sorted(fields)


def test_both_prefixes_and_spellings_answer_the_same_changes(client: httpx.Client) -> None:
    answers = [
        client.get(target, params={"page_size": "5"}, headers=exchange_headers()).json()["data"]
        for target in ("/api/v1/fee-changes", CHANGES, "/v1/fee-changes", "/v1/fee-changes/")
    ]
    assert answers[0] and all(answer == answers[0] for answer in answers)


def test_the_index_holds_every_file_the_layout_names(fixture_version: IngestResult) -> None:
    """The layout is the contract: the ingest writes what it names, and nothing else."""
    arrays = [
        *CODE_TYPES, "record_rank", "amount_rank", RECORD_ORDER, *LINE_FILES, *CLASS_FILES,
        *CHANGE_FILES,
    ]  # fmt: skip
    expected = {f"{name}.npy" for name in arrays} | {
        CODES_FILE,
        SUMMARY_FILE,
        PRINTED_FILE,
        PRINTED_CODES_FILE,
        PRICE_KEYS_FILE,
        PRICE_KEY_STARTS_FILE,
        PRICE_ROWS_FILE,
        PRICE_LINES_FILE,
        PRICE_ANSWERS_FILE,
    }
    index = fixture_version.version_dir / INDEX_DIR
    assert {path.name for path in index.iterdir()} == expected
