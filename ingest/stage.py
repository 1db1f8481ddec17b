"""Reading the raw files and checking every row, in SQL.

The rows are never copied into a staging table: `ingest.write` reads, checks, hashes and sorts
them in one query, straight into the serving file. A record's ordinal in its file (which gives
its line) cannot come from DuckDB's parallel CSV reader, and numbering rows in that query would
make it single-threaded, so each file is read on its own by a one-thread DuckDB that numbers
its rows (`RawRows`), and the main query scans those Arrow batches on every core. (5M rows:
staging table, checks and sort about 27 s; this about 20 s.)

Every rule is a SQL expression giving the reason a value is wrong, or NULL (`ingest.rules`).
The main query keeps the rows for which every reason is NULL (`BROKEN`); only when some row
broke a rule are the files that had such rows read again, to list each problem
(`CREATE_REJECTED`, `CHECKS`).
"""

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Final

import duckdb
import pyarrow as pa
from tqdm import tqdm

from ingest.layout import sql_string
from ingest.rules import BROKEN, CHECKED, reason, rule_parameters
from ingest.schema import (
    DETAIL_COLUMNS,
    DIMENSION_COLUMNS,
    LIFE_COLUMNS,
    LINE_COLUMNS,
    LINE_NAME,
    PROVENANCE_COLUMNS,
    RAW_COLUMNS,
    RAW_LAYOUTS,
    V1_RAW_COLUMNS,
)

# The registered name of the Arrow batches the main query and the rejects query read.
RAW_ROWS: Final = "raw_rows"

# One file on one thread (`RawRows` sets `threads = 1`), so its rows come in file order and
# row_number() is the ordinal. (Not `parallel = false`: that reader silently drops a last row
# whose quote is never closed, where this one reports the file as malformed.) A file of an older
# layout (`RAW_LAYOUTS`) gives NULL for the columns it lacks; `provenance_given` says whether
# its layout has the provenance columns, which are required only then, and `names_lines`
# whether it is of schema 5 or later (where a `line_name` names a line of its own: `LINE_ID`).
READ_FILE: Final = """
SELECT
    CAST($file_no AS INTEGER) AS file_no,
    row_number() OVER () AS ordinal,
    {provenance_given} AS provenance_given,
    {names_lines} AS names_lines,
    {projection}
FROM read_csv(
    $path,
    header = true,
    columns = $columns,
    auto_detect = false,
    delim = ',',
    quote = '"',
    escape = '"',
    strict_mode = true,
    null_padding = false
)
"""


def _read_file(layout: tuple[str, ...]) -> str:
    present = set(layout)
    return READ_FILE.format(
        provenance_given=str(set(PROVENANCE_COLUMNS) <= present).lower(),
        names_lines=str(set(LIFE_COLUMNS) <= present).lower(),
        projection=", ".join(
            name if name in present else f"CAST(NULL AS VARCHAR) AS {name}" for name in RAW_COLUMNS
        ),
    )


# The statement reading a file, by its layout (the identifiers come only from `RAW_COLUMNS`).
READ_FILES: Final[dict[tuple[str, ...], str]] = {
    layout: _read_file(layout) for layout in RAW_LAYOUTS
}
READ_SCHEMA: Final = pa.schema(
    [
        ("file_no", pa.int32()),
        ("ordinal", pa.int64()),
        ("provenance_given", pa.bool_()),
        ("names_lines", pa.bool_()),
    ]
    + [(name, pa.string()) for name in RAW_COLUMNS]
)
READER_MEMORY: Final = "256MB"
BATCH_ROWS: Final = 122_880  # Arrow batches of one DuckDB row group each


# A row's JSON text: the JSON array of its schema 1 values, followed by the JSON array of its
# later values (`DETAIL_COLUMNS` of schema 2, then `PROVENANCE_COLUMNS` of schema 3) when any
# is filled. It is the text the content id hashes (`RECORD_ID`), so a row of an older layout
# keeps the id its schema gave it (a schema 2 row's second array holds only its details), and
# the test of whether any value needs trimming. JSON keeps null apart from "" and quotes every
# value, and an array's text ends where it closes, so no two different rows share it.
# json_array() writes the same text as to_json() of a list, without building the list first
# (5M rows: 0.8 CPU-seconds less). For a row of an older layout without details this is the
# one array, as before schema 2 (1M rows: hashing every row's 26 values, then cutting the empty
# details off the text, cost 5% more wall time).
# (Text, not JSON: two arrays in a row are not one JSON document.)
V1_JSON: Final = f"CAST(json_array({', '.join(V1_RAW_COLUMNS)}) AS VARCHAR)"


def _none_of(columns: tuple[str, ...]) -> str:
    return " AND ".join(f"{name} IS NULL" for name in columns)


