"""Publishing to S3 and serving from it, against moto's S3-compatible server on loopback."""

import shutil
import time
import uuid
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import boto3
import httpx
import pytest

from ingest.errors import StorageFailed
from ingest.pipeline import run_ingest
from ingest.storage import S3Storage
from service.dataset.sources import S3Source
from service.settings import Settings
from tests.conftest import REGISTRY, LiveServer, fee_row, write_raw
from tools.servers import AWS_TEST_CREDENTIALS, s3_server


@pytest.fixture(scope="session")
def s3_endpoint() -> Iterator[str]:
    with pytest.MonkeyPatch.context() as patch:
        for name, value in AWS_TEST_CREDENTIALS.items():
            patch.setenv(name, value)
        with s3_server() as endpoint:
            yield endpoint


@pytest.fixture
def location(s3_endpoint: str) -> str:
    """A fresh bucket; the data location is a prefix in it."""
    bucket = f"fees-{uuid.uuid4().hex[:12]}"
    boto3.client("s3", endpoint_url=s3_endpoint).create_bucket(Bucket=bucket)
    return f"s3://{bucket}/warehouse"


def objects(location: str, endpoint: str) -> dict[str, bytes]:
    """Every object under the location, by key relative to it, with its body."""
    storage = S3Storage(location, endpoint)
    client = boto3.client("s3", endpoint_url=endpoint)
    found = {}
    for page in client.get_paginator("list_objects_v2").paginate(
        Bucket=storage.bucket, Prefix=storage.prefix + "/"
    ):
        for item in page.get("Contents", []):
            body = client.get_object(Bucket=storage.bucket, Key=item["Key"])["Body"].read()
            found[item["Key"].removeprefix(storage.prefix + "/")] = body
    return found


def files(version_dir: Path) -> set[str]:
    return {p.relative_to(version_dir).as_posix() for p in version_dir.rglob("*") if p.is_file()}


def ingest(raw: Path, location: str, endpoint: str, **options: Any) -> Any:
    return run_ingest(raw, location, registry=REGISTRY, s3_endpoint_url=endpoint, **options)


def test_ingest_publishes_every_file_of_the_version_then_the_pointer(
    raw_dir: Path, location: str, s3_endpoint: str, tmp_path: Path
) -> None:
    result = ingest(raw_dir, location, s3_endpoint)
    local = run_ingest(raw_dir, tmp_path / "local", registry=REGISTRY)
    stored = objects(location, s3_endpoint)
    version = f"versions/{result.version_id}/"
    assert result.changed
    assert result.version_dir == f"{location}/{version.rstrip('/')}"
    assert stored["current"] == result.version_id.encode()
    assert {key.removeprefix(version) for key in stored if key != "current"} == files(
        Path(local.version_dir)
    )
    assert result.records == local.records > 0


def test_an_unchanged_rerun_publishes_nothing(
    raw_dir: Path, location: str, s3_endpoint: str
) -> None:
    first = ingest(raw_dir, location, s3_endpoint)
    before = objects(location, s3_endpoint)
    again = ingest(raw_dir, location, s3_endpoint)
    assert (again.changed, again.version_id) == (False, first.version_id)
    assert objects(location, s3_endpoint) == before


def test_new_inputs_move_the_pointer_and_pruning_keeps_three(
    raw_dir: Path, location: str, s3_endpoint: str
) -> None:
    published = []
    for number in range(5):
        write_raw(raw_dir / f"extra-{number}.csv", [fee_row(fee_name=f"Extra {number}")])
        published.append(ingest(raw_dir, location, s3_endpoint).version_id)
    storage = S3Storage(location, s3_endpoint)
    assert len(set(published)) == 5
    assert storage.current_version() == published[-1]
    assert sorted(storage.versions()) == published[-3:]


@pytest.fixture
def s3_settings(location: str, s3_endpoint: str, tmp_path: Path, accounts_file: Path) -> Settings:
    return Settings(
        data_dir=location,
        s3_endpoint_url=s3_endpoint,
        cache_dir=tmp_path / "cache",
        accounts_file=accounts_file,
        version_poll_seconds=0.05,
    )


