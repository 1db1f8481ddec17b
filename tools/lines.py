"""Review which readings of one venue's fee schedule are one fee line (`docs/raw-format.md`,
"Fee lines" and "Linking readings"), and keep each decision in `data/facts/links.csv`.

    python -m tools.lines suggest memx            the candidate pairs of memx's lines, best first
    python -m tools.lines join memx 3f2a 9c41 --evidence "..."   they are one line
    python -m tools.lines apart memx 3f2a 9c41 --evidence "..."  they are not

A line is shown by the first hex digits of its `line_id` (as the ingest will give it, links
applied), its labels and tiers, and its records' figures over time. A candidate pair is two
lines of the venue with the same fee type, category, action, participant, penny class and
unit, never read in one source as of one day (a schedule listing both shows two items), whose
periods meet or overlap (an open line runs on), and whose labels are alike; a pair already
joined is one line, and a pair decided apart is never listed again, so a review converges.
`join` gives every label of both lines one name (the first line's, if either is named; else
`--name`, or the label read latest), `apart` records that the second line's labels are not
readings of the first. `make embedded` then applies the decisions to `data/raw/`.
"""

import argparse
import csv
import hashlib
import json
import re
import sys
import uuid
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import date, timedelta
from difflib import SequenceMatcher
from itertools import combinations
from typing import Final

import duckdb

from ingest.layout import CLASSED
from ingest.schema import CLASSIFYING, LINE_NAME
from ingest.units import AMOUNT, FORM, UNIT
from tools import embedded

# Periods this far apart still meet: a line whose last reading is a year before another's first
# may be its predecessor under a new label.
NEAR: Final = timedelta(days=400)
ALIKE: Final = 0.45  # the least label likeness listed (0 to 1)
# What two readings of one item share: their class (fee type, category, action, participant)
# and penny class. (Two lines read in one source on one day are two items, whatever they share.)
SAME: Final = (*CLASSED, "symbol_type")
WORD: Final = re.compile(r"[a-z0-9$.]+")
STEM: Final = re.compile(r"(?:ing|ed|es|s)$")

FIGURES: Final = f"""
SELECT {AMOUNT} AS amount, {UNIT} AS unit
FROM (SELECT *, {FORM} AS form FROM facts)
"""


@dataclass
class Line:
    """One fee line of the venue, as the ingest will make it."""

    line_id: str
    name: str  # its line_name, or (unnamed) its label
    named: bool
    rows: list[embedded.Row] = field(default_factory=list)
    units: set[str] = field(default_factory=set)

    @property
    def short(self) -> str:
        return self.line_id.replace("-", "")[:8]

    @property
    def readings(self) -> set[tuple[str, str]]:
        """Where and from when it was read: two lines read in one source from one day are two
        items (a page's address alone is not a reading: a schedule's page changes in place)."""
        return {(row["source_url"], row["effective_start"]) for row in self.rows}

    @property
    def labels(self) -> list[embedded.Label]:
        return sorted({embedded.label_of(row) for row in self.rows})

    def span(self) -> tuple[date, date]:
        starts = [date.fromisoformat(row["effective_start"]) for row in self.rows]
        ends = [row["effective_end"] for row in self.rows]
        last = date.max if "" in ends else max(date.fromisoformat(end) for end in ends)
        return min(starts), last

    def history(self) -> str:
        readings = sorted(self.rows, key=lambda row: row["effective_start"])
        return " · ".join(f"{row['effective_start']} {row['fee_amount']}" for row in readings)


def line_id(row: embedded.Row) -> str:
    """The ingest's `line_id` of a published row (`ingest.stage.LINE_ID`)."""
    if row[LINE_NAME]:
        values: list[str | None] = [row["exchange"], row["fee_type"], row[LINE_NAME]]
    else:
        values = [row[name] or None for name in (*CLASSIFYING, "fee_name", "volume_tier")]
    text = json.dumps(values, separators=(",", ":"), ensure_ascii=False)
    return str(uuid.UUID(hashlib.md5(text.encode()).hexdigest()))


def venue_lines(venue: str) -> dict[str, Line]:
    """The venue's lines (links applied), by line id, each with its records' units."""
    facts, links = embedded.read_table(embedded.FACTS), embedded.read_links()
    rows = embedded.build(facts, embedded.asset_classes(), links).get(venue, [])
    con = duckdb.connect()
    con.execute("CREATE TABLE facts (fee_amount VARCHAR, fee_basis VARCHAR, fee_name VARCHAR)")
    values = [(row["fee_amount"], row["fee_basis"] or None, row["fee_name"]) for row in rows]
    if values:
        con.executemany("INSERT INTO facts VALUES (?, ?, ?)", values)
    units = [unit or "text" for _, unit in con.execute(FIGURES).fetchall()]
    lines: dict[str, Line] = {}
    for row, unit in zip(rows, units, strict=True):
        row["venue"] = row["exchange"]
        key = line_id(row)
        name = row[LINE_NAME] or row["fee_name"]
        line = lines.setdefault(key, Line(key, name, bool(row[LINE_NAME])))
        line.rows.append(row)
        line.units.add(unit)
    return lines


def stems(label: str) -> set[str]:
    """A label's words, cut to their stems (`adding`, `added` and `adds` are all `add`)."""
    return {STEM.sub("", word) or word for word in WORD.findall(label.lower())}


