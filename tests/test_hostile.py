"""Hostile input: whatever a client sends, the answer is a clear 4xx in its family's envelope,
and no text a client sends ever becomes part of a SQL statement (only a bound parameter)."""

import socket
from typing import Any
from urllib.parse import urlsplit

import httpx
import pytest

from tests.conftest import LiveServer, exchange_headers, supplier_headers

SQL_MARKER = "zq9marker"  # in every hostile value below that could be mistaken for SQL
NAMES = {
    "dot-dot": "..%2F..%2Fetc%2Fpasswd",
    "slash": "nyse%2F..",
    "nul": "ny%00se",
    "single-quote": f"nyse'{SQL_MARKER}",
    "double-quote": f'"nyse"{SQL_MARKER}',
    "sql-or": f"nyse'%20OR%20'1'='1{SQL_MARKER}",
    "sql-drop": f"nyse;%20DROP%20TABLE%20fees;--{SQL_MARKER}",
    "sql-comment": f"nyse/*{SQL_MARKER}*/",
    "non-utf-8": "%FF%FE%FD",
    "overlong-utf-8": "%C0%AE%C0%AE",
    "bad-escape": "ny%ZZse",
    "5k-text": "n" * 5000,  # under the 8 KiB bound: looked up, not found
    "control": "nyse%0D%0ASet-Cookie:%20x=1",
}
DATES = {
    "with-time": "2020-01-01T00:00:00Z",
    "offset": "2020-01-01%2B05:00",
    "plus-sign": "%2B2020-01-01",
    "minus-sign": "-2020-01-01",
    "leading-space": "%202020-01-01",
    "trailing-space": "2020-01-01%20",
    "tab": "2020-01-01%09",
    "fullwidth": "%EF%BC%92%EF%BC%90%EF%BC%92%EF%BC%90-01-01",
    "arabic-indic": "%D9%A2%D9%A0%D9%A2%D9%A0-01-01",
    "no-padding": "2020-1-1",
    "compact": "20200101",
    "impossible": "2020-02-30",
    "year-zero": "0000-01-01",
    "five-digit-year": "20200-01-01",
    "nul": "2020-01-01%00",
    "non-utf-8": "%FF",
    "empty": "",
    "sql": f"2020-01-01'%20OR%201=1--{SQL_MARKER}",
}


def supplier_body(response: httpx.Response) -> dict[str, Any]:
    body: dict[str, Any] = response.json()
    assert set(body) <= {"error", "message", "details"} and isinstance(body["error"], str), body
    assert isinstance(body["message"], str) and body["message"]
    return body


def exchange_body(response: httpx.Response) -> dict[str, Any]:
    body: dict[str, Any] = response.json()
    assert set(body) == {"error", "meta"}, body
    assert set(body["error"]) <= {"code", "message", "details"} and body["error"]["message"]
    return body


def get(client: httpx.Client, target: str, headers: dict[str, str]) -> httpx.Response:
    """A GET of a raw target: path and query sent exactly as written, escapes and all."""
    return client.get(client.base_url.copy_with(raw_path=target.encode()), headers=headers)


@pytest.mark.parametrize("name", list(NAMES.values()), ids=list(NAMES))
def test_a_hostile_supplier_name_is_not_found_in_the_supplier_envelope(
    client: httpx.Client, name: str
) -> None:
    for endpoint in (
        "participants",
        "fee-categories",
        "actions",
        "fee-types",
        "data",
        "data/count",
    ):
        response = get(client, f"/api/v1/suppliers/{name}/{endpoint}", supplier_headers())
        assert response.status_code == 404, (endpoint, response.text)
        assert supplier_body(response)["error"] == "Not Found"
    date_ranges = get(client, f"/api/v1/suppliers/{name}/date-ranges", supplier_headers())
    assert date_ranges.status_code in (400, 404)  # 404 when the path no longer matches a route
    supplier_body(date_ranges)


