"""Tests of ingest.synth: determinism, file split, and validity under docs/raw-format.md."""

import csv
import datetime
import itertools
import re
import subprocess
import sys
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest

from ingest import synth
from ingest.pipeline import run_ingest
from ingest.schema import DETAIL_COLUMNS, RAW_COLUMNS
from ingest.schema import VOCABULARIES as SCHEMA_VOCABULARIES

ROOT = Path(__file__).resolve().parent.parent
RAW_FORMAT_DOC = ROOT / "docs" / "raw-format.md"

# A tiny registry covering every asset-class combination; one display name holds a comma.
REGISTRY = """\
code,display_name,aliases,mic,asset_classes
eqx,Equity Only Exchange,EQ,XEQX,equity
opx,"Options Only Exchange, LLC",OP,XOPX,option
bth,Both Classes Exchange,BOTH|BT,XBTH,equity|option
"""
VENUE_CLASSES = {"eqx": {"equity"}, "opx": {"option"}, "bth": {"equity", "option"}}

ROWS = 3000
ROWS_PER_FILE = 1000

# Vocabularies of docs/raw-format.md (tests/test_schema_docs.py keeps the page and the code equal).
VOCABULARIES: dict[str, set[str]] = {
    column: set(values) for column, values in SCHEMA_VOCABULARIES.items()
}
DATE_FORM = re.compile(r"\d{4}-\d{2}-\d{2}")
PLAIN_MONEY = re.compile(r"-?\$\d{1,3}(,\d{3})*(\.\d+)?|\(\$\d{1,3}(,\d{3})*(\.\d+)?\)")


def documented_columns() -> list[tuple[str, str]]:
    """(column, required flag) pairs of the Columns table of docs/raw-format.md, in order."""
    text = RAW_FORMAT_DOC.read_text(encoding="utf-8")
    section = text.split("## Columns", 1)[1].split("\n## ", 1)[0]
    return [
        (match.group(1), match.group(2))
        for match in re.finditer(r"^\| `(\w+)` \| (yes|no|sourced) \|", section, flags=re.MULTILINE)
    ]


def write_registry(directory: Path) -> Path:
    """Write the tiny test registry and return its path."""
    path = directory / "exchanges.csv"
    path.write_text(REGISTRY, encoding="utf-8")
    return path


def run_synth(out: Path, registry: Path, *extra: str, rows: int = ROWS) -> list[Path]:
    """Run the command-line entry point in-process and return the files written."""
    argv = ["--rows", str(rows), "--out", str(out), "--registry", str(registry), *extra]
    assert synth.main(argv) == 0
    return sorted(out.glob("*.csv"))


def read_rows(files: list[Path]) -> Iterator[tuple[Path, int, dict[str, str]]]:
    """Yield (file, line, row) for every data row; csv.reader checks the quoting."""
    for path in files:
        with path.open(encoding="utf-8", newline="") as handle:
            reader = csv.reader(handle, strict=True)
            header = next(reader)
            for fields in reader:
                assert len(fields) == len(header), f"{path}:{reader.line_num}: field count"
                yield path, reader.line_num, dict(zip(header, fields, strict=True))


def real_date(value: str) -> datetime.date | None:
    """The date written as YYYY-MM-DD, or None if it is not a real date in that form."""
    if not DATE_FORM.fullmatch(value):
        return None
    try:
        return datetime.date.fromisoformat(value)
    except ValueError:
        return None


def row_problems(row: dict[str, str]) -> list[str]:
    """Every documented validation rule the row breaks (empty list: the row is valid)."""
    problems: list[str] = []
    illustrative = row["source_kind"] == "illustrative"
    for column, flag in documented_columns():
        value = row[column]
        if value != value.strip():
            problems.append(f"{column}: untrimmed {value!r}")
        if (flag == "yes" or (flag == "sourced" and not illustrative)) and not value:
            problems.append(f"{column}: required value is missing")
        if (flag == "sourced" or column == "page_number") and illustrative and value:
            problems.append(f"{column}: an illustrative row names no source")
        allowed = VOCABULARIES.get(column)
        if value and allowed is not None and value not in allowed:
            problems.append(f"{column}: {value!r} not in vocabulary")
    codes = r"[0-9A-Za-z]{1,8}( [0-9A-Za-z]{1,8})*"
    if row["fee_codes"] and not re.fullmatch(codes, row["fee_codes"]):
        problems.append(f"fee_codes not codes separated by spaces: {row['fee_codes']!r}")
    if row["tapes"] and not set(row["tapes"].split()) <= {"A", "B", "C"}:
        problems.append(f"tapes not A, B or C: {row['tapes']!r}")
    if row["exchange"] not in VENUE_CLASSES:
        problems.append(f"unknown venue code {row['exchange']!r}")
    elif row["fee_type"] not in VENUE_CLASSES[row["exchange"]]:
        problems.append(f"{row['fee_type']} is not an asset class of {row['exchange']}")
    start = real_date(row["effective_start"])
    end = real_date(row["effective_end"]) if row["effective_end"] else None
    if start is None:
        problems.append(f"effective_start not a real date: {row['effective_start']!r}")
    if row["effective_end"] and end is None:
        problems.append(f"effective_end not a real date: {row['effective_end']!r}")
    if start is not None and end is not None and end < start:
        problems.append("effective_end is before effective_start")
    page = row["page_number"]
    if page and not (page.isascii() and page.isdigit() and int(page) >= 1):
        problems.append(f"page_number not a whole number of at least 1: {page!r}")
    return problems


