"""Routing, methods, error envelopes, key management and live version switches."""

import json
import shutil
import threading
import time
from pathlib import Path

import httpx
import pytest

from ingest.pipeline import IngestResult, run_ingest
from service.__main__ import main as service_main
from service.accounts import RECHECK_SECONDS
from service.api import ENDPOINTS
from service.settings import Settings
from service.urls import PREFIXES
from tests.conftest import (
    KEYS,
    REGISTRY,
    LiveServer,
    exchange_headers,
    fee_row,
    supplier_headers,
    write_raw,
)


def headers_for(path: str, key: str = KEYS["full"]) -> dict[str, str]:
    return supplier_headers(key) if "/suppliers/" in path else exchange_headers(key)


# Every keyed path, by the method it takes; the GET paths (the POST one has tests of its own,
# tests/test_estimates.py).
KEYED_PATHS = [
    (endpoint.method, prefix + endpoint.path.rstrip("/") + slash)
    for endpoint in ENDPOINTS if endpoint.prefixed and endpoint.handler is not None
    for prefix in PREFIXES for slash in ("", "/")
]  # fmt: skip
ALL_PATHS = [path for method, path in KEYED_PATHS if method == "GET"]
# The one endpoint with a required parameter, and a value for it.
REQUIRED = {"/compare": "?fee_type=equity"}


def with_required(path: str) -> str:
    return path + "".join(
        query for end, query in REQUIRED.items() if path.rstrip("/").endswith(end)
    )


@pytest.fixture(scope="module")
def path_values(client: httpx.Client, fixture_version: IngestResult) -> dict[str, str]:
    """A real value for every path parameter."""
    page = client.get("/api/v1/fee-schedule-results/", headers=exchange_headers()).json()
    return {
        "supplier_name": "nasdaq",
        "exchange_name": "nasdaq",
        "version_id": fixture_version.version_id,
        "record_id": page["data"][0]["record_id"],
        "line_id": page["data"][0]["line_id"],
    }


@pytest.mark.parametrize("template", ALL_PATHS)
def test_every_endpoint_answers_under_both_path_forms_without_redirect(
    client: httpx.Client, path_values: dict[str, str], template: str
) -> None:
    path = with_required(template.format(**path_values))
    response = client.get(path, headers=headers_for(path))
    assert response.status_code == 200
    assert response.headers["content-type"] == "application/json"


@pytest.mark.parametrize(("method", "template"), KEYED_PATHS[::2])
def test_every_endpoint_refuses_a_request_without_a_valid_key_before_its_parameters(
    client: httpx.Client, path_values: dict[str, str], method: str, template: str
) -> None:
    """Each handler reads the call's account first: a guard for the next endpoint too."""
    path = template.format(**path_values) + "?no_such_parameter=1"
    for headers in ({}, headers_for(path, "not-a-key")):
        response = client.request(method, path, headers=headers)
        assert response.status_code == 401
        assert "x-dataset-version" not in response.headers  # it tells a stranger nothing
        if "/suppliers/" in path:
            assert response.json() == {
                "error": "Unauthorized",
                "message": "invalid or missing API key",
            }
        else:
            error = {"code": "UNAUTHORIZED", "message": "missing or invalid API key"}
            assert response.json()["error"] == error


@pytest.mark.parametrize("template", ALL_PATHS[::2])
def test_head_answers_like_get_without_a_body(
    client: httpx.Client, path_values: dict[str, str], template: str
) -> None:
    path = with_required(template.format(**path_values))
    get = client.get(path, headers=headers_for(path))
    head = client.head(path, headers=headers_for(path))
    assert (head.status_code, head.content) == (200, b"")
    assert head.headers["content-type"] == get.headers["content-type"]
    # The exchange family's body holds its own query_time_ms, so lengths may differ by a digit.
    timing_digits = 0 if "/suppliers/" in path else 2
    lengths = int(head.headers["content-length"]), int(get.headers["content-length"])
    assert abs(lengths[0] - lengths[1]) <= timing_digits


@pytest.mark.parametrize("method", ["POST", "PUT", "PATCH", "DELETE"])
def test_other_methods_are_405_with_allow_and_a_family_body(
    client: httpx.Client, method: str
) -> None:
    supplier = client.request(method, "/api/v1/suppliers/nasdaq/actions")
    assert (supplier.status_code, supplier.json()) == (
        405,
        {"error": "Method Not Allowed", "message": "method not allowed; use GET or HEAD"},
    )
    assert supplier.headers["allow"] == "GET, HEAD"
    exchange = client.request(method, "/api/v1/exchanges/")
    assert exchange.status_code == 405
    assert exchange.json()["error"] == {
        "code": "METHOD_NOT_ALLOWED",
        "message": "method not allowed; use GET or HEAD",
    }
    assert exchange.headers["allow"] == "GET, HEAD"


@pytest.mark.parametrize(
    ("path", "body"),
    [
        ("/api/v1/suppliers/nasdaq/volumes", {"error": "Not Found", "message": "not found"}),
        ("/v1/suppliers/", {"error": "Not Found", "message": "not found"}),
        ("/api/v1/nothing", {"error": {"code": "NOT_FOUND", "message": "not found"}}),
        ("/api/v2/exchanges/", {"error": {"code": "NOT_FOUND", "message": "not found"}}),
    ],
)
def test_unknown_paths_are_404_in_the_familys_envelope(
    client: httpx.Client, path: str, body: dict[str, object]
) -> None:
    response = client.get(path, headers=supplier_headers())
    payload = response.json()
    payload.pop("meta", None)
    assert (response.status_code, payload) == (404, body)


