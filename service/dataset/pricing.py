"""What executions cost: the fills joined with the lines in force on their trade dates, in one
query (a range join over the version's records), never a lookup per fill.

The line a fill pays is, for now, its venue's **standard** line (`docs/raw-format.md`, "Standard
rates") of its fee type and action in the fees-and-rebates category, in force on its trade date,
for its participant (or for every participant, `all`) and its penny class (or for every class),
with a plain figure counted per share, per contract or as a percentage of value. Fee codes,
display, price bands and tiers select among a venue's other lines once they are data (issue 39);
`docs/pricing.md` states the rule and what each answer field means.

A fill with no such line, or with more than one, is answered with the lines' count and, when
there are several, their record ids: the caller names which (`symbol_type`, `fee_participant`),
the engine never guesses.
"""

import threading
from typing import Final

import pyarrow as pa

from service.dataset.engine import Engine

# What the engine is given: one row per fill that passed its checks (`fill` is its place in the
# request, from 0), the venue as its code.
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
    ]
)

# The units a fill's fee is counted in: its quantity times the amount, or the amount as a
# percentage of its value (quantity times price).
PER_UNIT: Final = ("per_share", "per_contract")
PERCENT: Final = "percent_of_value"

# The lines a fill may pay, whatever the fill: a version's standard fee-and-rebate lines with a
# plain figure in a unit the engine counts. A few thousand of a version's records at most, so
# they are read out of its files once, on the first request that prices fills, and every join
# after reads them from memory (10M records: a fill priced in 14 ms over the files).
CREATE_PRICEABLE: Final = f"""
CREATE TABLE IF NOT EXISTS priceable AS
SELECT exchange, fee_type, action, participant, symbol_type, effective_start, effective_end,
    record_id, line_id, fee_name, amount, unit, confirmed_through, source_url
FROM fees
WHERE fee_category = 'fees_and_rebates'
    AND standard
    AND amount IS NOT NULL
    AND unit IN ('{PER_UNIT[0]}', '{PER_UNIT[1]}', '{PERCENT}')
"""

# One row per fill, in fill order: how many lines it may pay, and when exactly one, that line
# and the fee (signed as the amount: negative is a rebate to the member), rounded to 1e-8 USD.
PRICE_FILLS: Final = f"""
WITH matched AS (
    SELECT
        fills.fill,
        fills.quantity,
        fills.price,
        fills.trade_date,
        fees.record_id,
        fees.line_id,
        fees.fee_name AS label,
        fees.amount,
        fees.unit,
        fees.confirmed_through,
        fees.source_url,
        count(fees.record_id) OVER (PARTITION BY fills.fill) AS lines,
        list(fees.record_id) OVER (
            PARTITION BY fills.fill ORDER BY fees.record_id
            ROWS BETWEEN UNBOUNDED PRECEDING AND UNBOUNDED FOLLOWING
        ) AS candidates
    FROM fills
    LEFT JOIN priceable AS fees
        ON fees.exchange = fills.exchange
        AND fees.fee_type = fills.fee_type
        AND fees.action = fills.action
        AND fees.participant IN (coalesce(fills.participant, 'all'), 'all')
        AND (fills.symbol_type IS NULL OR fees.symbol_type NOT IN ('penny', 'non_penny')
             OR fees.symbol_type = fills.symbol_type)
        AND fees.effective_start <= fills.trade_date
        AND (fees.effective_end IS NULL OR fees.effective_end >= fills.trade_date)
)
SELECT
    fill,
    lines,
    CASE WHEN lines = 1 THEN round(
        CASE unit WHEN '{PERCENT}' THEN quantity * price * amount / 100
            ELSE quantity * amount END, 8) END AS fee,
    CASE WHEN lines = 1 THEN amount END AS amount,
    CASE WHEN lines = 1 THEN unit END AS unit,
    CASE WHEN lines = 1 THEN CAST(record_id AS VARCHAR) END AS record_id,
    CASE WHEN lines = 1 THEN CAST(line_id AS VARCHAR) END AS line_id,
    CASE WHEN lines = 1 THEN label END AS label,
    CASE WHEN lines = 1 THEN confirmed_through END AS confirmed_through,
    CASE WHEN lines = 1 THEN confirmed_through < trade_date END AS presumed,
    CASE WHEN lines = 1 THEN source_url END AS source_link,
    CASE WHEN lines > 1 THEN CAST(candidates AS VARCHAR[]) END AS candidates
FROM matched
QUALIFY row_number() OVER (PARTITION BY fill ORDER BY record_id) = 1
ORDER BY fill
"""


class Pricing:
    """The engine over one version: its priceable lines read once, when first asked."""

    def __init__(self, db: Engine) -> None:
        self._db = db
        self._lock = threading.Lock()
        self._ready = False

    def price(self, fills: pa.Table) -> pa.Table:
        """One row per fill of `fills` (`FILLS_SCHEMA`), in order: `PRICE_FILLS`'s columns."""
        if not self._ready:
            with self._lock:
                if not self._ready:
                    self._db.query(CREATE_PRICEABLE)
                    self._ready = True
        return self._db.table(PRICE_FILLS, {}, {"fills": fills.cast(FILLS_SCHEMA)})
