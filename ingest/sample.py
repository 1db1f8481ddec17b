"""Build the embedded SAMPLE dataset: `data/raw/<venue>.csv` from the tables in `data/facts/`.

The output is a sample for developing and testing the service, not a copy of any venue's fee
schedule. It mixes two kinds of line:

- **Sourced lines** come from `data/facts/facts.csv`, a hand-curated table of facts restated
  from public material (exchange schedules, filings, regulators' notices, broker pass-through
  tables). They keep their printed amount, effective dates, source document and URL, and the
  reference notes' flags in `notes` ([U] uncertain, [D] derived date, [S] secondary source,
  [T] tiered), and the detail columns (symbols, participant details, ...) where the fact's
  own text names them. A fact whose venue is `@equity` or `@option` (SEC Section 31, FINRA
  TAF, CAT fees) is repeated on every schedule of that asset class. Facts are clipped to the
  period of the schedule they are placed on; a clipped start is said so in `notes`.
- **Illustrative lines** come from `data/facts/templates.csv`: plausible line items expanded
  over each schedule's publication dates (a few a year, listed in `data/facts/schedules.csv`).
  At each new schedule a line keeps its amount or moves by one or two steps, so a changed fee
  is two rows with adjacent periods. Each is marked `illustrative figure, not from a published
  schedule` in `notes`. A template named in a fact's `replaces` column stops the day before
  the first such fact starts, so the sourced rate takes over from the illustrative history.

`schedules.csv` gives each venue's document series per asset class: title, URL, period,
publication months, pricing `model` (`maker_taker`; `inverted`: adding pays, removing earns;
`pro_rata`: plain Priority Customer lines are free; `fee_only`: low fees, no rebates) and
`print_style` (`long` prints Section 31 as `$27.80 per $1,000,000`).

Choices are made by `random.Random` seeded with the venue, schedule and line, so every run
writes the same bytes. Schedules end on their `end` date or run on (empty `effective_end`);
no schedule date after 2026-11-01 is generated.

Coverage gap, on purpose: `nyse_texas` has no record in force from 2024-12-01 to 2025-03-02,
between the NYSE Chicago schedule (ends 2024-11-30) and the NYSE Texas relaunch (2025-03-03).
`txse` (Texas Stock Exchange, registered but not trading at last report) has no records and
no file.

Run `python -m ingest.sample`; it overwrites `data/raw/<venue>.csv` for every venue with rows.
"""

import csv
import random
from collections import defaultdict
from collections.abc import Iterable, Iterator
from dataclasses import astuple, dataclass, fields
from datetime import date, timedelta
from decimal import Decimal
from pathlib import Path

from ingest.schema import DETAIL_COLUMNS, RAW_COLUMNS

ROOT = Path(__file__).resolve().parent.parent
FACTS_DIR = ROOT / "data" / "facts"
RAW_DIR = ROOT / "data" / "raw"
REGISTRY = ROOT / "data" / "exchanges.csv"

LAST_SCHEDULE = date(2026, 11, 1)
ILLUSTRATIVE = "illustrative figure, not from a published schedule"
CHANGE_CHANCE = 0.2
LATE_START_CHANCE = 0.12
DISCONTINUE_CHANCE = 0.06
VENUE_FACTORS = ("0.90", "0.95", "1.00", "1.00", "1.05", "1.10")
EQUITY_ACCESS_CAP = Decimal("0.0030")
INVERTED_ADD_CEILING = Decimal("0.0035")
INVERTED_REMOVE_CEILING = Decimal("0.0034")
INVERTED_FLOOR = Decimal("0.0001")
FEE_ONLY_SCALE = Decimal("0.3")
# First page and number of pages of each section in an illustrative schedule document.
SECTION_PAGES = {
    "general_provisions": (1, 2),
    "fees_and_rebates": (3, 16),
    "legal_regulatory_fee": (19, 3),
    "participant_fee": (22, 4),
    "port_fees_and_other_services": (26, 7),
    "market_data_fees": (33, 6),
}
ONE_DAY = timedelta(days=1)


