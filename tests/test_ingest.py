"""The ingest end to end: real CSVs in, real Parquet versions out, read back with DuckDB."""

import csv
import hashlib
import json
import os
import uuid
from datetime import date
from decimal import Decimal
from pathlib import Path

import duckdb
import pyarrow.parquet as pq
import pytest

from ingest import layout, publish, synth
from ingest.__main__ import main
from ingest.errors import IngestError, IngestLocked, MalformedFile, RowsRejected
from ingest.pipeline import IngestResult, run_ingest
from ingest.schema import (
    DETAIL_COLUMNS,
    FEE_COLUMNS,
    PROVENANCE_COLUMNS,
    RAW_COLUMNS,
    V1_RAW_COLUMNS,
    V2_RAW_COLUMNS,
    V5_RAW_COLUMNS,
)
from tests.conftest import REGISTRY, fee_row, read_fees, write_raw

REPO = Path(__file__).parent.parent


def ingest(raw: Path, data: Path, **options: object) -> IngestResult:
    return run_ingest(raw, data, registry=REGISTRY, **options)  # type: ignore[arg-type]


def read_rejects(version_dir: Path) -> list[dict[str, str]]:
    with (version_dir / "rejects.csv").open(newline="", encoding="utf-8") as handle:
        return list(csv.DictReader(handle))


def test_round_trip_keeps_every_value_and_derives_columns(fixture_version: IngestResult) -> None:
    records = read_fees(fixture_version.version_dir)
    first = records[0]
    assert {name: first[name] for name in RAW_COLUMNS} == {
        "exchange": "nyse",
        "fee_type": "equity",
        "fee_category": "fees_and_rebates",
        "action": "make",
        "participant": "all",
        "symbol_classification": None,
        "symbol_type": None,
        "trade_type": None,
        "fee_name": "Good row",
        "fee_amount": "($0.0012)",
        "fee_basis": "per share",
        "volume_tier": None,
        "conditions": None,
        "notes": None,
        "effective_start": date(2020, 1, 2),
        "effective_end": None,
        "source_document": "NYSE Price List",
        "source_url": None,
        "page_number": 2,
        # a schema 1 file (no detail or provenance columns): read with them empty
        **dict.fromkeys(DETAIL_COLUMNS),
        **dict.fromkeys(PROVENANCE_COLUMNS),
        "line_name": None,
        "standard": False,  # an older file says nothing of standard rates: none is
        "complete_scope": None,
        "complete_as_of": None,
        # nor of fee codes, display, price bands, tapes or tiers: no code and every tape
        "fee_codes": [],
        "display": None,
        "price_band": None,
        "tapes": [],
        "tier": None,
    }
    assert (first["amount"], first["currency"], first["unit"]) == (
        Decimal("-0.0012"),
        "USD",
        "per_share",
    )
    assert (first["source_file"], first["source_line"]) == ("bad_rows.csv", 2)
    assert first["version_id"] == fixture_version.version_id
    assert set(first) == {name for name, _ in FEE_COLUMNS}


def test_quoted_commas_line_breaks_and_trimming_survive(fixture_version: IngestResult) -> None:
    by_name = {(r["fee_name"], r["source_file"]): r for r in read_fees(fixture_version.version_dir)}
    assert by_name[("Remove liquidity", "nasdaq.csv")]["conditions"] == "Tapes A, B and C"
    penny = by_name[("Penny remove", "nasdaq.csv")]
    assert (penny["conditions"], penny["source_line"]) == ("Multi-line\ncondition text", 7)
    trimmed = by_name[("Trimmed row", "bad_rows.csv")]
    assert (trimmed["exchange"], trimmed["fee_type"], trimmed["source_line"]) == (
        "nyse",
        "equity",
        8,
    )


def test_physical_lines_count_blank_lines_and_quoted_breaks(
    fixture_version: IngestResult,
) -> None:
    lines = sorted(
        (r["source_line"], r["fee_name"])
        for r in read_fees(fixture_version.version_dir)
        if r["source_file"] == "nasdaq.csv"
    )
    assert lines == [
        (2, "Rebate to add displayed liquidity"),
        (3, "Rebate to add displayed liquidity"),
        (4, "Remove liquidity"),
        (5, "Section 31 fee"),
        (7, "Penny remove"),  # after the blank line 6; spans lines 7-8
        (9, "MM rebate tiers"),
        (10, "FIX port"),
        (13, "Opening cross"),  # after the collapsed duplicate on lines 11-12
    ]


