"""Every SQL statement the service runs, as named constants with bound parameters.

Identifiers never come from a request: the few that vary (a rollup's dimension column) are
chosen from `ROLLUP_COLUMNS`, a fixed allow-list, when the version is opened.
"""

from typing import Final

from service.vocabulary import DIMENSIONS

ROLLUP_COLUMNS: Final = tuple(column for column, _ in DIMENSIONS.values())

# Views over one version's files; the paths are the service's own, quoted by the caller.
CREATE_FEES_VIEW: Final = """
CREATE VIEW fees AS
SELECT *
FROM read_parquet({fees}, hive_partitioning = true, hive_types = {{'exchange': VARCHAR}})
"""

CREATE_REGISTRY_VIEW: Final = "CREATE VIEW registry AS SELECT * FROM read_parquet({registry})"

# One small table per discovery dimension: how many records share a venue, a value and an
# effective period. A discovery call sums it over the periods that overlap its window.
CREATE_ROLLUP: Final = """
CREATE TABLE rollup_{column} AS
SELECT exchange, {column} AS value, effective_start, effective_end, count(*) AS records
FROM fees
GROUP BY ALL
ORDER BY exchange, value, effective_start
"""

# A record is in the window when its effective period overlaps it; a missing side is open.
COUNT_IN_WINDOW: Final = """
SELECT
    value,
    coalesce(sum(records) FILTER (
        WHERE effective_start <= coalesce($end_date, DATE '9999-12-31')
        AND coalesce(effective_end, DATE '9999-12-31') >= coalesce($start_date, DATE '0001-01-01')
    ), 0) AS records
FROM rollup_{column}
WHERE exchange = $exchange
GROUP BY value
"""

REGISTRY: Final = """
SELECT code, display_name, aliases
FROM registry
ORDER BY code
"""

EXCHANGE_SUMMARY: Final = """
SELECT exchange, fee_type, fee_category, sum(records) AS records
FROM (
    SELECT exchange, fee_type, fee_category, count(*) AS records
    FROM fees
    GROUP BY ALL
)
GROUP BY ALL
ORDER BY ALL
"""

# Coverage: merge each venue's effective periods (a record still in force runs to the as-of
# date, or to its own start if that is later) into maximal runs, joining periods that overlap
# or touch (the next starts at most one day after the run so far ends).
COVERAGE: Final = """
WITH periods AS (
    SELECT DISTINCT
        exchange,
        effective_start AS starts,
        coalesce(effective_end, greatest(effective_start, CAST($as_of AS DATE))) AS ends,
        fee_category
    FROM fees
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
SELECT exchange, min(starts) AS starts, max(ends) AS ends, list(DISTINCT fee_category) AS categories
FROM numbered
GROUP BY exchange, run
ORDER BY exchange, starts
"""