@dataclass(frozen=True)
class Schedule:
    """One venue's fee-schedule document series for one asset class over one period."""

    venue: str
    fee_type: str
    title: str
    url: str
    start: date
    end: date | None
    model: str
    months: tuple[int, ...]
    print_style: str


@dataclass(frozen=True)
class Template:
    """A plausible line item; `base` is the literal amount when `style` is `text`."""

    key: str
    fee_type: str
    fee_category: str
    action: str
    participant: str
    symbol_classification: str
    symbol_type: str
    trade_type: str
    fee_name: str
    style: str
    base: str
    high: str
    step: str
    fee_basis: str
    volume_tier: str
    conditions: str
    prob: str

    @property
    def chance(self) -> float:
        """How likely a venue's schedule is to carry this line (1 = always, from the start)."""
        return float(self.prob)


@dataclass(frozen=True)
class Record:
    """One output row; field order is the raw CSV column order."""

    exchange: str
    fee_type: str
    fee_category: str
    action: str
    participant: str
    symbol_classification: str
    symbol_type: str
    trade_type: str
    fee_name: str
    fee_amount: str
    fee_basis: str
    volume_tier: str
    conditions: str
    notes: str
    effective_start: str
    effective_end: str
    source_document: str
    source_url: str
    page_number: str
    action_details: str = ""
    participant_details: str = ""
    volume_criteria: str = ""
    symbols: str = ""
    excluded_symbols: str = ""
    exclusions: str = ""
    extra_info: str = ""


Amount = tuple[Decimal, ...]
CutoffKey = tuple[str, str, date, str]


def read_table(path: Path) -> list[dict[str, str]]:
    with path.open(newline="", encoding="utf-8") as handle:
        return [dict(row) for row in csv.DictReader(handle, strict=True)]


def to_date(text: str) -> date | None:
    return date.fromisoformat(text) if text else None


def iso(day: date | None) -> str:
    return day.isoformat() if day else ""


def load_schedules() -> list[Schedule]:
    return [
        Schedule(
            venue=row["venue"],
            fee_type=row["fee_type"],
            title=row["title"],
            url=row["url"],
            start=date.fromisoformat(row["start"]),
            end=to_date(row["end"]),
            model=row["model"],
            months=tuple(int(month) for month in row["months"].split("|")),
            print_style=row["print_style"],
        )
        for row in read_table(FACTS_DIR / "schedules.csv")
    ]


def load_templates() -> list[Template]:
    return [Template(**row) for row in read_table(FACTS_DIR / "templates.csv")]


def check_venues(schedules: list[Schedule]) -> None:
    """Fail early when a schedule names a venue the registry does not know."""
    known = {row["code"] for row in read_table(REGISTRY)}
    unknown = sorted({schedule.venue for schedule in schedules} - known)
    if unknown:
        raise ValueError(f"schedules.csv names venues missing from the registry: {unknown}")


def first_business_day(day: date) -> date:
    """The day a schedule dated `day` takes effect: not New Year's Day, not a weekend."""
    if (day.month, day.day) == (1, 1):
        day += ONE_DAY
    while day.weekday() >= 5:
        day += ONE_DAY
    return day


def schedule_dates(schedule: Schedule) -> list[date]:
    """The schedule's first date, then every publication date inside its period."""
    last = min(schedule.end or LAST_SCHEDULE, LAST_SCHEDULE)
    dates = [schedule.start]
    for year in range(schedule.start.year, last.year + 1):
        for month in schedule.months:
            day = first_business_day(date(year, month, 1))
            if schedule.start < day <= last:
                dates.append(day)
    return dates


def matches(fact: dict[str, str], schedule: Schedule) -> bool:
    venue = fact["venue"]
    same_venue = venue == schedule.venue or venue == f"@{schedule.fee_type}"
    return same_venue and fact["fee_type"] == schedule.fee_type


def clip(fact: dict[str, str], schedule: Schedule) -> tuple[date, date | None] | None:
    """The part of the fact's period inside the schedule's period, or None."""
    start = max(date.fromisoformat(fact["effective_start"]), schedule.start)
    ends = [day for day in (to_date(fact["effective_end"]), schedule.end) if day]
    end = min(ends) if ends else None
    return None if end and end < start else (start, end)


