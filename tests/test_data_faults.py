"""Faults in the data: a damaged file fails only the requests that read it (503 in the family's
envelope, reported by the readiness probe), a version that does not match its manifest is
refused at load, and a query past its time limit is stopped. The service answers from its own
copies of the records (the serving copy, the index, the record summary and details): the
venues' Parquet files are the analysts', and damage to one after a version is served fails no
request."""

import json
import os
import re
import shutil
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import duckdb
import httpx
import numpy as np
import pytest

from ingest.layout import LAYOUT_VERSION
from ingest.pipeline import IngestResult, run_ingest
from ingest.publish import publish
from ingest.schema import SCHEMA_VERSION
from service.dataset import queries
from service.dataset.engine import QueryTimeout
from service.dataset.version import Dataset
from service.settings import Settings
from tests.conftest import FIXTURES, REGISTRY, LiveServer, exchange_headers, supplier_headers

NASDAQ_DATA = "/api/v1/suppliers/nasdaq/data"
MEMX_DATA = "/api/v1/suppliers/memx/data"
UNREADABLE = "part of the dataset cannot be read; the operator has been alerted"


@pytest.fixture
def version(tmp_path: Path) -> IngestResult:
    """A private version of the fixture data, for a test to damage."""
    return run_ingest(FIXTURES / "raw", tmp_path / "data", registry=REGISTRY)


@pytest.fixture
def live(version: IngestResult, accounts_file: Path) -> Iterator[httpx.Client]:
    settings = Settings(
        data_dir=version.version_dir.parent.parent,
        accounts_file=accounts_file,
        version_poll_seconds=0.05,
    )
    with LiveServer(settings) as server, httpx.Client(base_url=server.url, timeout=10) as http:
        yield http


def venue_file(version: IngestResult, code: str) -> Path:
    return version.version_dir / "fees" / f"exchange={code}" / "data_0.parquet"


