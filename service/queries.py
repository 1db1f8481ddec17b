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

# Per venue: the span of its records (a record still in force runs to the as-of date) and the
# distinct values of every filter dimension, for exchange details and the filters endpoint.
VENUE_DETAILS: Final = """
SELECT
    exchange,
    min(effective_start) AS earliest,
    max(coalesce(effective_end, greatest(effective_start, CAST($as_of AS DATE)))) AS latest,
    count(*) AS records,
    list(DISTINCT fee_type) AS fee_types,
    list(DISTINCT fee_category) AS fee_categories,
    list(DISTINCT action) AS actions,
    list(DISTINCT participant) AS participants,
    list(DISTINCT symbol_classification) AS symbol_classifications,
    list(DISTINCT symbol_type) AS symbol_types,
    list(DISTINCT trade_type) AS trade_types
FROM fees
GROUP BY exchange
"""

VERSIONS: Final = """
SELECT version_id, exchange, count(*) AS records
FROM fees
GROUP BY ALL
"""

# The dimensions of the results filters: query parameter -> dataset column.
RESULT_FILTERS: Final = {
    "exchange_name": "exchange",
    "fee_type": "fee_type",
    "fee_category": "fee_category",
    "fee_action": "action",
    "fee_participant": "participant",
    "fee_symbol_classification": "symbol_classification",
    "fee_symbol_type": "symbol_type",
    "fee_trade_type": "trade_type",
}

# Sort keys clients may choose, mapped to columns (never taken from the request as text).
ORDER_COLUMNS: Final = {
    "effective_start": "effective_start",
    "exchange_name": "exchange",
    "fee_type": "fee_type",
    "fee_category": "fee_category",
    "amount": "amount",
}
ORDER_DIRECTIONS: Final = ("asc", "desc")

# Every filter is a bound list (NULL: no filter); `scope` is always the key's visible venues.
MATCHING: Final = f"""
FROM fees
WHERE list_contains($scope, exchange)
{
    "".join(
        f"AND (${name} IS NULL OR list_contains(${name}, {column})){chr(10)}"
        for name, column in RESULT_FILTERS.items()
    )
}\
AND effective_start <= coalesce($end_date, DATE '9999-12-31')
AND coalesce(effective_end, DATE '9999-12-31') >= coalesce($start_date, DATE '0001-01-01')
AND ($in_force_on IS NULL OR (
    effective_start <= $in_force_on
    AND coalesce(effective_end, DATE '9999-12-31') >= $in_force_on
))
AND ($version_id IS NULL OR version_id = $version_id)
AND ($record_id IS NULL OR record_id = $record_id)
"""

COUNT_MATCHING: Final = f"SELECT count(*) {MATCHING}"

# A result's fields: (name in the API, dataset column). JSON answers shape some of them in SQL
# (dates as text, the decimal amount as a number); exports keep the stored types. Provenance
# fields are null unless `include_source` is true.
RESULT_FIELDS: Final = (
    ("record_id", "record_id"),
    ("exchange_name", "exchange"),
    ("version_id", "version_id"),
    ("ingested_at", "ingested_at"),
    ("fee_type", "fee_type"),
    ("fee_category", "fee_category"),
    ("fee_action", "action"),
    ("fee_participant", "participant"),
    ("fee_symbol_classification", "symbol_classification"),
    ("fee_symbol_type", "symbol_type"),
    ("fee_trade_type", "trade_type"),
    ("fee_name", "fee_name"),
    ("fee_amount", "fee_amount"),
    ("amount", "amount"),
    ("currency", "currency"),
    ("unit", "unit"),
    ("fee_basis", "fee_basis"),
    ("volume_tier", "volume_tier"),
    ("conditions", "conditions"),
    ("notes", "notes"),
    ("effective_start", "effective_start"),
    ("effective_end", "effective_end"),
    ("source_document", "source_document"),
    ("source_url", "source_url"),
    ("page_number", "page_number"),
    ("source_file", "source_file"),
    ("source_line", "source_line"),
)
SOURCE_FIELDS: Final = frozenset(
    {"source_document", "source_url", "page_number", "source_file", "source_line"}
)
JSON_SHAPES: Final = {
    "ingested_at": "strftime(ingested_at, '%Y-%m-%dT%H:%M:%S.%fZ')",
    "amount": "CAST(amount AS DOUBLE)",
    "effective_start": "strftime(effective_start, '%Y-%m-%d')",
    "effective_end": "strftime(effective_end, '%Y-%m-%d')",
}


def result_item(*, json: bool) -> str:
    """The select list of a result, shaped for a JSON answer or kept typed for an export."""
    expressions = []
    for name, column in RESULT_FIELDS:
        value = JSON_SHAPES.get(name, column) if json else column
        if name in SOURCE_FIELDS:
            value = f"CASE WHEN $include_source THEN {value} END"
        expressions.append(f"{value} AS {name}")
    return ",\n    ".join(expressions)


PAGE_OF_RESULTS: Final = """
SELECT {item}
{matching}
ORDER BY {order_column} {order_direction} NULLS LAST, record_id ASC
LIMIT $limit
OFFSET $offset
"""


def page_of_results(order_by: str, order_dir: str, *, json: bool = True) -> str:
    """The page query for an allow-listed sort key and direction."""
    return PAGE_OF_RESULTS.format(
        item=result_item(json=json),
        matching=MATCHING,
        order_column=ORDER_COLUMNS[order_by],
        order_direction={"asc": "ASC", "desc": "DESC"}[order_dir],
    )
