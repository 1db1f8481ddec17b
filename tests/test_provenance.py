"""The provenance rules of the raw format (`docs/raw-format.md`, "Provenance"), run through the
real ingest: what a row must say about its source, and what an illustrative row must not."""

import csv
from pathlib import Path

import pytest

from ingest.pipeline import run_ingest
from tests.conftest import REGISTRY, fee_row, read_fees, write_raw

NO_SOURCE = (
    "an illustrative row names no source: leave source_document, source_url and page_number empty"
)
NOT_WEB = "not a web address: http:// or https://, a host, and no spaces"
ILLUSTRATIVE = {
    "source_kind": "illustrative",
    "source_document": "",
    "source_url": "",
    "date_basis": "",
}


def rejects_of(rows: list[dict[str, str]], tmp_path: Path) -> list[tuple[str, str, str]]:
    """(column, value, reason) of every problem the ingest finds in `rows`, in file order."""
    write_raw(tmp_path / "raw" / "rows.csv", [*rows, fee_row(fee_name="Keeps a version")])
    result = run_ingest(tmp_path / "raw", tmp_path / "data", registry=REGISTRY)
    with (result.version_dir / "rejects.csv").open(newline="", encoding="utf-8") as handle:
        return [(r["column"], r["value"], r["reason"]) for r in csv.DictReader(handle)]


@pytest.mark.parametrize(
    ("row", "problems"),
    [
        (
            fee_row(**ILLUSTRATIVE | {"source_document": "NYSE Price List"}),
            [("source_document", "NYSE Price List", NO_SOURCE)],
        ),
        (
            fee_row(**ILLUSTRATIVE | {"source_url": "https://example.test/a"}),
            [("source_url", "https://example.test/a", NO_SOURCE)],
        ),
        (fee_row(**ILLUSTRATIVE, page_number="3"), [("page_number", "3", NO_SOURCE)]),
        (
            fee_row(**ILLUSTRATIVE | {"date_basis": "stated"}),
            [
                (
                    "date_basis",
                    "stated",
                    "an illustrative row's dates have no basis: leave date_basis empty",
                )
            ],
        ),
        (
            fee_row(source_url=""),
            [("source_url", "", "a primary or secondary row needs its source URL")],
        ),
        (
            fee_row(source_kind="secondary", source_url=""),
            [("source_url", "", "a primary or secondary row needs its source URL")],
        ),
        (
            fee_row(source_document=""),
            [("source_document", "", "required value is missing")],
        ),
        (
            fee_row(source_kind="", date_basis="", uncertain=""),
            [
                ("source_kind", "", "required value is missing"),
                ("uncertain", "", "required value is missing"),
            ],
        ),
        (fee_row(date_basis=""), [("date_basis", "", "required value is missing")]),
        (
            fee_row(source_kind="tertiary", date_basis="guessed", uncertain="yes"),
            [
                ("source_kind", "tertiary", "not one of: illustrative, primary, secondary"),
                ("date_basis", "guessed", "not one of: derived, observed, stated"),
                ("uncertain", "yes", "not one of: false, true"),
            ],
        ),
    ],
    ids=[
        "illustrative-with-document",
        "illustrative-with-url",
        "illustrative-with-page",
        "illustrative-with-date-basis",
        "primary-without-url",
        "secondary-without-url",
        "sourced-without-document",
        "no-provenance-in-a-schema-3-file",
        "sourced-without-date-basis",
        "values-outside-the-vocabularies",
    ],
)
def test_a_row_breaking_a_provenance_rule_is_rejected_with_its_reason(
    tmp_path: Path, row: dict[str, str], problems: list[tuple[str, str, str]]
) -> None:
    assert rejects_of([row], tmp_path) == problems


def test_flags_are_stored_as_given_and_an_illustrative_row_names_nothing(tmp_path: Path) -> None:
    rows = [
        fee_row(fee_name="Primary", uncertain="false"),
        fee_row(
            fee_name="Secondary",
            source_kind="secondary",
            date_basis="observed",
            uncertain="true",
        ),
        fee_row(fee_name="Derived", date_basis="derived"),
        fee_row(fee_name="Made up", **ILLUSTRATIVE),
    ]
    write_raw(tmp_path / "raw" / "rows.csv", rows)
    result = run_ingest(tmp_path / "raw", tmp_path / "data", registry=REGISTRY)
    assert result.rejected_rows == 0
    stored = [
        (r["fee_name"], r["source_kind"], r["date_basis"], r["uncertain"], r["source_document"])
        for r in read_fees(result.version_dir)
    ]
    assert stored == [
        ("Primary", "primary", "stated", False, "NYSE Price List"),
        ("Secondary", "secondary", "observed", True, "NYSE Price List"),
        ("Derived", "primary", "derived", False, "NYSE Price List"),
        ("Made up", "illustrative", None, False, None),
    ]


@pytest.mark.parametrize(
    "address",
    [
        "javascript:alert(document.domain)",
        "data:text/html,<b>x</b>",
        "ftp://example.test/list.pdf",
        "https://",
        "https://example.test/a list.pdf",
        "example.test/list.pdf",
    ],
    ids=["script", "data", "ftp", "no-host", "space", "no-scheme"],
)
def test_a_source_url_that_is_not_a_web_address_is_rejected(tmp_path: Path, address: str) -> None:
    """A public source is one a reader can open; the explorer links it."""
    assert rejects_of([fee_row(source_url=address)], tmp_path) == [("source_url", address, NOT_WEB)]