def truncate(path: Path) -> None:
    os.truncate(path, path.stat().st_size // 2)


def scramble_footer(path: Path) -> None:
    with path.open("r+b") as handle:  # the footer sits just before the last 8 bytes
        handle.seek(-200, os.SEEK_END)
        handle.write(bytes(range(190)))


DAMAGE: dict[str, Callable[[Path], None]] = {
    "truncated": truncate,
    "missing": Path.unlink,
    "footer scrambled": scramble_footer,
}


@pytest.mark.parametrize("damage", list(DAMAGE.values()), ids=list(DAMAGE))
def test_a_damaged_venue_file_fails_no_request_of_the_version_served(
    version: IngestResult, live: httpx.Client, damage: Callable[[Path], None]
) -> None:
    assert live.get("/readyz").json()["status"] == "ready"
    page = "/api/v1/fee-schedule-results/?exchange_name=nasdaq&page_size=1"
    [record] = live.get(page, headers=exchange_headers()).json()["data"]
    exchange_paths = (
        page,
        f"/api/v1/fee-schedule-results/{record['record_id']}",
        "/api/v1/fee-schedule-results/?exchange_name=nasdaq&format=csv",
    )
    supplier_paths = (NASDAQ_DATA, NASDAQ_DATA + "/count", "/api/v1/suppliers/nasdaq/actions")
    calls = [(path, exchange_headers()) for path in exchange_paths] + [
        (path, supplier_headers()) for path in supplier_paths
    ]
    before = {path: live.get(path, headers=headers).content for path, headers in calls}
    damage(venue_file(version, "nasdaq"))
    for path, headers in calls:  # the same answers, from the service's own copies
        answer = live.get(path, headers=headers)
        assert answer.status_code == 200, path
        assert _without_timing(answer.content) == _without_timing(before[path]), path
    assert live.get("/readyz").json()["status"] == "ready"


def _without_timing(body: bytes) -> bytes:
    """An answer's body without its query time (`meta.query_time_ms`, the one part that moves)."""
    return re.sub(rb'"query_time_ms":[0-9.]+', b"", body)


def test_a_damaged_serving_copy_fails_downloads_with_503_in_the_exchange_envelope(
    version: IngestResult, live: httpx.Client
) -> None:
    serving = version.version_dir / "serving.duckdb"
    with serving.open("r+b") as handle:  # every block after the header: checksums fail
        handle.seek(3 * 4096)
        handle.write(b"\xa5" * (serving.stat().st_size - 3 * 4096))
    results = "/api/v1/fee-schedule-results/?page_size=5"
    download = live.get(results + "&format=csv", headers=exchange_headers())
    assert download.status_code == 503
    assert download.json()["error"] == {"code": "UNAVAILABLE", "message": UNREADABLE}
    # Pages are printed from the record summary and details, not the serving copy.
    assert live.get(results, headers=exchange_headers()).status_code == 200
    assert live.get("/api/v1/exchanges/", headers=exchange_headers()).status_code == 200
    ready = live.get("/readyz")
    assert (ready.status_code, ready.json()["status"]) == (503, "degraded")
    assert ready.json()["faults"], ready.text
    assert str(version.version_dir) not in ready.text  # paths are shown inside the version


def republish(version: IngestResult, change: Callable[[Path], None]) -> Path:
    """A copy of the version, changed, published as the new current one."""
    work = version.version_dir.parent.parent / "work"
    copy = Path(shutil.copytree(version.version_dir, work / "copy"))
    manifest = json.loads((copy / "manifest.json").read_text(encoding="utf-8"))
    manifest["version_id"] = f"{manifest['version_id']}-copy"
    (copy / "manifest.json").write_text(json.dumps(manifest), encoding="utf-8")
    change(copy)
    return publish(version.version_dir.parent.parent, copy, manifest["version_id"])


def miscount(version_dir: Path) -> None:
    manifest = json.loads((version_dir / "manifest.json").read_text(encoding="utf-8"))
    manifest["venues"]["nasdaq"] += 1
    (version_dir / "manifest.json").write_text(json.dumps(manifest), encoding="utf-8")


def older_schema(version_dir: Path) -> None:
    manifest = json.loads((version_dir / "manifest.json").read_text(encoding="utf-8"))
    manifest["schema_version"] = 1
    (version_dir / "manifest.json").write_text(json.dumps(manifest), encoding="utf-8")


def drop_venue(version_dir: Path) -> None:
    shutil.rmtree(version_dir / "fees" / "exchange=memx")


def drop_serving_copy(version_dir: Path) -> None:
    (version_dir / "serving.duckdb").unlink()


def drop_index(version_dir: Path) -> None:
    shutil.rmtree(version_dir / "index")


def extra_venue(version_dir: Path) -> None:
    shutil.copytree(version_dir / "fees" / "exchange=memx", version_dir / "fees" / "exchange=iex")


@pytest.mark.parametrize(
    ("change", "reason"),
    [
        (miscount, "nasdaq (8 records, manifest 9)"),
        (drop_venue, "memx (0 records, manifest 3)"),
        (extra_venue, "iex (3 records, manifest 0)"),
        (older_schema, f"written for schema 1 and layout {LAYOUT_VERSION}, this service reads "
                       f"schema {SCHEMA_VERSION} and layout {LAYOUT_VERSION}: run `fees ingest`"),
        (drop_serving_copy, "serving.duckdb is missing"),
        (drop_index, "index is missing"),
        (lambda version_dir: (version_dir / "index" / "records.arrow").unlink(),
         "index/records.arrow is missing"),
        (lambda version_dir: truncate(version_dir / "fees" / "exchange=memx" / "data_0.parquet"),
         "fees/exchange=memx/data_0.parquet cannot be read"),
    ],
)  # fmt: skip
def test_a_version_that_does_not_match_its_manifest_is_refused_and_the_previous_serves_on(
    version: IngestResult, live: httpx.Client, change: Callable[[Path], None], reason: str
) -> None:
    refused = republish(version, change)
    ready = wait_for_refusal(live)
    assert ready.status_code == 200
    assert (ready.json()["status"], ready.json()["version_id"]) == ("ready", version.version_id)
    assert ready.json()["refused"].startswith(f"{refused.name}: ")
    assert reason in ready.json()["refused"]
    answer = live.get(MEMX_DATA, headers=supplier_headers())
    assert answer.status_code == 200


def wait_for_refusal(live: httpx.Client) -> httpx.Response:
    deadline = time.monotonic() + 10
    while "refused" not in (ready := live.get("/readyz")).json():
        assert time.monotonic() < deadline, ready.text
        time.sleep(0.05)
    return ready


def test_with_no_readable_version_every_call_is_503_and_not_ready(
    version: IngestResult, accounts_file: Path
) -> None:
    miscount(version.version_dir)
    settings = Settings(data_dir=version.version_dir.parent.parent, accounts_file=accounts_file)
    with LiveServer(settings) as server, httpx.Client(base_url=server.url) as http:
        answer = http.get(MEMX_DATA, headers=supplier_headers())
        ready = http.get("/readyz")
        alive = http.get("/healthz")
    assert (answer.status_code, answer.json()["error"]) == (503, "Service Unavailable")
    assert (ready.status_code, ready.json()["status"]) == (503, "unavailable")
    assert "nasdaq (8 records, manifest 9)" in ready.json()["refused"]
    assert (alive.status_code, alive.json()) == (200, {"status": "alive"})


def test_a_query_past_the_time_limit_is_interrupted(version: IngestResult) -> None:
    dataset = Dataset(version.version_dir, Settings(query_timeout_seconds=0.2))
    started = time.monotonic()
    with pytest.raises(QueryTimeout, match=r"longer than 0\.2 s"):
        dataset.db.query("SELECT count(*) FROM range(1000000000000) AS t(x) WHERE x % 7 = 3")
    assert time.monotonic() - started < 5
    # The connection is still good, and a query within the limit is not disturbed.
    assert dataset.db.query("SELECT count(*) FROM serving.rows") == [(version.records,)]


def test_a_downloads_query_past_the_time_limit_is_interrupted(version: IngestResult) -> None:
    dataset = Dataset(version.version_dir, Settings(query_timeout_seconds=0.2))
    # `Engine.table` is how a download reads each chunk of its rows (`Dataset.batches_at`).
    slow = "SELECT x, x * 2 AS y FROM range(300000000) AS t(x) ORDER BY x DESC"
    with pytest.raises(QueryTimeout):
        dataset.db.table(slow, {}, {})


def test_a_slow_reader_of_a_download_is_not_the_querys_time(version: IngestResult) -> None:
    dataset = Dataset(version.version_dir, Settings(query_timeout_seconds=0.2))
    every = iter([np.arange(version.records)])  # one chunk, read a row at a time
    read = 0
    for batch in dataset.batches_at(every, shape="csv", included=queries.Included(), size=1):
        time.sleep(0.05)  # the client reads slowly: 13 batches take 0.65 s, past the limit
        read += batch.num_rows
    assert read == version.records


def test_a_query_error_that_is_not_a_file_fault_stays_a_defect(version: IngestResult) -> None:
    dataset = Dataset(version.version_dir, Settings())
    with pytest.raises(duckdb.CatalogException):
        dataset.db.query("SELECT * FROM no_such_table")
    assert dataset.faults == []
