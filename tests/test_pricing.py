"""Pricing executions (`service.dataset.pricing`, `service.endpoints.fills`, `fees price`):
fills priced against lines whose fees are worked out by hand here, every kind of refused fill,
the engine checked against a plain per-fill lookup over the Parquet, and the command answering
as the engine does."""

import csv
import io
import json
import random
import subprocess
import sys
import threading
from datetime import date, timedelta
from decimal import ROUND_HALF_UP, Decimal
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import duckdb
import numpy as np
import pyarrow as pa
import pyarrow.csv as pacsv
import pytest

from ingest import price_keys
from ingest.layout import current_version_dir
from ingest.pipeline import IngestResult, run_ingest
from service import price
from service.dataset.mapped import MappedTable, mapped_file
from service.dataset.version import Dataset
from service.endpoints import fills
from service.settings import Settings
from tests.conftest import REGISTRY, Indexed, fee_row, write_raw

ROOT = Path(__file__).parent.parent
CBOE = "https://example.test/cboe-options-fee-schedule"
MEMX = "https://example.test/memx-fee-schedule"


def standard(**values: str) -> dict[str, str]:
    return fee_row(standard="true", **values)


def memx(**values: str) -> dict[str, str]:
    return fee_row(exchange="memx", effective_start="2023-01-02",
                   source_document="MEMX fee schedule", source_url=MEMX, **values)  # fmt: skip


def option(participant: str, symbol_type: str, amount: str, **values: str) -> dict[str, str]:
    return standard(
        exchange="cboe", fee_type="option", action="take", participant=participant,
        symbol_type=symbol_type, fee_name=f"{participant} {symbol_type} take",
        fee_amount=amount, fee_basis="per contract", effective_start="2024-01-02",
        source_document="Cboe Options fee schedule", source_url=CBOE, **values,
    )  # fmt: skip


# NYSE's standard make rebate: $0.0020 to 2023-12-29, nothing in January 2024 (a gap), then
# $0.0016 from 2024-02-01; its take fee and routing fee; MEMX's only standard take line is a
# sub-dollar percentage of value; its adding lines by fee code: displayed (standard, and below
# $1.00 a percentage), non-displayed (standard too), a tier's, and a code priced per tape;
# Cboe's option take fees per participant and penny class.
ROWS = [
    standard(fee_name="Base add", fee_amount="($0.0020)", effective_start="2023-01-02",
             effective_end="2023-12-29"),
    standard(fee_name="Base add", fee_amount="($0.0016)", effective_start="2024-02-01"),
    standard(fee_name="Base take", action="take", fee_amount="$0.0030",
             effective_start="2023-01-02"),
    standard(fee_name="Routing", action="routed", fee_amount="$0.0035",
             effective_start="2023-01-02"),
    fee_row(fee_name="Tier 1 add", fee_amount="($0.0032)", effective_start="2023-01-02"),
    memx(fee_name="Sub-dollar take", action="take", fee_amount="0.30%",
         fee_basis="of total dollar value", price_band="below_1", standard="true"),
    memx(fee_name="Fee code B, D or J: Added displayed volume", fee_amount="($0.0020)",
         fee_codes="B D J", display="displayed", price_band="at_or_above_1", standard="true"),
    memx(fee_name="Fee code B, D or J: below $1.00", fee_amount="(0.10%)",
         fee_basis="of total dollar value", fee_codes="B D J", display="displayed",
         price_band="below_1", standard="true"),
    memx(fee_name="Fee code H: Added non-displayed volume", fee_amount="($0.0010)",
         fee_codes="H", display="non_displayed", standard="true"),
    memx(fee_name="Fee code B1, D1 or J1: Added displayed volume, Liquidity Provision Tier 1",
         fee_amount="($0.0032)", fee_codes="B1 D1 J1", display="displayed",
         tier="Liquidity Provision Tier 1", volume_tier="Tier 1: ADAV >= 0.20% of TCV"),
    memx(fee_name="Fee code V: Tape B", fee_amount="($0.0025)", fee_codes="V", tapes="B"),
    memx(fee_name="Fee code V: Tapes A and C", fee_amount="($0.0021)", fee_codes="V",
         tapes="A C"),
    option("customer", "penny", "$0.45"),
    option("customer", "non_penny", "$0.85"),
    option("market_maker", "penny", "$0.23"),
]  # fmt: skip


