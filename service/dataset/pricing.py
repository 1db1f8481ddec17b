"""What executions cost: the fills joined with the lines in force on their trade dates, over the
whole batch at once, never a lookup per fill.

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

The candidates are found by key, not by a scan: each fill's key (its venue, fee type and code,
else its action; and its tier) is looked up by binary search in the version's sorted price keys
(`ingest.price_keys`), the candidates' codes are read by row from the price lines, and the rule
is applied to all of them at once as column operations. (10M synthetic records, 1,000 fills: a
DuckDB join scanning the two million coded records took 98 ms, reading the candidates' fields
from the serving copy 89 ms more, and the rule as a DuckDB query over the candidates alone
12 ms, most of it the query's own cost.) The answer's fields come from the price answers, and
the fees are computed in 256-bit decimals.
"""

from dataclasses import dataclass
from decimal import Decimal
from typing import Final

import numpy as np
import numpy.typing as npt
import pyarrow as pa
import pyarrow.compute as pc

from ingest.layout import NO_RECORD, PRICE_ANSWER_COLUMNS
from ingest.schema import TAPES
from service.dataset.index import ResultsIndex
from service.dataset.price_keys import PriceKeys, key

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

# A fee counted as a percentage of value (quantity times price); every other unit a price key
# holds (`ingest.layout.PRICED_UNITS`) is counted per share or contract.
PERCENT: Final = "percent_of_value"

# The fee of each priced fill, signed as the amount (negative is a rebate to the member):
# quantity times amount, or quantity times price times amount / 100 for a percentage of value,
# in decimal arithmetic wide enough for every bound a fill's numbers have, then rounded to 1e-8
# USD, a half away from zero. The summary holds an amount as a double; it has at most 8 places,
# so its decimal of 8 places is the published amount.
EXACT: Final = pa.decimal128(20, 8)
HUNDREDTH: Final = pa.scalar(Decimal("0.01"), pa.decimal256(3, 2))
ROUNDED: Final = pc.RoundOptions(ndigits=8, round_mode="half_towards_infinity")

# A fill's kinds of line, best last: another tier's line (only through a code), a line without
# a tier, a standard line, the fill's own tier's line.
OTHER_TIER, UNTIERED, STANDARD, OWN_TIER = range(4)


# A fill's value no record holds: it equals no record's code (`Candidates.given`); and a value
# the fill leaves out.
NOT_HELD, UNSAID = -2, -1


@dataclass(frozen=True)
class Candidates:
    """The price lines some fills' keys find in force on the fills' trade dates: for each, the
    fill (its row in the batch) and the line's row; the rule reads both as the results index's
    codes, never as text (a block of 400,000 fills has some 1.9 million keyed lines, 400,000
    of them in force)."""

    index: ResultsIndex
    fills: pa.Table
    owner: npt.NDArray[np.int64]
    rows: npt.NDArray[np.int64]
    lines: npt.NDArray[np.void]  # the price lines at `rows`

    def line(self, column: str) -> npt.NDArray[np.int64]:
        """Each candidate's code of a column of the index (0: no value)."""
        return self.lines[column].astype(np.int64)

    def given(self, column: str, values: pa.Array) -> npt.NDArray[np.int64]:
        """Each candidate's fill's value (one per fill) as the column's code: `UNSAID` where
        it gives none, `NOT_HELD` where no record holds it."""
        codes = self.index.codes_of(column, values)
        return codes[self.owner]

    def per_fill(self, flags: pa.Array) -> npt.NDArray[np.bool_]:
        """Each candidate's fill's flag (one per fill; null is false)."""
        return _true(flags)[self.owner]

    def codes(self, column: str, *values: str) -> list[int]:
        """The codes of values of a column that records hold."""
        return [code for value in values if (code := self.index.code(column, value)) is not None]

    def priceable(self) -> npt.NDArray[np.bool_]:
        """Whether each candidate is a line a fill may pay: of fees and rebates, with an amount
        in a unit the engine counts (a fee code's key names every record carrying it)."""
        priceable: npt.NDArray[np.bool_] = self.lines["priceable"] == 1
        return priceable