# A row naming its line (`line_name`, schema 4) has a third array holding the name; a row saying
# anything of its line's life (`LIFE_COLUMNS`, schema 5) one of three values; a row stating any
# dimension (`DIMENSION_COLUMNS`, schema 6) a last one of five. (The arrays differ in length, so
# no two rows share a text, and a row stating no dimension keeps the id it had in schema 5.)
RAW_JSON: Final = f"""CASE
    WHEN {_none_of((*DETAIL_COLUMNS, *PROVENANCE_COLUMNS))} THEN {V1_JSON}
    WHEN {_none_of(PROVENANCE_COLUMNS)} THEN {V1_JSON} || json_array({", ".join(DETAIL_COLUMNS)})
    ELSE {V1_JSON} || json_array({", ".join((*DETAIL_COLUMNS, *PROVENANCE_COLUMNS))})
END || CASE WHEN {LINE_NAME} IS NULL THEN '' ELSE CAST(json_array({LINE_NAME}) AS VARCHAR) END
|| CASE WHEN {_none_of(LIFE_COLUMNS)} THEN ''
    ELSE CAST(json_array({", ".join(LIFE_COLUMNS)}) AS VARCHAR) END
|| CASE WHEN {_none_of(DIMENSION_COLUMNS)} THEN ''
    ELSE CAST(json_array({", ".join(DIMENSION_COLUMNS)}) AS VARCHAR) END"""

# Surrounding spaces are removed and an empty value becomes NULL (the reader already reads an
# empty field as NULL). trim() removes only space separators, ASCII or not. A row none of whose
# values starts or ends with one is left as it is, and one test of its JSON text says so: a
# value that starts or ends with ' ' shows as `" ` or ` "`, and any other space separator is
# not ASCII. Only the few other rows are trimmed value by value (5M rows: 1.8 CPU-seconds less
# than testing each value's ends).
UNTOUCHED: Final = (
    "NOT contains(raw_json, '\" ') AND NOT contains(raw_json, ' \"')"
    " AND strlen(raw_json) = length(raw_json)"
)


def _trimmed(column: str) -> str:
    return f"CASE WHEN untouched THEN {column} ELSE nullif(trim({column}), '') END AS {column}"


TRIMMED_ROWS: Final = f"""
SELECT
    file_no,
    ordinal,
    provenance_given,
    names_lines,
    raw_json,
    untouched,
    {", ".join(_trimmed(name) for name in RAW_COLUMNS)}
FROM (
    SELECT *, {UNTOUCHED} AS untouched
    FROM (SELECT *, {RAW_JSON} AS raw_json FROM {RAW_ROWS})
)
"""

# The content id: md5 of the row's JSON text (`RAW_JSON`) over its trimmed values, held as a
# UUID (16 bytes to sort and join on; its text is the md5 hex digits in 8-4-4-4-12 groups). An
# untouched row's trimmed values are its raw values, so their JSON is already made.
RECORD_ID: Final = f"""CAST(
    md5(CASE WHEN untouched THEN raw_json ELSE {RAW_JSON} END) AS UUID
)"""

# The line id (`schema.LINE_COLUMNS`): md5 of the JSON array of the line's values over the
# trimmed row, held as a UUID like the record id. A row of schema 5 or later that names its
# line is on the line of that name in its venue and fee type (a reader linked readings whose
# labels, tiers or classification differ); in a schema 4 file the name stands for the label.
LINE_VALUES: Final = {"label": f"coalesce({LINE_NAME}, fee_name)"}
LINE_JSON: Final = f"json_array({', '.join(LINE_VALUES.get(name, name) for name in LINE_COLUMNS)})"
NAMED_LINE_JSON: Final = f"json_array(exchange, fee_type, {LINE_NAME})"
LINE_ID: Final = f"""CAST(md5(CAST(CASE
    WHEN names_lines AND {LINE_NAME} IS NOT NULL THEN {NAMED_LINE_JSON}
    ELSE {LINE_JSON}
END AS VARCHAR)) AS UUID)"""

CREATE_TABLES: Final = """
CREATE TABLE files (file_no INTEGER PRIMARY KEY, path VARCHAR NOT NULL, records BIGINT);
CREATE TABLE line_map (file_no INTEGER, ordinal BIGINT, line BIGINT);
CREATE TABLE problems (
    file_no INTEGER,
    ordinal BIGINT,
    column_no INTEGER,
    column_name VARCHAR,
    value VARCHAR,
    reason VARCHAR
);
"""
RECORD_FILE: Final = "INSERT INTO files VALUES ($file_no, $path, $records)"