def ready_on(http: httpx.Client, version_id: str, seconds: float = 15) -> dict[str, Any]:
    deadline = time.monotonic() + seconds
    while (body := http.get("/readyz").json()).get("version_id") != version_id:
        assert time.monotonic() < deadline, body
        time.sleep(0.1)
    ready: dict[str, Any] = body
    return ready


def test_the_service_serves_the_s3_version_and_switches_to_a_new_one(
    raw_dir: Path, s3_settings: Settings, s3_endpoint: str
) -> None:
    location = str(s3_settings.data_dir)
    first = ingest(raw_dir, location, s3_endpoint)
    with LiveServer(s3_settings) as live, httpx.Client(base_url=live.url) as http:
        assert ready_on(http, first.version_id, seconds=0)["records"] == first.records
        write_raw(raw_dir / "extra.csv", [fee_row(fee_name="Extra")])
        second = ingest(raw_dir, location, s3_endpoint)
        assert ready_on(http, second.version_id)["records"] == second.records
    cached = sorted(p.name for p in s3_settings.cache_dir.iterdir() if p.name[0] != ".")
    assert cached == [first.version_id, second.version_id]


def test_processes_sharing_a_cache_download_a_version_once(
    raw_dir: Path, s3_settings: Settings, s3_endpoint: str
) -> None:
    published = ingest(raw_dir, str(s3_settings.data_dir), s3_endpoint)
    sources = [S3Source(s3_settings) for _ in range(4)]  # as four workers of one replica
    downloads = []
    for source in sources:
        real = source._storage.download

        def counted(*args: Any, real: Callable[..., None] = real) -> None:
            downloads.append(args[0])
            time.sleep(0.2)  # the others arrive while it downloads
            real(*args)

        source._storage.download = counted  # type: ignore[method-assign]
    target = s3_settings.cache_dir / published.version_id
    with ThreadPoolExecutor(len(sources)) as pool:
        fetched = list(pool.map(lambda source: source.fetch(target), sources))
    assert downloads == [published.version_id]
    assert fetched == [target] * len(sources)
    assert (target / "manifest.json").is_file()


def test_a_pointer_to_an_incomplete_version_is_refused_and_the_previous_serves_on(
    raw_dir: Path, s3_settings: Settings, s3_endpoint: str, tmp_path: Path
) -> None:
    location = str(s3_settings.data_dir)
    first = ingest(raw_dir, location, s3_endpoint)
    write_raw(raw_dir / "extra.csv", [fee_row(fee_name="Extra")])
    built = run_ingest(raw_dir, tmp_path / "local", registry=REGISTRY)
    partial = Path(shutil.copytree(built.version_dir, tmp_path / "partial"))
    missing = next((partial / "fees" / "exchange=nyse").glob("*.parquet"))
    missing.unlink()
    with LiveServer(s3_settings) as live, httpx.Client(base_url=live.url) as http:
        ready_on(http, first.version_id, seconds=0)
        S3Storage(location, s3_endpoint).publish(partial, built.version_id)
        deadline = time.monotonic() + 15
        while "refused" not in (ready := http.get("/readyz")).json():
            assert time.monotonic() < deadline
            time.sleep(0.1)
        assert ready.status_code == 200
        assert ready.json()["version_id"] == first.version_id
        assert ready.json()["refused"].startswith(f"{built.version_id}: ")


def test_a_missing_bucket_fails_the_ingest_naming_the_url(raw_dir: Path, s3_endpoint: str) -> None:
    location = f"s3://no-such-bucket-{uuid.uuid4().hex[:8]}/warehouse"
    with pytest.raises(StorageFailed) as raised:
        ingest(raw_dir, location, s3_endpoint)
    assert str(raised.value).startswith(f"{location}: An error occurred (NoSuchBucket)")
    assert str(raised.value).endswith("; nothing published")