class Pricing:
    """The engine over one version: its price keys and lines, and the results index's codes."""

    def __init__(self, index: ResultsIndex):
        self._keys: PriceKeys = index.price_keys
        self._index = index

    def price(self, fills: pa.Table) -> pa.Table:
        """One row per fill of `fills` (`FILLS_SCHEMA`), in order: how many lines it may pay
        (`lines`), whether its tier is one of its venue's that day (`tier_known`), and when
        one line, the fee and the line (`PRICE_ANSWER_COLUMNS` and more); when several, their
        record ids (`candidates`)."""
        fills = fills.cast(FILLS_SCHEMA).combine_chunks()
        count = fills.num_rows
        kind = pc.if_else(pc.is_valid(fills["fee_code"]), "C", "A")
        value = pc.coalesce(fills["fee_code"], fills["action"])
        found = self._candidates(fills, key(fills, kind, value))
        tiered = self._candidates(fills, key(fills, "T", fills["tier"]))
        tier_known = _true(pc.is_null(fills["tier"]))
        tier_known[tiered.owner] = True
        kinds = _kinds(found)
        fit = _fits(found) & (kinds >= 0)
        best = np.full(count, -1)
        np.maximum.at(best, found.owner[fit], kinds[fit])
        chosen = fit & (kinds == best[found.owner])
        lines = np.where(tier_known, np.bincount(found.owner[chosen], minlength=count), 0)
        at = np.flatnonzero(chosen)  # the chosen candidates
        single, several = at[lines[found.owner[at]] == 1], at[lines[found.owner[at]] > 1]
        answered = self._answered(fills, found, single)
        return pa.table(
            {
                "fill": fills["fill"],
                "lines": lines,
                "tier_known": tier_known,
                **answered,
                "candidates": self._several(count, found.owner[several], found.rows[several]),
            }
        )

    def _candidates(self, fills: pa.Table, keys: pa.Array) -> Candidates:
        """Each record keyed by a fill's key and in force on its trade date (a null key, a fill
        with no tier, finds none): the rule reads only those (a fifth of the keyed lines at 10M
        synthetic records)."""
        owner, rows = self._keys.find(keys)
        lines = self._keys.lines.take(rows)
        day = np.asarray(fills["trade_date"].cast(pa.int32()))[owner]
        in_force = (lines["effective_start"] <= day) & (lines["effective_end"] >= day)
        return Candidates(self._index, fills, owner[in_force], rows[in_force], lines[in_force])

    def _answered(
        self, fills: pa.Table, found: Candidates, single: npt.NDArray[np.int64]
    ) -> dict[str, pa.Array]:
        """The answer of each fill one line prices (the candidates at `single`, one a fill), in
        the batch's order, nulls for the others: read in that order, never taken again."""
        owners, lines = found.owner[single], found.lines.take(single)
        line_of = np.full(fills.num_rows, NO_RECORD)  # each fill's price line's row, or none
        line_of[owners] = found.rows[single]
        unpriced = line_of == NO_RECORD
        summary = self._keys.answers(line_of, PRICE_ANSWER_COLUMNS)

        def code(column: str) -> npt.NDArray[np.int64]:
            """Each fill's line's code of a column (0, no value, for a fill not priced)."""
            codes = np.zeros(fills.num_rows, np.int64)
            codes[owners] = lines[column]
            return codes

        unit = self._index.decode("unit", code("unit"))
        confirmed_through = pa.array(code("confirmed_through"), pa.int32(), mask=unpriced)
        confirmed_through = confirmed_through.cast(pa.date32())
        amount = summary["amount"].cast(EXACT)
        quantity = _wide(fills["quantity"])
        per_unit = pc.multiply(quantity, _wide(amount))
        percent = pc.multiply(
            pc.multiply(pc.multiply(quantity, _wide(fills["price"])), _wide(amount)), HUNDREDTH
        )
        wide = percent.type
        fee = pc.round(
            pc.if_else(pc.equal(unit, PERCENT), percent, per_unit.cast(wide)),
            options=ROUNDED,
        )
        return {
            "fee": fee,
            "amount": amount,
            "unit": unit,
            "record_id": summary["record_id"],
            "line_id": summary["line_id"],
            "label": summary["fee_name"],
            "line_tier": self._index.decode("tier", code("tier")),
            "confirmed_through": confirmed_through,
            "presumed": pc.less(confirmed_through, fills["trade_date"]),
            "source_link": summary["source_url"],
        }

    def _several(
        self, count: int, owners: npt.NDArray[np.int64], rows: npt.NDArray[np.int64]
    ) -> pa.Array:
        """The record ids of each fill several lines would price, sorted (null for the rest)."""
        record_ids = self._keys.answers(rows, ("record_id",))["record_id"].to_pylist()
        named: list[list[str] | None] = [None] * count
        for owner, record_id in sorted(zip(owners.tolist(), record_ids, strict=True)):
            named[owner] = [*(named[owner] or []), record_id]
        return pa.array(named, pa.list_(pa.string()))


