"""Pricing executions (`service.dataset.pricing`, `service.endpoints.fills`, `fees price`):
fills priced against lines whose fees are worked out by hand here, every kind of refused fill,
the engine checked against a plain per-fill lookup over the Parquet, and the command answering
as the engine does."""

import csv
import json
import random
import subprocess
import sys
from datetime import date, timedelta
from decimal import Decimal
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import duckdb
import pytest

from ingest.layout import current_version_dir
from ingest.pipeline import IngestResult, run_ingest
from service.dataset.version import Dataset
from service.endpoints import fills
from service.settings import Settings
from tests.conftest import REGISTRY, Indexed, fee_row, write_raw

ROOT = Path(__file__).parent.parent
CBOE = "https://example.test/cboe-options-fee-schedule"
MEMX = "https://example.test/memx-fee-schedule"


def standard(**values: str) -> dict[str, str]:
    return fee_row(standard="true", **values)


def option(participant: str, symbol_type: str, amount: str, **values: str) -> dict[str, str]:
    return standard(
        exchange="cboe", fee_type="option", action="take", participant=participant,
        symbol_type=symbol_type, fee_name=f"{participant} {symbol_type} take",
        fee_amount=amount, fee_basis="per contract", effective_start="2024-01-02",
        source_document="Cboe Options fee schedule", source_url=CBOE, **values,
    )  # fmt: skip


# NYSE's standard make rebate: $0.0020 to 2023-12-29, nothing in January 2024 (a gap), then
# $0.0016 from 2024-02-01; its take fee and routing fee; MEMX's only standard take line is a
# percentage of value; Cboe's option take fees per participant and penny class.
ROWS = [
    standard(fee_name="Base add", fee_amount="($0.0020)", effective_start="2023-01-02",
             effective_end="2023-12-29"),
    standard(fee_name="Base add", fee_amount="($0.0016)", effective_start="2024-02-01"),
    standard(fee_name="Base take", action="take", fee_amount="$0.0030",
             effective_start="2023-01-02"),
    standard(fee_name="Routing", action="routed", fee_amount="$0.0035",
             effective_start="2023-01-02"),
    fee_row(fee_name="Tier 1 add", fee_amount="($0.0032)", effective_start="2023-01-02"),
    standard(exchange="memx", fee_name="Sub-dollar take", action="take", fee_amount="0.30%",
             fee_basis="of total dollar value", effective_start="2023-01-02",
             source_document="MEMX fee schedule", source_url=MEMX),
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
     "missing trade_date, price, fee_action"),
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
        f"2 standard lines apply (record ids {ids}): give symbol_type or fee_participant to choose"
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
SELECT record_id, amount, unit
FROM read_parquet($files, hive_partitioning = true, hive_types = {'exchange': VARCHAR})
WHERE exchange = $exchange AND fee_type = $fee_type AND action = $action
    AND fee_category = 'fees_and_rebates' AND standard AND amount IS NOT NULL
    AND unit IN ('per_share', 'per_contract', 'percent_of_value')
    AND (participant = 'all' OR participant = coalesce($participant, 'all'))
    AND ($symbol_type IS NULL OR symbol_type = $symbol_type
         OR symbol_type NOT IN ('penny', 'non_penny'))
    AND effective_start <= $day AND coalesce(effective_end, DATE '9999-12-31') >= $day
"""


def looked_up(version: Path, given: dict[str, Any]) -> tuple[str | None, float | None]:
    """The record and fee the rule gives one fill, found by the plainest query: (None, None)
    when no line or several apply."""
    files = [str(path) for path in (version / "fees").rglob("*.parquet")]
    parameters = {
        "files": files, "exchange": given["exchange_name"], "fee_type": given["fee_type"],
        "action": given["fee_action"], "participant": given.get("fee_participant"),
        "symbol_type": given.get("symbol_type"), "day": date.fromisoformat(given["trade_date"]),
    }  # fmt: skip
    rows = duckdb.connect().execute(LOOKUP, parameters).fetchall()
    if len(rows) != 1:
        return None, None
    record_id, amount, unit = rows[0]
    value = Decimal(given["quantity"]) * (
        Decimal(given["price"]) / 100 if unit == "percent_of_value" else 1
    )
    return str(record_id), float(round(value * amount, 8))


def random_fill(rng: random.Random, codes: list[str]) -> dict[str, str]:
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
    return given


@pytest.mark.parametrize("seed", range(3))
def test_the_engine_prices_each_fill_as_a_plain_lookup_finds_it(
    indexed: Indexed, seed: int
) -> None:
    """Over the synthetic version with NYSE's standard rates (`tests/conftest.py`), fills drawn
    at random on every venue: one query for all of them answers what a query per fill does."""
    rng = random.Random(seed)
    given = [random_fill(rng, indexed.venues) for _ in range(300)]
    priced = answers(indexed.dataset, given)
    version = indexed.dataset.version_dir
    expected = [looked_up(version, one) for one in given]
    assert [(answer["record_id"], answer["fee"]) for answer in priced] == expected
    assert sum(record is not None for record, _ in expected) > 20


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
        rows.append(
            f"  | {number} | {given['exchange_name']} | {given['trade_date']} | "
            f"{given['quantity']} | {given['fee_action']} | {fee} | {shown} |"
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