def test_rejects_file_names_every_problem(fixture_version: IngestResult) -> None:
    assert read_rejects(fixture_version.version_dir) == [
        {"file": "bad_rows.csv", "line": "3", "column": "fee_type", "value": "stock",
         "reason": "not one of: equity, option"},
        {"file": "bad_rows.csv", "line": "4", "column": "effective_start", "value": "2024-02-30",
         "reason": "not a real date in the form YYYY-MM-DD"},
        {"file": "bad_rows.csv", "line": "5", "column": "effective_end", "value": "2024-04-30",
         "reason": "effective_end is before effective_start"},
        {"file": "bad_rows.csv", "line": "6", "column": "exchange", "value": "lse",
         "reason": "unknown venue code"},
        {"file": "bad_rows.csv", "line": "7", "column": "fee_category", "value": "",
         "reason": "required value is missing"},
        {"file": "bad_rows.csv", "line": "7", "column": "fee_name", "value": "",
         "reason": "required value is missing"},
        {"file": "bad_rows.csv", "line": "7", "column": "effective_start", "value": "20240101",
         "reason": "not a real date in the form YYYY-MM-DD"},
        {"file": "bad_rows.csv", "line": "7", "column": "effective_end", "value": "2024-1-1",
         "reason": "not a real date in the form YYYY-MM-DD"},
        {"file": "bad_rows.csv", "line": "7", "column": "page_number", "value": "0",
         "reason": "not a whole number of at least 1"},
    ]  # fmt: skip


def test_manifest_counts_rows_rejects_and_duplicates(fixture_version: IngestResult) -> None:
    manifest = layout.read_manifest(fixture_version.version_dir)
    assert {key: manifest[key] for key in ("rows_read", "records", "rejected_rows", "problems",
                                           "duplicates", "venues", "schema_version")} == {
        "rows_read": 19,
        "records": 13,
        "rejected_rows": 5,
        "problems": 9,
        "duplicates": 1,
        "venues": {"memx": 3, "nasdaq": 8, "nyse": 2},
        "schema_version": 6,
    }  # fmt: skip
    assert [(f["path"], f["rejected_rows"]) for f in manifest["files"]] == [
        ("bad_rows.csv", 5),
        ("memx.csv", 0),
        ("nasdaq.csv", 0),
    ]
    assert manifest["version_id"] == fixture_version.version_id
    assert len(manifest["files"][0]["sha256"]) == 64


@pytest.mark.parametrize(
    ("printed", "basis", "amount", "currency", "unit"),
    [
        ("$0.0030", "per share", Decimal("0.0030"), "USD", "per_share"),
        ("($0.0020)", "Per Share Executed", Decimal("-0.0020"), "USD", "per_share"),
        ("$0.0001", "per executed equivalent share", Decimal("0.0001"), "USD", "per_share"),
        ("-$0.25", "per contract side", Decimal("-0.25"), "USD", "per_contract"),
        ("$0.05", "per executed contract", Decimal("0.05"), "USD", "per_contract"),
        ("$0.01", "per order", Decimal("0.01"), "USD", "per_order"),
        ("$1,500.00", "per port, per month", Decimal("1500.00"), "USD", "per_port"),
        ("$450", "per port per month per mnemonic", Decimal("450"), "USD", "per_port"),
        ("$500.00", "per user per month", Decimal("500.00"), "USD", "per_month"),
        ("$2,000", "per Trading Permit per year (payable monthly)", Decimal("2000"), "USD",
         "per_year"),
        ("$100.00", "per member (one-time)", Decimal("100.00"), "USD", "one_time"),
        ("$20,000.00", "per calendar year", Decimal("20000.00"), "USD", "per_year"),
        ("$27.80", "per $1M of sales", Decimal("27.80"), "USD", "per_million_dollars_of_value"),
        ("$5,000.00", "per month cap", Decimal("5000.00"), "USD", "other"),
        ("$25.00", "maximum per execution", Decimal("25.00"), "USD", "other"),
        ("$75", "per day of historical data purchased", Decimal("75"), "USD", "other"),
        ("$0.00000001", "", Decimal("0.00000001"), "USD", "other"),
        ("$0.000000001", "per share", None, None, None),
        ("0.30% of TDV", "", Decimal("0.30"), None, "percent_of_value"),
        ("(0.075%)", "of total dollar value", Decimal("-0.075"), None, "percent_of_value"),
        ("-0.05%", "of notional value", Decimal("-0.05"), None, "percent_of_value"),
        ("25%", "discount on order entry port fees", Decimal("25"), None, "other"),
        ("(0.10%", "of total dollar value", None, None, None),
        ("1000%", "", None, None, None),
        ("$0.10 - $0.25", "per contract", None, None, None),
        ("Free", "", None, None, None),
        ("$1,50.00", "", None, None, None),
        ("($0.25", "", None, None, None),
        ("0.0030", "per share", None, None, None),
    ],
    ids=lambda value: str(value),
)  # fmt: skip
def test_amount_and_unit_follow_the_documented_rules(
    tmp_path: Path, printed: str, basis: str, amount: object, currency: object, unit: object
) -> None:
    write_raw(tmp_path / "raw" / "one.csv", [fee_row(fee_amount=printed, fee_basis=basis)])
    result = ingest(tmp_path / "raw", tmp_path / "data")
    [record] = read_fees(result.version_dir)
    assert (record["fee_amount"], record["amount"], record["currency"], record["unit"]) == (
        printed,
        amount,
        currency,
        unit,
    )


