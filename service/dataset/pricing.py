"""What executions cost: the fills joined with the lines in force on their trade dates, in a few
queries over the whole batch (a range join over the version's priceable lines), never a lookup
per fill.

The line a fill pays (`docs/pricing.md` states the rule and each answer field):

- a fill naming a **fee code** pays a fees-and-rebates line of its venue and fee type that
  carries the code; one naming only its **action** pays a **standard** line of that action
  (`docs/raw-format.md`, "Standard rates");
- a fill with a **tier** pays that tier's line when the venue has one for it, else the line it
  would pay without a tier; a tier's line prices a fill without that tier only by a code no
  line outside the tiers carries (MEMX's B1 is its Liquidity Provision Tier 1);
- in force on the trade date, for the fill's participant (or `all`), penny class (or a line
  for both), display (or a line for any, or one that does not say), tape (or a line for every
  tape) and **price band**: an equity fill at or above $1.00 pays a line for that band, for
  any, or one that does not say (a standard rate is a rate at or above $1.00 unless its band
  says otherwise); one below $1.00 only a line for that band or for any;
- with a plain figure counted per share, per contract or as a percentage of value.

A fill with no such line, or with more than one, is answered with the lines' count and, when
there are several, their record ids: the caller names which (a code, a display, a class, a
participant, a tape), the engine never guesses.
"""

from typing import Final

import pyarrow as pa
import pyarrow.compute as pc

from service.dataset.engine import Engine

# What the engine is given: one row per fill that passed its checks (`fill` is its place in the
# request, from 0), the venue as its code. `action` is null for a fill that names its fee code.
FILLS_SCHEMA: Final = pa.schema(
    [
        ("fill", pa.int64()),
        ("exchange", pa.string()),
        ("fee_type", pa.string()),
        ("trade_date", pa.date32()),
        ("quantity", pa.decimal128(18, 6)),
        ("price", pa.decimal128(18, 8)),
        ("action", pa.string()),
        ("participant", pa.string()),
        ("symbol_type", pa.string()),
        ("fee_code", pa.string()),
        ("display", pa.string()),
        ("tape", pa.string()),
        ("tier", pa.string()),
    ]
)

# The units a fill's fee is counted in: its quantity times the amount, or the amount as a
# percentage of its value (quantity times price).
PER_UNIT: Final = ("per_share", "per_contract")
PERCENT: Final = "percent_of_value"
UNITS: Final = ", ".join(f"'{unit}'" for unit in (*PER_UNIT, PERCENT))