@pytest.fixture(scope="module")
def registry(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The tiny registry, shared by the module."""
    return write_registry(tmp_path_factory.mktemp("registry"))


@pytest.fixture(scope="module")
def dataset(tmp_path_factory: pytest.TempPathFactory, registry: Path) -> list[Path]:
    """One generated data set of ROWS rows in files of ROWS_PER_FILE, shared by the module."""
    out = tmp_path_factory.mktemp("synth")
    return run_synth(out, registry, "--rows-per-file", str(ROWS_PER_FILE))


def test_same_seed_gives_identical_bytes_with_any_thread_count(
    tmp_path: Path, registry: Path
) -> None:
    first = run_synth(tmp_path / "a", registry, "--seed", "7", "--rows-per-file", "1500")
    second = run_synth(tmp_path / "b", registry, "--seed", "7", "--rows-per-file", "1500")
    outputs = [first, second]
    for threads in (1, 4):
        outputs.append(
            synth.generate(
                ROWS,
                tmp_path / f"t{threads}",
                seed=7,
                registry=registry,
                rows_per_file=1500,
                threads=threads,
            )
        )
    expected = [path.read_bytes() for path in first]
    assert len(expected) == 2
    for files in outputs[1:]:
        assert [path.name for path in files] == [path.name for path in first]
        assert [path.read_bytes() for path in files] == expected


def test_different_seed_gives_different_rows(tmp_path: Path, registry: Path) -> None:
    one = run_synth(tmp_path / "one", registry, "--seed", "1", rows=500)
    two = run_synth(tmp_path / "two", registry, "--seed", "2", rows=500)
    assert one[0].read_bytes() != two[0].read_bytes()


def test_rows_split_exactly_across_files(dataset: list[Path]) -> None:
    assert [path.name for path in dataset] == ["synth-0000.csv", "synth-0001.csv", "synth-0002.csv"]
    per_file = Counter(path for path, _, _ in read_rows(dataset))
    assert [per_file[path] for path in dataset] == [1000, 1000, 1000]


def test_last_file_holds_the_remainder(tmp_path: Path, registry: Path) -> None:
    files = run_synth(tmp_path, registry, "--rows-per-file", "400", rows=1000)
    per_file = Counter(path for path, _, _ in read_rows(files))
    assert [per_file[path] for path in files] == [400, 400, 200]


def test_smaller_run_removes_stale_files(tmp_path: Path, registry: Path) -> None:
    run_synth(tmp_path, registry, "--rows-per-file", "100", rows=300)
    files = run_synth(tmp_path, registry, "--rows-per-file", "100", rows=150)
    assert [path.name for path in files] == ["synth-0000.csv", "synth-0001.csv"]
    assert sum(1 for _ in read_rows(files)) == 150


def test_header_is_the_documented_header(dataset: list[Path]) -> None:
    documented = [column for column, _ in documented_columns()]
    assert len(documented) == 38
    assert list(RAW_COLUMNS) == documented
    for path in dataset:
        with path.open(encoding="utf-8", newline="") as handle:
            assert next(csv.reader(handle)) == documented


def test_every_row_passes_the_documented_rules(dataset: list[Path]) -> None:
    failures = [
        f"{path.name}:{line}: {problem}"
        for path, line, row in read_rows(dataset)
        for problem in row_problems(row)
    ]
    assert failures == []


def test_no_duplicate_rows(dataset: list[Path]) -> None:
    rows = [tuple(row.values()) for _, _, row in read_rows(dataset)]
    assert len(rows) == ROWS
    assert len(set(rows)) == ROWS


def test_shape_is_realistic(dataset: list[Path]) -> None:
    rows = [row for _, _, row in read_rows(dataset)]
    share = {
        "open_ended": sum(not row["effective_end"] for row in rows) / ROWS,
        "non_plain": sum(not PLAIN_MONEY.fullmatch(row["fee_amount"]) for row in rows) / ROWS,
        "rebate": sum(row["fee_amount"].startswith("(") for row in rows) / ROWS,
    }
    assert 0.15 < share["open_ended"] < 0.25
    assert 0.03 < share["non_plain"] < 0.07
    assert share["rebate"] > 0.05
    # Skewed, not uniform: the commonest category and action clearly dominate.
    categories = Counter(row["fee_category"] for row in rows)
    assert categories.most_common(1)[0][1] > 2 * ROWS / len(VOCABULARIES["fee_category"])
    assert len(Counter(row["participant"] for row in rows)) == len(VOCABULARIES["participant"])
    # Starts sit on month boundaries; ends are the day before one.
    for row in rows:
        assert row["effective_start"].endswith("-01")
        if row["effective_end"]:
            end = datetime.date.fromisoformat(row["effective_end"])
            assert (end + datetime.timedelta(days=1)).day == 1
    # Penny/simple-complex columns are an options matter.
    options = [row for row in rows if row["fee_type"] == "option"]
    assert sum(bool(row["symbol_type"]) for row in options) > 0.7 * len(options)
    assert sum(bool(row["trade_type"]) for row in options) > 0.7 * len(options)
    assert all(
        row["symbol_type"] in {"", "not_applicable"} for row in rows if row["fee_type"] == "equity"
    )
    # Optional text is sometimes empty, sometimes filled; required source columns always are.
    for column in ("symbol_classification", "fee_basis", "volume_tier", "conditions", "notes",
                   *DETAIL_COLUMNS):  # fmt: skip
        assert 0 < sum(bool(row[column]) for row in rows) < ROWS, column
    # Most lines need no detail at all, as in real schedules.
    assert sum(any(row[column] for column in DETAIL_COLUMNS) for row in rows) < ROWS / 2
    # Made up, and saying so: no source, no page, no basis for the dates.
    assert all(row["source_kind"] == "illustrative" for row in rows)
    assert not any(
        row[column] for row in rows
        for column in ("source_document", "source_url", "page_number", "date_basis")
    )  # fmt: skip


def test_rows_are_fee_lines_with_histories(dataset: list[Path]) -> None:
    """Consecutive rows of one line: 1 to 8 records, oldest first, one at a time, with changes,
    gaps and some changes still to come."""
    rows = [row for _, _, row in read_rows(dataset)]
    lines = [list(group) for _, group in itertools.groupby(rows, key=lambda row: row["fee_name"])]
    assert len({row["fee_name"] for row in rows}) == len(lines)  # a line's rows are adjacent
    assert {len(line) for line in lines} == set(range(1, 9))
    assert 3 < ROWS / len(lines) < 4
    gaps = changes = 0
    for line in lines:
        for earlier, later in itertools.pairwise(line):
            end = datetime.date.fromisoformat(earlier["effective_end"])
            start = datetime.date.fromisoformat(later["effective_start"])
            assert end < start
            gaps += (start - end).days > 1
            changes += earlier["fee_amount"] != later["fee_amount"]
    records_after_the_first = ROWS - len(lines)
    assert 0.05 < gaps / records_after_the_first < 0.15
    assert 0.4 < changes / records_after_the_first < 0.8
    assert any(row["effective_start"] > "2026-12" for row in rows)


def test_quoting_is_exercised(dataset: list[Path]) -> None:
    raw = dataset[0].read_text(encoding="utf-8")
    assert '""' in raw  # an escaped double quote
    rows = [row for _, _, row in read_rows(dataset)]
    assert any("," in row["fee_name"] for row in rows)


def test_bad_registry_is_an_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    registry = tmp_path / "exchanges.csv"
    registry.write_text(
        "code,display_name,aliases,mic,asset_classes\nxx,X,,XXXX,futures\n", encoding="utf-8"
    )
    argv = ["--rows", "10", "--out", str(tmp_path / "out"), "--registry", str(registry)]
    assert synth.main(argv) == 1
    assert "asset_classes" in capsys.readouterr().err
    assert not (tmp_path / "out").exists()  # the registry is checked before anything is written


@pytest.mark.slow
def test_module_entry_point_prints_one_summary_line(tmp_path: Path, registry: Path) -> None:
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "ingest.synth",
            "--rows",
            "50",
            "--out",
            str(tmp_path),
            "--registry",
            str(registry),
            "--rows-per-file",
            "20",
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    )
    lines = result.stdout.splitlines()
    assert len(lines) == 1
    assert re.fullmatch(r"wrote 50 rows in 3 files to .+ in \d+\.\d s", lines[0])


@pytest.mark.slow
def test_real_ingest_accepts_every_row(dataset: list[Path], tmp_path: Path, registry: Path) -> None:
    result = run_ingest(dataset[0].parent, tmp_path / "warehouse", registry=registry, strict=True)
    assert (result.rows_read, result.records) == (ROWS, ROWS)
    assert (result.rejected_rows, result.duplicates) == (0, 0)
