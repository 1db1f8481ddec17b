"""The embedded dataset: what the committed data/raw promises, checked by ingesting it."""

import csv
import filecmp
from pathlib import Path

import pytest

from ingest.pipeline import IngestResult, run_ingest
from ingest.query import open_version
from ingest.sample import RAW_DIR, build, write
from ingest.schema import VOCABULARIES

ROOT = Path(__file__).parent.parent


@pytest.fixture(scope="module")
def embedded(tmp_path_factory: pytest.TempPathFactory) -> IngestResult:
    data = tmp_path_factory.mktemp("embedded")
    return run_ingest(RAW_DIR, data, registry=ROOT / "data" / "exchanges.csv", strict=True)


def query(version: IngestResult, sql: str) -> list[tuple[object, ...]]:
    return open_version(version.version_dir).execute(sql).fetchall()


def test_committed_files_are_what_the_script_writes(tmp_path: Path) -> None:
    for venue, rows in build().items():
        write(venue, rows, tmp_path)
    committed = sorted(path.name for path in RAW_DIR.glob("*.csv"))
    assert sorted(path.name for path in tmp_path.glob("*.csv")) == committed
    _, mismatch, errors = filecmp.cmpfiles(RAW_DIR, tmp_path, committed, shallow=False)
    assert (mismatch, errors) == ([], [])


def test_it_ingests_strictly_with_enough_records_and_venues(embedded: IngestResult) -> None:
    assert (embedded.rejected_rows, embedded.duplicates) == (0, 0)
    assert embedded.records >= 5000
    [(venues, first, last)] = query(
        embedded,
        "SELECT count(DISTINCT exchange), min(effective_start), max(effective_start) FROM fees",
    )
    assert venues >= 15
    assert (str(first)[:4], str(last)[:4]) == ("2019", "2026")


@pytest.mark.parametrize("column", list(VOCABULARIES))
def test_every_vocabulary_value_is_present(embedded: IngestResult, column: str) -> None:
    present = {value for (value,) in query(embedded, f"SELECT DISTINCT {column} FROM fees")}
    assert set(VOCABULARIES[column]) <= present


def test_schedule_changes_are_adjacent_periods(embedded: IngestResult) -> None:
    [(adjacent,)] = query(
        embedded,
        """SELECT count(*) FROM fees AS old JOIN fees AS new
           ON old.exchange = new.exchange AND old.fee_name = new.fee_name
           AND old.fee_type = new.fee_type AND old.participant = new.participant
           AND new.effective_start = old.effective_end + 1
           AND old.fee_amount <> new.fee_amount""",
    )
    assert adjacent >= 100


def test_nyse_texas_has_a_gap_in_coverage(embedded: IngestResult) -> None:
    [(in_force,)] = query(
        embedded,
        """SELECT count(*) FROM fees WHERE exchange = 'nyse_texas'
           AND effective_start <= DATE '2025-03-02'
           AND coalesce(effective_end, DATE '9999-12-31') >= DATE '2024-12-01'""",
    )
    assert in_force == 0


def test_every_figure_is_sourced_or_marked_illustrative(embedded: IngestResult) -> None:
    with (ROOT / "data" / "facts" / "facts.csv").open(newline="", encoding="utf-8") as handle:
        sourced = {row["fee_name"] for row in csv.DictReader(handle)}
    rows = query(embedded, "SELECT fee_name, coalesce(notes, '') FROM fees")
    unmarked = {name for name, notes in rows if "illustrative" not in str(notes)}
    assert unmarked <= sourced
    assert len(unmarked) > 50
