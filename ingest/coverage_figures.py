"""The figures the coverage report (`ingest.coverage`) and the README's paragraph on the data
(`ingest.readme`) are made of: the SQL that counts them over a version's `fees` and
`exchanges` views (`ingest.query.open_version`), and how a share is written."""

from typing import Final

# One row per venue and category, then the venues' and the whole dataset's totals (GROUPING
# SETS: the NULL category is a venue's total, NULL venue and category the grand total).
COVERAGE: Final = """
SELECT
    exchange,
    fee_category,
    count(*) AS records,
    count(*) FILTER (WHERE source_kind = 'primary') AS primary_records,
    count(*) FILTER (WHERE source_kind = 'primary' AND date_basis = 'stated') AS primary_stated,
    count(*) FILTER (WHERE date_basis IN ('stated', 'derived')) AS dated,
    count(*) FILTER (WHERE uncertain) AS uncertain,
    count(DISTINCT source_url) AS sources,
    min(effective_start) AS earliest,
    max(coalesce(effective_end, effective_start)) AS latest,
    count(*) FILTER (WHERE effective_end IS NULL) AS open_ended
FROM fees
GROUP BY GROUPING SETS ((exchange, fee_category), (exchange), ())
ORDER BY exchange NULLS LAST, fee_category NULLS LAST
"""
BY_CATEGORY: Final = """
SELECT fee_category, count(*), count(DISTINCT exchange), count(DISTINCT source_url)
FROM fees GROUP BY fee_category ORDER BY fee_category
"""
BY_PROVENANCE: Final = """
SELECT source_kind, date_basis, count(*), count(*) FILTER (WHERE uncertain)
FROM fees GROUP BY ALL ORDER BY ALL
"""
# The records with no known end, by the year of their start: each counts as in force on any
# later day, resting on no later reading.
OPEN_ENDS: Final = """
SELECT year(effective_start), count(*), count(DISTINCT exchange), count(*) FILTER (WHERE uncertain)
FROM fees WHERE effective_end IS NULL GROUP BY ALL ORDER BY ALL
"""
# On each day, the records in force and those of them presumed for more than two years: no
# source shows their figure in force within 730 days before the day (`confirmed_through`); all
# records, then the equity records of adding and removing liquidity.
STALE_TARGET_DAY: Final = "2025-06-01"  # the day issue 36's target is measured on
PRESUMED_DAYS: Final = (
    *(f"{year}-01-01" for year in range(2018, 2027)),
    STALE_TARGET_DAY,
)
STALE_DAYS: Final = 730
STALE: Final = """
SELECT
    day,
    count(*),
    count(*) FILTER (WHERE confirmed_through < day - $stale),
    count(*) FILTER (WHERE fee_type = 'equity' AND action IN ('make', 'take')),
    count(*) FILTER (
        WHERE fee_type = 'equity' AND action IN ('make', 'take')
        AND confirmed_through < day - $stale
    )
FROM (SELECT CAST(unnest($days) AS DATE) AS day) AS days
JOIN fees
    ON effective_start <= day AND (effective_end IS NULL OR effective_end >= day)
GROUP BY day
ORDER BY day
"""
# Per venue and year, whether its standard make and take were confirmed on some day of the year:
# a standard record shown in force (from its start to `confirmed_through`) within the year.
STANDARD_YEARS: Final = (2018, 2026)
STANDARD_CONFIRMED: Final = """
SELECT
    exchange,
    fee_type,
    year,
    bool_or(action = 'make') AS make,
    bool_or(action = 'take') AS take
FROM fees
JOIN (SELECT unnest(range($first, $last + 1)) AS year) AS years
    ON year(effective_start) <= year AND year(confirmed_through) >= year
WHERE standard AND action IN ('make', 'take')
GROUP BY ALL
ORDER BY ALL
"""
VENUE_TYPES: Final = """
SELECT DISTINCT exchange, fee_type FROM fees WHERE fee_category = 'fees_and_rebates' ORDER BY ALL
"""
COMPLETE_SCHEDULES: Final = """
SELECT exchange, fee_type, complete_scope, complete_as_of, count(*), min(source_url)
FROM fees
WHERE complete_as_of IS NOT NULL
GROUP BY ALL
ORDER BY ALL
"""
REGISTERED: Final = "SELECT count(*) FROM exchanges"
SPREAD: Final = "SELECT count(DISTINCT exchange), count(DISTINCT fee_category) FROM fees"
EMPTY_VENUES: Final = """
SELECT code, display_name FROM exchanges
WHERE code NOT IN (SELECT DISTINCT exchange FROM fees) ORDER BY code
"""


def percent(part: int, whole: int) -> str:
    return f"{100 * part / whole:.0f}%" if whole else "-"
