"""`fees coverage` (`make coverage`): what the current version covers, as Markdown
(`docs/data-coverage.md` for the embedded data).

Per venue and fee category: the records, how many rest on a primary source, how many have
dates their sources give or that were computed from other dated facts (`stated` or `derived`,
as against `observed`: seen in force on a day, start unknown), how many are uncertain, and the
earliest and latest effective dates; the records with no known end by the year of their
start; the records presumed on a day (last confirmed more than two years before it); the years
in which each venue's standard rates are confirmed; the complete schedules read; then the
registered venues with no records. Everything is read from the published
version, so the report says what the service serves. It holds nothing that changes from one
ingest of the same data to the next (no version id, no time), so a test can check the
committed report against the embedded data.
"""

import argparse
import sys
import textwrap
from collections.abc import Iterable
from pathlib import Path
from typing import Any, Final

import duckdb

from ingest import cli
from ingest.query import add_data_argument, current_local_version, open_version
from ingest.schema import VOCABULARIES

# One row per venue and category, then the venues' and the whole dataset's totals (GROUPING
# SETS: the NULL category is a venue's total, NULL venue and category the grand total).
COVERAGE: Final = """
SELECT
    exchange,
    fee_category,
    count(*) AS records,
    count(*) FILTER (WHERE source_kind = 'primary') AS primary_records,
    count(*) FILTER (WHERE source_kind = 'primary' AND date_basis = 'stated') AS primary_stated,
    count(*) FILTER (WHERE date_basis IN ('stated', 'derived')) AS dated,
    count(*) FILTER (WHERE uncertain) AS uncertain,
    count(DISTINCT source_url) AS sources,
    min(effective_start) AS earliest,
    max(coalesce(effective_end, effective_start)) AS latest,
    count(*) FILTER (WHERE effective_end IS NULL) AS open_ended
FROM fees
GROUP BY GROUPING SETS ((exchange, fee_category), (exchange), ())
ORDER BY exchange NULLS LAST, fee_category NULLS LAST
"""
BY_CATEGORY: Final = """
SELECT fee_category, count(*), count(DISTINCT exchange), count(DISTINCT source_url)
FROM fees GROUP BY fee_category ORDER BY fee_category
"""
BY_PROVENANCE: Final = """
SELECT source_kind, date_basis, count(*), count(*) FILTER (WHERE uncertain)
FROM fees GROUP BY ALL ORDER BY ALL
"""
# The records with no known end, by the year of their start: each counts as in force on any
# later day, resting on no later reading.
OPEN_ENDS: Final = """
SELECT year(effective_start), count(*), count(DISTINCT exchange), count(*) FILTER (WHERE uncertain)
FROM fees WHERE effective_end IS NULL GROUP BY ALL ORDER BY ALL
"""
# On each day, the records in force and those of them presumed for more than two years: no
# source shows their figure in force within 730 days before the day (`confirmed_through`); all
# records, then the equity records of adding and removing liquidity.
STALE_TARGET_DAY: Final = "2025-06-01"  # the day issue 36's target is measured on
PRESUMED_DAYS: Final = (
    *(f"{year}-01-01" for year in range(2018, 2027)),
    STALE_TARGET_DAY,
)
STALE_DAYS: Final = 730
STALE: Final = """
SELECT
    day,
    count(*),
    count(*) FILTER (WHERE confirmed_through < day - $stale),
    count(*) FILTER (WHERE fee_type = 'equity' AND action IN ('make', 'take')),
    count(*) FILTER (
        WHERE fee_type = 'equity' AND action IN ('make', 'take')
        AND confirmed_through < day - $stale
    )
FROM (SELECT CAST(unnest($days) AS DATE) AS day) AS days
JOIN fees
    ON effective_start <= day AND (effective_end IS NULL OR effective_end >= day)
GROUP BY day
ORDER BY day
"""
# Per venue and year, whether its standard make and take were confirmed on some day of the year:
# a standard record shown in force (from its start to `confirmed_through`) within the year.
STANDARD_YEARS: Final = (2018, 2026)
STANDARD_CONFIRMED: Final = """
SELECT
    exchange,
    fee_type,
    year,
    bool_or(action = 'make') AS make,
    bool_or(action = 'take') AS take
FROM fees
JOIN (SELECT unnest(range($first, $last + 1)) AS year) AS years
    ON year(effective_start) <= year AND year(confirmed_through) >= year
WHERE standard AND action IN ('make', 'take')
GROUP BY ALL
ORDER BY ALL
"""
VENUE_TYPES: Final = """
SELECT DISTINCT exchange, fee_type FROM fees WHERE fee_category = 'fees_and_rebates' ORDER BY ALL
"""
COMPLETE_SCHEDULES: Final = """
SELECT exchange, fee_type, complete_scope, complete_as_of, count(*), min(source_url)
FROM fees
WHERE complete_as_of IS NOT NULL
GROUP BY ALL
ORDER BY ALL
"""
REGISTERED: Final = "SELECT count(*) FROM exchanges"
SPREAD: Final = "SELECT count(DISTINCT exchange), count(DISTINCT fee_category) FROM fees"
EMPTY_VENUES: Final = """
SELECT code, display_name FROM exchanges
WHERE code NOT IN (SELECT DISTINCT exchange FROM fees) ORDER BY code
"""