@pytest.mark.parametrize("name", list(NAMES.values()), ids=list(NAMES))
def test_a_hostile_venue_record_or_version_is_a_4xx_in_the_exchange_envelope(
    client: httpx.Client, name: str
) -> None:
    expected = {
        f"/api/v1/exchanges/{name}": 404,
        f"/api/v1/fee-schedule-results/{name}": 404,
        f"/api/v1/fee-schedule-results/versions/{name}": 404,
        f"/api/v1/fee-schedule-results/?exchange_name={name}": 422,
        f"/api/v1/fee-schedule-results/filters?exchange_name={name}": 422,
    }
    for target, status in expected.items():
        response = get(client, target, exchange_headers())
        assert response.status_code == status, (target, response.text)
        exchange_body(response)


@pytest.mark.parametrize("date", list(DATES.values()), ids=list(DATES))
def test_a_hostile_date_is_refused_by_name_in_both_families(
    client: httpx.Client, date: str
) -> None:
    for endpoint in ("actions", "data", "data/count"):
        response = get(
            client, f"/api/v1/suppliers/nasdaq/{endpoint}?start_date={date}", supplier_headers()
        )
        assert response.status_code == 400, (endpoint, response.text)
        assert supplier_body(response)["details"] == {
            "field": "start_date",
            "expected_format": "YYYY-MM-DD",
        }
    results = get(client, f"/api/v1/fee-schedule-results/?end_date={date}", exchange_headers())
    assert results.status_code == 422, results.text
    assert [problem["field"] for problem in exchange_body(results)["error"]["details"]] == [
        "end_date"
    ]


@pytest.mark.parametrize(
    ("target", "status", "field"),
    [
        ("/api/v1/suppliers/nasdaq/actions?start_date=2020-01-01&start_date=2020-01-01", 400,
         "start_date"),
        ("/api/v1/suppliers/nasdaq/actions?Start_Date=2020-01-01", 400, "Start_Date"),
        ("/api/v1/suppliers/nasdaq/data?limit=1e3", 400, "limit"),
        ("/api/v1/suppliers/nasdaq/data?offset=-1", 400, "offset"),
        ("/api/v1/suppliers/nasdaq/data?offset=99999999999999999999999999", 400, "offset"),
        ("/api/v1/suppliers/nasdaq/data?fee_type=equity%00", 400, "fee_type"),
        ("/api/v1/suppliers/nasdaq/date-ranges?x=1", 400, "x"),
        ("/api/v1/exchanges/?page_size=1", 422, "page_size"),
        ("/api/v1/fee-schedule-results/?page_size=20&page_size=20", 422, "page_size"),
        ("/api/v1/fee-schedule-results/?page_number=99999999999999999999", 422, "page_number"),
        ("/api/v1/fee-schedule-results/?page_size=%EF%BC%92", 422, "page_size"),
        ("/api/v1/fee-schedule-results/?order_by=amount;DROP", 422, "order_by"),
        ("/api/v1/fee-schedule-results/?latest_only=maybe", 422, "latest_only"),
        ("/api/v1/fee-schedule-results/?fee_category=%27%20OR%201=1", 422, "fee_category"),
        ("/api/v1/fee-schedule-results/?%00=1", 422, "\x00"),
    ],
)  # fmt: skip
def test_bad_parameters_are_named_in_the_familys_envelope(
    client: httpx.Client, target: str, status: int, field: str
) -> None:
    supplier = "/suppliers/" in target
    response = get(client, target, supplier_headers() if supplier else exchange_headers())
    assert response.status_code == status, response.text
    if supplier:
        assert supplier_body(response)["details"]["field"] == field
    elif status == 400:
        assert exchange_body(response)["error"]["details"]["field"] == field
    else:
        assert field in [
            problem["field"] for problem in exchange_body(response)["error"]["details"]
        ]