@pytest.fixture(scope="module")
def priced_version(tmp_path_factory: pytest.TempPathFactory) -> IngestResult:
    root = tmp_path_factory.mktemp("pricing")
    write_raw(root / "raw" / "fees.csv", ROWS)
    return run_ingest(root / "raw", root / "data", registry=REGISTRY)


@pytest.fixture(scope="module")
def dataset(priced_version: IngestResult) -> Any:
    opened = Dataset(Path(priced_version.version_dir), Settings())
    yield opened
    opened.close()


def fill(exchange: str, day: str, quantity: str, price: str, action: str, **more: str) -> dict:
    return {"exchange_name": exchange, "trade_date": day, "quantity": quantity, "price": price,
            "fee_action": action, **more}  # fmt: skip


def answers(dataset: Dataset, given: list[dict[str, Any]]) -> list[dict[str, Any]]:
    checked = fills.checked(fills.from_mappings(given), dataset, lambda code: True)
    answered: list[dict[str, Any]] = fills.priced(checked, dataset).to_pylist()
    return answered


# Each fill and its fee (USD, negative: a rebate to the member), worked out by hand.
WORKED = [
    ("a make", fill("nyse", "2023-06-01", "1000", "25", "make"), -2.0),  # 1,000 x -0.0020
    ("a take", fill("NYSE", "2023-06-01", "500", "25", "take"), 1.5),  # 500 x 0.0030
    ("a route", fill("nyse", "2023-06-01", "200", "25", "routed"), 0.7),  # 200 x 0.0035
    ("the last day of a rate", fill("nyse", "2023-12-29", "1000", "25", "make"), -2.0),
    ("the first day of a new rate", fill("nyse", "2024-02-01", "1000", "25", "make"), -1.6),
    # 10,000 shares at $0.50 = $5,000 of value; 0.30% of it.
    ("a sub-dollar fill", fill("memx", "2024-03-01", "10000", "0.50", "take"), 15.0),
    ("an option fill by participant",
     fill("cboe", "2024-03-01", "10", "1.20", "take", fee_participant="customer",
          symbol_type="penny"), 4.5),  # 10 contracts x 0.45
    ("another participant",
     fill("cboe", "2024-03-01", "20", "1.20", "take", fee_participant="market_maker",
          symbol_type="penny"), 4.6),  # 20 x 0.23
    ("a fractional quantity", fill("nyse", "2023-06-01", "0.5", "25", "take"), 0.0015),
    ("a fee code", fill("memx", "2024-03-01", "1000", "25", "", fee_code="D"), -2.0),
    ("a fee code and its action", fill("memx", "2024-03-01", "1000", "25", "make",
                                       fee_code="H"), -1.0),
    # $5,000 of value at 0.10%: the code's sub-dollar line
    ("a fee code below $1.00", fill("memx", "2024-03-01", "10000", "0.50", "", fee_code="B"),
     -5.0),
    ("a display", fill("memx", "2024-03-01", "1000", "25", "make", display="non_displayed"),
     -1.0),
    ("a tier", fill("memx", "2024-03-01", "1000", "25", "make",
                    tier="Liquidity Provision Tier 1"), -3.2),
    ("a tier's fee code", fill("memx", "2024-03-01", "1000", "25", "", fee_code="J1"), -3.2),
    ("a tape", fill("memx", "2024-03-01", "1000", "25", "", fee_code="V", tape="C"), -2.1),
]  # fmt: skip


@pytest.mark.parametrize(("name", "given", "fee"), WORKED, ids=[case[0] for case in WORKED])
def test_a_fill_pays_its_standard_line_as_worked_out_by_hand(
    dataset: Dataset, name: str, given: dict[str, str], fee: float
) -> None:
    [answer] = answers(dataset, [given])
    assert answer["error"] is None, answer
    assert answer["fee"] == pytest.approx(fee, abs=1e-12)
    assert answer["record_id"] and answer["line_id"] and answer["source_link"]
    assert answer["label"] in {row["fee_name"] for row in ROWS}