HEADER: Final = """# Data coverage

Generated by `make coverage` (`fees coverage`) from the published version: do not edit by hand.
For the embedded data, `tests/test_embedded.py` checks that this file is what the command
writes. How the facts were gathered and dated: `data/facts/README.md`; what the provenance
columns mean: `docs/raw-format.md`, "Provenance".
"""


# The README's paragraph on the embedded data lies between these two lines; `fees coverage
# --readme README.md` rewrites it, and a test holds it to the data.
README_BEGIN: Final = "<!-- the embedded data today: made by `make coverage`, do not edit -->"
README_END: Final = "<!-- end of what `make coverage` makes -->"
README_WIDTH: Final = 99


def percent(part: int, whole: int) -> str:
    return f"{100 * part / whole:.0f}%" if whole else "-"


def render(con: duckdb.DuckDBPyConnection) -> str:
    """The report, as Markdown, of the version `con` has open (`ingest.query.open_version`)."""
    rows = con.execute(COVERAGE).fetchall()  # per venue and category, the grand total last
    empty = [f"- `{code}` ({name})" for code, name in con.execute(EMPTY_VENUES).fetchall()]
    lines = [
        HEADER,
        *_headline(rows),
        *_table(
            "By provenance",
            "| source_kind | date_basis | records | of which uncertain |\n|---|---|---:|---:|",
            (
                f"| {kind} | {basis} | {count:,} | {doubt:,} |"
                for kind, basis, count, doubt in con.execute(BY_PROVENANCE).fetchall()
            ),
        ),
        *_table(
            "By category",
            "| fee_category | records | venues | sources |\n|---|---:|---:|---:|",
            (
                f"| {category} | {count:,} | {venues} | {sources} |"
                for category, count, venues, sources in con.execute(BY_CATEGORY).fetchall()
            ),
        ),
        *_by_venue(rows[:-1]),
        "",
        *_table(
            "Open ends by the year of their start",
            "A record with no known end counts as in force on any later day (an `as_of` query, "
            "`GET /compare/`): the older its start, the longer that rests on no later reading. "
            "The last column counts those of them marked `uncertain`.\n\n"
            "| start year | open-ended records | venues | of which uncertain |\n"
            "|---|---:|---:|---:|",
            (
                f"| {year} | {count:,} | {venues} | {doubt:,} |"
                for year, count, venues, doubt in con.execute(OPEN_ENDS).fetchall()
            ),
        ),
        *_stale(con),
        *_standard(con),
        *_table(
            "Complete schedules",
            "The schedules read whole for a scope, each ending on the day before its date every "
            "open line of that scope it does not list (`docs/raw-format.md`, \"Complete "
            "schedules\"). A venue not listed has none read whole.\n\n"
            "| venue | fee type | scope | as of | lines listed | source |\n"
            "|---|---|---|---|---:|---|",
            (
                f"| {venue} | {fee_type} | {scope} | {day} | {count} | {url} |"
                for venue, fee_type, scope, day, count, url in con.execute(
                    COMPLETE_SCHEDULES
                ).fetchall()
            ),
        ),
        "## Venues with no records",
        "",
        *(empty or ["None."]),
    ]
    return "\n".join(lines) + "\n"