def private_server(tmp_path: Path, accounts: Path) -> LiveServer:
    write_raw(tmp_path / "raw" / "one.csv", [fee_row()])
    run_ingest(tmp_path / "raw", tmp_path / "data", registry=REGISTRY)
    settings = Settings(
        data_dir=tmp_path / "data", accounts_file=accounts, version_poll_seconds=0.05
    )
    return LiveServer(settings)


def test_an_unexpected_failure_is_500_in_the_envelope_without_internals(
    tmp_path: Path, accounts_file: Path, caplog: pytest.LogCaptureFixture
) -> None:
    # An accounts file that was never readable: there are no keys to keep serving with.
    accounts = tmp_path / "accounts.json"
    accounts.write_text("{ broken json", encoding="utf-8")
    with private_server(tmp_path, accounts) as live, httpx.Client(base_url=live.url) as http:
        supplier = http.get("/api/v1/suppliers/nyse/actions", headers=supplier_headers())
        exchange = http.get("/api/v1/exchanges/", headers=exchange_headers())
        assert (supplier.status_code, supplier.json()) == (
            500,
            {"error": "Internal Server Error", "message": "internal error"},
        )
        assert exchange.status_code == 500
        assert exchange.json()["error"] == {"code": "INTERNAL_ERROR", "message": "internal error"}
        assert "JSONDecodeError" not in exchange.text + supplier.text
        shutil.copy(accounts_file, accounts)
        time.sleep(RECHECK_SECONDS)
        assert http.get("/api/v1/exchanges/", headers=exchange_headers()).status_code == 200
    assert any("unhandled error" in record.message for record in caplog.records)


def test_keys_are_issued_listed_and_revoked_within_a_recheck(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    accounts = tmp_path / "accounts.json"
    monkeypatch.setenv("FEES_ACCOUNTS_FILE", str(accounts))
    assert service_main(["keys", "add", "--account", "desk", "--exchange", "nyse",
                         "--registry", str(REGISTRY)]) == 0  # fmt: skip
    key = capsys.readouterr().out.strip()
    assert len(key) >= 32
    assert key not in accounts.read_text()
    assert service_main(["keys", "list"]) == 0
    [listed] = json.loads(capsys.readouterr().out)
    assert (listed["account"], listed["exchanges"], listed["revoked_at"]) == (
        "desk",
        ["nyse"],
        None,
    )
    assert service_main(["keys", "add", "--account", "x", "--exchange", "lse",
                         "--registry", str(REGISTRY)]) == 1  # fmt: skip
    with private_server(tmp_path, accounts) as live, httpx.Client(base_url=live.url) as http:
        for _ in range(2):  # the second answer comes from the cache, which knows the key
            venues = http.get("/api/v1/exchanges/", headers=exchange_headers(key)).json()["data"]
            assert [venue["name"] for venue in venues] == ["nyse"]
        assert service_main(["keys", "revoke", listed["id"]]) == 0
        time.sleep(RECHECK_SECONDS)  # the next request is sure to look at the file
        assert http.get("/api/v1/exchanges/", headers=exchange_headers(key)).status_code == 401
        # A request not seen before checks the key itself (the key store remembered it).
        assert http.get("/api/v1/exchanges/nyse", headers=exchange_headers(key)).status_code == 401
    assert service_main(["keys", "revoke", listed["id"]]) == 1


def test_a_new_version_is_served_without_restart_or_failed_requests(
    tmp_path: Path, accounts_file: Path
) -> None:
    with private_server(tmp_path, accounts_file) as live, httpx.Client(base_url=live.url) as http:
        failures: list[int] = []
        stop = threading.Event()

        def hammer() -> None:
            with httpx.Client(base_url=live.url) as own:
                for _ in range(5000):
                    if stop.is_set():
                        return
                    status = own.get("/api/v1/exchanges/", headers=exchange_headers()).status_code
                    if status != 200:
                        failures.append(status)

        thread = threading.Thread(target=hammer)
        thread.start()
        write_raw(
            tmp_path / "raw" / "two.csv",
            [fee_row(exchange="memx"), fee_row(exchange="nyse", fee_name="New")],
        )
        run_ingest(tmp_path / "raw", tmp_path / "data", registry=REGISTRY)
        for _ in range(400):  # up to 20 s, far more than the watcher's 0.05 s poll needs
            body = http.get("/api/v1/exchanges/", headers=exchange_headers()).json()
            if [v["name"] for v in body["data"]] == ["memx", "nyse"]:
                break
            threading.Event().wait(0.05)
        stop.set()
        thread.join()
        assert [(v["name"], v["record_count"]) for v in body["data"]] == [("memx", 1), ("nyse", 2)]
        assert failures == []


def test_content_type_json_on_get_is_accepted(client: httpx.Client) -> None:
    response = client.get(
        "/v1/suppliers/nyse/fee-types",
        headers={"Authorization": f"Bearer {KEYS['full']}", "Content-Type": "application/json"},
    )
    assert response.status_code == 200


def test_a_broken_change_to_the_accounts_file_keeps_the_keys_read_last(
    tmp_path: Path, accounts_file: Path, caplog: pytest.LogCaptureFixture
) -> None:
    accounts = Path(shutil.copy(accounts_file, tmp_path / "accounts.json"))
    with private_server(tmp_path, accounts) as live, httpx.Client(base_url=live.url) as http:
        assert http.get("/api/v1/exchanges/", headers=exchange_headers()).status_code == 200
        accounts.write_text("{ half-written", encoding="utf-8")
        time.sleep(RECHECK_SECONDS * 2)
        kept = http.get("/api/v1/exchanges/", headers=exchange_headers())
        refused = http.get("/api/v1/exchanges/", headers=exchange_headers("revoked-key"))
    assert (kept.status_code, refused.status_code) == (200, 401)
    assert any("keeping the keys read last" in record.message for record in caplog.records)
