"""Per-version rollups: everything the discovery endpoints answer, counted once by the ingest.

    rollups/counts.parquet     records per venue x dimension value x effective period, for the
                               four discovery dimensions (long form: a `dimension` column)
    rollups/summary.parquet    records per venue x fee type x fee category
    rollups/details.parquet    per venue: span of its records, distinct values of each filter
    rollups/coverage.parquet   per venue: maximal runs of covered days, with their categories
    rollups/versions.parquet   records per venue x the version that first published them

Each file carries the version id in its Parquet key-value metadata (`fees:version_id`); the
service refuses to open a version whose rollups name another. They are small (thousands of
rows at 10M records), so opening a version reads them whole instead of grouping millions of
records, and a discovery call sums a few hundred rows in memory (`service.dataset.rollups`).
"""

from datetime import date
from pathlib import Path
from typing import Final

import duckdb
import pyarrow.parquet as pq

from ingest.layout import COUNTED, ROLLUP_DIR, VERSION_KEY
from ingest.serving import RECORDS

COUNTS: Final = (
    "\nUNION ALL\n".join(
        f"""SELECT '{column}' AS dimension, exchange, {column} AS value, effective_start,
    effective_end, count(*) AS records
FROM {RECORDS}
GROUP BY ALL"""
        for column in COUNTED
    )
    + "\nORDER BY dimension, exchange, value, effective_start, effective_end"
)

SUMMARY: Final = f"""
SELECT exchange, fee_type, fee_category, count(*) AS records
FROM {RECORDS}
GROUP BY ALL
ORDER BY ALL
"""

# Per venue: the span of its records (a record still in force runs to the as-of date) and the
# distinct values of every filter dimension, for exchange details and the filters endpoint.
DETAILS: Final = f"""
SELECT
    exchange,
    min(effective_start) AS earliest,
    max(coalesce(effective_end, greatest(effective_start, CAST($as_of AS DATE)))) AS latest,
    list(DISTINCT fee_type ORDER BY fee_type) AS fee_types,
    list(DISTINCT fee_category ORDER BY fee_category) AS fee_categories,
    list(DISTINCT action ORDER BY action) AS actions,
    list(DISTINCT participant ORDER BY participant) AS participants,
    list(DISTINCT symbol_classification ORDER BY symbol_classification)
        AS symbol_classifications,
    list(DISTINCT symbol_type ORDER BY symbol_type) AS symbol_types,
    list(DISTINCT trade_type ORDER BY trade_type) AS trade_types
FROM {RECORDS}
GROUP BY exchange
ORDER BY exchange
"""

# Coverage: merge each venue's effective periods (a record still in force runs to the as-of
# date, or to its own start if that is later) into maximal runs, joining periods that overlap
# or touch (the next starts at most one day after the run so far ends).
COVERAGE: Final = f"""
WITH periods AS (
    SELECT DISTINCT
        exchange,
        effective_start AS starts,
        coalesce(effective_end, greatest(effective_start, CAST($as_of AS DATE))) AS ends,
        fee_category
    FROM {RECORDS}
),
ordered AS (
    SELECT
        *,
        max(ends) OVER (
            PARTITION BY exchange
            ORDER BY starts, ends
            ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING
        ) AS reach
    FROM periods
),
numbered AS (
    SELECT
        *,
        sum(CASE WHEN reach IS NULL OR starts > reach + 1 THEN 1 ELSE 0 END) OVER (
            PARTITION BY exchange
            ORDER BY starts, ends
            ROWS UNBOUNDED PRECEDING
        ) AS run
    FROM ordered
)
SELECT
    exchange,
    min(starts) AS starts,
    max(ends) AS ends,
    list(DISTINCT fee_category ORDER BY fee_category) AS categories
FROM numbered
GROUP BY exchange, run
ORDER BY exchange, starts
"""

VERSIONS: Final = f"""
SELECT version_id, exchange, count(*) AS records
FROM {RECORDS}
GROUP BY ALL
ORDER BY ALL
"""

ROLLUPS: Final = {
    "counts": COUNTS,
    "summary": SUMMARY,
    "details": DETAILS,
    "coverage": COVERAGE,
    "versions": VERSIONS,
}
AS_OF_DEPENDENT: Final = frozenset({"details", "coverage"})


def write_rollups(
    con: duckdb.DuckDBPyConnection, version: Path, *, version_id: str, as_of: date
) -> None:
    """Write `rollups/*.parquet` for the records in `RECORDS`, each stamped with `version_id`."""
    target = version / ROLLUP_DIR
    target.mkdir()
    for name, sql in ROLLUPS.items():
        parameters = {"as_of": as_of} if name in AS_OF_DEPENDENT else {}
        table = con.sql(sql, params=parameters).to_arrow_table()
        metadata = {**(table.schema.metadata or {}), VERSION_KEY: version_id.encode()}
        pq.write_table(table.replace_schema_metadata(metadata), target / f"{name}.parquet")