# A record's physical line: its ordinal plus one for the header, unless the walk of its file
# recorded it (blank lines, quoted line breaks: `ingest.rawfiles.record_lines`).
LINE: Final = "coalesce(line_map.line, located.ordinal + 1)"
JOIN_LINES: Final = """JOIN files ON files.file_no = located.file_no
LEFT JOIN line_map
    ON line_map.file_no = located.file_no AND line_map.ordinal = located.ordinal"""

WRITE_REJECTS: Final = f"""
SELECT files.path AS file, {LINE} AS line, column_name AS column, value, reason
FROM problems AS located
{JOIN_LINES}
ORDER BY located.file_no, line, column_no
"""

REJECT_COUNTS: Final = """
SELECT file_no, count(*) AS problems, count(DISTINCT ordinal) AS rows
FROM problems
GROUP BY file_no
"""

CREATE_REJECTED: Final = f"""
CREATE TABLE rejected AS
SELECT * EXCLUDE (raw_json, untouched) FROM ({TRIMMED_ROWS}) WHERE {BROKEN}
"""


def _check(column_no: int, column: str) -> str:
    return f"""
INSERT INTO problems
SELECT file_no, ordinal, {column_no}, '{column}', {column}, reason
FROM (SELECT file_no, ordinal, {column}, {reason(column)} AS reason FROM rejected)
WHERE reason IS NOT NULL
"""


# The checks, one statement per checked column (identifiers come only from RAW_COLUMNS).
CHECKS: Final = tuple(_check(number, column) for number, column in CHECKED)


def list_problems(con: duckdb.DuckDBPyConnection, rows: "RawRows", venues: list[str]) -> None:
    """Read the files again, keep the rows that break a rule and list each broken rule in
    `problems` (file, ordinal, column, value, reason)."""
    with rows.scanned_by(con):
        con.execute(CREATE_REJECTED, rule_parameters(CREATE_REJECTED, venues))
    for statement in CHECKS:
        con.execute(statement, rule_parameters(statement, venues))


@dataclass
class RawRows:
    """The raw files as numbered Arrow batches, for one scan by the main or the rejects query.

    A file DuckDB refuses ends the batches; the query scanning them then fails with a message
    that has lost the cause, so the cause is kept here and raised instead (`scanned_by`)."""

    paths: dict[int, Path]  # by file number
    layouts: dict[int, tuple[str, ...]]  # each file's columns (`RAW_LAYOUTS`), by file number
    failure: Callable[[int, duckdb.Error], Exception]  # a refused file's error, by its number
    records: dict[int, int] = field(default_factory=dict)  # by file number, once all are read
    _error: Exception | None = field(default=None, init=False)

    @contextmanager
    def scanned_by(self, con: duckdb.DuckDBPyConnection) -> Iterator[None]:
        """Register the batches as `RAW_ROWS` for one query run inside the block."""
        con.register(RAW_ROWS, pa.RecordBatchReader.from_batches(READ_SCHEMA, self._batches()))
        try:
            yield
        except duckdb.Error:
            if self._error is not None:
                raise self._error from None
            raise
        finally:
            con.unregister(RAW_ROWS)

    def _batches(self) -> Iterator[pa.RecordBatch]:
        # Read on the thread that asks for a batch. Reading ahead on two threads was no faster
        # (5M rows, back to back: 20.3-23.1 s against 20.0-20.8 s) and held 300 MB more.
        self.records = dict.fromkeys(self.paths, 0)
        reader = duckdb.connect()
        try:
            reader.execute("SET threads = 1")
            # A streaming read of one file: a few buffers, held apart from the main query's.
            reader.execute(f"SET memory_limit = '{READER_MEMORY}'")
            sizes = {number: path.stat().st_size for number, path in self.paths.items()}
            total = sum(sizes.values())
            # disable=None: a bar in a terminal only, so CI and pipes stay quiet.
            with tqdm(total=total, unit="B", unit_scale=True, desc="reading", disable=None) as bar:
                for number, path in self.paths.items():
                    yield from self._file(reader, number, path)
                    bar.update(sizes[number])
        finally:
            reader.close()

    def _file(
        self, reader: duckdb.DuckDBPyConnection, number: int, path: Path
    ) -> Iterator[pa.RecordBatch]:
        try:
            layout = self.layouts[number]
            result = reader.sql(
                READ_FILES[layout],
                params={
                    "file_no": number,
                    "path": str(path),
                    "columns": dict.fromkeys(layout, "VARCHAR"),
                },
            )
            for batch in result.to_arrow_reader(BATCH_ROWS):
                self.records[number] += batch.num_rows
                yield batch
        except duckdb.Error as error:
            self._error = self.failure(number, error)
            raise


def copy_rejects(target: Path) -> str:
    """The statement writing `rejects.csv` (a COPY target cannot be a bound parameter)."""
    return f"COPY ({WRITE_REJECTS}) TO {sql_string(str(target))} (HEADER)"