def documented_line_id(row: dict[str, str]) -> str:
    """docs/raw-format.md, "Fee lines": md5 of the JSON array of the line's ten values."""
    label = row.get("line_name") or row["fee_name"]
    names = ("exchange", "fee_type", "fee_category", "action", "participant",
             "symbol_classification", "symbol_type", "trade_type")  # fmt: skip
    values = [row.get(name) or None for name in names] + [label, row.get("volume_tier") or None]
    text = json.dumps(values, separators=(",", ":"), ensure_ascii=False)
    return str(uuid.UUID(hashlib.md5(text.encode()).hexdigest()))


def test_a_fee_line_keeps_its_id_through_new_rates(tmp_path: Path) -> None:
    first = fee_row(effective_end="2021-05-31")
    rows = [
        first,
        fee_row(fee_amount="($0.0015)", effective_start="2021-06-01", source_kind="secondary",
                effective_end="2022-02-28"),
        fee_row(fee_amount="($0.0016)", effective_start="2022-03-01"),
        fee_row(volume_tier="Tier 1"),  # another tier: another line
        fee_row(fee_name="Adding credit, sub-dollar", fee_amount="(0.05%)"),  # another label
    ]  # fmt: skip
    write_raw(tmp_path / "raw" / "one.csv", rows)
    records = read_fees(ingest(tmp_path / "raw", tmp_path / "data").version_dir)
    ids = [record["line_id"] for record in records]
    assert ids[0] == ids[1] == ids[2] == documented_line_id(first)
    assert ids[3] == documented_line_id(rows[3]) and ids[4] == documented_line_id(rows[4])
    assert len({ids[0], ids[3], ids[4]}) == 3


def test_records_of_one_line_in_force_on_one_day_are_all_rejected_naming_each_other(
    tmp_path: Path,
) -> None:
    """By their own dates: a start shared, or an end a row gives reaching the next record. (A
    record with no end is ended by the next one: `tests/test_lives.py`.)"""
    rows = [
        fee_row(effective_end="2020-12-31"),  # line 2: overlaps line 4
        fee_row(fee_amount="($0.0015)", effective_start="2021-06-01"),  # line 3: ended by 5
        fee_row(fee_amount="($0.0014)", effective_start="2020-06-01",
                effective_end="2021-01-31"),  # line 4
        fee_row(fee_amount="($0.0016)", effective_start="2024-01-01"),  # line 5: after line 3
        fee_row(effective_start="2019-01-01", effective_end="2020-01-02"),  # line 6: one day
        fee_row(fee_name="Other line", effective_start="2020-06-01"),  # line 7: its own line
        fee_row(fee_name="Other line", effective_start="2020-06-01"),  # an exact duplicate
        fee_row(fee_name="Other line", fee_amount="$0.0001",
                effective_start="2020-06-01"),  # line 9: line 7's start, another figure
    ]  # fmt: skip
    write_raw(tmp_path / "raw" / "one.csv", rows)
    result = ingest(tmp_path / "raw", tmp_path / "data")
    kept = read_fees(result.version_dir)
    assert [(record["source_line"], str(record["effective_end"])) for record in kept] == [
        (3, "2023-12-31"),
        (5, "None"),
    ]
    assert (result.rejected_rows, result.duplicates) == (5, 1)
    reasons = {(reject["line"], reject["reason"]) for reject in read_rejects(result.version_dir)}
    assert all(reject["column"] == "effective_start" for reject in read_rejects(result.version_dir))
    fmt = "overlaps one.csv, line {} (the same fee line, in force {} to {})"
    assert reasons == {
        ("2", fmt.format(6, "2019-01-01", "2020-01-02")),
        ("6", fmt.format(2, "2020-01-02", "2020-12-31")),
        ("2", fmt.format(4, "2020-06-01", "2021-01-31")),
        ("4", fmt.format(2, "2020-01-02", "2020-12-31")),
        ("7", fmt.format(9, "2020-06-01", "no end")),
        ("9", fmt.format(7, "2020-06-01", "no end")),
    }