# Each fill's candidates among the priceable lines (`ingest.serving.CREATE_PRICEABLE`: one row
# per code, and one without a code for a standard or tier record, so both ways in are equality
# joins), the best kind only (its tier's line, else a standard one, else another line without a
# tier, else, for a code only a tier's lines carry, the tiers' lines): how
# many, and their positions in the serving copy; and whether a fill's tier is a tier of its
# venue on that day (a tier no line is in force for is the fill's error, never ignored).
MATCH_FILLS: Final = f"""
WITH candidates AS (
    SELECT
        fills.fill,
        lines.position,
        CASE
            WHEN lines.tier IS NOT NULL THEN CASE WHEN lines.tier = fills.tier THEN 3 ELSE 0 END
            WHEN lines.standard THEN 2
            ELSE 1
        END AS kind
    FROM fills
    JOIN serving.priceable AS lines
        ON lines.exchange = fills.exchange
        AND lines.fee_type = fills.fee_type
        AND lines.fee_code IS NOT DISTINCT FROM fills.fee_code
        AND (fills.action IS NULL OR lines.action = fills.action)
        AND (lines.tier IS NULL OR lines.tier = fills.tier OR fills.fee_code IS NOT NULL)
        AND lines.participant IN (coalesce(fills.participant, 'all'), 'all')
        AND (fills.symbol_type IS NULL
             OR lines.symbol_type IN ('both', 'not_applicable', fills.symbol_type))
        AND (fills.display IS NULL OR lines.display IS NULL
             OR lines.display IN (fills.display, 'any'))
        AND (fills.tape IS NULL OR len(lines.tapes) = 0 OR list_contains(lines.tapes, fills.tape))
        AND (fills.fee_type <> 'equity' OR CASE WHEN fills.price >= 1
             THEN coalesce(lines.price_band, 'at_or_above_1') IN ('at_or_above_1', 'any')
             ELSE lines.price_band IN ('below_1', 'any') END)
        AND lines.unit IN ({UNITS})
        AND lines.effective_start <= fills.trade_date
        AND (lines.effective_end IS NULL OR lines.effective_end >= fills.trade_date)
)
,
best AS (
    SELECT fill, count(*) AS lines, list(position ORDER BY position) AS positions
    FROM (SELECT * FROM candidates QUALIFY kind = max(kind) OVER (PARTITION BY fill))
    GROUP BY fill
),
tiers AS (
    SELECT DISTINCT fills.fill
    FROM fills
    JOIN serving.priceable AS lines
        ON lines.exchange = fills.exchange
        AND lines.fee_type = fills.fee_type
        AND lines.tier = fills.tier
        AND lines.fee_code IS NULL
        AND lines.effective_start <= fills.trade_date
        AND (lines.effective_end IS NULL OR lines.effective_end >= fills.trade_date)
)
SELECT
    fill,
    CASE WHEN tier_known THEN coalesce(best.lines, 0) ELSE 0 END AS lines,
    CASE WHEN tier_known THEN best.positions END AS positions,
    tier_known
FROM (
    SELECT fill, fills.tier IS NULL OR tiers.fill IS NOT NULL AS tier_known
    FROM fills LEFT JOIN tiers USING (fill)
)
LEFT JOIN best USING (fill)
"""
MATCHES_SCHEMA: Final = pa.schema(
    [
        ("fill", pa.int64()),
        ("lines", pa.int64()),
        ("positions", pa.list_(pa.int64())),
        ("tier_known", pa.bool_()),
    ]
)

# What an answer shows of each candidate line, by its position (bound as a list: a filter on
# rowid reads only the row groups holding them).
LINES_AT: Final = """
SELECT
    rowid AS position,
    CAST(record_id AS VARCHAR) AS record_id,
    CAST(line_id AS VARCHAR) AS line_id,
    fee_name AS label,
    tier,
    amount,
    unit,
    confirmed_through,
    source_url
FROM serving.rows
WHERE rowid = ANY($positions)
"""

# One row per fill, in fill order: how many lines it may pay, and when exactly one, that line
# and the fee (signed as the amount: negative is a rebate to the member), rounded to 1e-8 USD;
# when several, their record ids.
PRICE_FILLS: Final = f"""
WITH several AS (
    SELECT fill, list(record_id ORDER BY record_id) AS candidates
    FROM (SELECT fill, unnest(positions) AS position FROM matches WHERE lines > 1)
    JOIN lines USING (position)
    GROUP BY fill
)
SELECT
    fills.fill,
    matches.lines,
    matches.tier_known,
    round(CASE lines.unit WHEN '{PERCENT}' THEN quantity * price * amount / 100
        ELSE quantity * amount END, 8) AS fee,
    lines.amount,
    lines.unit,
    lines.record_id,
    lines.line_id,
    lines.label,
    lines.tier AS line_tier,
    lines.confirmed_through,
    lines.confirmed_through < fills.trade_date AS presumed,
    lines.source_url AS source_link,
    several.candidates
FROM fills
JOIN matches USING (fill)
LEFT JOIN lines ON matches.lines = 1 AND lines.position = matches.positions[1]
LEFT JOIN several USING (fill)
ORDER BY fills.fill
"""


def price(db: Engine, fills: pa.Table) -> pa.Table:
    """One row per fill of `fills` (`FILLS_SCHEMA`), in order: `PRICE_FILLS`'s columns."""
    fills = fills.cast(FILLS_SCHEMA)
    matches = db.table(MATCH_FILLS, {}, {"fills": fills}).cast(MATCHES_SCHEMA)
    positions = pc.unique(pc.list_flatten(matches["positions"]))
    lines = db.table(LINES_AT, {"positions": positions.to_pylist()}, {})
    return db.table(PRICE_FILLS, {}, {"fills": fills, "matches": matches, "lines": lines})
