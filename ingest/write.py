"""Turning the raw rows into the published records: the sorted serving table, then the
`fees` Parquet files.

One query reads the numbered raw rows (`ingest.stage.RawRows`), drops the rows that break a
rule, derives the published columns and sorts the records straight into the version's serving
file (`ingest.serving.RECORDS`), so each venue's rows are one contiguous range that a plain COPY
writes out (found by the table's zone maps). DuckDB's PARTITION_BY writer copies every row into
per-partition buffers first and took twice as long on 5M rows.

Three things the query cannot know until every row has been read are put right afterwards, and
cost time only when they occur: the lines of records in files with blank lines or quoted line
breaks (`fix_lines`), exact duplicates (`drop_later_duplicates`) and the problems of rejected
rows (`ingest.stage.list_problems`).
"""

import os
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Final

import duckdb
import pyarrow as pa
import pyarrow.parquet as pq

from ingest.layout import LINE_TEXT, SERVING_FILE, TEXT_ID, sql_string
from ingest.rules import BROKEN, allowed_values, rule_parameters
from ingest.schema import FEE_COLUMNS, LIST_COLUMNS, PUBLISHED_REQUIRED, VOCABULARIES
from ingest.serving import DETACH, RECORDS, attach
from ingest.stage import LINE_ID, RECORD_ID, TRIMMED_ROWS, RawRows
from ingest.units import AMOUNT, CURRENCY, FORM, UNIT

# A list of the raw format (values separated by spaces) as published: its values sorted, each
# once, and an empty list for an empty value (for `tapes`, every tape).
LISTED: Final = (
    r"coalesce(list_sort(list_distinct(regexp_split_to_array({column}, '\s+'))), [])"
)

# What each published column is made of; columns not listed are copied as they are. The sorted
# table keeps `record_id` as a 16-byte UUID (it sorts in the same order as its text, and the
# sort carrying it was 2.3 s faster at 5M rows than one carrying 36-character text); the
# Parquet files and every answer hold its text (`SELECT_VENUE`, `TEXT_ID`). `line_id` likewise.
DERIVED: Final = {
    "amount": AMOUNT,
    "currency": CURRENCY,
    "unit": UNIT,
    "effective_start": "CAST(effective_start AS DATE)",
    "effective_end": "CAST(effective_end AS DATE)",
    "page_number": "CAST(page_number AS INTEGER)",
    "uncertain": "CAST(uncertain AS BOOLEAN)",
    "standard": "coalesce(CAST(standard AS BOOLEAN), false)",
    "complete_as_of": "CAST(complete_as_of AS DATE)",
    **{column: LISTED.format(column=column) for column in LIST_COLUMNS},
    # The latest day the reading itself shows its figure in force; `ingest.lives` settles it
    # with the line's other records, and derives the ends rows leave open (`ended_by`).
    "confirmed_through": """coalesce(
        CAST(effective_end AS DATE),
        greatest(CAST(effective_start AS DATE), CAST(complete_as_of AS DATE))
    )""",
    "ended_by": "CAST(NULL AS VARCHAR)",
    "source_file": "$paths[file_no + 1]",
    "source_line": "ordinal + 1",  # the line, unless its file is irregular (`fix_lines`)
    "version_id": "coalesce(previous.version_id, $version_id)",
    "ingested_at": "coalesce(previous.ingested_at, CAST($ingested_at AS TIMESTAMPTZ))",
}

# Columns made after the sort from columns it carries anyway, so that it moves narrower rows
# (5M rows, five runs each way: 21.1-22.3 s against 22.0-24.6 s for the whole query). A plain
# projection of an ordered subquery keeps its order (DuckDB inserts it as ordered batches);
# `tests/test_ingest.py` checks the order of a table of several row groups.
AFTER_SORT: Final = ("amount", "currency", "unit", "source_file", "source_line")

# Columns of a known set of values (`ingest.rules.allowed_values`: venue codes, vocabularies) go
# through the sort as ENUMs: one byte each instead of a string (5M rows: the query 1.2-1.4 s
# faster, 2.5 CPU-seconds less). Each ENUM lists its values sorted, so it orders as its text
# does; a kept row's value is always among them, as the rules reject any other.
ENUMERATED: Final = ("exchange", *VOCABULARIES)
CREATE_ENUM: Final = "CREATE TYPE {column}_value AS ENUM (SELECT unnest(list_sort($values)))"


def _sorted_column(name: str) -> str:
    if name in ENUMERATED:
        return f"CAST({name} AS {name}_value) AS {name}"
    return f"{DERIVED.get(name, name)} AS {name}"


def _published_column(name: str) -> str:
    if name in ENUMERATED:
        return f"CAST({name} AS VARCHAR) AS {name}"
    return f"{DERIVED[name] if name in AFTER_SORT else name} AS {name}"