def test_an_answer_names_its_line_its_unit_and_whether_it_is_presumed(dataset: Dataset) -> None:
    [make, later] = answers(
        dataset,
        [fill("nyse", "2023-06-01", "1000", "25", "make"),
         fill("nyse", "2026-01-05", "1000", "25", "make")],
    )  # fmt: skip
    assert (make["amount"], make["unit"], make["label"]) == (-0.002, "per_share", "Base add")
    # The 2023 rate's own end confirms it through 2023-12-29; the 2024 rate is shown only from
    # its start, so a fill of 2026 rests on it, presumed.
    assert (make["confirmed_through"], make["presumed"]) == ("2023-12-29", False)
    assert (later["confirmed_through"], later["presumed"]) == ("2024-02-01", True)
    assert later["line_id"] == make["line_id"] != later["record_id"]


REFUSED = [
    ("a date in a gap", fill("nyse", "2024-01-15", "100", "25", "make"),
     "no standard line of this venue for this fill is in force on 2024-01-15"),
    ("before any line", fill("nyse", "2020-01-02", "100", "25", "make"),
     "no standard line of this venue for this fill is in force on 2020-01-02"),
    ("an unknown venue", fill("nowhere", "2024-03-01", "100", "25", "make"),
     "unknown exchange: nowhere"),
    ("a date that does not exist", fill("nyse", "2024-02-30", "100", "25", "make"),
     "trade_date must be a real date in the form YYYY-MM-DD"),
    ("a negative quantity", fill("nyse", "2024-03-01", "-5", "25", "make"),
     "quantity must be a number more than 0"),
    ("a quantity that is not a number", fill("nyse", "2024-03-01", "ten", "25", "make"),
     "quantity must be a number more than 0"),
    ("too many places", fill("nyse", "2024-03-01", "1.0000001", "25", "make"),
     "quantity must be below 1,000,000,000,000 with at most 6 decimal places"),
    ("an unknown action", fill("nyse", "2024-03-01", "100", "25", "add"),
     "fee_action must be one of: make, open, other, routed, take"),
    ("a missing field", {"exchange_name": "nyse", "quantity": "1"},
     "missing trade_date, price, fee_action or fee_code"),
    ("neither an action nor a code", fill("memx", "2024-03-01", "100", "25", ""),
     "missing fee_action or fee_code"),
    ("an unknown fee code", fill("memx", "2024-03-01", "100", "25", "", fee_code="ZZ"),
     "no line of this venue with fee code ZZ is in force for this fill on 2024-03-01"),
    ("a fee code that cannot be one", fill("memx", "2024-03-01", "100", "25", "",
                                           fee_code="B-1"),
     "fee_code must be letters and digits, at most 8"),
    ("a tier the venue does not have", fill("memx", "2024-03-01", "100", "25", "make",
                                            tier="Tier 9"),
     'no line of this venue is in tier "Tier 9" on 2024-03-01'),
    ("a sub-dollar fill with no line for its band",
     fill("nyse", "2023-06-01", "100", "0.5", "make"),
     "no standard line of this venue for this fill is in force on 2023-06-01"),
    ("an unknown tape", fill("memx", "2024-03-01", "100", "25", "", fee_code="V", tape="D"),
     "tape must be one of: A, B, C"),
    ("an unknown display", fill("memx", "2024-03-01", "100", "25", "make", display="lit"),
     "display must be one of: displayed, non_displayed, midpoint"),
    ("an option fill without its participant", fill("cboe", "2024-03-01", "10", "1", "take"),
     "an option fill needs fee_participant"),
]  # fmt: skip


@pytest.mark.parametrize(("name", "given", "error"), REFUSED, ids=[case[0] for case in REFUSED])
def test_a_fill_that_cannot_be_priced_says_why_and_pays_nothing(
    dataset: Dataset, name: str, given: dict[str, str], error: str
) -> None:
    [answer] = answers(dataset, [given])
    assert answer["error"] == error
    assert {key: value for key, value in answer.items() if key != "error"} == dict.fromkeys(
        fills.ANSWER_FIELDS[:-1]
    )


