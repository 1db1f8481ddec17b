"""Shared fixtures: the real ingest run once over small hand-written CSVs, the real app over it."""

import csv
import json
import shutil
import socket
import threading
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, replace
from datetime import date
from pathlib import Path

import duckdb
import httpx
import pytest
import uvicorn

from ingest import synth
from ingest.pipeline import IngestResult, run_ingest
from ingest.query import open_version
from ingest.schema import CLOSED_VALUES, RAW_COLUMNS, TAPES
from service.accounts import key_entry
from service.api import ENDPOINTS, Endpoint
from service.app import create_app, server_options
from service.dataset.index import ResultsIndex
from service.dataset.version import Dataset
from service.settings import Settings
from tests.servers import debian_program
from tools import embedded

FIXTURES = Path(__file__).parent / "fixtures"
REGISTRY = FIXTURES / "exchanges.csv"


def write_raw(
    path: Path, rows: list[dict[str, str]], columns: tuple[str, ...] = RAW_COLUMNS
) -> Path:
    """A raw CSV with the documented header (or an older layout's `columns`, whose rows lose the
    values it has no column for); columns a row leaves out are empty."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", newline="", encoding="utf-8") as handle:
        writer = csv.DictWriter(handle, fieldnames=columns, extrasaction="ignore")
        writer.writeheader()
        writer.writerows(rows)
    return path


def fee_row(**values: str) -> dict[str, str]:
    """A valid raw row; keyword arguments override its fields."""
    row = {
        "exchange": "nyse",
        "fee_type": "equity",
        "fee_category": "fees_and_rebates",
        "action": "make",
        "participant": "all",
        "fee_name": "Adding credit",
        "fee_amount": "($0.0012)",
        "fee_basis": "per share",
        "effective_start": "2020-01-02",
        "source_document": "NYSE Price List",
        "source_url": "https://example.test/nyse-price-list",
        "source_kind": "primary",
        "date_basis": "stated",
        "uncertain": "false",
    }
    row.update(values)
    return row


def read_fees(version_dir: Path) -> list[dict[str, object]]:
    pattern = str(version_dir / "fees" / "**" / "*.parquet")
    cursor = duckdb.connect().execute(
        "SELECT * FROM read_parquet($p, hive_partitioning = true) "
        "ORDER BY source_file, source_line",
        {"p": pattern},
    )
    names = [column[0] for column in cursor.description]
    return [dict(zip(names, row, strict=True)) for row in cursor.fetchall()]


# NYSE's standard rates, read in a complete standard-rates schedule of 2023-06-01 and before:
# what the synthetic rows have none of (`indexed`, `tests/test_lives_http.py`).
SCHEDULE = "https://example.test/nyse-standard-rates-2023"
# Values each results filter's column may be asked for: its vocabulary, and for the open
# columns the synthetic data's values and one it never holds.
FILTER_VALUES = CLOSED_VALUES | {
    "tier": ("Tier 1", "Tier 3", "Tier 9"),
    "tapes": TAPES,
    "fee_codes": ("S1041", "S1090", "S10CC", "ZZ9"),
}


STANDARD_ROWS = [
    fee_row(fee_name="Base add", standard="true", effective_start="2019-03-01"),
    fee_row(fee_name="Base add", standard="true", fee_amount="($0.0016)",
            effective_start="2022-01-03", complete_scope="standard_rates",
            complete_as_of="2023-06-01", source_url=SCHEDULE),  # changed, listed again
    fee_row(fee_name="Old base add", standard="true", effective_start="2015-06-01",
            effective_end="2016-12-31"),
    fee_row(action="take", fee_name="Base take", fee_amount="$0.0030", standard="true",
            effective_start="2018-01-02"),
    fee_row(action="take", fee_name="Base take", fee_amount="$0.0030", standard="true",
            effective_start="2023-06-01", complete_scope="standard_rates",
            complete_as_of="2023-06-01", source_url=SCHEDULE),  # read again: no change
    fee_row(action="routed", fee_name="Routed", fee_amount="$0.0030", standard="true",
            effective_start="2020-01-02"),  # omitted from the schedule: ended 2023-05-31
    fee_row(fee_name="Tier 1 add", fee_amount="($0.0020)", effective_start="2021-03-01"),
]  # fmt: skip


@pytest.fixture(scope="session")
def fixture_version(tmp_path_factory: pytest.TempPathFactory) -> Iterator[IngestResult]:
    """The fixture CSVs ingested once, read-only for the tests that share it."""
    data = tmp_path_factory.mktemp("warehouse")
    yield run_ingest(FIXTURES / "raw", data, registry=REGISTRY)
    shutil.rmtree(data)


@pytest.fixture(scope="session")
def embedded_version(tmp_path_factory: pytest.TempPathFactory) -> Iterator[IngestResult]:
    """The committed data/raw ingested once, strictly (one reject fails it), read-only for
    the tests that share it."""
    data = tmp_path_factory.mktemp("embedded")
    yield run_ingest(embedded.RAW_DIR, data, registry=embedded.REGISTRY, strict=True)
    shutil.rmtree(data)


@pytest.fixture(scope="session")
def chromium() -> str:
    """Debian's Chromium for the browser tests (`tests.browser`); skips them, saying why, only
    where it cannot be installed."""
    return debian_program("chromium", "chromium")


@pytest.fixture
def raw_dir(tmp_path: Path) -> Path:
    """A private copy of the fixture CSVs that a test may change."""
    return Path(shutil.copytree(FIXTURES / "raw", tmp_path / "raw"))


class LiveServer:
    """The real app under a real uvicorn server on a free loopback port, in a thread."""

    def __init__(
        self,
        settings: Settings,
        *,
        log_level: str = "warning",
        endpoints: Sequence[Endpoint] = ENDPOINTS,
    ) -> None:
        logged = replace(settings, log_level=log_level)  # "info" writes the access lines
        self.app = create_app(logged, endpoints)
        self._socket = socket.socket()
        self._socket.bind(("127.0.0.1", 0))
        self.url = f"http://127.0.0.1:{self._socket.getsockname()[1]}"
        config = uvicorn.Config(self.app, lifespan="on", **server_options(logged))
        self._server = uvicorn.Server(config)
        self._thread = threading.Thread(
            target=self._server.run, kwargs={"sockets": [self._socket]}, daemon=True
        )

    def __enter__(self) -> "LiveServer":
        self._thread.start()
        deadline = time.monotonic() + 30
        while not self._server.started:
            if time.monotonic() > deadline or not self._thread.is_alive():
                raise RuntimeError("test server did not start")
            time.sleep(0.01)
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.should_exit = True
        self._thread.join(timeout=10)


KEYS = {
    "full": "test-key-full-access-0123456789abcdef",
    "nyse": "test-key-nyse-only-0123456789abcdef",
}
# The shared test keys make hundreds of calls; the rate-limit tests make keys of their own.
UNLIMITED = {"burst": 10**9, "per_minute": 10**9}


@pytest.fixture(scope="session")
def accounts_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Accounts with an all-venue key, a NYSE-only key and a revoked key."""
    document = {
        "accounts": {
            "analyst": {
                "exchanges": None,
                "rate_limit": UNLIMITED,
                "keys": [account_key(KEYS["full"])],
            },
            "nyse-desk": {
                "exchanges": ["nyse"],
                "rate_limit": UNLIMITED,
                "keys": [account_key(KEYS["nyse"])],
            },
            "former": {"exchanges": None, "keys": [account_key("revoked-key", revoked=True)]},
        }
    }
    path = tmp_path_factory.mktemp("accounts") / "accounts.json"
    path.write_text(json.dumps(document), encoding="utf-8")
    return path