def test_adjacent_periods_of_a_line_are_not_an_overlap_and_strict_refuses_one(
    tmp_path: Path,
) -> None:
    write_raw(
        tmp_path / "raw" / "one.csv",
        [fee_row(effective_end="2020-12-31"), fee_row(effective_start="2021-01-01")],
    )
    assert ingest(tmp_path / "raw", tmp_path / "data", strict=True).rejected_rows == 0
    # blank lines before the rows: the problem still names the physical lines
    (tmp_path / "raw" / "one.csv").write_text(
        (tmp_path / "raw" / "one.csv").read_text().replace("\n", "\n\n", 1)
    )
    write_raw(
        tmp_path / "raw" / "two.csv",
        [fee_row(effective_start="2020-12-31", fee_amount="($0.0011)")],  # another figure
    )
    with pytest.raises(
        RowsRejected,
        match=r"one\.csv, line 3, effective_start = '2020-01-02': "
        r"overlaps two\.csv, line 2 \(the same fee line, in force 2020-12-31",
    ):
        ingest(tmp_path / "raw", tmp_path / "data", strict=True)


def test_record_ids_are_stable_across_runs_files_and_directories(tmp_path: Path) -> None:
    rows = [fee_row(), fee_row(fee_name="Other", action="take", fee_amount="$0.0030")]
    write_raw(tmp_path / "a" / "one.csv", rows)
    write_raw(tmp_path / "b" / "renamed.csv", [{}, *rows][1:][::-1])
    ids_a = {r["record_id"] for r in read_fees(ingest(tmp_path / "a", tmp_path / "d1").version_dir)}
    ids_b = {r["record_id"] for r in read_fees(ingest(tmp_path / "b", tmp_path / "d2").version_dir)}
    assert ids_a == ids_b
    assert len(ids_a) == 2


def test_unchanged_input_publishes_nothing(raw_dir: Path, tmp_path: Path) -> None:
    first = ingest(raw_dir, tmp_path / "data")
    again = ingest(raw_dir, tmp_path / "data")
    assert (again.changed, again.version_id) == (False, first.version_id)
    assert [p.name for p in (tmp_path / "data" / "versions").iterdir()] == [first.version_id]