def test_an_ambiguous_fill_names_its_candidates(dataset: Dataset) -> None:
    """Cboe prices penny and non-penny classes apart: a fill that names neither may pay either."""
    [answer] = answers(
        dataset, [fill("cboe", "2024-03-01", "10", "1", "take", fee_participant="customer")]
    )
    penny, non_penny = (
        answers(dataset, [fill("cboe", "2024-03-01", "10", "1", "take",
                               fee_participant="customer", symbol_type=kind)])[0]["record_id"]
        for kind in ("penny", "non_penny")
    )  # fmt: skip
    ids = ", ".join(sorted([penny, non_penny]))
    assert answer["error"] == (
        f"2 lines apply (record ids {ids}): give fee_code, display, symbol_type, fee_participant"
        " or tape to choose"
    )


@pytest.mark.parametrize(
    ("given", "choices"),
    [
        # MEMX's standard adding lines are one displayed and one not.
        (fill("memx", "2024-03-01", "10", "25", "make"),
         [{"display": "displayed"}, {"display": "non_displayed"}]),
        # Its code V is priced per tape.
        (fill("memx", "2024-03-01", "10", "25", "", fee_code="V"),
         [{"tape": "B"}, {"tape": "A"}]),
    ],
)  # fmt: skip
def test_a_fill_several_lines_fit_names_them_until_it_says_which(
    dataset: Dataset, given: dict[str, str], choices: list[dict[str, str]]
) -> None:
    [answer] = answers(dataset, [given])
    chosen = sorted(answers(dataset, [given | choice])[0]["record_id"] for choice in choices)
    assert answer["error"].startswith(f"2 lines apply (record ids {', '.join(chosen)}): ")


def test_a_batchs_tiers_price_the_fills_that_name_none(dataset: Dataset) -> None:
    given = [
        fill("memx", "2024-03-01", "1000", "25", "make", display="displayed"),
        fill("memx", "2024-03-01", "1000", "25", "make", display="displayed", tier="none such"),
        fill("memx", "2024-03-01", "1000", "25", "routed"),  # neither a tier nor a standard line
        fill("nyse", "2023-06-01", "1000", "25", "make"),  # another venue: its standard line
    ]
    tiers, unknown = fills.tiers_of(
        {"MEMX": "Liquidity Provision Tier 1", "nowhere": "Tier 1"}, dataset, lambda code: True
    )
    assert (tiers, unknown) == ({"memx": "Liquidity Provision Tier 1"}, ["nowhere"])
    checked = fills.checked(fills.from_mappings(given), dataset, lambda code: True, tiers)
    priced = fills.priced(checked, dataset).to_pylist()
    assert [(answer["fee"], answer["line_tier"]) for answer in priced] == [
        (-3.2, "Liquidity Provision Tier 1"), (None, None), (None, None), (-2.0, None)
    ]  # fmt: skip
    assert priced[1]["error"] == 'no line of this venue is in tier "none such" on 2024-03-01'
    assert priced[2]["error"] == (
        "no standard line of this venue for this fill is in force on 2024-03-01"
    )


def test_a_bad_fill_never_fails_the_others_and_answers_keep_the_fills_order(
    dataset: Dataset,
) -> None:
    given = [WORKED[0][1], REFUSED[2][1], WORKED[1][1], REFUSED[0][1], WORKED[5][1]]
    priced = answers(dataset, given)
    assert [answer["fee"] for answer in priced] == [-2.0, None, 1.5, None, 15.0]
    assert [answer["error"] is None for answer in priced] == [True, False, True, False, True]


def test_a_venue_outside_the_callers_scope_is_unknown_like_one_that_does_not_exist(
    dataset: Dataset,
) -> None:
    given = [
        fill("nyse", "2023-06-01", "1", "1", "make"),
        fill("zz", "2023-06-01", "1", "1", "make"),
    ]
    checked = fills.checked(fills.from_mappings(given), dataset, lambda code: code != "nyse")
    assert checked.errors.to_pylist() == ["unknown exchange: nyse", "unknown exchange: zz"]


# ---- the engine against a plain lookup, one fill at a time, over the Parquet files

