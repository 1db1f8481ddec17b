"""The documentation pages list exactly the columns and values the code enforces."""

import re
from pathlib import Path

import pyarrow.parquet as pq

from ingest.layout import LAYOUT_VERSION
from ingest.pipeline import IngestResult
from ingest.schema import (
    FEE_COLUMNS,
    PUBLISHED_REQUIRED,
    RAW_COLUMNS,
    REQUIRED,
    SCHEMA_VERSION,
    UNITS,
    VOCABULARIES,
)
from ingest.units import MONEY_RULES

DOCS = Path(__file__).parent.parent / "docs"


def table_rows(page: str) -> dict[str, list[str]]:
    rows = {}
    for line in (DOCS / page).read_text(encoding="utf-8").splitlines():
        cells = [cell.strip() for cell in line.strip().strip("|").split("|")]
        if line.startswith("| `") and len(cells) > 2:
            rows[cells[0].strip("`")] = cells
    return rows


def test_raw_format_page_lists_every_column_in_order_with_required_flags() -> None:
    rows = table_rows("raw-format.md")
    columns = [name for name in rows if name in RAW_COLUMNS]
    assert columns == list(RAW_COLUMNS)
    flags = {name: rows[name][1] for name in RAW_COLUMNS}
    # `source_kind` and `uncertain`: required in a current file (an older one has neither).
    assert {name for name, flag in flags.items() if flag == "yes"} == REQUIRED | {
        "source_kind",
        "uncertain",
    }
    assert {name for name, flag in flags.items() if flag == "sourced"} == {
        "source_document",
        "source_url",
        "date_basis",
    }


def test_raw_format_page_lists_every_vocabulary_value() -> None:
    rows = table_rows("raw-format.md")
    for column, values in VOCABULARIES.items():
        assert sorted(re.findall(r"`([a-z0-9_]+)`", rows[column][2])) == sorted(values), column


def test_dataset_page_lists_every_published_column_with_its_type() -> None:
    rows = table_rows("dataset.md")
    assert [(name, rows[name][1]) for name, _ in FEE_COLUMNS] == list(FEE_COLUMNS)


def test_dataset_page_names_the_schema_and_layout_a_version_is_written_in() -> None:
    text = (DOCS / "dataset.md").read_text(encoding="utf-8")
    assert f"| `schema_version` | `{SCHEMA_VERSION}` (" in text
    assert f"| `layout_version` | `{LAYOUT_VERSION}`: " in text


def test_raw_format_page_lists_the_unit_rules_in_their_order() -> None:
    text = (DOCS / "raw-format.md").read_text(encoding="utf-8")
    section = text.split("## Amounts and units", 1)[1].split("\n## ", 1)[0]
    listed = re.findall(r"^\| `([a-z_]+)` \|", section, flags=re.MULTILINE)
    # First the limits (`ingest.units.IS_LIMIT`), then the money rules, then percentages.
    assert listed == ["other"] + [unit for unit, _ in MONEY_RULES] + ["percent_of_value"]
    assert set(listed) == set(UNITS)


def test_every_fees_file_declares_required_exactly_the_columns_the_dataset_page_does(
    fixture_version: IngestResult, embedded_version: IngestResult
) -> None:
    """Issue 37: `record_id` was optional in the files though documented as always present,
    and the provenance columns required in one version and optional in another, as the rows
    happened to be. Now each file's schema is the documented one, whatever its rows (the
    fixture's older raw files leave the provenance columns null; the embedded data never)."""
    rows = table_rows("dataset.md")
    documented = {name for name, _ in FEE_COLUMNS if rows[name][2] == "yes"}
    assert documented == PUBLISHED_REQUIRED
    for version in (fixture_version, embedded_version):
        files = sorted((version.version_dir / "fees").glob("exchange=*/data_0.parquet"))
        assert files
        for path in files:
            schema = pq.read_schema(path)
            assert schema.names == [name for name, _ in FEE_COLUMNS if name != "exchange"]
            required = {field.name for field in schema if not field.nullable}
            assert required == documented - {"exchange"}, path
