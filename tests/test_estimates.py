"""`POST /api/v1/fee-estimates` through the real server: the fees worked out by hand in
`tests/test_pricing.py`, in JSON and CSV, the batch's totals, the key's scope, the bounds on the
body, and the endpoint answering every fill as `fees price` does."""

import asyncio
import csv
import io
import json
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from unittest import mock

import httpx
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ingest.pipeline import IngestResult, run_ingest
from service.endpoints import envelope, estimates, fills
from service.errors import ValidationError
from service.settings import Settings
from tests.conftest import (
    KEYS,
    REGISTRY,
    LiveServer,
    exchange_headers,
    supplier_headers,
    write_raw,
)
from tests.test_pricing import REFUSED, ROWS, WORKED, fill

ROOT = Path(__file__).parent.parent
PATH = "/api/v1/fee-estimates"


@pytest.fixture(scope="module")
def client(priced_version: IngestResult, accounts_file: Path) -> Iterator[httpx.Client]:
    settings = Settings(
        data_dir=Path(priced_version.version_dir).parent.parent, accounts_file=accounts_file
    )
    with LiveServer(settings) as live, httpx.Client(base_url=live.url, timeout=30) as http:
        yield http


@pytest.fixture(scope="module")
def priced_version(tmp_path_factory: pytest.TempPathFactory) -> IngestResult:
    root = tmp_path_factory.mktemp("estimates")
    write_raw(root / "raw" / "fees.csv", ROWS)
    return run_ingest(root / "raw", root / "data", registry=REGISTRY)


def post(client: httpx.Client, given: list[dict[str, Any]], **kwargs: Any) -> httpx.Response:
    return client.post(PATH, json={"fills": given}, headers=exchange_headers(), **kwargs)


def test_each_fill_is_answered_in_its_place_with_the_fee_worked_out_by_hand(
    client: httpx.Client,
) -> None:
    given = [case[1] for case in WORKED] + [REFUSED[0][1], REFUSED[2][1]]
    answer = post(client, given)
    assert answer.status_code == 200, answer.text
    data = answer.json()["data"]
    assert [item["fee"] for item in data] == pytest.approx(
        [case[2] for case in WORKED] + [None, None]
    )  # type: ignore[comparison-overlap]
    assert [item["error"] for item in data[-2:]] == [REFUSED[0][2], REFUSED[2][2]]
    assert answer.headers["x-dataset-version"]
    # A POST's answer is neither validated nor kept for the cache.
    assert "etag" not in answer.headers and "server-timing" in answer.headers


def test_the_meta_totals_the_priced_fills_per_venue_and_per_trade_date(
    client: httpx.Client,
) -> None:
    given = [WORKED[0][1], WORKED[1][1], WORKED[5][1], REFUSED[2][1]]  # -2.0, 1.5, 15.0, refused
    meta = post(client, given).json()["meta"]
    assert (meta["fills"], meta["priced"], meta["refused"], meta["record_count"]) == (4, 3, 1, 4)
    assert meta["total_fee"] == pytest.approx(14.5)
    assert meta["by_exchange"] == [
        {"exchange_name": "memx", "fills": 1, "fee": 15.0},
        {"exchange_name": "nyse", "fills": 2, "fee": -0.5},
    ]
    assert meta["by_trade_date"] == [
        {"trade_date": "2023-06-01", "fills": 2, "fee": -0.5},
        {"trade_date": "2024-03-01", "fills": 1, "fee": 15.0},
    ]
    assert list(meta)[-1] == "query_time_ms"