LOOKUP = """
SELECT record_id, amount, unit,
    CASE WHEN tier IS NOT NULL THEN CASE WHEN tier = $tier THEN 3 ELSE 0 END
        WHEN standard THEN 2 ELSE 1 END AS kind
FROM fees
WHERE exchange = $exchange AND fee_type = $fee_type
    AND fee_category = 'fees_and_rebates' AND amount IS NOT NULL
    AND unit IN ('per_share', 'per_contract', 'percent_of_value')
    AND CASE WHEN $code IS NULL THEN action = $action AND (standard OR tier = $tier)
        ELSE list_contains(fee_codes, $code) AND ($action IS NULL OR action = $action) END
    AND (tier IS NULL OR tier = $tier OR $code IS NOT NULL)
    AND (participant = 'all' OR participant = coalesce($participant, 'all'))
    AND ($symbol_type IS NULL OR symbol_type IN ('both', 'not_applicable', $symbol_type))
    AND ($display IS NULL OR display IS NULL OR display IN ($display, 'any'))
    AND ($fee_type <> 'equity' OR CASE WHEN $price >= 1
        THEN coalesce(price_band, 'at_or_above_1') IN ('at_or_above_1', 'any')
        ELSE price_band IN ('below_1', 'any') END)
    AND effective_start <= $day AND coalesce(effective_end, DATE '9999-12-31') >= $day
"""
TIER_KNOWN = """
SELECT count(*) > 0
FROM fees
WHERE exchange = $exchange AND fee_type = $fee_type AND tier = $tier
    AND fee_category = 'fees_and_rebates' AND amount IS NOT NULL
    AND effective_start <= $day AND coalesce(effective_end, DATE '9999-12-31') >= $day
"""


def plain_fees(version: Path) -> duckdb.DuckDBPyConnection:
    """A connection holding the version's Parquet rows as they are, as the table `fees` (read
    once: reading the files again for each fill took 40 ms of it)."""
    files = [str(path) for path in (version / "fees").rglob("*.parquet")]
    con = duckdb.connect()
    con.execute(
        "CREATE TABLE fees AS SELECT * FROM read_parquet($files, hive_partitioning = true, "
        "hive_types = {'exchange': VARCHAR})",
        {"files": files},
    )
    return con


def looked_up(
    con: duckdb.DuckDBPyConnection, given: dict[str, Any]
) -> tuple[str | None, float | None]:
    """The record and fee the rule gives one fill, found by the plainest query over `fees`
    (`plain_fees`): (None, None) when no line or several of the best kind apply (the fill's
    tier's, else a standard one, else another without a tier, else another tier's)."""
    parameters = {
        "exchange": given["exchange_name"], "fee_type": given["fee_type"],
        "action": given.get("fee_action"), "participant": given.get("fee_participant"),
        "symbol_type": given.get("symbol_type"), "day": date.fromisoformat(given["trade_date"]),
        "code": given.get("fee_code"), "tier": given.get("tier"), "display": None,
        "price": Decimal(given["price"]),
    }  # fmt: skip
    known = {key: parameters[key] for key in ("exchange", "fee_type", "tier", "day")}
    if given.get("tier") and not con.execute(TIER_KNOWN, known).fetchone()[0]:
        return None, None
    rows = con.execute(LOOKUP, parameters).fetchall()
    best = max((kind for *_, kind in rows), default=0)
    rows = [row for row in rows if row[3] == best]
    if len(rows) != 1:
        return None, None
    record_id, amount, unit, *_ = rows[0]
    value = Decimal(given["quantity"]) * (
        Decimal(given["price"]) / 100 if unit == "percent_of_value" else 1
    )
    fee = (value * amount).quantize(Decimal("1e-8"), rounding=ROUND_HALF_UP)  # half away from 0
    return str(record_id), float(fee)


CODED = """
SELECT exchange, fee_type, unnest(fee_codes) AS code, effective_start, tier
FROM read_parquet($files, hive_partitioning = true, hive_types = {'exchange': VARCHAR})
WHERE len(fee_codes) > 0 AND fee_category = 'fees_and_rebates'
ORDER BY ALL
"""