def account_key(key: str, *, revoked: bool = False) -> dict[str, object]:
    revoked_at = "2026-02-01T00:00:00+00:00" if revoked else None
    return key_entry(key, "2026-01-01T00:00:00+00:00", revoked_at)


@pytest.fixture(scope="session")
def server(fixture_version: IngestResult, accounts_file: Path) -> Iterator[LiveServer]:
    settings = Settings(
        data_dir=fixture_version.version_dir.parent.parent, accounts_file=accounts_file
    )
    with LiveServer(settings) as live:
        yield live


@pytest.fixture(scope="session")
def client(server: LiveServer) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=server.url, timeout=10) as http:
        yield http


def supplier_headers(key: str = KEYS["full"]) -> dict[str, str]:
    return {"Authorization": f"Bearer {key}", "Content-Type": "application/json"}


def exchange_headers(key: str = KEYS["full"]) -> dict[str, str]:
    return {"x-service-api-access-key": key}


DAYS = """
SELECT DISTINCT day FROM (
    SELECT effective_start AS day FROM fees UNION SELECT effective_end FROM fees
) WHERE day IS NOT NULL ORDER BY day
"""


@dataclass(frozen=True)
class Indexed:
    dataset: Dataset
    index: ResultsIndex
    venues: list[str]
    versions: list[str]
    days: list[date]  # every effective start and end in the data: the edges of windows
    plain: duckdb.DuckDBPyConnection  # the tests' own, over the Parquet (`fees sql`'s views)


@pytest.fixture(scope="session")
def indexed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Indexed]:
    """Synthetic rows, then the same rows plus the fixture CSVs: two versions, so records
    carry two version ids (shared by the tests that compare fast paths with plain SQL)."""
    root = tmp_path_factory.mktemp("indexed")
    raw, data = root / "raw", root / "data"
    synth.generate(rows=24_000, out=raw, registry=REGISTRY, rows_per_file=10_000)
    first = run_ingest(raw, data, registry=REGISTRY)
    shutil.copytree(FIXTURES / "raw", raw / "fixtures")
    write_raw(raw / "fixtures" / "standard.csv", STANDARD_ROWS)
    second = run_ingest(raw, data, registry=REGISTRY)
    dataset = Dataset(second.version_dir, Settings(data_dir=data))
    assert dataset.index is not None
    venues = sorted(dataset.venues)
    plain = open_version(second.version_dir)
    days = [day for (day,) in plain.execute(DAYS).fetchall()]
    versions = [first.version_id, second.version_id]
    yield Indexed(dataset, dataset.index, venues, versions, days, plain)
    plain.close()
    dataset.close()
    shutil.rmtree(root)
