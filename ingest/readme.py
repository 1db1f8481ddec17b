"""The README's paragraph on the embedded data, made from the published version by `fees
coverage --readme README.md` (`make coverage`) and held to the data by a test, so its figures
cannot drift from what the service serves."""

import textwrap
from typing import Final

import duckdb

from ingest.coverage_figures import (
    BY_CATEGORY,
    COVERAGE,
    EMPTY_VENUES,
    REGISTERED,
    SPREAD,
    STALE,
    STALE_DAYS,
    STALE_TARGET_DAY,
    percent,
)
from ingest.schema import VOCABULARIES

# The README's paragraph on the embedded data lies between these two lines; `fees coverage
# --readme README.md` rewrites it, and a test holds it to the data.
README_BEGIN: Final = "<!-- the embedded data today: made by `make coverage`, do not edit -->"
README_END: Final = "<!-- end of what `make coverage` makes -->"
README_WIDTH: Final = 99


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