SORTED_COLUMNS: Final = ", ".join(
    _sorted_column(name) for name, _ in FEE_COLUMNS if name not in AFTER_SORT
)
PUBLISHED_COLUMNS: Final = ", ".join(_published_column(name) for name, _ in FEE_COLUMNS)

# Rows with the same content have the same sort key up to their file and ordinal, which break
# the tie: of exact duplicates, the first read is first in the table.
SORT_RECORDS: Final = f"""
CREATE TABLE {RECORDS} AS
SELECT {PUBLISHED_COLUMNS}
FROM (
    SELECT {SORTED_COLUMNS}, file_no, ordinal, form
    FROM (
        SELECT
            *,
            {RECORD_ID} AS record_id,
            {LINE_ID} AS line_id,
            {FORM} AS form
        FROM ({TRIMMED_ROWS})
        WHERE NOT ({BROKEN})
    ) AS located
    LEFT JOIN previous USING (record_id)
    ORDER BY exchange, fee_type, effective_start, record_id, file_no, ordinal
) AS sorted
"""

NO_PREVIOUS: Final = """
CREATE TABLE previous (record_id UUID, version_id VARCHAR, ingested_at TIMESTAMPTZ)
"""

READ_PREVIOUS: Final = """
CREATE TABLE previous AS
SELECT CAST(record_id AS UUID) AS record_id, version_id, ingested_at
FROM read_parquet($pattern, hive_partitioning = false)
"""


def load_previous(con: duckdb.DuckDBPyConnection, previous_fees: Path | None) -> None:
    if previous_fees is None:
        con.execute(NO_PREVIOUS)
    else:
        con.execute(READ_PREVIOUS, {"pattern": str(previous_fees / "**" / "*.parquet")})


COUNT_RECORDS: Final = f"SELECT count(*) FROM {RECORDS}"
VENUE_COUNTS: Final = f"SELECT exchange, count(*) FROM {RECORDS} GROUP BY 1 ORDER BY 1"


def sort_records(
    con: duckdb.DuckDBPyConnection,
    rows: RawRows,
    *,
    venues: list[str],
    paths: list[str],
    version_id: str,
    ingested_at: str,
) -> int:
    """Read, check, derive and sort every valid row into `RECORDS` (the serving file must be
    attached: `ingest.serving.attach`); returns the count of rows kept."""
    allowed = allowed_values(venues)
    for column in ENUMERATED:
        con.execute(CREATE_ENUM.format(column=column), {"values": allowed[column]})
    parameters = rule_parameters(SORT_RECORDS, venues) | {
        "paths": paths,
        "version_id": version_id,
        "ingested_at": ingested_at,
    }
    with rows.scanned_by(con):
        con.execute(SORT_RECORDS, parameters)
    [(valid_rows,)] = con.execute(COUNT_RECORDS).fetchall()
    return int(valid_rows)


# Records of irregular files carry ordinal + 1 as their line until their file's walk is known.
FIX_LINES: Final = f"""
UPDATE {RECORDS} AS records
SET source_line = line_map.line
FROM line_map JOIN files USING (file_no)
WHERE records.source_file = files.path AND records.source_line = line_map.ordinal + 1
"""


def fix_lines(con: duckdb.DuckDBPyConnection) -> None:
    """Give the records of irregular files (those in `line_map`) their physical lines."""
    con.execute(FIX_LINES)


# Files some of whose rows were not kept: the rows broke a rule (duplicates are not yet dropped).
FILES_WITH_REJECTS: Final = f"""
SELECT files.file_no
FROM files LEFT JOIN (
    SELECT source_file, count(*) AS kept FROM {RECORDS} GROUP BY source_file
) AS records ON records.source_file = files.path
WHERE coalesce(records.kept, 0) < files.records
ORDER BY files.file_no
"""


def files_with_rejects(con: duckdb.DuckDBPyConnection) -> list[int]:
    """The numbers of the files that had rows rejected (only they are read again)."""
    return [int(number) for (number,) in con.execute(FILES_WITH_REJECTS).fetchall()]


# Exact duplicates have the same sort key up to their file and ordinal (`SORT_RECORDS`), so they
# are next to each other in the table, the first read first: a later duplicate is a row whose
# id is the row before's. A streaming window reads the table in its order (5M rows: 0.01 s to
# count them, against 0.4-0.6 s for count(DISTINCT record_id)).
LATER_DUPLICATES: Final = f"""
SELECT rowid AS position
FROM (SELECT rowid, record_id, lag(record_id) OVER () AS id_before FROM {RECORDS})
WHERE record_id = id_before
"""
DUPLICATES: Final = f"SELECT count(*) FROM ({LATER_DUPLICATES})"
DELETE_LATER_DUPLICATES: Final = (
    f"DELETE FROM {RECORDS} WHERE rowid IN (SELECT position FROM ({LATER_DUPLICATES}))"
)