def test_a_batchs_tiers_price_its_fills_and_an_unknown_venue_among_them_is_a_422(
    client: httpx.Client,
) -> None:
    given = [fill("memx", "2024-03-01", "1000", "25", "make", display="displayed")]
    tiered = client.post(
        PATH, json={"fills": given, "tiers": {"MEMX": "Liquidity Provision Tier 1"}},
        headers=exchange_headers(),
    )  # fmt: skip
    assert tiered.status_code == 200, tiered.text
    [answer] = tiered.json()["data"]
    assert (answer["fee"], answer["line_tier"]) == (-3.2, "Liquidity Provision Tier 1")
    refused = client.post(
        PATH, json={"fills": given, "tiers": {"nowhere": "Tier 1"}}, headers=exchange_headers()
    )
    assert refused.status_code == 422, refused.text
    assert [(problem["field"], problem["message"])
            for problem in refused.json()["error"]["details"]] == [
        ("tiers.nowhere", "unknown exchange")
    ]  # fmt: skip


def test_the_json_answer_is_made_off_the_event_loop(
    client: httpx.Client, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A large batch's answer takes a while to make (1.1 million values for 100,000 fills):
    it is made in the pricing's worker thread, where the event loop goes on serving."""
    loops: list[asyncio.AbstractEventLoop | None] = []

    def answered(*args: Any) -> Any:
        loops.append(asyncio._get_running_loop())
        return envelope.answer(*args)

    monkeypatch.setattr(estimates, "answer", answered)
    given = [case[1] for case in WORKED] + [REFUSED[0][1]]
    one = post(client, given).json()["data"]
    # Made a batch of answers at a time: more than two batches, each fill in its place.
    times = 2 * estimates.ANSWERS_AT_ONCE // len(given) + 1
    many = post(client, given * times)
    assert many.status_code == 200
    assert many.json()["data"] == one * times
    assert loops == [None, None]  # no event loop runs in the thread that made them


def test_a_batch_priced_in_blocks_is_answered_as_one_priced_whole(
    client: httpx.Client, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Blocks of a batch, priced two at once (`estimates.BLOCK_FILLS`), answer every fill in
    its place, and the meta totals every block's: the JSON answer (its time aside) and the
    CSV's bytes are what the batch priced as one block gives. A batch of no fills is one block
    of none."""
    given = [case[1] for case in WORKED] + [case[1] for case in REFUSED]

    def answered() -> tuple[Any, bytes]:
        json_answer = post(client, given * 3)
        csv_answer = post(client, given * 3, params={"format": "csv"})
        assert json_answer.status_code == csv_answer.status_code == 200
        whole = json_answer.json()
        whole["meta"].pop("query_time_ms")
        return whole, csv_answer.content

    whole = answered()
    assert whole[0]["meta"]["priced"] and whole[0]["meta"]["refused"]
    monkeypatch.setattr(estimates, "BLOCK_FILLS", 4)
    assert 3 * len(given) > 4 * estimates.BLOCK_FILLS  # more blocks than are priced at once
    assert answered() == whole
    empty = post(client, [])
    assert (empty.status_code, empty.json()["data"]) == (200, [])
    assert (empty.json()["meta"]["fills"], empty.json()["meta"]["total_fee"]) == (0, 0)


def test_a_csv_body_and_a_csv_answer(client: httpx.Client) -> None:
    body = "exchange_name,trade_date,quantity,price,fee_action\nnyse,2023-06-01,500,25,take\n"
    answer = client.post(
        PATH, params={"format": "csv"}, content=body,
        headers={**exchange_headers(), "content-type": "text/csv"},
    )  # fmt: skip
    assert answer.status_code == 200, answer.text
    assert answer.headers["content-type"].startswith("text/csv")
    [row] = list(csv.DictReader(io.StringIO(answer.text)))
    assert list(row) == [*fills.FIELDS, *fills.ANSWER_FIELDS]
    assert (row["exchange_name"], row["fee"], row["unit"], row["error"]) == (
        "nyse", "1.5", "per_share", "",
    )  # fmt: skip


def test_a_venue_outside_the_keys_scope_is_an_unknown_venue_of_that_fill_alone(
    client: httpx.Client,
) -> None:
    given = [WORKED[0][1], WORKED[5][1], fill("nowhere", "2024-03-01", "1", "1", "take")]
    answer = client.post(PATH, json={"fills": given}, headers=exchange_headers(KEYS["nyse"]))
    data = answer.json()["data"]
    assert data[0]["fee"] == -2.0
    assert [item["error"] for item in data[1:]] == [
        "unknown exchange: memx", "unknown exchange: nowhere",
    ]  # fmt: skip


@pytest.mark.parametrize(
    ("body", "problems"),
    [
        ({"fills": [{"exchange": "nyse"}, 5, {"quantity": [1]}], "tier": {}},
         [("tier", "unknown field"), ("fills[0].exchange", "unknown field"),
          ("fills[1]", "must be an object"),
          ("fills[2].quantity", "must be a string or a number")]),
        ({"fill": []}, [("fill", "unknown field"), ("fills", "must be a list of fills")]),
        ([1, 2], [("body", 'must be an object: {"fills": [...]}')]),
    ],
    ids=["fields", "no fills", "not an object"],
)  # fmt: skip
def test_a_body_that_cannot_be_read_as_fills_is_a_422_naming_its_problems(
    client: httpx.Client, body: Any, problems: list[tuple[str, str]]
) -> None:
    answer = client.post(PATH, json=body, headers=exchange_headers())
    assert answer.status_code == 422
    details = answer.json()["error"]["details"]
    assert [(item["field"], item["message"]) for item in details] == problems


# JSON values a fill's field may hold, readable or not: strings (spaces and empty ones among
# them), whole and fractional numbers, null, and the booleans, lists and objects refused.
VALUES = st.one_of(
    st.sampled_from(["", " nyse ", "take", "2024-03-01", "1.50"]), st.none(),
    st.integers(-(2**63), 2**64 - 1), st.floats(allow_nan=False, allow_infinity=False),
    st.booleans(), st.lists(st.integers(), max_size=1), st.just({"a": 1}),
)  # fmt: skip
FILLS = st.lists(
    st.one_of(
        st.dictionaries(st.sampled_from([*fills.FIELDS, "exchange"]), VALUES, max_size=5),
        st.integers(), st.none(),
    ),
    max_size=5,
)


@settings(max_examples=400, deadline=None)
@given(FILLS)
def test_a_body_of_plain_fills_is_read_whole_as_each_fill_read_on_its_own(
    given_fills: list[Any],
) -> None:
    """Read whole by Arrow (`fills.from_objects`, in parts of two fills or at once) or checked
    and read a fill at a time, a body gives the same fills' text, or the same 422."""
    body = json.dumps({"fills": given_fills}).encode()  # orjson writes no unsigned 64 bits
    plain = all(
        isinstance(fill, dict) and fill.keys() <= set(fills.FIELDS)
        and all(value is None or type(value) in (str, int, float) for value in fill.values())
        for fill in given_fills
    )  # fmt: skip
    try:
        text, _ = estimates._fills("application/json", body)
    except ValidationError as refused:
        assert not plain, refused.details
        return
    assert plain
    assert text.equals(fills.from_mappings(given_fills))
    with mock.patch.object(fills, "OBJECTS_AT_ONCE", 2):
        assert estimates._fills("application/json", body)[0].equals(text)


def test_plain_fills_are_read_whole() -> None:
    """Strings, numbers of either kind and nulls are read by Arrow, not a fill at a time (a
    field of strings in one fill and numbers in another is read a fill at a time)."""
    given_fills = [{"exchange_name": " nyse ", "quantity": 100, "price": 25.1},
                   {"quantity": 5, "price": 3, "tier": None}]  # fmt: skip
    text = fills.from_objects(given_fills)
    assert text is not None and text.equals(fills.from_mappings(given_fills))
    assert text["price"].to_pylist() == ["25.1", "3"]


def test_not_json_an_unknown_column_and_another_media_type(client: httpx.Client) -> None:
    headers = exchange_headers()
    broken = client.post(
        PATH, content=b"{", headers={**headers, "content-type": "application/json"}
    )
    assert broken.status_code == 422
    assert broken.json()["error"]["details"][0]["message"].startswith("not JSON")
    column = client.post(
        PATH, content="exchange_name,quantty\nnyse,1\n",
        headers={**headers, "content-type": "text/csv; charset=utf-8"},
    )  # fmt: skip
    assert column.json()["error"]["details"][0]["field"] == "quantty"
    xml = client.post(PATH, content=b"<a/>", headers={**headers, "content-type": "text/xml"})
    assert (xml.status_code, xml.json()["error"]["code"]) == (415, "UNSUPPORTED_MEDIA_TYPE")


def test_a_body_over_its_bound_is_refused_before_it_is_read(client: httpx.Client) -> None:
    """A `Content-Length` over the bound is a 413 at once: the answer comes back though not a
    byte of the body was sent."""
    host, port = str(client.base_url.host), int(client.base_url.port or 80)
    head = (
        f"POST {PATH} HTTP/1.1\r\nHost: {host}\r\nContent-Type: application/json\r\n"
        f"x-service-api-access-key: {KEYS['full']}\r\n"
        f"Content-Length: {estimates.MAX_BODY_BYTES + 1}\r\n\r\n"
    )
    with socket.create_connection((host, port), timeout=10) as connection:
        connection.sendall(head.encode())
        answer = connection.recv(65536).decode()
    assert answer.startswith("HTTP/1.1 413 ")
    assert '"code":"PAYLOAD_TOO_LARGE"' in answer


def test_more_fills_than_a_request_takes_is_a_413(client: httpx.Client) -> None:
    given = [{}] * (estimates.MAX_FILLS + 1)
    answer = post(client, given)
    assert answer.status_code == 413
    assert answer.json()["error"]["message"] == "100,001 fills: at most 100,000 a request"


def test_the_endpoint_takes_post_alone_and_a_key_of_its_family(client: httpx.Client) -> None:
    get = client.get(PATH, headers=exchange_headers())
    assert (get.status_code, get.headers["allow"]) == (405, "POST")
    assert get.json()["error"]["message"] == "method not allowed; use POST"
    keyless = client.post(PATH, json={"fills": []})
    assert keyless.status_code == 401
    bearer = client.post(PATH, json={"fills": []}, headers=supplier_headers())
    assert bearer.status_code == 401
    for prefix in ("/api/v1", "/v1"):
        for slash in ("", "/"):
            answer = client.post(f"{prefix}/fee-estimates{slash}", json={"fills": []},
                                 headers=exchange_headers())  # fmt: skip
            assert answer.status_code == 200


def test_the_endpoint_and_the_command_agree_on_every_fill(
    client: httpx.Client, priced_version: IngestResult, tmp_path: Path
) -> None:
    given = [case[1] for case in WORKED] + [case[1] for case in REFUSED]
    source = tmp_path / "fills.csv"
    with source.open("w", newline="", encoding="utf-8") as handle:
        writer = csv.DictWriter(handle, fieldnames=list(fills.FIELDS), restval="")
        writer.writeheader()
        writer.writerows(given)
    out = tmp_path / "priced.csv"
    done = subprocess.run(
        [sys.executable, "-m", "service", "price", str(source), "--out", str(out),
         "--data", str(Path(priced_version.version_dir).parent.parent)],
        cwd=ROOT, capture_output=True, text=True,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    with out.open(newline="", encoding="utf-8") as handle:
        command = [
            {name: row[name] for name in fills.ANSWER_FIELDS} for row in csv.DictReader(handle)
        ]
    answer = client.post(
        PATH, params={"format": "csv"}, content=source.read_bytes(),
        headers={**exchange_headers(), "content-type": "text/csv"},
    )  # fmt: skip
    endpoint = [
        {name: row[name] for name in fills.ANSWER_FIELDS}
        for row in csv.DictReader(io.StringIO(answer.text))
    ]
    assert len(command) == len(given) == len(endpoint)
    for mine, theirs in zip(command, endpoint, strict=True):
        assert mine["record_id"] == theirs["record_id"] and mine["error"] == theirs["error"]
        assert (float(mine["fee"]) if mine["fee"] else None) == (
            float(theirs["fee"]) if theirs["fee"] else None
        )


# ---- the same dimensions as filters, over the same version


def labels(client: httpx.Client, path: str, field: str, **params: Any) -> list[str]:
    answer = client.get(f"/api/v1{path}", params=params, headers=exchange_headers())
    assert answer.status_code == 200, answer.text
    return sorted(item[field] for item in answer.json()["data"])


def results_labels(client: httpx.Client, **params: Any) -> list[str]:
    return labels(client, "/fee-schedule-results/", "fee_charge_type", exchange_name="memx",
                  page_size=100, **params)  # fmt: skip


MEMX_EQUITY = sorted(row["fee_name"] for row in ROWS if row["exchange"] == "memx")


def test_the_results_filter_by_display_price_band_tape_and_tier(client: httpx.Client) -> None:
    assert results_labels(client) == MEMX_EQUITY
    assert results_labels(client, display="non_displayed") == [
        "Fee code H: Added non-displayed volume"
    ]
    assert results_labels(client, price_band=["below_1", "any"]) == [
        "Fee code B, D or J: below $1.00", "Sub-dollar take",
    ]  # fmt: skip
    assert results_labels(client, tier="Liquidity Provision Tier 1") == [
        "Fee code B1, D1 or J1: Added displayed volume, Liquidity Provision Tier 1"
    ]
    assert results_labels(client, tier="Tier 9") == []
    assert results_labels(client, fee_code="D") == [
        "Fee code B, D or J: Added displayed volume", "Fee code B, D or J: below $1.00",
    ]  # fmt: skip
    assert results_labels(client, fee_code=["V", "H"]) == [
        "Fee code H: Added non-displayed volume", "Fee code V: Tape B",
        "Fee code V: Tapes A and C",
    ]  # fmt: skip
    assert results_labels(client, fee_code="d") == []  # a code is matched exactly
    # A line for every tape is a line for tape C too; code V's Tape B line is not.
    assert results_labels(client, tape="C") == [
        label for label in MEMX_EQUITY if label != "Fee code V: Tape B"
    ]
    [coded] = client.get(
        "/api/v1/fee-schedule-results/", headers=exchange_headers(),
        params={"exchange_name": "memx", "tier": "Liquidity Provision Tier 1"},
    ).json()["data"]  # fmt: skip
    dimensions = ("fee_codes", "display", "price_band", "tapes", "tier")
    assert {name: coded[name] for name in dimensions} == {
        "fee_codes": ["B1", "D1", "J1"], "display": "displayed", "price_band": None, "tapes": [],
        "tier": "Liquidity Provision Tier 1",
    }  # fmt: skip


def test_changes_and_comparisons_filter_by_the_same_dimensions(client: httpx.Client) -> None:
    changes = labels(client, "/fee-changes/", "label", exchange_name="memx",
                     tier="Liquidity Provision Tier 1")  # fmt: skip
    assert changes == [
        "Fee code B1, D1 or J1: Added displayed volume, Liquidity Provision Tier 1"
    ]
    assert labels(client, "/fee-changes/", "label", fee_code="J1") == changes
    compared = client.get(
        "/api/v1/compare/", headers=exchange_headers(),
        params={"fee_type": "equity", "as_of": "2024-03-01", "exchange_name": "memx",
                "fee_action": "make", "display": "non_displayed"},
    ).json()["data"]  # fmt: skip
    assert [(item["lines"], item["lowest"]["label"]) for item in compared] == [
        (1, "Fee code H: Added non-displayed volume")
    ]
    by_code = client.get(
        "/api/v1/compare/", headers=exchange_headers(),
        params={"fee_type": "equity", "as_of": "2024-03-01", "fee_code": "V"},
    ).json()["data"]  # fmt: skip
    assert [(item["exchange_name"], item["lines"], item["lowest"]["label"]) for item in by_code
            if item["lines"]] == [("memx", 2, "Fee code V: Tape B")]  # fmt: skip