def readme_summary(con: duckdb.DuckDBPyConnection) -> str:
    """The README's paragraph on the data of the version `con` has open: the headline figures
    of the report, each computed here rather than copied by hand."""
    total = con.execute(COVERAGE).fetchall()[-1]
    records, primary, primary_stated, sources = total[2], total[3], total[4], total[7]
    [(venues, categories)] = con.execute(SPREAD).fetchall()
    [(registered,)] = con.execute(REGISTERED).fetchall()
    by_category = {category: count for category, count, *_ in con.execute(BY_CATEGORY).fetchall()}
    day, in_force, stale = con.execute(
        STALE, {"days": [STALE_TARGET_DAY], "stale": STALE_DAYS}
    ).fetchall()[0][:3]
    empty = [name for _code, name in con.execute(EMPTY_VENUES).fetchall()]
    all_categories = len(VOCABULARIES["fee_category"])
    text = (
        "The embedded data today ([docs/data-coverage.md](docs/data-coverage.md), made by "
        f"`make coverage`): **{records:,} records on {venues} of the {registered} registered "
        f"venues, read in {sources:,} public sources**; {percent(primary, records)} from primary "
        "sources (the venue's or a regulator's own text), "
        f"**{percent(primary_stated, records)} primary with a stated date**; "
        + (
            "every fee category present"
            if categories == all_categories
            else f"{categories} of the {all_categories} fee categories present"
        )
        + f", though {percent(by_category.get('fees_and_rebates', 0), records)} of the records "
        "are transaction fees and rebates. A record with no known end was last shown in force "
        "by a source on its `confirmed_through`; an answer for a later day marks it "
        f"`presumed`. Of the {in_force:,} records in force on {day}, {stale:,} "
        f"({percent(stale, in_force)}) were last confirmed more than {STALE_DAYS} days before "
        "it. "
        + (f"Nothing yet for {_series(empty)}. " if empty else "")
        + "How the facts were gathered, dated and checked: "
        "[data/facts/README.md](data/facts/README.md)."
    )
    return textwrap.fill(text, width=README_WIDTH, break_on_hyphens=False)


def with_readme_summary(readme: str, summary: str) -> str | None:
    """`readme` with the text between its two markers replaced by `summary`; None when it
    lacks either marker."""
    head, begin, rest = readme.partition(README_BEGIN)
    _old, end, tail = rest.partition(README_END)
    if not begin or not end:
        return None
    return f"{head}{README_BEGIN}\n{summary}\n{README_END}{tail}"


def _series(names: list[str]) -> str:
    return names[0] if len(names) == 1 else ", ".join(names[:-1]) + " and " + names[-1]


def _stale(con: duckdb.DuckDBPyConnection) -> list[str]:
    rows = con.execute(STALE, {"days": list(PRESUMED_DAYS), "stale": STALE_DAYS}).fetchall()
    return _table(
        "Presumed on a day",
        "Of the records in force on a day, those no source shows in force within "
        f"{STALE_DAYS} days before it (their `confirmed_through` is older): an answer for that "
        "day presumes them, and `GET /compare/` leaves them out by default. Target: at most "
        f"25% on {STALE_TARGET_DAY}.\n\n"
        f"| day | in force | presumed over {STALE_DAYS} days | share | equity make/take in force "
        f"| of them presumed over {STALE_DAYS} days | share |\n"
        "|---|---:|---:|---:|---:|---:|---:|",
        (
            f"| {day} | {count:,} | {stale:,} | {percent(stale, count)} | {equity:,} "
            f"| {equity_stale:,} | {percent(equity_stale, equity)} |"
            for day, count, stale, equity, equity_stale in rows
        ),
    )


