"""HTTP caching: every successful answer carries a weak ETag of its version and request and
`Cache-Control: private, max-age`; `If-None-Match` with that tag is 304 with no body, whether
the answer is in the response cache or not; a new version changes every tag."""

import logging
import re
import shutil
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from ingest.pipeline import IngestResult, run_ingest
from service.settings import Settings
from tests.conftest import (
    FIXTURES,
    KEYS,
    REGISTRY,
    LiveServer,
    exchange_headers,
    fee_row,
    supplier_headers,
    write_raw,
)

ETAG = re.compile(r'W/"(?P<version>[^".]+)\.[0-9a-f]{24}"')
ANSWERS = {
    "discovery": ("/api/v1/suppliers/nasdaq/actions?start_date=2020-01-01", supplier_headers()),
    "data": ("/api/v1/suppliers/nasdaq/data?limit=5", supplier_headers()),
    "exchanges": ("/api/v1/exchanges/", exchange_headers()),
    "results": ("/api/v1/fee-schedule-results/?page_size=3", exchange_headers()),
    "download": ("/api/v1/fee-schedule-results/?format=csv", exchange_headers()),
}


@pytest.fixture(params=[64, 0], ids=["cache on", "cache off"])
def live(
    request: pytest.FixtureRequest, fixture_version: IngestResult, accounts_file: Path
) -> Iterator[httpx.Client]:
    settings = Settings(
        data_dir=fixture_version.version_dir.parent.parent,
        accounts_file=accounts_file,
        cache_mb=request.param,
        max_age_seconds=45,
    )
    with LiveServer(settings) as server, httpx.Client(base_url=server.url, timeout=10) as http:
        yield http


@pytest.mark.parametrize("answer", list(ANSWERS), ids=list(ANSWERS))
def test_an_answer_is_304_to_its_own_etag(
    live: httpx.Client,
    fixture_version: IngestResult,
    answer: str,
    caplog: pytest.LogCaptureFixture,
) -> None:
    path, headers = ANSWERS[answer]
    first = live.get(path, headers=headers)
    tag = first.headers["etag"]
    assert ETAG.fullmatch(tag)["version"] == fixture_version.version_id  # type: ignore[index]
    assert first.headers["cache-control"] == "private, max-age=45"
    for given in (tag, tag.removeprefix("W/"), f'"other", {tag}', "*"):
        again = live.get(path, headers={**headers, "If-None-Match": given})
        assert (again.status_code, again.content) == (304, b""), given
        assert again.headers["etag"] == tag
        assert again.headers["cache-control"] == "private, max-age=45"
        assert "content-type" not in again.headers
    other = live.get(path, headers={**headers, "If-None-Match": 'W/"something-else"'})
    assert (other.status_code, other.headers["etag"]) == (200, tag)
    assert other.content == first.content or answer in ("results", "exchanges", "download")
    # The door stops an answer it replaced with a 304 (a download before its body is made):
    # a quiet stop, not an error.
    assert not [record for record in caplog.records if record.levelno >= logging.ERROR]


def test_the_tag_follows_the_request_and_the_keys_scope(live: httpx.Client) -> None:
    def tag(path: str, headers: dict[str, str]) -> str:
        return live.get(path, headers=headers).headers["etag"]

    actions = "/api/v1/suppliers/nasdaq/actions"
    assert tag(actions, supplier_headers()) == tag(actions, supplier_headers())
    assert tag(actions, supplier_headers()) != tag(actions + "?end_date=2021-01-01",
                                                   supplier_headers())  # fmt: skip
    # The same request by a key that sees other venues is another answer.
    exchanges = "/api/v1/exchanges/"
    assert tag(exchanges, exchange_headers()) != tag(exchanges, exchange_headers(KEYS["nyse"]))


def test_errors_carry_no_etag(live: httpx.Client) -> None:
    for path, headers in [
        ("/api/v1/suppliers/nowhere/actions", supplier_headers()),
        ("/api/v1/fee-schedule-results/?page_size=0", exchange_headers()),
        ("/api/v1/exchanges/", {}),
    ]:
        response = live.get(path, headers={**headers, "If-None-Match": "*"})
        assert response.status_code >= 400
        assert "etag" not in response.headers
        assert response.headers.get("cache-control", "private") == "private"


def test_two_processes_give_the_same_tag(
    fixture_version: IngestResult, accounts_file: Path
) -> None:
    settings = Settings(
        data_dir=fixture_version.version_dir.parent.parent, accounts_file=accounts_file
    )
    path, headers = ANSWERS["discovery"]
    with LiveServer(settings) as one, LiveServer(settings) as two:
        tags = {
            httpx.get(server.url + path, headers=headers).headers["etag"] for server in (one, two)
        }
    assert len(tags) == 1


def test_a_new_version_changes_the_tag(tmp_path: Path, accounts_file: Path) -> None:
    raw = Path(shutil.copytree(FIXTURES / "raw", tmp_path / "raw"))
    first = run_ingest(raw, tmp_path / "data", registry=REGISTRY)
    settings = Settings(
        data_dir=tmp_path / "data", accounts_file=accounts_file, version_poll_seconds=0.05
    )
    path, headers = ANSWERS["discovery"]
    with LiveServer(settings) as server, httpx.Client(base_url=server.url) as http:
        before = http.get(path, headers=headers).headers["etag"]
        write_raw(raw / "more.csv", [fee_row(exchange="nasdaq", fee_name="New fee")])
        second = run_ingest(raw, tmp_path / "data", registry=REGISTRY)
        assert second.version_id != first.version_id
        deadline = time.monotonic() + 10  # the watcher opens the new version within ~0.1 s
        while (
            after := http.get(path, headers={**headers, "If-None-Match": before})
        ).status_code == 304:
            assert time.monotonic() < deadline
            time.sleep(0.02)
    assert after.status_code == 200
    assert ETAG.fullmatch(after.headers["etag"])["version"] == second.version_id  # type: ignore[index]
