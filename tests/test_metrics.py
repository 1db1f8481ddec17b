"""`/metrics`: Prometheus's text format through the official client, scraped as a monitor
would, and the service's log lines as JSON fields."""

import json
import logging
import logging.config
import time
from pathlib import Path

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from ingest.pipeline import IngestResult
from service.app import server_options
from service.memory import STATUS
from service.settings import Settings
from tests.conftest import KEYS, LiveServer, account_key, exchange_headers, supplier_headers

TRICKLE = "test-key-metrics-trickle-0123456789"  # one request a minute


def scrape(http: httpx.Client) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    response = http.get("/metrics")
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/plain; version=")
    return {
        (sample.name, tuple(sorted(sample.labels.items()))): sample.value
        for family in text_string_to_metric_families(response.text)
        for sample in family.samples
    }


def test_the_scrape_counts_requests_by_route_and_status_and_names_the_version(
    tmp_path: Path, fixture_version: IngestResult, accounts_file: Path
) -> None:
    document = json.loads(accounts_file.read_text(encoding="utf-8"))
    document["accounts"]["trickle"] = {
        "exchanges": None,
        "rate_limit": {"burst": 1, "per_minute": 1},
        "keys": [account_key(TRICKLE)],
    }
    accounts = tmp_path / "accounts.json"
    accounts.write_text(json.dumps(document), encoding="utf-8")
    settings = Settings(data_dir=fixture_version.version_dir.parent.parent, accounts_file=accounts)
    with LiveServer(settings) as live, httpx.Client(base_url=live.url) as http:
        for name in ("nasdaq", "memx", "nasdaq"):  # two suppliers, one route; one cached
            assert http.get(f"/v1/suppliers/{name}/actions", headers=supplier_headers()).is_success
        http.get("/api/v1/exchanges/", headers=exchange_headers("wrong"))
        for _ in range(2):
            http.get(
                "/api/v1/exchanges/",
                headers=exchange_headers("test-key-metrics-trickle-0123456789"),
            )
        time.sleep(0.1)  # the last answer is counted just after it is sent
        samples = scrape(http)
    actions = (("route", "/suppliers/{supplier_name}/actions"), ("status", "200"))
    assert samples["fees_requests_total", actions] == 3
    assert samples["fees_request_duration_seconds_count", actions] == 3
    assert samples["fees_request_duration_seconds_bucket", (("le", "+Inf"), *actions)] == 3
    exchanges = ("route", "/exchanges")
    assert samples["fees_requests_total", (exchanges, ("status", "401"))] == 1
    assert samples["fees_requests_total", (exchanges, ("status", "429"))] == 1
    assert samples["fees_rate_limited_total", ()] == 1
    assert samples["fees_response_cache_lookups_total", (("result", "hit"),)] >= 1
    assert samples["fees_response_cache_answers", ()] >= 1
    assert samples["fees_response_cache_bytes", ()] > 0
    version = (("as_of", _as_of(fixture_version)), ("version_id", fixture_version.version_id))
    assert samples["fees_dataset_version", version] == 1
    assert samples["fees_dataset_records", ()] == fixture_version.records
    assert samples["fees_dataset_faults", ()] == 0


def _as_of(version: IngestResult) -> str:
    manifest = json.loads((version.version_dir / "manifest.json").read_text(encoding="utf-8"))
    return str(manifest["as_of"])


def test_metrics_need_no_key_and_hold_no_key(client: httpx.Client) -> None:
    client.get("/api/v1/exchanges/", headers=exchange_headers())
    text = client.get("/metrics").text
    assert KEYS["full"] not in text and "fees_requests_total" in text


@pytest.mark.skipif(not STATUS.exists(), reason="no /proc status: not Linux")
def test_the_scrape_reports_the_processs_resident_memory_by_part(client: httpx.Client) -> None:
    """Anonymous memory apart from the mapped files' pages: what a replica must be given. The
    test server runs in this process, so its figures are this process's, read here from the
    status as the kernel prints it (kB)."""
    samples = scrape(client)
    status = {
        name: int(value.split()[0]) * 1024
        for name, _, value in (line.partition(":") for line in STATUS.read_text().splitlines())
        if name.startswith("Rss")
    }
    for part, name in (("anonymous", "RssAnon"), ("file", "RssFile"), ("shared", "RssShmem")):
        reported = samples["fees_process_resident_bytes", (("part", part),)]
        assert abs(reported - status[name]) <= 16 * 2**20, part
    assert samples["fees_process_resident_bytes", (("part", "anonymous"),)] > 16 * 2**20


PATHS_AND_ROUTES = [
    ("/api/v1/suppliers/Nasdaq%20Stock%20Market/data/count",
     "/suppliers/{supplier_name}/data/count"),
    ("/v1/fee-schedule-results/filters/", "/fee-schedule-results/filters"),
    ("/api/v1/fee-schedule-results/versions/abc", "/fee-schedule-results/versions/{version_id}"),
    ("/api/v1/fee-schedule-results/abc", "/fee-schedule-results/{record_id}"),
    ("/v1/openapi.json/", "/openapi.json"),
    ("/api/v1/no/such/path", "other"),
    ("/readyz", "/readyz"),
    ("/docs/docs.js", "/docs/docs.js"),
    ("/etc/passwd", "other"),
]  # fmt: skip


def test_paths_are_counted_by_the_route_template_the_router_matched(client: httpx.Client) -> None:
    """The router's own match names the route (a literal segment wins over a parameter, as
    `filters` over `{record_id}`), whether the answer is a 200, a 404 or a 405."""
    before = scrape(client)
    for path, _ in PATHS_AND_ROUTES:
        client.get(path, headers={**supplier_headers(), **exchange_headers()})
    client.post("/api/v1/fee-schedule-results/filters", headers=exchange_headers())
    time.sleep(0.1)
    after = scrape(client)
    counted: dict[str, float] = {}
    for (name, labels), value in after.items():
        if name == "fees_requests_total":
            route = dict(labels)["route"]
            counted[route] = counted.get(route, 0) + value - before.get((name, labels), 0)
    for path, route in PATHS_AND_ROUTES:
        assert counted.get(route, 0) >= 1, (path, route)
    assert counted["other"] == 2
    assert counted["/fee-schedule-results/filters"] == 2  # the GET and the 405


def test_the_services_log_lines_are_one_json_object_each(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Its other lines (a failed query, a version refused) go through the logging module, as
    JSON with their extra fields when the log is not a terminal; the access lines have their
    own writer (`tests/test_accesslog.py`)."""
    config = server_options(Settings())["log_config"]
    logging.config.dictConfig(config)
    formatter = logging.getLogger("service").handlers[0].formatter
    assert formatter is not None
    record = logging.LogRecord("service.edge.front", logging.ERROR, __file__, 1, "failed", (), None)
    record.__dict__.update({"route": "/exchanges", "status": 500})
    line = json.loads(formatter.format(record))  # pytest's stderr is not a terminal
    assert line["route"] == "/exchanges" and line["status"] == 500 and line["level"] == "ERROR"
