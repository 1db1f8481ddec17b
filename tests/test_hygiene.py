"""HTTP hygiene on every answer: a request id (echoed or made) that the access log names, no
sniffing, no server banner, `Cache-Control: private` on what a key unlocked, and a log line that
names a key only by its fingerprint."""

import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

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
def logged(
    fixture_version: IngestResult, accounts_file: Path, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[httpx.Client, Path]]:
    """The shared data under a server that writes its access lines (INFO), to a file."""
    log = tmp_path_factory.mktemp("access") / "access.log"
    settings = Settings(
        data_dir=fixture_version.version_dir.parent.parent,
        accounts_file=accounts_file,
        access_log=str(log),
    )
    with (
        LiveServer(settings, log_level="info") as live,
        httpx.Client(base_url=live.url, timeout=10) as http,
    ):
        yield http, log


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
    logged: tuple[httpx.Client, Path],
) -> None:
    http, log = logged
    answered = http.get(
        "/api/v1/suppliers/nasdaq/actions?start_date=2020-01-01",
        headers={**supplier_headers(), "X-Request-ID": "audit-7"},
    )
    refused = http.get("/api/v1/exchanges/", headers=exchange_headers("wrong-key"))
    request_id = refused.headers["x-request-id"]
    lines = access_lines(log, {"audit-7", request_id})
    assert answered.status_code == 200 and refused.status_code == 401
    took = lines["audit-7"]["duration_ms"]
    assert lines["audit-7"]["message"] == (
        f"GET /api/v1/suppliers/nasdaq/actions 200 {took:.2f}ms "
        f"request_id=audit-7 key={fingerprint(KEYS['full'])}"
    )
    assert lines["audit-7"]["route"] == "/suppliers/{supplier_name}/actions"
    assert lines[request_id]["status"] == 401 and lines[request_id]["key"] is None
    assert lines[request_id]["message"].endswith(f"request_id={request_id} key=-")
    every_line = log.read_text()
    assert KEYS["full"] not in every_line and "wrong-key" not in every_line


def access_lines(log: Path, request_ids: set[str]) -> dict[str, dict[str, Any]]:
    """The access lines of these requests, by request id, once all are written: a line is
    written after its answer is sent, and the log holds lines up to a second."""
    deadline = time.monotonic() + 5
    while True:
        lines = [json.loads(line) for line in log.read_text().splitlines()]
        found = {line["request_id"]: line for line in lines if line["request_id"] in request_ids}
        if len(found) == len(request_ids) or time.monotonic() > deadline:
            return found
        time.sleep(0.05)