def delete_later_duplicates(con: duckdb.DuckDBPyConnection) -> int:
    """Collapse exact duplicates to their first row; returns how many rows were deleted."""
    [(duplicates,)] = con.execute(DUPLICATES).fetchall()
    if duplicates:
        con.execute(DELETE_LATER_DUPLICATES)
    return int(duplicates)


# A plain scan keeps the table's order (and skips deleted rows), so the copy's rowids are again
# the records' positions, with no gaps.
COPY_KEPT: Final = f"CREATE TABLE kept.rows AS SELECT * FROM {RECORDS}"
KEPT_FILE: Final = "kept.duckdb"


def compact(con: duckdb.DuckDBPyConnection, version: Path) -> None:
    """Make the positions of the records left after deletes contiguous again.

    A table's rowids must stay its positions, which a delete leaves with gaps, so the rows left
    are copied, in order, into a new serving file that replaces the old one (a copy inside the
    same file would leave the old table's blocks behind as dead space)."""
    compacted = version / KEPT_FILE
    con.execute(f"ATTACH {sql_string(str(compacted))} AS kept")
    con.execute(COPY_KEPT)
    con.execute("DETACH kept")
    con.execute(DETACH)
    os.replace(compacted, version / SERVING_FILE)
    attach(con, version)


SELECT_VENUE: Final = f"""
SELECT * EXCLUDE (exchange) REPLACE ({TEXT_ID} AS record_id, {LINE_TEXT} AS line_id)
FROM {RECORDS}
WHERE exchange = $exchange
"""

# A venue's file has only a few row groups, too few to keep both cores busy alone, so two
# venues are written at a time (measured: 12 s instead of 17 s for 5M rows on 2 cores).
# zstd level 1 instead of 3 saved another 1.5 s, for files 2% larger (100k synthetic rows).
# Row groups are of the table's own size (122,880 rows).
WRITERS: Final = 2
ROW_GROUP: Final = 122_880
# No `ARROW:schema` blob in the footer: the Parquet schema says it all, and a reader is not
# sent a second description of it (DuckDB ignores it; it would be the footer's largest part).
FILE_OPTIONS: Final = {"compression": "zstd", "compression_level": 1, "store_schema": False}

# Each file's schema is declared, not inferred: DuckDB's own writer marks a column required
# or optional from what the rows hold (a version with no null `source_kind` wrote it required,
# and `record_id`, an expression, optional), so a file's schema changed with its data. Here
# the columns every record fills are required and all others optional, in every version
# (docs/dataset.md, "required"); Arrow batches from DuckDB are written by pyarrow under it.
ARROW_TYPES: Final = {
    "VARCHAR": pa.string(),
    "VARCHAR[]": pa.list_(pa.string()),
    "DECIMAL(20,8)": pa.decimal128(20, 8),
    "DATE": pa.date32(),
    "INTEGER": pa.int32(),
    "BIGINT": pa.int64(),
    "BOOLEAN": pa.bool_(),
    "TIMESTAMP WITH TIME ZONE": pa.timestamp("us", tz="UTC"),
}
FILE_SCHEMA: Final = pa.schema(
    [
        pa.field(name, ARROW_TYPES[type_name], nullable=name not in PUBLISHED_REQUIRED)
        for name, type_name in FEE_COLUMNS
        if name != "exchange"  # the partition key: in the path, not the file
    ]
)


def declared(batch: pa.RecordBatch) -> pa.RecordBatch:
    """`batch` under the file schema; a required column holding a null (which the ingest's
    rules make impossible) stops the write rather than write a file that lies."""
    for field, column in zip(FILE_SCHEMA, batch.columns, strict=True):
        if not field.nullable and column.null_count:
            raise ValueError(f"{field.name} holds {column.null_count} nulls but is required")
    return batch.cast(FILE_SCHEMA)


def write_venue_files(con: duckdb.DuckDBPyConnection, target: Path) -> dict[str, int]:
    """Write the records of `RECORDS` as `exchange=<code>/data_0.parquet` files; returns counts
    by venue."""
    counts = {str(code): int(count) for code, count in con.execute(VENUE_COUNTS).fetchall()}

    def write_venue(code: str) -> None:
        # Venue codes come from the registry (`registry.CODE_PATTERN`: [a-z][a-z0-9_]*).
        partition = target / f"exchange={code}"
        partition.mkdir(parents=True)
        with (
            con.cursor() as cursor,
            pq.ParquetWriter(partition / "data_0.parquet", FILE_SCHEMA, **FILE_OPTIONS) as writer,
        ):
            records = cursor.sql(SELECT_VENUE, params={"exchange": code})
            for batch in records.to_arrow_reader(ROW_GROUP):
                writer.write_batch(declared(batch), row_group_size=ROW_GROUP)

    with ThreadPoolExecutor(WRITERS) as pool:
        list(pool.map(write_venue, counts))
    return counts
