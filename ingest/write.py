"""Turning the checked staging rows into the published `fees` Parquet files.

The records are first gathered, sorted, into one table (`ingest.serving.RECORDS`, in the
version's serving file, which the service reads rows from), so each venue's rows are one
contiguous range that a plain COPY writes out (found by the table's zone maps). DuckDB's
PARTITION_BY writer copies every row into per-partition buffers first and took twice as long on
5M rows.

Derived columns are computed here, in SQL: the parsed amount, the source line, and the version
that first published each record (carried forward from the previous version). The content id
is computed while staging (`ingest.stage.RECORD_ID`).
"""

from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Final

import duckdb

from ingest.schema import FEE_COLUMNS
from ingest.serving import RECORDS
from ingest.stage import JOIN_LINES, LINE_OF_ROW, sql_string

# A plain money figure: `$0.0030`, `($0.0020)`, `-$0.25`, `$1,500.00` (docs/raw-format.md).
MONEY: Final = r"(?:[0-9]{1,3}(?:,[0-9]{3})+|[0-9]{1,12})(?:\.[0-9]{1,8})?"
PLAIN_MONEY: Final = rf"\(\${MONEY}\)|-?\${MONEY}"

# `plain` (is the printed amount a plain money figure?) is computed once per row, below.
AMOUNT: Final = f"""CASE WHEN plain THEN
    CAST(
        CASE WHEN fee_amount[1] IN ('(', '-') THEN -1 ELSE 1 END
        * CAST(replace(regexp_extract(fee_amount, '{MONEY}'), ',', '') AS DECIMAL(20, 8))
        AS DECIMAL(20, 8)
    )
END"""

# The normalised unit of each distinct printed basis, made once per basis rather than per row.
CREATE_UNITS: Final = """
CREATE TABLE units AS
SELECT
    fee_basis,
    nullif(trim(regexp_replace(lower(fee_basis), '[^a-z0-9%]+', '_', 'g'), '_'), '') AS unit
FROM (SELECT DISTINCT fee_basis FROM staged WHERE fee_basis IS NOT NULL)
"""

UNIT: Final = "CASE WHEN plain THEN units.unit END"

# What each published column is made of; columns not listed are copied as they are. The sorted
# table keeps `record_id` as the 16-byte UUID it was staged as (it sorts in the same order as its
# text, and the sort carrying it was 2.3 s faster at 5M rows than one carrying 36-character
# text); the Parquet files and every answer hold its text (`SELECT_VENUE`, `TEXT_ID`).
DERIVED: Final = {
    "amount": AMOUNT,
    "currency": "CASE WHEN plain THEN 'USD' END",
    "unit": UNIT,
    "effective_start": "CAST(effective_start AS DATE)",
    "effective_end": "CAST(effective_end AS DATE)",
    "page_number": "CAST(page_number AS INTEGER)",
    "source_file": "files.path",
    "source_line": LINE_OF_ROW,
    "version_id": "coalesce(previous.version_id, $version_id)",
    "ingested_at": "coalesce(previous.ingested_at, CAST($ingested_at AS TIMESTAMPTZ))",
}

# Exact duplicates share a content id; all but the first row of each are dropped. (Identical
# rows break identical rules, so a duplicate group is either wholly rejected or wholly kept.)
FIND_LATER_DUPLICATES: Final = """
CREATE TABLE later_duplicates AS
SELECT staged.rowid AS row_no
FROM staged
JOIN (
    SELECT record_id, min(rowid) AS first_row
    FROM staged
    GROUP BY record_id
    HAVING count(*) > 1
) AS repeated USING (record_id)
WHERE staged.rowid > repeated.first_row
"""

SELECT_FEES: Final = f"""
SELECT
    {", ".join(f"{DERIVED.get(name, name)} AS {name}" for name, _ in FEE_COLUMNS)}
FROM (
    SELECT rowid AS row_no, *, regexp_full_match(fee_amount, '{PLAIN_MONEY}') AS plain
    FROM staged
    WHERE rowid NOT IN (SELECT row_no FROM problems)
    AND rowid NOT IN (SELECT row_no FROM later_duplicates)
) AS located
{JOIN_LINES}
LEFT JOIN units USING (fee_basis)
LEFT JOIN previous USING (record_id)
ORDER BY exchange, fee_type, effective_start, record_id
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


CREATE_RECORDS: Final = f"CREATE TABLE {RECORDS} AS {SELECT_FEES}"
DROP_STAGED: Final = "DROP TABLE staged"

VENUE_COUNTS: Final = f"SELECT exchange, count(*) FROM {RECORDS} GROUP BY 1 ORDER BY 1"

TEXT_ID: Final = "CAST(record_id AS VARCHAR)"
SELECT_VENUE: Final = f"""
SELECT * EXCLUDE (exchange) REPLACE ({TEXT_ID} AS record_id)
FROM {RECORDS}
WHERE exchange = $exchange
"""

# A venue's file has only a few row groups, too few to keep both cores busy alone, so two
# venues are written at a time (measured: 12 s instead of 17 s for 5M rows on 2 cores).
# zstd level 1 instead of 3 saved another 1.5 s, for files 2% larger (100k synthetic rows).
WRITERS: Final = 2
WRITE_OPTIONS: Final = (
    "FORMAT parquet, COMPRESSION zstd, COMPRESSION_LEVEL 1, ROW_GROUP_SIZE 100000"
)


def write_fees(
    con: duckdb.DuckDBPyConnection, target: Path, *, version_id: str, ingested_at: str
) -> dict[str, int]:
    """Sort the records into `RECORDS` (the serving file must be attached:
    `ingest.serving.attach`) and write them as `exchange=<code>/data_0.parquet` files; returns
    counts by venue. Consumes `staged`: it is dropped once the sorted table exists."""
    con.execute(FIND_LATER_DUPLICATES)
    con.execute(CREATE_UNITS)
    con.execute(CREATE_RECORDS, {"version_id": version_id, "ingested_at": ingested_at})
    con.execute(DROP_STAGED)
    counts = {str(code): int(count) for code, count in con.execute(VENUE_COUNTS).fetchall()}

    def write_venue(code: str) -> None:
        # Venue codes come from the registry (`registry.CODE_PATTERN`: [a-z][a-z0-9_]*).
        partition = target / f"exchange={code}"
        partition.mkdir(parents=True)
        path = sql_string(str(partition / "data_0.parquet"))
        with con.cursor() as cursor:
            cursor.execute(f"COPY ({SELECT_VENUE}) TO {path} ({WRITE_OPTIONS})", {"exchange": code})

    with ThreadPoolExecutor(WRITERS) as pool:
        list(pool.map(write_venue, counts))
    return counts
