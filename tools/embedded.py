"""Build the embedded dataset, `data/raw/<venue>.csv`, from the sourced facts in
`data/facts/facts.csv` (`data/facts/README.md` says how the table was assembled and how each
row's provenance was decided).

Every published row is a fact read in a public source: its `source_url`, `source_kind`
(`primary` or `secondary`) and `date_basis` (`stated`, `derived` or `observed`) come from the
table unchanged. Two things happen on the way:

- A fact with a `held_out` reason stays out (it is kept in the table so the reason is on
  record: mostly lines whose source gives no day on which they were in force).
- A market-wide fee (`venue` `@equity` or `@option`: SEC Section 31, FINRA TAF, CAT and OCC
  fees) is repeated on every venue of that asset class that has facts of its own, with the
  fee's own dates: it applies to the covered trades on each of them. It goes only where it is
  in force on or after the first day of the venue's own facts of that asset class, so a venue's
  history starts where its own sources do, and a venue with no facts of its own gets none: a
  market-wide fee never makes a venue look covered.

- The records of one fee line (`ingest.schema.LINE_COLUMNS`) are put in force one at a time,
  as the ingest requires (`docs/raw-format.md`, "Fee lines"). Successive readings of a line
  mostly give only a start ("no end known"), so in start order a record still in force when
  the line's next record starts is ended the day before it: its end is then `derived` from the
  next reading (a `stated` row becomes `derived`: a row takes its weakest date basis), and its
  notes say from which. A cut that would drop days the next record does not cover, or two
  records of a line starting on one day, stops the build for a reader to settle.

Nothing is invented: no figure, date or source is made up, and a fact keeps its dates as its
source gives them, except for an end derived as above. The `evidence` column (a quote from the
source, where the reader kept one) is for reviewers and is not published. Run
`python -m tools.embedded` (`make embedded`); it rewrites `data/raw/` to hold exactly one file
per venue with rows.
"""

import csv
from collections import defaultdict
from datetime import date, timedelta
from itertools import pairwise
from pathlib import Path
from typing import Final

from ingest.schema import LINE_COLUMNS, LINE_NAME, RAW_COLUMNS

ROOT: Final = Path(__file__).resolve().parent.parent
FACTS: Final = ROOT / "data" / "facts" / "facts.csv"
RAW_DIR: Final = ROOT / "data" / "raw"
REGISTRY: Final = ROOT / "data" / "exchanges.csv"

# The facts table: the raw columns (with `venue` for `exchange`, which may also be `@equity` or
# `@option`, and no `page_number`: no source here is cited by page), then the two columns that
# are not published.
FACT_COLUMNS: Final = (
    "venue",
    *(name for name in RAW_COLUMNS[1:] if name != "page_number"),
    "held_out",
    "evidence",
)
MARKET_WIDE: Final = "@"

Row = dict[str, str]


def read_table(path: Path) -> list[Row]:
    with path.open(newline="", encoding="utf-8") as handle:
        reader = csv.DictReader(handle, strict=True)
        if tuple(reader.fieldnames or ()) != FACT_COLUMNS:
            raise ValueError(f"{path}: the header must be {','.join(FACT_COLUMNS)}")
        return list(reader)


def asset_classes() -> dict[str, set[str]]:
    """Each registered venue's asset classes."""
    with REGISTRY.open(newline="", encoding="utf-8") as handle:
        return {row["code"]: set(row["asset_classes"].split("|")) for row in csv.DictReader(handle)}


def raw_row(fact: Row, venue: str) -> Row:
    row = {name: fact.get(name, "") for name in RAW_COLUMNS}
    row["exchange"] = venue
    return row


def reading_order(row: Row) -> tuple[str, ...]:
    keys = ("fee_type", "fee_category", "action", "participant", "fee_name", "volume_tier")
    return (*(row[key] for key in keys), row["effective_start"], row["source_url"])


def line_of(row: Row) -> tuple[str, ...]:
    """The row's fee line: its values of `LINE_COLUMNS` as the ingest reads them (trimmed,
    the label being `line_name` when given, else `fee_name`)."""
    values = row | {"label": row[LINE_NAME].strip() or row["fee_name"]}
    return tuple(values[name].strip() for name in LINE_COLUMNS)


