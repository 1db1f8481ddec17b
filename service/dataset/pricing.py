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
(`ingest.price_keys`), the candidates' columns are read from the results index by position, and
the rule is applied to all of them at once as column operations. (10M synthetic records, 1,000
fills: a DuckDB join scanning the two million coded records took 98 ms, reading the candidates'
fields from the serving copy 89 ms more, and the rule as a DuckDB query over the candidates
alone 12 ms, most of it the query's own cost.) The answer's fields come from the record
summary; DuckDB computes the fees in decimal.
"""

from dataclasses import dataclass
from decimal import Decimal
from pathlib import Path
from typing import Final

import numpy as np
import numpy.typing as npt
import pyarrow as pa
import pyarrow.compute as pc

from ingest.layout import PRICE_KEY_SEPARATOR, PRICE_KEYS_FILE, PRICE_POSITIONS_FILE
from ingest.schema import TAPES
from service.dataset.index import ResultsIndex
from service.dataset.records import Records

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

# The columns of a candidate the rule tests, decoded from the results index (the tapes as their
# text: `A C`, and `` for every tape).
TESTED: Final = (
    "action", "participant", "symbol_type", "display", "price_band", "tapes", "tier", "standard",
)  # fmt: skip

# The fee of each priced fill, signed as the amount (negative is a rebate to the member):
# quantity times amount, or quantity times price times amount / 100 for a percentage of value,
# in decimal arithmetic wide enough for every bound a fill's numbers have, then rounded to 1e-8
# USD, a half away from zero. The summary holds an amount as a double; it has at most 8 places,
# so its decimal of 8 places is the published amount.
EXACT: Final = pa.decimal128(20, 8)
HUNDREDTH: Final = pa.scalar(Decimal("0.01"), pa.decimal256(3, 2))
ROUNDED: Final = pc.RoundOptions(ndigits=8, round_mode="half_towards_infinity")


def _wide(values: pa.Array | pa.ChunkedArray) -> pa.Array:
    """A decimal as a 256-bit one of its precision and scale, so products never overflow."""
    return values.cast(pa.decimal256(values.type.precision, values.type.scale))

# What an answer prints of the line that priced a fill, from the record summary.
ANSWERED: Final = ("record_id", "line_id", "fee_name", "amount", "source_url")

# A fill's kinds of line, best last: another tier's line (only through a code), a line without
# a tier, a standard line, the fill's own tier's line.
OTHER_TIER, UNTIERED, STANDARD, OWN_TIER = range(4)


@dataclass(frozen=True)
class Candidates:
    """The records some fills' keys find: for each, the fill (its row in the batch), its
    position, and the columns the rule tests."""

    owner: npt.NDArray[np.int64]
    positions: npt.NDArray[np.int64]
    columns: dict[str, pa.Array]

    def of(self, fills: pa.Table, name: str) -> pa.Array:
        """Each candidate's fill's value of `name`."""
        return fills[name].take(pa.array(self.owner))


class Pricing:
    """The engine over one version: its price keys, memory-mapped, and its results index and
    record summary, read by position."""

    def __init__(self, directory: Path, index: ResultsIndex, summary: Records):
        # Plain views of the mapped files, as `service.dataset.changes` keeps its own.
        self._keys = np.asarray(np.load(directory / PRICE_KEYS_FILE, mmap_mode="r"))
        self._positions = np.asarray(np.load(directory / PRICE_POSITIONS_FILE, mmap_mode="r"))
        self._index = index
        self._summary = summary

    def price(self, fills: pa.Table) -> pa.Table:
        """One row per fill of `fills` (`FILLS_SCHEMA`), in order: how many lines it may pay
        (`lines`), whether its tier is one of its venue's that day (`tier_known`), and when
        one line, the fee and the line (`ANSWERED`); when several, their record ids
        (`candidates`)."""
        fills = fills.cast(FILLS_SCHEMA).combine_chunks()
        count = fills.num_rows
        kind = pc.if_else(pc.is_valid(fills["fee_code"]), "C", "A")
        found = self._candidates(_key(fills, kind, pc.coalesce(fills["fee_code"], fills["action"])))
        tiered = self._candidates(_key(fills, "T", fills["tier"]), ())
        tier_known = np.asarray(pc.is_null(fills["tier"]).to_numpy(zero_copy_only=False))
        tier_known[tiered.owner[_in_force(tiered, fills)]] = True
        kinds = np.asarray(_kinds(found, fills))
        fit = _fits(found, fills) & (kinds >= 0)
        best = np.full(count, -1)
        np.maximum.at(best, found.owner[fit], kinds[fit])
        chosen = fit & (kinds == best[found.owner])
        lines = np.where(tier_known, np.bincount(found.owner[chosen], minlength=count), 0)
        owners, positions = found.owner[chosen], found.positions[chosen]
        single = lines[owners] == 1
        answered = self._answered(fills, owners[single], positions[single])
        several = lines[owners] > 1
        return pa.table(
            {
                "fill": fills["fill"],
                "lines": lines,
                "tier_known": tier_known,
                **answered,
                "candidates": self._several(count, owners[several], positions[several]),
            }
        )

    def _candidates(self, keys: pa.Array, coded: tuple[str, ...] = TESTED) -> Candidates:
        """Each record keyed by a fill's key (a null key, a fill with no tier, finds none),
        with its `coded` columns and its period."""
        sought = np.array(
            [b"" if key is None else key.encode() for key in keys.to_pylist()], dtype=np.bytes_
        )
        # A key longer than every key written names no record; the rest are looked up as the
        # keys' own type (a longer type would not compare with them).
        known = (np.char.str_len(sought) > 0) & (np.char.str_len(sought) <= self._keys.itemsize)
        wanted = np.where(known, sought, b"").astype(self._keys.dtype)
        first = np.searchsorted(self._keys, wanted, side="left")
        counts = np.where(known, np.searchsorted(self._keys, wanted, side="right") - first, 0)
        # Each fill's run of keys, one after another: its first key, then the next ones.
        at = np.repeat(first - np.cumsum(counts) + counts, counts) + np.arange(counts.sum())
        positions = np.asarray(self._positions[at], dtype=np.int64)
        columns = self._index.decoded(positions, coded)
        return Candidates(np.repeat(np.arange(len(sought)), counts), positions, columns)

    def _answered(
        self, fills: pa.Table, owners: npt.NDArray[np.int64], positions: npt.NDArray[np.int64]
    ) -> dict[str, pa.Array]:
        """The answer of each fill one line prices (`owners`, their lines at `positions`), in
        the batch's order, nulls for the others."""
        summary = self._summary.table(positions, ("unit", "tier"), ANSWERED)
        amount = summary["amount"].cast(EXACT)
        quantity = _wide(fills["quantity"].take(pa.array(owners)))
        per_unit = pc.multiply(quantity, _wide(amount))
        percent = pc.multiply(
            pc.multiply(pc.multiply(quantity, _wide(fills["price"].take(pa.array(owners)))),
                        _wide(amount)),
            HUNDREDTH,
        )  # fmt: skip
        wide = percent.type
        fee = pc.round(
            pc.if_else(pc.equal(summary["unit"], PERCENT), percent, per_unit.cast(wide)),
            options=ROUNDED,
        )
        day = fills["trade_date"].take(pa.array(owners))
        columns = {
            "fee": fee,
            "amount": amount,
            "unit": summary["unit"],
            "record_id": summary["record_id"],
            "line_id": summary["line_id"],
            "label": summary["fee_name"],
            "line_tier": summary["tier"],
            "confirmed_through": summary["confirmed_through"],
            "presumed": pc.less(summary["confirmed_through"], day),
            "source_link": summary["source_url"],
        }
        place = np.full(fills.num_rows, -1)
        place[owners] = np.arange(len(owners))
        spread = pa.array(place, mask=place < 0)
        return {name: values.take(spread) for name, values in columns.items()}

    def _several(
        self, count: int, owners: npt.NDArray[np.int64], positions: npt.NDArray[np.int64]
    ) -> pa.Array:
        """The record ids of each fill several lines would price, sorted (null for the rest)."""
        record_ids = self._summary.table(positions, (), ("record_id",))["record_id"].to_pylist()
        named: list[list[str] | None] = [None] * count
        for owner, record_id in sorted(zip(owners.tolist(), record_ids, strict=True)):
            named[owner] = [*(named[owner] or []), record_id]
        return pa.array(named, pa.list_(pa.string()))


def _key(fills: pa.Table, kind: str | pa.Array, value: pa.Array) -> pa.Array:
    """Each fill's price key of a kind (null where the value is), as the ingest writes them."""
    return pc.binary_join_element_wise(
        kind, fills["exchange"], fills["fee_type"], value, PRICE_KEY_SEPARATOR
    )


def _in_force(found: Candidates, fills: pa.Table) -> npt.NDArray[np.bool_]:
    """Whether each candidate is in force on its fill's trade date."""
    day = found.of(fills, "trade_date")
    started = pc.less_equal(found.columns["effective_start"], day)
    not_ended = pc.or_kleene(
        pc.is_null(found.columns["effective_end"]),
        pc.greater_equal(found.columns["effective_end"], day),
    )
    return _true(pc.and_kleene(started, not_ended))


def _kinds(found: Candidates, fills: pa.Table) -> pa.Array:
    """Each candidate's kind for its fill (`OWN_TIER` ... `OTHER_TIER`); -1 for a tier's line
    that prices the fill neither by its tier nor by a code."""
    tier = found.columns["tier"]
    own = _true(pc.equal(tier, found.of(fills, "tier")))
    by_code = _true(pc.is_valid(found.of(fills, "fee_code")))
    standard = _true(found.columns["standard"])
    untiered = _true(pc.is_null(tier))
    return np.select(
        [~untiered & own, ~untiered & by_code, untiered & standard, untiered],
        [OWN_TIER, OTHER_TIER, STANDARD, UNTIERED],
        default=-1,
    )


def _fits(found: Candidates, fills: pa.Table) -> npt.NDArray[np.bool_]:
    """Whether each candidate fits its fill by the rule (`docs/pricing.md`), its kind aside:
    action, participant, penny class, display, tape, price band, and in force that day."""
    line = found.columns

    def unsaid(name: str) -> npt.NDArray[np.bool_]:
        return _true(pc.is_null(found.of(fills, name)))

    def same(column: str, name: str) -> npt.NDArray[np.bool_]:
        return _true(pc.equal(line[column], found.of(fills, name)))

    def among(column: str, *values: str) -> npt.NDArray[np.bool_]:
        return _true(pc.is_in(line[column], pa.array(values, pa.string())))

    participant = pc.coalesce(found.of(fills, "participant"), "all")
    tape = found.of(fills, "tape")
    on_tape = np.zeros(len(found.positions), dtype=bool)
    for letter in TAPES:  # a line's tapes are single letters: its text holds each it is for
        on_tape |= _true(pc.equal(tape, letter)) & _true(pc.match_substring(line["tapes"], letter))
    high = _true(pc.greater_equal(found.of(fills, "price"), pa.scalar(1, pa.decimal128(18, 8))))
    banded = np.where(
        high,
        _true(pc.is_in(pc.coalesce(line["price_band"], "at_or_above_1"),
                       pa.array(["at_or_above_1", "any"]))),
        among("price_band", "below_1", "any"),
    )  # fmt: skip
    equity = _true(pc.equal(found.of(fills, "fee_type"), "equity"))
    return (
        (unsaid("action") | same("action", "action"))
        & (among("participant", "all") | _true(pc.equal(line["participant"], participant)))
        & (unsaid("symbol_type") | among("symbol_type", "both", "not_applicable")
           | same("symbol_type", "symbol_type"))
        & (unsaid("display") | _true(pc.is_null(line["display"])) | among("display", "any")
           | same("display", "display"))
        & (unsaid("tape") | among("tapes", "") | on_tape)
        & (~equity | banded)
        & _in_force(found, fills)
    )  # fmt: skip


def _true(condition: pa.Array | pa.ChunkedArray) -> npt.NDArray[np.bool_]:
    """A condition's values as booleans, null as false."""
    return np.asarray(pc.fill_null(condition, False).to_numpy(zero_copy_only=False), dtype=bool)