def restyle(amount: str, basis: str, schedule: Schedule) -> tuple[str, str]:
    """Print a per-$1M figure as the schedule prints it."""
    if schedule.print_style == "long" and basis == "per $1M of sales":
        return f"{amount} per $1,000,000", "of the aggregate dollar amount of covered sales"
    return amount, basis


def fact_record(fact: dict[str, str], schedule: Schedule, start: date, end: date | None) -> Record:
    notes = fact["notes"]
    if start.isoformat() != fact["effective_start"]:
        note = f"source effective {fact['effective_start']}; shown from this schedule's start"
        notes = f"{notes}; {note}" if notes else note
    amount, basis = restyle(fact["fee_amount"], fact["fee_basis"], schedule)
    return Record(
        exchange=schedule.venue,
        fee_type=fact["fee_type"],
        fee_category=fact["fee_category"],
        action=fact["action"],
        participant=fact["participant"],
        symbol_classification=fact["symbol_classification"],
        symbol_type=fact["symbol_type"],
        trade_type=fact["trade_type"],
        fee_name=fact["fee_name"],
        fee_amount=amount,
        fee_basis=basis,
        volume_tier=fact["volume_tier"],
        conditions=fact["conditions"],
        notes=notes,
        effective_start=iso(start),
        effective_end=iso(end),
        source_document=fact["source_document"],
        source_url=fact["source_url"],
        page_number="",
        **{column: fact[column] for column in DETAIL_COLUMNS},
    )


def expand_facts(
    facts: list[dict[str, str]], schedules: list[Schedule]
) -> tuple[list[Record], dict[CutoffKey, date]]:
    """Place every fact on its schedules; note where each replaced template must stop."""
    records: list[Record] = []
    cutoffs: dict[CutoffKey, date] = {}
    for fact in facts:
        for schedule in schedules:
            period = clip(fact, schedule) if matches(fact, schedule) else None
            if period is None:
                continue
            records.append(fact_record(fact, schedule, *period))
            for key in filter(None, fact["replaces"].split("|")):
                where = (schedule.venue, schedule.fee_type, schedule.start, key)
                cutoffs[where] = min(cutoffs.get(where, period[0]), period[0])
    return records, cutoffs


def exponent(value: Decimal) -> int:
    """The power of ten of the last digit (`0.0030` -> -4); 0 for special values."""
    power = value.as_tuple().exponent
    return power if isinstance(power, int) else 0


def quantum(step: Decimal) -> Decimal:
    return Decimal(1).scaleb(min(exponent(step), -2))


def initial_amount(template: Template, schedule: Schedule, rng: random.Random) -> Amount:
    step = Decimal(template.step)
    factor = Decimal(random.Random(f"{schedule.venue}|{schedule.fee_type}").choice(VENUE_FACTORS))
    jitter = step * rng.choice((-1, 0, 0, 1))
    values = [Decimal(text) * factor + jitter for text in (template.base, template.high) if text]
    rounded = tuple(value.quantize(quantum(step)) for value in values)
    amount = model_amount(template, schedule, rounded)
    if template.style == "share":
        return tuple(min(value, EQUITY_ACCESS_CAP) for value in amount)
    return amount


def model_amount(template: Template, schedule: Schedule, amount: Amount) -> Amount:
    """Adjust to the venue's pricing model: fee-only (low flat fees), inverted equity venues
    (market maker credits stay credits), pro-rata options venues (plain Priority Customer lines
    are free)."""
    if schedule.model == "fee_only" and template.style == "share":
        return tuple((value * FEE_ONLY_SCALE).quantize(Decimal("0.0001")) for value in amount)
    priced = template.style in ("share", "contract") and template.action in ("make", "take")
    if not priced or template.fee_category != "fees_and_rebates":
        return amount
    market_maker = template.participant in ("market_maker", "away_market_maker")
    if schedule.model == "inverted" and not market_maker:
        return tuple(inverted(template.action, value) for value in amount)
    plain_customer = template.participant == "customer" and template.symbol_classification == "all"
    if schedule.model == "pro_rata" and plain_customer and template.trade_type == "simple_order":
        return tuple(Decimal("0.00") for _ in amount)
    return amount