def one_at_a_time(rows: list[Row]) -> None:
    """End each record still in force when its line's next record starts the day before it
    (module docstring); raises ValueError where that is not a reading's to decide."""
    lines: dict[tuple[str, ...], list[Row]] = defaultdict(list)
    for row in rows:
        lines[line_of(row)].append(row)
    for records in lines.values():
        records.sort(key=lambda row: row["effective_start"])
        for earlier, later in pairwise(records):
            start, end = later["effective_start"], earlier["effective_end"]
            if end and end < start:
                continue
            where = f"{earlier['exchange']}: {earlier['fee_name']!r} from {start}"
            if start == earlier["effective_start"]:
                raise ValueError(f"{where}: two records of one line start on the same day")
            if end and end > (later["effective_end"] or end):
                raise ValueError(f"{where}: ending the earlier record would drop days")
            earlier["effective_end"] = (date.fromisoformat(start) - timedelta(days=1)).isoformat()
            if earlier["date_basis"] == "stated":
                earlier["date_basis"] = "derived"
            next_one = f"{later['fee_amount']} from {start}"
            cut = f"end: the day before this line's next record ({next_one})"
            earlier["notes"] = f"{earlier['notes']}; {cut}" if earlier["notes"] else cut


def build(facts: list[Row], registry: dict[str, set[str]]) -> dict[str, list[Row]]:
    """The published rows per venue, in a stable reading order."""
    published = [fact for fact in facts if not fact["held_out"]]
    market_wide = [fact for fact in published if fact["venue"].startswith(MARKET_WIDE)]
    own = [fact for fact in published if not fact["venue"].startswith(MARKET_WIDE)]
    unknown = sorted({fact["venue"] for fact in own} - set(registry))
    if unknown:
        raise ValueError(f"facts.csv names venues missing from the registry: {unknown}")
    groups: dict[str, list[Row]] = defaultdict(list)
    first: dict[tuple[str, str], str] = {}  # (venue, fee_type) -> first start of its own facts
    for fact in own:
        groups[fact["venue"]].append(raw_row(fact, fact["venue"]))
        key = (fact["venue"], fact["fee_type"])
        first[key] = min(first.get(key, fact["effective_start"]), fact["effective_start"])
    for fact in market_wide:
        asset_class = fact["venue"].removeprefix(MARKET_WIDE)
        if asset_class != fact["fee_type"]:
            raise ValueError(f"{fact['fee_name']}: {fact['venue']} with a {fact['fee_type']} fee")
        for venue in sorted(registry):
            since = first.get((venue, asset_class)) if asset_class in registry[venue] else None
            # ISO dates compare as text; an empty end is still in force.
            if since is not None and (fact["effective_end"] or "9999") >= since:
                groups[venue].append(raw_row(fact, venue))
    for venue, rows in groups.items():
        if len({tuple(row.values()) for row in rows}) != len(rows):
            raise ValueError(f"{venue}: facts.csv holds the same line twice")
        one_at_a_time(rows)
        rows.sort(key=reading_order)
    return dict(sorted(groups.items()))


def write(venue: str, rows: list[Row], out: Path = RAW_DIR) -> Path:
    path = out / f"{venue}.csv"
    with path.open("w", newline="", encoding="utf-8") as handle:
        writer = csv.DictWriter(handle, fieldnames=RAW_COLUMNS, lineterminator="\n")
        writer.writeheader()
        writer.writerows(rows)
    return path


def main() -> None:
    groups = build(read_table(FACTS), asset_classes())
    RAW_DIR.mkdir(parents=True, exist_ok=True)
    for stale in RAW_DIR.glob("*.csv"):
        if stale.stem not in groups:
            stale.unlink()
    for venue, rows in groups.items():
        write(venue, rows)
    total = sum(len(rows) for rows in groups.values())
    print(f"wrote {total} sourced records for {len(groups)} venues to {RAW_DIR}")


if __name__ == "__main__":
    main()
