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

- A reader's decision that readings printed under other labels or tiers are one fee line
  (`data/facts/links.csv`, `joined`: `docs/raw-format.md`, "Fee lines") gives each fact of
  the venue, fee type, label and tier it names that line's `line_name`. Decisions that two
  lines are not one (`apart`) are kept for the review tool (`tools.lines`) and change nothing
  here. A decision naming no fact, or a label joined to two lines, stops the build.

A fact's end is its source's: where the source gives none, the ingest ends the record when
the line's next reading or a complete schedule shows it gone (`docs/raw-format.md`, "Ends the
ingest derives").

Nothing is invented: no figure, date or source is made up, and a fact keeps its dates as its
source gives them. The `evidence` column (a quote from the source, where the reader kept one)
and the `reviewer` column (remarks on how a fact was read, checked or placed in the table) are
for reviewers and are not published. Run
`python -m tools.embedded` (`make embedded`); it rewrites `data/raw/` to hold exactly one file
per venue with rows.
"""

import csv
from collections import defaultdict
from pathlib import Path
from typing import Final

from ingest.schema import LINE_NAME, RAW_COLUMNS

ROOT: Final = Path(__file__).resolve().parent.parent
FACTS: Final = ROOT / "data" / "facts" / "facts.csv"
LINKS: Final = ROOT / "data" / "facts" / "links.csv"
RAW_DIR: Final = ROOT / "data" / "raw"
REGISTRY: Final = ROOT / "data" / "exchanges.csv"

# The facts table: the raw columns (with `venue` for `exchange`, which may also be `@equity` or
# `@option`, and no `page_number`: no source here is cited by page), then the three columns
# that are not published: why a fact is held out, the source's words, and the reader's remarks
# on how the fact was read, checked or placed (`notes` is for the reader of the fee).
FACT_COLUMNS: Final = (
    "venue",
    *(name for name in RAW_COLUMNS[1:] if name != "page_number"),
    "held_out",
    "evidence",
    "reviewer",
)
MARKET_WIDE: Final = "@"

# A reader's decision on one label of a venue's fee type (with its tier, and its participant
# when the label is printed for several: empty for every one): it is (`joined`) or is not
# (`apart`) a reading of the line named `line_name`; `evidence` says why.
LINK_COLUMNS: Final = (
    "venue",
    "fee_type",
    "line_name",
    "fee_name",
    "volume_tier",
    "participant",
    "decision",
    "evidence",
)
DECISIONS: Final = ("joined", "apart")

Row = dict[str, str]
Label = tuple[str, str, str, str, str]  # venue, fee type, label, tier, participant


def read_table(path: Path, columns: tuple[str, ...] = FACT_COLUMNS) -> list[Row]:
    with path.open(newline="", encoding="utf-8") as handle:
        reader = csv.DictReader(handle, strict=True)
        if tuple(reader.fieldnames or ()) != columns:
            raise ValueError(f"{path}: the header must be {','.join(columns)}")
        return list(reader)


def read_links(path: Path | None = None) -> list[Row]:
    """The links table (`LINKS` unless another is given)."""
    path = path or LINKS
    links = read_table(path, LINK_COLUMNS)
    wrong = [link for link in links if link["decision"] not in DECISIONS or not link["evidence"]]
    if wrong:
        raise ValueError(f"{path}: a decision is joined or apart, with its evidence: {wrong[0]}")
    return links


def label_of(row: Row) -> Label:
    return (row["venue"], row["fee_type"], row["fee_name"], row["volume_tier"], row["participant"])


def covers(link: Row, label: Label) -> bool:
    """Whether a decision is about a label (of any participant, when it names none)."""
    return label_of(link)[:4] == label[:4] and link["participant"] in ("", label[4])


def line_names(facts: list[Row], links: list[Row]) -> dict[Label, str]:
    """The line each joined label belongs to; raises ValueError for a decision naming no fact
    or a label joined to two lines."""
    labels: dict[tuple[str, ...], list[Label]] = defaultdict(list)
    for label in {label_of(fact) for fact in facts}:
        labels[label[:4]].append(label)
    names: dict[Label, str] = {}
    for link in links:
        if link["decision"] != "joined":
            continue
        covered = [label for label in labels[label_of(link)[:4]] if covers(link, label)]
        if not covered:
            raise ValueError(f"links.csv: no fact has the label {label_of(link)}")
        for label in covered:
            if names.setdefault(label, link["line_name"]) != link["line_name"]:
                raise ValueError(f"links.csv: {label} is joined to two lines")
    return names


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


def build(
    facts: list[Row], registry: dict[str, set[str]], links: list[Row] | None = None
) -> dict[str, list[Row]]:
    """The published rows per venue, in a stable reading order, each joined to the line the
    links name."""
    names = line_names(facts, links or [])
    published = [
        fact | {LINE_NAME: names.get(label_of(fact), fact[LINE_NAME])}
        for fact in facts
        if not fact["held_out"]
    ]
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
    groups = build(read_table(FACTS), asset_classes(), read_links())
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
