"""Finding raw files and reading what DuckDB cannot tell us: headers, exact lines, malformations.

DuckDB parses the bulk of every file; plain Python only looks at a file's first line, and walks
a whole file only when that file has blank lines or quoted line breaks (so a record's ordinal is
not its line) or when DuckDB has already refused it (to name the exact line at fault).
"""

import csv
import hashlib
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Final, TextIO

from ingest.errors import MalformedFile
from ingest.schema import RAW_COLUMNS, RAW_LAYOUTS, SCHEMA_VERSION

CHUNK = 1 << 22


def find_raw_files(raw_dir: Path) -> list[Path]:
    if not raw_dir.is_dir():
        raise MalformedFile(str(raw_dir), None, "raw directory does not exist")
    return sorted(path for path in raw_dir.rglob("*.csv") if path.is_file())


def digest_and_newlines(path: Path) -> tuple[str, int]:
    """sha256 of the file and its count of line-feed bytes, in one read."""
    sha = hashlib.sha256()
    newlines = 0
    with path.open("rb") as handle:
        while chunk := handle.read(CHUNK):
            sha.update(chunk)
            newlines += chunk.count(b"\n")
    return sha.hexdigest(), newlines


def check_header(path: Path, shown: str) -> tuple[str, ...]:
    """The file's columns: one of the layouts a raw file may have (`RAW_LAYOUTS`)."""
    with path.open("rb") as handle:
        first = handle.readline()  # only the header line: later bytes are DuckDB's to judge
    if not first:
        raise MalformedFile(shown, None, "file is empty (no header line)")
    try:
        header = next(csv.reader([first.decode("utf-8-sig")]))
    except UnicodeDecodeError:
        raise MalformedFile(shown, 1, "header is not UTF-8") from None
    names = tuple(name.strip() for name in header)
    if names in RAW_LAYOUTS:
        return names
    missing = [name for name in RAW_COLUMNS if name not in names]
    unknown = [name for name in names if name not in RAW_COLUMNS]
    differences = [
        f"{what}: {', '.join(columns)}"
        for what, columns in (("missing", missing), ("unknown", unknown))
        if columns
    ] or ["the columns are out of order"]
    raise MalformedFile(
        shown,
        1,
        f"header must be exactly: {','.join(RAW_COLUMNS)} ({OLDER_HEADERS}); "
        f"{'; '.join(differences)}",
    )


def _older_headers() -> str:
    """'or that of schema 5, which stops after complete_as_of, of schema 4, after ...'"""
    older = [
        (SCHEMA_VERSION - number, layout[-1]) for number, layout in enumerate(RAW_LAYOUTS[1:], 1)
    ]
    (newest, newest_last), *rest = older
    steps = [f"of schema {schema}, after {last}" for schema, last in rest]
    return (
        f"or that of schema {newest}, which stops after {newest_last}, "
        f"{', '.join(steps[:-1])}, or {steps[-1]}"
    )


OLDER_HEADERS: Final = _older_headers()


def is_regular(newlines: int, records: int) -> bool:
    """True when every record sits on its own line after the header (so line = ordinal + 1)."""
    return newlines in (records, records + 1)


def _records(handle: TextIO) -> Iterator[tuple[int, int, list[str]]]:
    """(first line, last line, fields) of every non-blank record, header included; quoted line
    breaks and blank lines are counted as lines, as they are in the file."""
    reader = csv.reader(handle, strict=True)
    previous_end = 0
    for row in reader:
        start, previous_end = previous_end + 1, reader.line_num
        if row:
            yield start, previous_end, row


def record_lines(path: Path) -> Iterator[tuple[int, int]]:
    """(ordinal, first physical line) of each record; blank lines are skipped, as DuckDB does."""
    with path.open(newline="", encoding="utf-8-sig") as handle:
        records = _records(handle)
        next(records, None)  # the header is ordinal 0
        for ordinal, (start, _, _) in enumerate(records, start=1):
            yield ordinal, start


def find_malformation(path: Path, shown: str, width: int) -> MalformedFile | None:
    """The first structural fault of a file of `width` columns with its exact line, or None if
    Python finds none."""
    last_end = 0
    try:
        with path.open(newline="", encoding="utf-8-sig", errors="strict") as handle:
            for start, end, row in _records(handle):
                if len(row) != width:
                    return MalformedFile(shown, start, f"expected {width} fields, found {len(row)}")
                last_end = end  # a parse error is in the record after this one
    except UnicodeDecodeError:
        return MalformedFile(shown, _undecodable_line(path), "bytes are not valid UTF-8")
    except csv.Error as error:
        return MalformedFile(shown, last_end + 1, str(error))
    return None


def _undecodable_line(path: Path) -> int:
    with path.open("rb") as handle:
        for number, raw in enumerate(handle, start=1):
            try:
                raw.decode("utf-8")
            except UnicodeDecodeError:
                return number
    return 1


@dataclass(frozen=True)
class RawFile:
    path: Path
    shown: str  # path relative to the raw directory, as reported and stored
    sha256: str
    newlines: int
    columns: tuple[str, ...]  # its header: one of `schema.RAW_LAYOUTS`


def inspect_file(path: Path, raw_dir: Path) -> RawFile:
    shown = path.relative_to(raw_dir).as_posix()
    columns = check_header(path, shown)
    sha256, newlines = digest_and_newlines(path)
    return RawFile(path, shown, sha256, newlines, columns)