def test_a_new_layout_rebuilds_unchanged_input(
    raw_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    first = run_ingest(raw_dir, tmp_path / "data", registry=REGISTRY)
    monkeypatch.setattr(layout, "LAYOUT_VERSION", layout.LAYOUT_VERSION + 1)
    again = run_ingest(raw_dir, tmp_path / "data", registry=REGISTRY)
    assert again.changed and again.version_id != first.version_id


def test_changed_input_keeps_first_version_of_unchanged_records(tmp_path: Path) -> None:
    raw = tmp_path / "raw" / "one.csv"
    write_raw(raw, [fee_row()])
    first = ingest(tmp_path / "raw", tmp_path / "data")
    write_raw(raw, [fee_row(), fee_row(fee_name="New line", fee_amount="$0.50")])
    second = ingest(tmp_path / "raw", tmp_path / "data")
    versions = {r["fee_name"]: r["version_id"] for r in read_fees(second.version_dir)}
    assert versions == {"Adding credit": first.version_id, "New line": second.version_id}
    assert layout.current_version_dir(tmp_path / "data") == second.version_dir


def test_strict_mode_fails_and_publishes_nothing(raw_dir: Path, tmp_path: Path) -> None:
    with pytest.raises(RowsRejected, match=r"5 row\(s\) rejected with 9 problem\(s\)"):
        ingest(raw_dir, tmp_path / "data", strict=True)
    assert not (tmp_path / "data" / "current").exists()
    assert list((tmp_path / "data" / "versions").iterdir()) == []


def test_strict_mode_leaves_the_previous_version_current(raw_dir: Path, tmp_path: Path) -> None:
    (raw_dir / "bad_rows.csv").unlink()
    good = ingest(raw_dir, tmp_path / "data", strict=True)
    write_raw(raw_dir / "more.csv", [fee_row(fee_type="bond")])
    with pytest.raises(RowsRejected):
        ingest(raw_dir, tmp_path / "data", strict=True)
    assert layout.current_version_dir(tmp_path / "data") == good.version_dir


HEADER = ",".join(RAW_COLUMNS)
HEADER_RULE = (
    f"header must be exactly: {HEADER} (or that of schema 5, which stops after complete_as_of, "
    "of schema 4, after line_name, of schema 3, after uncertain, of schema 2, after extra_info, "
    "or of schema 1, after page_number)"
)
V1_LINE = "nyse,equity,fees_and_rebates,make,all,,,,Credit,$0.10,per share,,,,2020-01-02,,Doc,,1"
GOOD_LINE = V1_LINE + "," * (len(RAW_COLUMNS) - len(V1_RAW_COLUMNS))


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (b"", "malformed file bad.csv: file is empty (no header line)"),
        (
            b"exchange,fee_type,colour\n",
            f"malformed file bad.csv, line 1: {HEADER_RULE}; "
            f"missing: {', '.join(RAW_COLUMNS[2:])}; unknown: colour",
        ),
        (
            f"{','.join(reversed(RAW_COLUMNS))}\n".encode(),
            f"malformed file bad.csv, line 1: {HEADER_RULE}; the columns are out of order",
        ),
        (
            f"{HEADER}\n{GOOD_LINE}\n{GOOD_LINE},extra\n".encode(),
            "malformed file bad.csv, line 3: expected 38 fields, found 39",
        ),
        (
            f"{HEADER}\n\n{GOOD_LINE}\nnyse,equity\n".encode(),
            "malformed file bad.csv, line 4: expected 38 fields, found 2",
        ),
        (
            f"{','.join(V1_RAW_COLUMNS)}\n{GOOD_LINE}SPY\n".encode(),
            "malformed file bad.csv, line 2: expected 19 fields, found 38",
        ),
        (
            f"{HEADER}\n{GOOD_LINE}\n".encode() + b"nyse,\xff\xfe" + GOOD_LINE[5:].encode(),
            "malformed file bad.csv, line 3: bytes are not valid UTF-8",
        ),
        (
            f'{HEADER}\n{GOOD_LINE}\nnyse,"unterminated\n'.encode(),
            "malformed file bad.csv, line 3: unexpected end of data",
        ),
    ],
    ids=[
        "empty",
        "header",
        "header-order",
        "long-row",
        "short-row-after-blank",
        "schema-1-row",
        "encoding",
        "open-quote",
    ],
)
def test_malformed_file_is_named_with_its_line(
    tmp_path: Path, content: bytes, message: str
) -> None:
    (tmp_path / "raw").mkdir()
    write_raw(tmp_path / "raw" / "good.csv", [fee_row()])
    (tmp_path / "raw" / "bad.csv").write_bytes(content)
    with pytest.raises(MalformedFile) as caught:
        ingest(tmp_path / "raw", tmp_path / "data")
    assert str(caught.value) == message
    assert not (tmp_path / "data" / "current").exists()


def test_no_valid_records_publishes_nothing(tmp_path: Path) -> None:
    write_raw(tmp_path / "raw" / "one.csv", [fee_row(exchange="nowhere")])
    with pytest.raises(IngestError, match="no valid records"):
        ingest(tmp_path / "raw", tmp_path / "data")


def test_empty_raw_directory_is_an_error(tmp_path: Path) -> None:
    (tmp_path / "raw").mkdir()
    with pytest.raises(IngestError, match=r"no \*\.csv files"):
        ingest(tmp_path / "raw", tmp_path / "data")


def versions_on_disk(data: Path) -> list[str]:
    return sorted(p.name for p in (data / "versions").iterdir())


def test_old_versions_are_pruned_keeping_the_newest(tmp_path: Path) -> None:
    published = []
    for number in range(4):
        write_raw(tmp_path / "raw" / "one.csv", [fee_row(fee_name=f"Credit {number}")])
        published.append(ingest(tmp_path / "raw", tmp_path / "data", keep=2).version_id)
    assert versions_on_disk(tmp_path / "data") == published[2:]
    assert (
        layout.current_version_dir(tmp_path / "data")
        == tmp_path / "data" / "versions" / published[3]
    )


@pytest.mark.parametrize("step", ["rename", "symlink", "replace"])
def test_failure_while_publishing_leaves_previous_version_current(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, step: str
) -> None:
    write_raw(tmp_path / "raw" / "one.csv", [fee_row()])
    good = ingest(tmp_path / "raw", tmp_path / "data")
    write_raw(tmp_path / "raw" / "one.csv", [fee_row(), fee_row(fee_name="Second")])

    def crash(*args: object, **kwargs: object) -> None:
        raise OSError(f"injected failure at {step}")

    monkeypatch.setattr(publish.os, step, crash)
    with pytest.raises(OSError, match="injected"):
        ingest(tmp_path / "raw", tmp_path / "data")
    monkeypatch.undo()
    assert layout.current_version_dir(tmp_path / "data") == good.version_dir
    assert [r["fee_name"] for r in read_fees(good.version_dir)] == ["Adding credit"]
    retry = ingest(tmp_path / "raw", tmp_path / "data")
    assert len(read_fees(retry.version_dir)) == 2
    assert not [p for p in (tmp_path / "data" / "versions").iterdir() if p.name.startswith(".")]