def random_fill(rng: random.Random, codes: list[str], coded: list[tuple[Any, ...]]) -> dict:
    fee_type = rng.choice(["equity", "option"])
    day = date(2019, 1, 1) + timedelta(days=rng.randrange(2_500))
    given = {
        # NYSE half the time and more: its standard lines are the only ones the version has.
        "exchange_name": "nyse" if rng.random() < 0.6 else rng.choice(codes),
        "trade_date": day.isoformat(),
        "quantity": str(rng.choice([1, 100, 2_500, 12_345])),
        "price": rng.choice(["0.35", "1", "19.99", "250.5"]), "fee_type": fee_type,
        "fee_action": rng.choice(["make", "take", "routed"]),
        "fee_participant": rng.choice(["all", "customer", "market_maker", "firm"]),
    }  # fmt: skip
    if rng.random() < 0.5:
        given["symbol_type"] = rng.choice(["penny", "non_penny"])
    if rng.random() < 0.3:  # a code of the version, on a day from its record's start
        exchange, fee_type, code, start, tier = rng.choice(coded)
        del given["fee_action"]
        given |= {"exchange_name": exchange, "fee_type": fee_type, "fee_code": code,
                  "trade_date": (start + timedelta(days=rng.randrange(60))).isoformat()}
        if tier and rng.random() < 0.5:
            given["tier"] = tier
    elif rng.random() < 0.2:  # the synthetic tiers are Tier 1 to Tier 4
        given["tier"] = f"Tier {rng.randrange(1, 6)}"
    return given


@pytest.mark.parametrize("seed", range(3))
def test_the_engine_prices_each_fill_as_a_plain_lookup_finds_it(
    indexed: Indexed, seed: int
) -> None:
    """Over the synthetic version with NYSE's standard rates (`tests/conftest.py`), fills drawn
    at random on every venue, by action or by one of the version's fee codes, some in a tier:
    one query for all of them answers what a query per fill does."""
    rng = random.Random(seed)
    version = indexed.dataset.version_dir
    files = [str(path) for path in (version / "fees").rglob("*.parquet")]
    coded = duckdb.connect().execute(CODED, {"files": files}).fetchall()
    given = [random_fill(rng, indexed.venues, coded) for _ in range(300)]
    priced = answers(indexed.dataset, given)
    plain = plain_fees(version)
    expected = [looked_up(plain, one) for one in given]
    assert [(answer["record_id"], answer["fee"]) for answer in priced] == expected
    assert sum(record is not None for record, _ in expected) > 30
    coded_priced = [
        one
        for one, (record, _) in zip(given, expected, strict=True)
        if record and "fee_code" in one
    ]
    tier_priced = [answer for answer in priced if answer["line_tier"]]
    assert len(coded_priced) > 10 and len(tier_priced) >= 2


# ---- `fees price`: the same answers, as CSV


def test_the_command_writes_each_fill_with_the_engines_answer(
    dataset: Dataset, priced_version: IngestResult, tmp_path: Path
) -> None:
    given = [case[1] for case in WORKED] + [case[1] for case in REFUSED]
    columns = list(fills.FIELDS)
    source = tmp_path / "fills.csv"
    with source.open("w", newline="", encoding="utf-8") as handle:
        writer = csv.DictWriter(handle, fieldnames=columns)
        writer.writeheader()
        writer.writerows({name: one.get(name, "") for name in columns} for one in given)
    out = tmp_path / "priced.csv"
    data = Path(priced_version.version_dir).parent.parent  # the data directory it was published to
    assert current_version_dir(data) == Path(priced_version.version_dir)
    done = subprocess.run(
        [sys.executable, "-m", "service", "price", str(source), "--out", str(out),
         "--data", str(data)],
        cwd=ROOT, capture_output=True, text=True,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    with out.open(newline="", encoding="utf-8") as handle:
        written = list(csv.DictReader(handle))
    assert [list(row)[: len(columns)] for row in written[:1]] == [columns]
    expected = answers(dataset, [{name: one.get(name, "") for name in columns} for one in given])
    for row, answer in zip(written, expected, strict=True):
        assert {name: row[name] for name in fills.ANSWER_FIELDS} == {
            name: "" if value is None else str(value).lower() if isinstance(value, bool)
            else f"{value:g}" if isinstance(value, float) else str(value)
            for name, value in answer.items()
        }  # fmt: skip


def test_the_command_prices_fills_in_the_tiers_it_is_given(
    priced_version: IngestResult, tmp_path: Path
) -> None:
    source = tmp_path / "fills.csv"
    with source.open("w", newline="", encoding="utf-8") as handle:
        writer = csv.DictWriter(handle, fieldnames=list(fills.FIELDS), restval="")
        writer.writeheader()
        writer.writerow(fill("memx", "2024-03-01", "1000", "25", "make", display="displayed"))
    data = Path(priced_version.version_dir).parent.parent

    def price(*tiers: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "service", "price", str(source), "--data", str(data),
             "--tiers", *tiers],
            cwd=ROOT, capture_output=True, text=True,
        )  # fmt: skip

    done = price("memx=Liquidity Provision Tier 1")
    assert done.returncode == 0, done.stderr
    [row] = list(csv.DictReader(done.stdout.splitlines()))
    assert (row["fee"], row["line_tier"]) == ("-3.2", "Liquidity Provision Tier 1")
    refused = price("nowhere=Tier 1")
    assert refused.returncode == 2
    assert "--tiers names unknown venues: nowhere" in refused.stderr
    assert price("memx").returncode == 2  # not VENUE=TIER