def inverted(action: str, value: Decimal) -> Decimal:
    """Taker-maker pricing: adding pays a fee (less for better tiers), removing earns a rebate."""
    if action == "make":
        return max(INVERTED_ADD_CEILING - abs(value), INVERTED_FLOOR)
    return min(value - INVERTED_REMOVE_CEILING, -INVERTED_FLOOR)


def within_bounds(template: Template, amount: Amount, origin: Amount) -> bool:
    """Keep a drifting amount on the same side of zero and within half to 1.5 times its origin."""
    value, first = amount[0], origin[0]
    if value == 0 or (value < 0) != (first < 0):
        return False
    too_far = not abs(first) / 2 <= abs(value) <= abs(first) * Decimal("1.5")
    over_cap = template.style == "share" and value > EQUITY_ACCESS_CAP
    return not (too_far or over_cap)


def drift(template: Template, amount: Amount, origin: Amount, rng: random.Random) -> Amount:
    """The amount in the next schedule that changes this line: one or two steps away."""
    step = Decimal(template.step) * rng.choice((1, 1, 2))
    for delta in (step * rng.choice((-1, 1)), step, -step):
        moved = tuple(value + delta for value in amount)
        if within_bounds(template, moved, origin):
            return moved
    return amount


def can_change(template: Template, amount: Amount) -> bool:
    return template.style != "text" and bool(amount) and amount[0] != 0


def money(value: Decimal, places: int) -> str:
    text = f"${abs(value):,.{places}f}"
    return f"({text})" if value < 0 else text


def places_for(value: Decimal, least: int) -> int:
    return max(least, -exponent(value.normalize()))


def printed(template: Template, amount: Amount) -> str:
    """The amount as a schedule prints it."""
    if template.style == "text":
        return template.base
    if template.style == "pct":
        text = f"{abs(amount[0]):.2f}% of TDV"
        return f"({text})" if amount[0] < 0 else text
    least = {"share": 4, "contract": 2, "money": 2}.get(template.style, 2)
    if template.style == "range":
        least = max(2, -exponent(Decimal(template.step)))
        return " - ".join(money(value, least) for value in amount)
    return money(amount[0], places_for(amount[0], least))


def template_amount(template: Template, schedule: Schedule, rng: random.Random) -> Amount:
    return () if template.style == "text" else initial_amount(template, schedule, rng)


def active_dates(
    template: Template, dates: list[date], rng: random.Random
) -> tuple[list[date], date | None]:
    """The schedule dates on which the line is published, and its last day when it is dropped."""
    optional = template.chance < 1 and len(dates) > 2
    first = rng.randrange(1, len(dates) - 1) if optional and rng.random() < LATE_START_CHANCE else 0
    if optional and first + 1 < len(dates) and rng.random() < DISCONTINUE_CHANCE:
        stop = rng.randrange(first + 1, len(dates))
        return dates[first:stop], dates[stop] - ONE_DAY
    return dates[first:], None


Period = tuple[date, date | None, str]


def runs(template: Template, schedule: Schedule, rng: random.Random) -> list[Period]:
    """Periods of constant amount: (start, end, printed amount)."""
    dates, dropped = active_dates(template, schedule_dates(schedule), rng)
    amount = origin = template_amount(template, schedule, rng)
    changes = [(dates[0], printed(template, amount))]
    for day in dates[1:]:
        if can_change(template, amount) and rng.random() < CHANGE_CHANCE:
            amount = drift(template, amount, origin, rng)
            if printed(template, amount) != changes[-1][1]:
                changes.append((day, printed(template, amount)))
    ends = [start - ONE_DAY for start, _ in changes[1:]] + [dropped or schedule.end]
    return [(start, end, text) for (start, text), end in zip(changes, ends, strict=True)]