def test_a_second_ingest_on_the_same_directory_is_refused(tmp_path: Path) -> None:
    write_raw(tmp_path / "raw" / "one.csv", [fee_row()])
    with publish.ingest_lock(tmp_path / "data"), pytest.raises(IngestLocked):
        ingest(tmp_path / "raw", tmp_path / "data")


def test_command_line_prints_a_summary_and_exit_codes(
    raw_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    args = ["--raw", str(raw_dir), "--data", str(tmp_path / "data"), "--registry", str(REGISTRY)]
    assert main([*args, "--strict"]) == 1
    assert "nothing published" in capsys.readouterr().err
    assert main(args) == 0
    out = capsys.readouterr().out
    assert "records                    13" in out
    assert "bad_rows.csv, line 3, fee_type = 'stock': not one of: equity, option" in out
    assert main(args) == 0
    assert "nothing changed" in capsys.readouterr().out


def test_if_stale_publishes_only_when_nothing_servable_is_current(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """What `make run` does: never replace data ingested from elsewhere, but rebuild a version
    of another schema (which the service refuses)."""
    data = tmp_path / "data"
    write_raw(tmp_path / "mine" / "one.csv", [fee_row(fee_name="Mine")])
    write_raw(tmp_path / "embedded" / "one.csv", [fee_row(fee_name="Embedded")])
    args = ["--data", str(data), "--registry", str(REGISTRY), "--if-stale"]
    assert main(["--raw", str(tmp_path / "mine"), *args]) == 0  # nothing current yet
    mine = layout.current_version_dir(data)
    assert mine is not None and "published version" in capsys.readouterr().out
    assert main(["--raw", str(tmp_path / "embedded"), *args]) == 0
    assert layout.current_version_dir(data) == mine
    assert capsys.readouterr().out == (
        f"a version of schema 6 and layout {layout.LAYOUT_VERSION} is current (--if-stale): "
        f"version {mine.name} is "
        "current; nothing published\n"
    )
    for stale in ({"schema_version": 1}, {"layout_version": 2}):
        assert main(["--raw", str(tmp_path / "mine"), *args[:-1]]) == 0
        mine = layout.current_version_dir(data)
        assert mine is not None
        manifest = layout.read_manifest(mine)
        (mine / "manifest.json").write_text(json.dumps(manifest | stale))
        assert main(["--raw", str(tmp_path / "embedded"), *args]) == 0
        rebuilt = layout.current_version_dir(data)
        assert rebuilt != mine and rebuilt is not None
        assert [record["fee_name"] for record in read_fees(rebuilt)] == ["Embedded"]


def test_published_files_are_partitioned_by_venue_and_compressed(
    fixture_version: IngestResult,
) -> None:
    fees = fixture_version.version_dir / "fees"
    assert sorted(p.name for p in fees.iterdir()) == [
        "exchange=memx",
        "exchange=nasdaq",
        "exchange=nyse",
    ]
    meta = pq.ParquetFile(next((fees / "exchange=nasdaq").glob("*.parquet"))).metadata
    assert meta.row_group(0).column(0).compression == "ZSTD"
    assert json.loads((fixture_version.version_dir / "manifest.json").read_text())["records"] == 13
    assert os.readlink(fixture_version.version_dir.parent.parent / "current") == (
        f"versions/{fixture_version.version_id}"
    )


def test_each_venue_file_is_in_publishing_order(tmp_path: Path) -> None:
    """Enough rows for many DuckDB vectors and two writer threads: the order must survive."""
    synth.generate(rows=60_000, out=tmp_path / "raw", registry=REPO / "data" / "exchanges.csv")
    version = ingest(tmp_path / "raw", tmp_path / "data")
    files = sorted((version.version_dir / "fees").glob("exchange=*/*.parquet"))
    assert len(files) > 2
    assert sum(pq.ParquetFile(f).metadata.num_rows for f in files) == version.records
    for path in files:
        rows = pq.read_table(path, columns=["fee_type", "effective_start", "record_id"]).to_pylist()
        keys = [(r["fee_type"], r["effective_start"], r["record_id"]) for r in rows]
        assert keys == sorted(keys), path


def test_lines_rejects_and_duplicates_hold_across_many_batches(tmp_path: Path) -> None:
    """Rows are numbered by a one-thread reader in Arrow batches of 122,880; rejected and
    duplicate rows are dealt with after the sort. Synthetic notes, where a row has them, name
    its row number (`Synthetic row <n>`), so those records' lines can be checked, and the
    serving table must stay gapless and in order."""
    raw = tmp_path / "raw"
    synth.generate(
        rows=300_000, out=raw, registry=REPO / "data" / "exchanges.csv", rows_per_file=150_000
    )
    first = sorted(raw.glob("*.csv"))[0]
    lines = first.read_text(encoding="utf-8").splitlines()
    bad = [lines[2].replace(lines[2].split(",")[0], "nowhere", 1)]  # an unknown venue
    (raw / "zz-again.csv").write_text("\n".join([lines[0], *lines[1:4001], *bad]) + "\n")
    version = run_ingest(raw, tmp_path / "data", registry=REPO / "data" / "exchanges.csv")
    assert (version.records, version.duplicates, version.rejected_rows) == (300_000, 4_000, 1)
    assert [r["line"] for r in read_rejects(version.version_dir)] == ["4002"]
    con = duckdb.connect()
    con.execute(f"ATTACH '{version.version_dir / 'serving.duckdb'}' AS serving (READ_ONLY)")
    [(count, last, unordered, wrong_lines, checked, from_again)] = con.execute(
        """
        SELECT
            count(*),
            max(rowid),
            count(*) FILTER (WHERE (exchange, fee_type, effective_start, record_id) < previous),
            count(*) FILTER (
                WHERE source_line <> CAST(regexp_extract(notes, 'row ([0-9]+);', 1) AS BIGINT)
                    + 2 - 150000 * CAST(source_file > $first AS INTEGER)
            ),
            count(notes),
            count(*) FILTER (WHERE source_file = 'zz-again.csv')
        FROM (
            SELECT *, rowid, lag((exchange, fee_type, effective_start, record_id))
                OVER (ORDER BY rowid) AS previous
            FROM serving.rows
        )
        """,
        {"first": first.name},
    ).fetchall()
    assert (count, last, unordered, wrong_lines, from_again) == (300_000, 299_999, 0, 0, 0)
    assert checked > 60_000


def content_text(values: list[str | None]) -> str:
    return json.dumps(values, separators=(",", ":"), ensure_ascii=False)


def expected_id(row: dict[str, str]) -> str:
    """A row's id: md5 of its schema 1 values' JSON array, then, when it has any provenance
    (schema 3), the array of its details and provenance, or else of its details when it has any
    (schema 2)."""
    text = content_text([row.get(name) or None for name in V1_RAW_COLUMNS])
    details = [row.get(name) or None for name in DETAIL_COLUMNS]
    provenance = [row.get(name) or None for name in PROVENANCE_COLUMNS]
    if any(provenance):
        text += content_text(details + provenance)
    elif any(details):
        text += content_text(details)
    return str(uuid.UUID(hashlib.md5(text.encode()).hexdigest()))


@pytest.mark.parametrize(
    "details",
    [{}, {"symbols": "SPY, QQQ"}, {"extra_info": "null"}, dict.fromkeys(DETAIL_COLUMNS, "x")],
    ids=["none", "symbols", "the-word-null", "all"],
)
def test_record_id_is_the_md5_of_the_raw_values_in_uuid_form(
    tmp_path: Path, details: dict[str, str]
) -> None:
    row = fee_row(**details)
    write_raw(tmp_path / "raw" / "one.csv", [row])
    (record,) = read_fees(ingest(tmp_path / "raw", tmp_path / "data").version_dir)
    assert record["record_id"] == expected_id(row)


@pytest.mark.parametrize("layout", [V1_RAW_COLUMNS, V2_RAW_COLUMNS], ids=["schema-1", "schema-2"])
def test_a_file_of_an_older_schema_is_read_with_empty_columns_and_keeps_its_ids(
    tmp_path: Path, layout: tuple[str, ...]
) -> None:
    """A schema 1 file has no details or provenance, a schema 2 file no provenance: its records
    hold nulls there, need none of the provenance rules, and keep the ids their schema gave."""
    rows = [
        fee_row(notes='a, quoted "note"', source_url=""),  # no URL: a rule of sourced rows only
        fee_row(fee_name="With details", symbols="SPY, QQQ"),
    ]
    write_raw(tmp_path / "old" / "one.csv", rows, columns=layout)
    result = ingest(tmp_path / "old", tmp_path / "data")
    assert (result.records, result.rejected_rows) == (2, 0)
    records = read_fees(result.version_dir)
    for record, row in zip(records, rows, strict=True):
        old_row = {name: row[name] for name in layout if name in row}
        assert record["record_id"] == expected_id(old_row)
        assert [record[name] for name in PROVENANCE_COLUMNS] == [None] * 3
        assert record["symbols"] == old_row.get("symbols")


# Space separators (Unicode category Zs) that trim() removes from either end of a value.
SPACES = ("\u00a0", "\u1680", "\u2002", "\u200a", "\u202f", "\u205f", "\u3000")


def test_every_space_separator_is_trimmed_and_nothing_else(tmp_path: Path) -> None:
    """Rows are left untouched or trimmed value by value (`ingest.stage.UNTOUCHED`); either way
    each value is what Python's strip of space separators makes of it, and so is the content id."""
    rows = [
        fee_row(fee_name="Plain row"),
        fee_row(fee_name="Quote then space", notes='a "quoted" value, and " more'),
        fee_row(fee_name="Tab and line separator", notes="\tkept\u2028", conditions="é"),
        fee_row(fee_name=" Leading space only"),
        fee_row(fee_name="Trailing space only", conditions="trailing "),
        fee_row(fee_name="Only spaces", volume_tier="   "),
        fee_row(fee_name="Spaced detail", symbols="\u00a0SPY, QQQ ", extra_info="  "),
        *(
            fee_row(
                exchange=f"{space}nyse",
                fee_type=f"equity{space}",
                fee_name=f"{space}Space {ord(space):04x}{space}",
                conditions=f"inner{space}space",
                volume_tier=space * 2,  # only spaces: empty, so NULL
            )
            for space in SPACES
        ),
    ]
    write_raw(tmp_path / "raw" / "spaces.csv", rows)
    result = ingest(tmp_path / "raw", tmp_path / "data")
    assert (result.records, result.rejected_rows) == (len(rows), 0)
    by_line = {record["source_line"]: record for record in read_fees(result.version_dir)}
    zs = "".join(SPACES) + " "
    for line, row in enumerate(rows, start=2):
        trimmed = {name: (row.get(name) or "").strip(zs) for name in RAW_COLUMNS}
        record = by_line[line]
        shown = ("fee_name", "fee_basis", "volume_tier", "conditions", "notes", *DETAIL_COLUMNS)
        assert [record[name] for name in shown] == [trimmed[name] or None for name in shown]
        assert (record["exchange"], record["fee_type"]) == ("nyse", "equity")
        assert record["record_id"] == expected_id(trimmed), row["fee_name"]


CODES_RULE = "fee codes are letters and digits (at most 8 each), separated by spaces"


def test_fee_codes_display_price_bands_tapes_and_tiers_are_data(tmp_path: Path) -> None:
    coded = fee_row(fee_name="Coded", fee_codes="D  B J B", display="displayed",
                    price_band="at_or_above_1", tapes="C A", tier="Tier 1")
    plain = fee_row(fee_name="Plain", line_name="Plain line", standard="true")
    broken = [
        fee_row(fee_name="Comma codes", fee_codes="B,D"),
        fee_row(fee_name="Long code", fee_codes="ABCDEFGHI"),
        fee_row(fee_name="Tape D", tapes="A D"),
        fee_row(fee_name="Lit", display="lit"),
        fee_row(fee_name="Band", price_band="sub_dollar"),
    ]  # fmt: skip
    write_raw(tmp_path / "raw" / "a.csv", [coded, plain, *broken])
    result = ingest(tmp_path / "raw", tmp_path / "data")
    records = {record["fee_name"]: record for record in read_fees(result.version_dir)}
    assert set(records) == {"Coded", "Plain"}
    dimensions = ("fee_codes", "display", "price_band", "tapes", "tier")
    assert [records["Coded"][name] for name in dimensions] == [
        ["B", "D", "J"], "displayed", "at_or_above_1", ["A", "C"], "Tier 1"
    ]
    assert [records["Plain"][name] for name in dimensions] == [[], None, None, [], None]
    assert {(r["column"], r["value"], r["reason"]) for r in read_rejects(result.version_dir)} == {
        ("fee_codes", "B,D", CODES_RULE),
        ("fee_codes", "ABCDEFGHI", CODES_RULE),
        ("tapes", "A D", "tapes are A, B, C, separated by spaces (empty for every tape)"),
        ("display", "lit", "not one of: any, displayed, midpoint, non_displayed"),
        ("price_band", "sub_dollar", "not one of: any, at_or_above_1, below_1"),
    }  # fmt: skip
    # A row stating no dimension keeps the record id and the named line it had in schema 5.
    write_raw(tmp_path / "v5" / "a.csv", [plain], V5_RAW_COLUMNS)
    [older] = read_fees(ingest(tmp_path / "v5", tmp_path / "d5").version_dir)
    assert (older["record_id"], older["line_id"]) == (
        records["Plain"]["record_id"], records["Plain"]["line_id"]
    )