@pytest.mark.parametrize(
    ("target", "headers", "envelope"),
    [
        ("/api/v1/suppliers/" + "n" * 10_000 + "/actions", supplier_headers(), supplier_body),
        ("/api/v1/fee-schedule-results/?fee_category=" + "x" * 9_000, exchange_headers(),
         exchange_body),
    ],
)  # fmt: skip
def test_a_request_target_over_8_kib_is_414_in_the_familys_envelope(
    client: httpx.Client, target: str, headers: dict[str, str], envelope: Any
) -> None:
    response = get(client, target, headers)
    assert response.status_code == 414
    envelope(response)
    assert response.headers["connection"] == "close"


def raw_exchange(server: LiveServer, request: bytes) -> tuple[bytes, bytes]:
    """Send raw bytes; the status line and body of the answer (read until the server closes)."""
    url = urlsplit(server.url)
    with socket.create_connection((url.hostname, url.port), timeout=10) as connection:
        connection.sendall(request)
        answer = b"".join(iter(lambda: connection.recv(65536), b""))
    head, _, body = answer.partition(b"\r\n\r\n")
    return head.split(b"\r\n")[0], body


@pytest.mark.parametrize(
    ("headers", "status"),
    [
        (b"".join(b"X-Filler-%d: v\r\n" % number for number in range(5_000)), b"431"),
        (b"X-Big: " + b"a" * 20_000 + b"\r\n", b"431"),
    ],
)
def test_oversized_headers_are_431_and_the_connection_closes(
    server: LiveServer, headers: bytes, status: bytes
) -> None:
    line, body = raw_exchange(
        server, b"GET /api/v1/exchanges/ HTTP/1.1\r\nHost: t\r\n" + headers + b"\r\n"
    )
    assert line.split(b" ")[1] == status
    assert b'"HEADERS_TOO_LARGE"' in body


@pytest.mark.parametrize(
    "request_line",
    [
        b"GET /api/v1/suppliers/\xff\xfe/actions HTTP/1.1",
        b"GET /api/v1/suppliers/a\x00b/actions HTTP/1.1",
        b"GET /api/v1/exchanges/ HTTP/9.9",
        b"G\x00T /api/v1/exchanges/ HTTP/1.1",
    ],
)
def test_a_request_that_is_not_http_is_400_in_the_envelope(
    server: LiveServer, request_line: bytes
) -> None:
    line, body = raw_exchange(server, request_line + b"\r\nHost: t\r\n\r\n")
    assert line.split(b" ")[1] == b"400"
    assert body == b'{"error":{"code":"BAD_REQUEST","message":"malformed HTTP request"},' \
        b'"meta":{"query_time_ms":0}}'  # fmt: skip


def test_no_hostile_text_ever_reaches_sql_except_as_a_bound_value(
    server: LiveServer, client: httpx.Client
) -> None:
    dataset = server.app.state.holder.current
    dataset.db.query("CALL truncate_duckdb_logs()")
    dataset.db.query("CALL enable_logging('QueryLog')")
    try:
        for name in NAMES.values():
            get(client, f"/api/v1/fee-schedule-results/{name}", exchange_headers())
            get(client, f"/api/v1/suppliers/{name}/data", supplier_headers())
        for date in DATES.values():
            get(client, f"/api/v1/suppliers/nasdaq/data?end_date={date}", supplier_headers())
        # A page and a record that do run SQL, so an empty log cannot pass for a clean one.
        page = client.get("/api/v1/fee-schedule-results/?page_size=5", headers=exchange_headers())
        record_id = page.json()["data"][0]["record_id"]
        one = client.get(f"/api/v1/fee-schedule-results/{record_id}", headers=exchange_headers())
        assert (page.status_code, one.status_code) == (200, 200)
    finally:
        dataset.db.query("CALL disable_logging()")
    statements = [row[0] for row in dataset.db.query("SELECT message FROM duckdb_logs")]
    assert statements
    assert not [text for text in statements if SQL_MARKER in text or record_id in text]
