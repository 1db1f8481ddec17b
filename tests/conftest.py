"""Shared fixtures: the real ingest run once over small hand-written CSVs."""

import csv
import shutil
from collections.abc import Iterator
from pathlib import Path

import duckdb
import pytest

from ingest.pipeline import IngestResult, run_ingest
from ingest.schema import RAW_COLUMNS

FIXTURES = Path(__file__).parent / "fixtures"
REGISTRY = FIXTURES / "exchanges.csv"


def write_raw(path: Path, rows: list[dict[str, str]]) -> Path:
    """A raw CSV with the documented header; columns a row leaves out are empty."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", newline="", encoding="utf-8") as handle:
        writer = csv.DictWriter(handle, fieldnames=RAW_COLUMNS)
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


@pytest.fixture(scope="session")
def fixture_version(tmp_path_factory: pytest.TempPathFactory) -> Iterator[IngestResult]:
    """The fixture CSVs ingested once, read-only for the tests that share it."""
    data = tmp_path_factory.mktemp("warehouse")
    yield run_ingest(FIXTURES / "raw", data, registry=REGISTRY)
    shutil.rmtree(data)


@pytest.fixture
def raw_dir(tmp_path: Path) -> Path:
    """A private copy of the fixture CSVs that a test may change."""
    return Path(shutil.copytree(FIXTURES / "raw", tmp_path / "raw"))
