"""Per-version rollups: everything the discovery endpoints answer, counted once by the ingest.

    rollups/counts.parquet     records per venue x dimension value x effective period, for the
                               four discovery dimensions (long form: a `dimension` column)
    rollups/summary.parquet    records per venue x fee type x fee category
    rollups/details.parquet    per venue: span of its records, distinct values of each filter
    rollups/coverage.parquet   per venue: maximal runs of covered days, with their categories
    rollups/versions.parquet   records per venue x the version that first published them

    rollups/discovery_groups.parquet, discovery_*.npy
                               the counts as the search discovery calls make
                               (`ingest.layout.DISCOVERY_ARRAYS`)

Each Parquet file carries the version id in its key-value metadata (`fees:version_id`); the
service refuses to open a version whose rollups name another. They are small (about a million
rows of counts at 10M records, the rest thousands), so opening a version reads them instead of
grouping millions of records, and a discovery call is two binary searches per value over the
counts' search (`service.dataset.rollups`).
"""

from datetime import date
from pathlib import Path
from typing import Final

import duckdb
import numpy as np
import numpy.typing as npt
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from ingest.layout import (
    COUNTED,
    DAY_OFFSET,
    DISCOVERY_GROUPS,
    GROUP_COLUMNS,
    OPEN_END,
    ROLLUP_DIR,
    VERSION_KEY,
    discovery_array_path,
)
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

    def stamped(table: pa.Table, name: str) -> None:
        metadata = {**(table.schema.metadata or {}), VERSION_KEY: version_id.encode()}
        pq.write_table(table.replace_schema_metadata(metadata), target / f"{name}.parquet")

    for name, sql in ROLLUPS.items():
        parameters = {"as_of": as_of} if name in AS_OF_DEPENDENT else {}
        table = con.sql(sql, params=parameters).to_arrow_table()
        stamped(table, name)
        if name == "counts":
            stamped(write_discovery_search(table, version), DISCOVERY_GROUPS)


Keys = npt.NDArray[np.int64]


def write_discovery_search(counts: pa.Table, version: Path) -> pa.Table:
    """Write the counts rollup as the search discovery calls make (`DISCOVERY_ARRAYS`); returns
    its groups, the n-th numbered n. The rollup is sorted by dimension, venue and value, so a
    group starts where any of the three changes. Built here, not when a version is opened: at
    10M records it sorted a million periods there, 0.06-0.26 s of an open (the slow end while
    the service was loaded)."""
    named = [counts[name] for name in GROUP_COLUMNS]
    changes = np.zeros(counts.num_rows, dtype=bool)
    if counts.num_rows:
        changes[0] = True
        for column in named:
            text = column.combine_chunks()
            differs = pc.fill_null(pc.not_equal(text.slice(1), text.slice(0, len(text) - 1)), True)
            changes[1:] |= differs.to_numpy(zero_copy_only=False)
    group = np.cumsum(changes, dtype=np.int64) - 1
    records = counts["records"].to_numpy().astype(np.int64)
    for side, name, summed in (("effective_start", "starts", "started"),
                               ("effective_end", "ends", "ended")):  # fmt: skip
        keys, sums = _prefix_sums(group, _days(counts[side]), records)
        np.save(discovery_array_path(version, name), keys)
        np.save(discovery_array_path(version, summed), sums)
    where = np.flatnonzero(changes)
    return pa.table({name: counts[name].take(where) for name in GROUP_COLUMNS})


def _days(column: pa.ChunkedArray) -> Keys:
    """Days as search keys hold them: since 1970, plus `DAY_OFFSET`; none (an open end) last."""
    days: Keys = pc.fill_null(pc.cast(column, pa.int32()), OPEN_END - DAY_OFFSET).to_numpy()
    return days.astype(np.int64) + DAY_OFFSET


def _prefix_sums(group: Keys, days: Keys, records: Keys) -> tuple[Keys, Keys]:
    """Search keys (group, day) in order, and the records up to each (a leading 0)."""
    keys = (group << 32) | days
    order = np.argsort(keys, kind="stable")
    return keys[order], np.concatenate(([0], np.cumsum(records[order])))
