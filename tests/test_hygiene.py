"""HTTP hygiene on every answer: a request id (echoed or made) that the access log names, no
sniffing, no server banner, `Cache-Control: private` on what a key unlocked, and a log line that
names a key only by its fingerprint."""

import logging
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from ingest.pipeline import IngestResult
from service.accounts import fingerprint
from service.settings import Settings
from tests.conftest import KEYS, LiveServer, exchange_headers, supplier_headers

AUTHENTICATED = {
    "supplier": ("/api/v1/suppliers/nasdaq/actions", supplier_headers()),
    "exchange": ("/api/v1/exchanges/", exchange_headers()),
    "results": ("/v1/fee-schedule-results/?page_size=1", exchange_headers()),
    "not found": ("/api/v1/suppliers/nowhere/actions", supplier_headers()),
    "unknown path": ("/api/v1/no-such-thing", exchange_headers()),
}
ANONYMOUS = {
    "no key": ("/api/v1/exchanges/", {}),
    "unknown key": ("/api/v1/suppliers/nasdaq/actions", supplier_headers("wrong")),
    "openapi": ("/api/v1/openapi.json", {}),
}


@pytest.fixture(scope="module")
def logged(fixture_version: IngestResult, accounts_file: Path) -> Iterator[httpx.Client]:
    """The shared data under a server that writes its access lines (INFO)."""
    settings = Settings(
        data_dir=fixture_version.version_dir.parent.parent, accounts_file=accounts_file
    )
    with (
        LiveServer(settings, log_level="info") as live,
        httpx.Client(base_url=live.url, timeout=10) as http,
    ):
        yield http


@pytest.mark.parametrize("case", [*AUTHENTICATED, *ANONYMOUS])
def test_every_answer_has_a_request_id_and_nosniff_and_no_server_banner(
    client: httpx.Client, case: str
) -> None:
    path, headers = {**AUTHENTICATED, **ANONYMOUS}[case]
    for _ in range(2):  # the second identical request may come from the response cache
        response = client.get(path, headers=headers)
        assert len(response.headers["x-request-id"]) == 32
        assert response.headers["x-content-type-options"] == "nosniff"
        assert "server" not in response.headers
        assert ("private" in response.headers.get("cache-control", "")) == (case in AUTHENTICATED)


def test_a_method_other_than_get_is_405_with_the_same_headers(client: httpx.Client) -> None:
    response = client.post("/api/v1/exchanges/", headers=exchange_headers())
    assert response.status_code == 405
    assert response.headers["x-content-type-options"] == "nosniff"
    assert "x-request-id" in response.headers and "server" not in response.headers


@pytest.mark.parametrize(
    ("given", "echoed"),
    [
        ("trace-42.a:b_C", True),
        ("x" * 128, True),
        ("x" * 129, False),  # too long
        ("two words", False),
        ("line\tbreak", False),
        ("", False),
    ],
)
def test_a_callers_request_id_is_echoed_only_when_it_is_a_plain_token(
    client: httpx.Client, given: str, echoed: bool
) -> None:
    response = client.get(
        "/api/v1/exchanges/", headers={**exchange_headers(), "X-Request-ID": given}
    )
    assert (response.headers["x-request-id"] == given) == echoed
    assert response.headers["x-request-id"].isascii()


def test_the_access_line_names_the_request_id_and_the_keys_fingerprint_never_the_key(
    logged: httpx.Client, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.INFO, logger="service.access"):
        answered = logged.get(
            "/api/v1/suppliers/nasdaq/actions?start_date=2020-01-01",
            headers={**supplier_headers(), "X-Request-ID": "audit-7"},
        )
        refused = logged.get("/api/v1/exchanges/", headers=exchange_headers("wrong-key"))
        lines = access_lines(caplog, count=2)
    assert answered.status_code == 200 and refused.status_code == 401
    assert any(
        "GET /api/v1/suppliers/nasdaq/actions 200" in line
        and "request_id=audit-7" in line
        and f"key={fingerprint(KEYS['full'])}" in line
        for line in lines
    ), lines
    request_id = refused.headers["x-request-id"]
    assert any(
        "GET /api/v1/exchanges/ 401" in line and f"request_id={request_id} key=-" in line
        for line in lines
    ), lines
    every_message = "\n".join(record.getMessage() for record in caplog.records)
    assert KEYS["full"] not in every_message and "wrong-key" not in every_message


def access_lines(caplog: pytest.LogCaptureFixture, *, count: int) -> list[str]:
    """The access lines logged so far, once there are `count` of them: a line is written after
    its answer is sent, so the client may read the answer first."""
    deadline = time.monotonic() + 5
    while True:
        lines = [r.getMessage() for r in caplog.records if r.name == "service.access"]
        if len(lines) >= count or time.monotonic() > deadline:
            return lines
        time.sleep(0.01)
