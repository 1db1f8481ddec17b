"""Fee history over HTTP: a fee line and its records (`GET /fee-lines/{line_id}`), checked
against plain SQL over the fixture version's Parquet files."""

from collections import defaultdict

import httpx
import pytest

from ingest.pipeline import IngestResult
from ingest.query import open_version
from tests.conftest import KEYS, exchange_headers

LINES = "/api/v1/fee-lines/"
RESULTS = "/api/v1/fee-schedule-results/"


# A history record's fields: those of a result (with its source) that a line's records do not
# share.
HISTORY_FIELDS = (
    "record_id", "fee_charge_type", "fee_amount", "amount", "currency", "unit", "fee_basis",
    "effective_start", "effective_end", "confirmed_through", "ended_by", "standard",
    "source_kind", "date_basis", "uncertain", "source_document", "source_link",
)  # fmt: skip


def history_record(result: dict[str, object]) -> dict[str, object]:
    return {name: result[name] for name in HISTORY_FIELDS}


def every_result(client: httpx.Client) -> dict[str, dict[str, object]]:
    """Every record of the fixture version as the results listing answers it (with its
    source), by id."""
    params = {"page_size": 100, "include_source": "true"}
    body = client.get(RESULTS, params=params, headers=exchange_headers()).json()
    assert body["meta"]["total_pages"] == 1
    return {item["record_id"]: item for item in body["data"]}


def test_every_line_is_its_records_in_effective_order_as_sql_finds_them(
    client: httpx.Client, fixture_version: IngestResult
) -> None:
    con = open_version(fixture_version.version_dir)
    rows = con.execute(
        """SELECT line_id, record_id, exchange, fee_type, fee_category, action, participant,
                  symbol_classification, symbol_type, trade_type,
                  coalesce(line_name, fee_name), volume_tier
           FROM fees ORDER BY line_id, effective_start"""
    ).fetchall()
    lines: dict[str, list[tuple[object, ...]]] = defaultdict(list)
    for row in rows:
        lines[row[0]].append(row)
    results = every_result(client)
    assert len(lines) < len(rows)  # some line has more than one record
    for line_id, records in lines.items():
        response = client.get(f"{LINES}{line_id}", headers=exchange_headers())
        assert response.status_code == 200
        body = response.json()
        identity = dict(
            zip(
                ["line_id", "exchange_name", "fee_type", "fee_category", "fee_action",
                 "fee_participant", "fee_symbol_classification", "fee_symbol_type",
                 "fee_trade_type", "label", "fee_monthly_volume"],
                [line_id, *records[0][2:]],
                strict=True,
            )
        )  # fmt: skip
        assert body["data"] == identity | {
            "records": [history_record(results[str(record[1])]) for record in records]
        }
        assert body["meta"]["record_count"] == len(records)


def line_of(client: httpx.Client, exchange: str, action: str) -> str:
    params = {"exchange_name": exchange, "fee_action": action, "fee_type": "equity"}
    item = client.get(RESULTS, params=params, headers=exchange_headers()).json()["data"][0]
    return str(item["line_id"])


def test_a_line_with_a_new_rate_holds_both_records_and_answers_every_spelling(
    client: httpx.Client,
) -> None:
    line_id = line_of(client, "nasdaq", "make")
    for prefix in ("/api/v1/fee-lines/", "/v1/fee-lines/"):
        for target in (f"{prefix}{line_id}", f"{prefix}{line_id}/"):
            body = client.get(target, headers=exchange_headers()).json()
            amounts = [
                (record["fee_amount"], record["effective_start"], record["effective_end"])
                for record in body["data"]["records"]
            ]
            assert amounts == [
                ("($0.0020)", "2019-01-01", "2021-06-30"),
                ("($0.0021)", "2021-07-01", None),
            ]
            assert body["data"]["label"] == "Rebate to add displayed liquidity"
            assert [record["source_document"] for record in body["data"]["records"]] == [
                "Nasdaq Price List 2019",
                "Nasdaq Price List 2021",
            ]


@pytest.mark.parametrize(
    ("line_id", "key", "status", "error"),
    [
        ("00000000-0000-0000-0000-000000000000", KEYS["full"], 404,
         {"code": "NOT_FOUND", "message": "Fee line not found."}),
        ("not-a-line", KEYS["full"], 404,
         {"code": "NOT_FOUND", "message": "Fee line not found."}),
        ("nasdaq", KEYS["nyse"], 403,
         {"code": "FORBIDDEN", "message": "You do not have access to this exchange's data."}),
    ],
    ids=["unknown", "malformed", "outside-scope"],
)  # fmt: skip
def test_an_unknown_or_hidden_line_is_refused_in_the_envelope(
    client: httpx.Client, line_id: str, key: str, status: int, error: dict[str, str]
) -> None:
    if line_id == "nasdaq":
        line_id = line_of(client, "nasdaq", "make")
    response = client.get(f"{LINES}{line_id}", headers=exchange_headers(key))
    assert (response.status_code, response.json()["error"]) == (status, error)


def test_any_parameter_is_a_422(client: httpx.Client) -> None:
    line_id = line_of(client, "nasdaq", "make")
    response = client.get(
        f"{LINES}{line_id}", params={"include_source": "true"}, headers=exchange_headers()
    )
    assert response.status_code == 422
    assert response.json()["error"]["code"] == "VALIDATION_ERROR"