def likeness(one: str, other: str) -> float:
    """How alike two labels are: the better of their character likeness and the share of the
    shorter label's word stems the other holds."""
    a, b = stems(one), stems(other)
    overlap = len(a & b) / max(min(len(a), len(b)), 1)
    return max(SequenceMatcher(None, one.lower(), other.lower()).ratio(), overlap)


def decided_apart(one: Line, other: Line, links: Iterable[embedded.Row]) -> bool:
    apart = [link for link in links if link["decision"] == "apart"]
    return any(
        link["line_name"] == first.name and embedded.covers(link, label)
        for first, second in ((one, other), (other, one))
        for label in second.labels
        for link in apart
    )


def candidates(lines: dict[str, Line], links: list[embedded.Row]) -> list[tuple[float, Line, Line]]:
    """The undecided pairs that may be one line, best first."""
    pairs = []
    for one, other in combinations(lines.values(), 2):
        a, b = one.rows[0], other.rows[0]
        if any(a[key] != b[key] for key in SAME):
            continue
        if not one.units & other.units or one.readings & other.readings:
            continue
        (start_a, end_a), (start_b, end_b) = one.span(), other.span()
        if start_a - NEAR > end_b or start_b - NEAR > end_a:
            continue
        score = max(likeness(x[2], y[2]) for x in one.labels for y in other.labels)
        if score >= ALIKE and not decided_apart(one, other, links):
            pairs.append((score, one, other))
    return sorted(pairs, key=lambda item: (-item[0], item[1].short, item[2].short))


def describe(line: Line) -> str:
    row = line.rows[0]
    labels = "; ".join(
        f"{label}" + (f" [{tier}]" if tier else "") for _, _, label, tier, _ in line.labels
    )
    kind = f"named {line.name!r}" if line.named else "unnamed"
    return (
        f"  {line.short}  {labels}\n"
        f"            {kind}, {row['participant']}, units {', '.join(sorted(line.units))}\n"
        f"            {line.history()}"
    )


def find(lines: dict[str, Line], short: str) -> Line:
    matching = [line for line in lines.values() if line.short.startswith(short.replace("-", ""))]
    if len(matching) != 1:
        raise SystemExit(f"{short}: {len(matching)} lines of the venue start so; give more digits")
    return matching[0]


def write_links(links: list[embedded.Row]) -> None:
    """Write every decision to `links.csv` (the file is rewritten: a join may rename earlier
    decisions)."""
    with embedded.LINKS.open("w", newline="", encoding="utf-8") as handle:
        writer = csv.DictWriter(handle, fieldnames=embedded.LINK_COLUMNS, lineterminator="\n")
        writer.writeheader()
        writer.writerows(links)


def join(one: Line, other: Line, name: str | None, evidence: str) -> list[embedded.Row]:
    """The decisions joining every label of both lines to one name; a named second line's
    earlier decisions move to that name."""
    links = embedded.read_links()
    if one.named:
        chosen = one.name
    elif other.named:
        chosen = other.name
    else:
        readings = one.rows + other.rows
        chosen = name or max(readings, key=lambda row: row["effective_start"])["fee_name"]
    renamed = {line.name for line in (one, other) if line.named}
    for link in links:
        if link["decision"] == "joined" and link["line_name"] in renamed:
            link["line_name"] = chosen
    joined = [link for link in links if link["decision"] == "joined"]
    for label in one.labels + other.labels:
        if not any(embedded.covers(link, label) for link in joined):
            links.append(_decision(label, chosen, "joined", evidence))
    return links


def apart(one: Line, other: Line, evidence: str) -> list[embedded.Row]:
    links = embedded.read_links()
    for label in other.labels:
        links.append(_decision(label, one.name, "apart", evidence))
    return links


def _decision(label: embedded.Label, name: str, decision: str, evidence: str) -> embedded.Row:
    """A decision on one label of one participant (a label may be printed for several)."""
    venue, fee_type, fee_name, tier, participant = label
    values = (venue, fee_type, name, fee_name, tier, participant, decision, evidence)
    return dict(zip(embedded.LINK_COLUMNS, values, strict=True))


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tools.lines", description=__doc__)
    commands = parser.add_subparsers(dest="command", required=True)
    suggest = commands.add_parser("suggest", help="list the candidate pairs of a venue's lines")
    suggest.add_argument("venue")
    suggest.add_argument("--limit", type=int, default=20)
    for command in ("join", "apart"):
        decide = commands.add_parser(command, help=f"record that two lines are {command}")
        decide.add_argument("venue")
        decide.add_argument("one")
        decide.add_argument("other")
        decide.add_argument("--evidence", required=True, help="why: a quote or a reason")
        if command == "join":
            decide.add_argument("--name", help="the line's name, when neither is named")
    args = parser.parse_args(argv)
    lines = venue_lines(args.venue)
    if not lines:
        print(f"{args.venue}: no published facts", file=sys.stderr)
        return 1
    if args.command == "suggest":
        pairs = candidates(lines, embedded.read_links())
        for score, one, other in pairs[: args.limit]:
            print(f"{score:.2f}\n{describe(one)}\n{describe(other)}\n")
        print(f"{len(pairs)} candidate pairs among {len(lines)} lines of {args.venue}")
        return 0
    one, other = find(lines, args.one), find(lines, args.other)
    if one.line_id == other.line_id:
        print("they are one line already", file=sys.stderr)
        return 1
    if args.command == "join":
        write_links(join(one, other, args.name, args.evidence))
    else:
        write_links(apart(one, other, args.evidence))
    print(f"recorded in {embedded.LINKS}; run `make embedded` to apply it")
    return 0


if __name__ == "__main__":
    sys.exit(main())