def test_the_command_writes_the_same_bytes_whatever_its_blocks(
    dataset: Dataset, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Blocks priced at once (`fills.PRICERS`) are written in the file's order: a file read in
    blocks of a few fills each is written as when it is read whole."""
    given = [case[1] for case in WORKED] + [case[1] for case in REFUSED]
    source = tmp_path / "fills.csv"
    with source.open("w", newline="", encoding="utf-8") as handle:
        writer = csv.DictWriter(handle, fieldnames=list(fills.FIELDS), restval="")
        writer.writeheader()
        writer.writerows(given * 20)

    def written(block_bytes: int) -> bytes:
        monkeypatch.setattr(price, "BLOCK_BYTES", block_bytes)
        out = io.BytesIO()
        price._price_file(source, out, dataset, {}, show=False)
        return out.getvalue()

    whole = written(2**20)
    assert whole.count(b"\n") == 1 + 20 * len(given)
    blocks = pacsv.open_csv(source, read_options=pacsv.ReadOptions(block_size=1_024))
    assert sum(1 for _ in blocks) > 2 * fills.PRICERS
    assert written(1_024) == whole


def test_blocks_are_worked_at_once_and_given_back_in_order() -> None:
    """`fills.in_order`: the second block's work starts before the first's ends (the first
    waits for it), results come in the blocks' order, and a failure at its turn."""
    second_started = threading.Event()

    def work(block: int) -> int:
        if block == 0:
            assert second_started.wait(timeout=10), "the blocks were worked one at a time"
        if block == 1:
            second_started.set()
        if block == 3:
            raise ValueError("block 3")
        return block * 10

    results = fills.in_order(work, range(5))
    assert [next(results) for _ in range(3)] == [0, 10, 20]
    with pytest.raises(ValueError, match="block 3"):
        next(results)


def test_the_command_refuses_a_directory_with_no_version(tmp_path: Path) -> None:
    source = tmp_path / "fills.csv"
    source.write_text(",".join(fills.FIELDS) + "\n", encoding="utf-8")
    done = subprocess.run(
        [sys.executable, "-m", "service", "price", str(source), "--data", str(tmp_path)],
        cwd=ROOT, capture_output=True, text=True,
    )  # fmt: skip
    assert done.returncode == 1
    assert "no current version" in done.stderr


def test_make_price_prints_the_fills_priced(priced_version: IngestResult, tmp_path: Path) -> None:
    """README's `make price FILLS=...`: the priced CSV on standard output."""
    source = tmp_path / "fills.csv"
    with source.open("w", newline="", encoding="utf-8") as handle:
        writer = csv.DictWriter(handle, fieldnames=list(fills.FIELDS), restval="")
        writer.writeheader()
        writer.writerow(WORKED[1][1])
    data = Path(priced_version.version_dir).parent.parent
    done = subprocess.run(
        ["make", "--no-print-directory", "price", f"FILLS={source}", f"DATA={data}"],
        cwd=ROOT, capture_output=True, text=True,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    [row] = list(csv.DictReader(done.stdout.splitlines()))
    assert (row["exchange_name"], row["fee"], row["error"]) == ("NYSE", "1.5", "")


def test_the_readmes_worked_example_is_the_embedded_datas_answer(
    embedded_version: IngestResult,
) -> None:
    """README's five fills on three venues: each row is what the engine answers over the
    committed data (the request is the OpenAPI document's example)."""
    operations = json.loads((ROOT / "service" / "operations.json").read_text(encoding="utf-8"))
    request = operations["operations"]["estimateFees"]["requestBody"]["content"][
        "application/json"
    ]["examples"]["fiveFills"]["value"]
    opened = Dataset(Path(embedded_version.version_dir), Settings())
    try:
        priced = answers(opened, request["fills"])
    finally:
        opened.close()
    rows = []
    for number, (given, answer) in enumerate(zip(request["fills"], priced, strict=True)):
        if answer["error"] is None:
            host = urlsplit(answer["source_link"]).hostname
            shown = f"{answer['label']} ({host}{', presumed' if answer['presumed'] else ''})"
        else:
            shown = answer["error"]
        fee = "" if answer["fee"] is None else f"{answer['fee']:g}"
        code = given.get("fee_code") and f"fee code {given['fee_code']}"
        what = ", ".join(filter(None, (given.get("fee_action"), code, given.get("tier"))))
        rows.append(
            f"  | {number} | {given['exchange_name']} | {given['trade_date']} | "
            f"{given['quantity']} | {given['price']:g} | {what} | {fee} | {shown} |"
        )
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    table = readme.split("<!-- fee-estimates-example:start -->\n")[1].split("  <!--")[0]
    assert table.splitlines()[2:] == rows
    example = operations["operations"]["estimateFees"]["responses"]["200"]["content"][
        "application/json"
    ]["examples"]["fiveFills"]["value"]
    assert example["data"] == priced  # every field, each figure the float its decimal writes


def test_trailing_zeros_are_not_decimal_places(dataset: Dataset) -> None:
    [answer] = answers(dataset, [fill("nyse", "2023-06-01", "500.0000000", "25.000000000", "take")])
    assert (answer["fee"], answer["error"]) == (1.5, None)


def test_the_price_answers_are_written_in_whole_batches_in_order() -> None:
    """DuckDB yields a filtered row group as one short batch; the answers file joins them into
    batches of a fixed size, the rows in their order."""
    values = pa.array(range(15))
    sizes = (3, 5, 0, 7)
    starts = [sum(sizes[:at]) for at in range(len(sizes))]
    batches = [
        pa.record_batch([values.slice(start, size)], names=["n"])
        for start, size in zip(starts, sizes, strict=True)
    ]
    reader = pa.RecordBatchReader.from_batches(batches[0].schema, batches)
    joined = list(price_keys._rebatched(reader, 4))
    assert [batch.num_rows for batch in joined] == [4, 4, 4, 3]
    assert pa.Table.from_batches(joined)["n"].to_pylist() == list(range(15))


def test_a_mapped_file_is_read_in_place_not_copied(tmp_path: Path) -> None:
    """Opening a mapped table takes its batches from the file's mapping, not from a copy: a
    value changed in the file after it is opened is the value the table gives."""
    table = pa.table({"text": [f"{n:08d}" * 100 for n in range(10_000)]})
    path = tmp_path / "rows.arrow"
    with pa.ipc.new_file(path, table.schema) as writer:
        writer.write_table(table, max_chunksize=1_000)
    assert bytes(mapped_file(path)) == path.read_bytes()
    mapped = MappedTable(path)
    assert (mapped.size, mapped.value("text", 9_999)) == (10_000, "00009999" * 100)
    with path.open("r+b") as file:
        file.seek(path.read_bytes().index(b"00009999" * 100))
        file.write(b"changed!" * 100)
    assert mapped.value("text", 9_999) == "changed!" * 100


def test_a_mapped_file_gives_rows_in_the_order_asked_across_its_batches(tmp_path: Path) -> None:
    """The record summary and the price answers are read by position across their batches,
    one-row slices and takes alike, a `NO_RECORD` position as a row of nulls."""
    table = pa.table({"n": pa.array(range(1_000)), "text": [f"r{n}" for n in range(1_000)]})
    path = tmp_path / "rows.arrow"
    with pa.ipc.new_file(path, table.schema) as writer:
        writer.write_table(table, max_chunksize=97)
    mapped = MappedTable(path)
    rng = random.Random(5)
    for count in (0, 1, 20, 900):  # few a batch (slices), many (takes)
        positions = [rng.randrange(-1, 1_000) for _ in range(count)]
        rows = mapped.take(np.array(positions, dtype=np.int64), ("text",)).to_pylist()
        assert rows == [{"text": None if at == -1 else f"r{at}"} for at in positions]