def _kinds(found: Candidates) -> npt.NDArray[np.int64]:
    """Each candidate's kind for its fill (`OWN_TIER` ... `OTHER_TIER`); -1 for a tier's line
    that prices the fill neither by its tier nor by a code."""
    tier = found.line("tier")
    untiered = tier == 0
    own = ~untiered & (tier == found.given("tier", found.fills["tier"]))
    by_code = found.per_fill(pc.is_valid(found.fills["fee_code"]))
    standard = np.isin(found.line("standard"), found.codes("standard", "true"))
    return np.select(
        [own, ~untiered & by_code, untiered & standard, untiered],
        [OWN_TIER, OTHER_TIER, STANDARD, UNTIERED],
        default=-1,
    )


def _fits(found: Candidates) -> npt.NDArray[np.bool_]:
    """Whether each candidate (in force that day) fits its fill by the rule (`docs/pricing.md`),
    its kind aside: action, participant, penny class, display, tape, price band, and a line a
    fill may pay."""
    fills = found.fills

    def either(column: str, field: str, *also: str) -> npt.NDArray[np.bool_]:
        """The fill gives no value, or the line's is the fill's or one of `also`."""
        line, given = found.line(column), found.given(column, fills[field])
        fits: npt.NDArray[np.bool_] = (given == UNSAID) | (line == given)
        return fits | np.isin(line, found.codes(column, *also))

    participant = found.line("participant")
    given_participant = found.given("participant", pc.coalesce(fills["participant"], "all"))
    tapes = found.line("tapes")
    on_tape = np.isin(tapes, found.codes("tapes", ""))  # a line for every tape
    for letter in TAPES:
        holding = found.codes("tapes", *(text for text in found.index.values("tapes")
                                         if letter in text.split()))  # fmt: skip
        on_tape |= found.per_fill(pc.equal(fills["tape"], letter)) & np.isin(tapes, holding)
    band = found.line("price_band")
    high = found.per_fill(pc.greater_equal(fills["price"], pa.scalar(1, pa.decimal128(18, 8))))
    banded = np.where(
        high,
        (band == 0) | np.isin(band, found.codes("price_band", "at_or_above_1", "any")),
        np.isin(band, found.codes("price_band", "below_1", "any")),
    )
    equity = found.per_fill(pc.equal(fills["fee_type"], "equity"))
    fits: npt.NDArray[np.bool_] = (
        either("action", "action")
        & ((participant == given_participant)
           | np.isin(participant, found.codes("participant", "all")))
        & either("symbol_type", "symbol_type", "both", "not_applicable")
        & (either("display", "display", "any") | (found.line("display") == 0))
        & (found.per_fill(pc.is_null(fills["tape"])) | on_tape)
        & (~equity | banded)
        & found.priceable()
    )  # fmt: skip
    return fits


def _wide(values: pa.Array | pa.ChunkedArray) -> pa.Array:
    """A decimal as a 256-bit one of its precision and scale, so products never overflow."""
    return values.cast(pa.decimal256(values.type.precision, values.type.scale))


def _true(condition: pa.Array | pa.ChunkedArray) -> npt.NDArray[np.bool_]:
    """A condition's values as booleans, null as false."""
    return np.asarray(pc.fill_null(condition, False).to_numpy(zero_copy_only=False), dtype=bool)