def _standard(con: duckdb.DuckDBPyConnection) -> list[str]:
    first, last = STANDARD_YEARS
    years = range(first, last + 1)
    confirmed = {
        (venue, fee_type, year): ("M" if make else "") + ("T" if take else "")
        for venue, fee_type, year, make, take in con.execute(
            STANDARD_CONFIRMED, {"first": first, "last": last}
        ).fetchall()
    }
    head = " | ".join(str(year) for year in years)
    return _table(
        "Standard rates confirmed, by year",
        "Per venue and asset class with transaction fees, the years in which a source shows "
        "its standard rate in force: `M` to add liquidity (make), `T` to remove it (take), "
        "`-` neither (`docs/raw-format.md`, \"Standard rates\"). A year with neither rests on "
        "a reading from another year.\n\n"
        f"| venue | fee type | {head} |\n|---|---|{'---|' * len(years)}",
        (
            f"| {venue} | {fee_type} | "
            + " | ".join(confirmed.get((venue, fee_type, year)) or "-" for year in years)
            + " |"
            for venue, fee_type in con.execute(VENUE_TYPES).fetchall()
        ),
    )


def _headline(rows: list[tuple[Any, ...]]) -> list[str]:
    total = rows[-1]
    records, primary, primary_stated, dated, uncertain, sources = total[2:8]
    venues = len({row[0] for row in rows if row[0] is not None})
    return [
        "## Headline",
        "",
        f"- **{records:,} records** on **{venues} venues**, read in **{sources} sources**.",
        f"- {percent(primary, records)} rest on a primary source; "
        f"**{percent(primary_stated, records)} are primary with a stated date**.",
        f"- {percent(dated, records)} have stated or derived dates (the rest are `observed`: "
        f"in force on the day shown, start unknown); {percent(uncertain, records)} are "
        "marked `uncertain`.",
        f"- Effective dates from {total[8]} to {total[9]}; {total[10]:,} records are open-ended "
        "(no end date known).",
        "",
    ]


def _table(title: str, head: str, body: Iterable[str]) -> list[str]:
    return [f"## {title}", "", *head.split("\n"), *body, ""]


def _by_venue(rows: list[tuple[Any, ...]]) -> list[str]:
    lines = [
        "## By venue and category",
        "",
        "Shares are of the row's records. *Dated*: a `stated` or `derived` date. Dates: the "
        "earliest start and the latest day any record is known in force (its end, or its start "
        "when it has no end).",
        "",
        "| venue | category | records | primary | primary, stated | dated | uncertain | sources "
        "| earliest | latest |",
        "|---|---|---:|---:|---:|---:|---:|---:|---|---|",
    ]
    for row in rows:
        venue, category, count, prim, prim_stated, dated_count, doubt, srcs, first, last, _ = row
        label = f"**{venue}**" if category is None else venue
        lines.append(
            f"| {label} | {category or '**all**'} | {count:,} | {percent(prim, count)} "
            f"| {percent(prim_stated, count)} | {percent(dated_count, count)} "
            f"| {percent(doubt, count)} | {srcs} | {first} | {last} |"
        )
    return lines


# `fees coverage`: its line in `fees --help` (`ingest.cli`); its `--data`
# defaults to FEES_DATA_DIR.
HELP = "report what the current version covers, as Markdown"
READS_DATA_DIR = True


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_data_argument(parser)
    parser.add_argument("--out", type=Path, help="write the report here (default: stdout)")
    parser.add_argument(
        "--readme",
        type=Path,
        help="also rewrite this README's paragraph on the data, between its two marker lines",
    )


def run(args: argparse.Namespace) -> int:
    version = current_local_version(args.data, "coverage")
    if version is None:
        return 1
    con = open_version(version)
    report = render(con)
    if args.out is None:
        sys.stdout.write(report)
    else:
        args.out.write_text(report, encoding="utf-8")
        print(f"wrote {args.out}")
    if args.readme is not None:
        readme = with_readme_summary(args.readme.read_text(encoding="utf-8"), readme_summary(con))
        if readme is None:
            print(
                f"fees coverage: {args.readme} has no lines {README_BEGIN!r} and {README_END!r}",
                file=sys.stderr,
            )
            return 2
        args.readme.write_text(readme, encoding="utf-8")
        print(f"wrote {args.readme}")
    return 0


def main(argv: list[str] | None = None) -> int:
    """`python -m ingest.coverage ARGS` is `fees coverage ARGS`."""
    return cli.main("coverage", argv)


if __name__ == "__main__":
    raise SystemExit(main())