def cut(periods: list[Period], cutoff: date | None) -> Iterator[Period]:
    """Drop what a sourced fact takes over from `cutoff` on."""
    for start, end, text in periods:
        if cutoff is None:
            yield start, end, text
        elif start < cutoff:
            yield start, min(end, cutoff - ONE_DAY) if end else cutoff - ONE_DAY, text


def page(template: Template, index: int) -> str:
    first, span = SECTION_PAGES[template.fee_category]
    return str(first + index % span)


def carried(template: Template, schedule: Schedule) -> bool:
    """A fee-only venue (IEX) publishes no rebate lines."""
    rebate = template.style in ("share", "contract") and Decimal(template.base) < 0
    return not (schedule.model == "fee_only" and rebate)


def template_records(
    schedule: Schedule, template: Template, index: int, cutoff: date | None
) -> list[Record]:
    rng = random.Random(f"{schedule.venue}|{schedule.fee_type}|{schedule.start}|{template.key}")
    if rng.random() >= template.chance or not carried(template, schedule):
        return []
    return [
        Record(
            exchange=schedule.venue,
            fee_type=template.fee_type,
            fee_category=template.fee_category,
            action=template.action,
            participant=template.participant,
            symbol_classification=template.symbol_classification,
            symbol_type=template.symbol_type,
            trade_type=template.trade_type,
            fee_name=template.fee_name,
            fee_amount=text,
            fee_basis=template.fee_basis,
            volume_tier=template.volume_tier,
            conditions=template.conditions,
            notes=ILLUSTRATIVE,
            effective_start=iso(start),
            effective_end=iso(end),
            source_document=f"{schedule.title} ({start.isoformat()})",
            source_url=schedule.url,
            page_number=page(template, index),
        )
        for start, end, text in cut(runs(template, schedule, rng), cutoff)
    ]


def illustrative(
    schedules: list[Schedule], templates: list[Template], cutoffs: dict[CutoffKey, date]
) -> Iterator[Record]:
    for schedule in schedules:
        for index, template in enumerate(templates):
            if template.fee_type == schedule.fee_type:
                where = (schedule.venue, schedule.fee_type, schedule.start, template.key)
                yield from template_records(schedule, template, index, cutoffs.get(where))


def reading_order(row: Record) -> tuple[str, ...]:
    return (
        row.fee_type,
        row.fee_category,
        row.action,
        row.participant,
        row.fee_name,
        row.volume_tier,
        row.effective_start,
    )


def by_venue(records: Iterable[Record]) -> dict[str, list[Record]]:
    """Group rows per venue in a stable reading order; refuse exact duplicates."""
    groups: dict[str, list[Record]] = defaultdict(list)
    for record in records:
        groups[record.exchange].append(record)
    for venue, rows in groups.items():
        if len(set(rows)) != len(rows):
            raise ValueError(f"{venue}: the sample would hold identical rows")
        rows.sort(key=reading_order)
    return dict(sorted(groups.items()))


def build() -> dict[str, list[Record]]:
    """The whole sample, per venue."""
    schedules = load_schedules()
    check_venues(schedules)
    facts = read_table(FACTS_DIR / "facts.csv")
    sourced, cutoffs = expand_facts(facts, schedules)
    return by_venue([*sourced, *illustrative(schedules, load_templates(), cutoffs)])


def write(venue: str, rows: list[Record], out: Path = RAW_DIR) -> Path:
    if tuple(field.name for field in fields(Record)) != RAW_COLUMNS:
        raise ValueError("Record fields are out of step with ingest.schema.RAW_COLUMNS")
    path = out / f"{venue}.csv"
    with path.open("w", newline="", encoding="utf-8") as handle:
        writer = csv.writer(handle, lineterminator="\n")
        writer.writerow(RAW_COLUMNS)
        writer.writerows(astuple(row) for row in rows)
    return path


def main() -> None:
    RAW_DIR.mkdir(parents=True, exist_ok=True)
    groups = build()
    for venue, rows in groups.items():
        write(venue, rows)
    total = sum(len(rows) for rows in groups.values())
    print(f"wrote {total} sample records for {len(groups)} venues to {RAW_DIR}")


if __name__ == "__main__":
    main()
