"""The embedded dataset: what the committed data/raw and docs/data-coverage.md promise, checked
by building and ingesting them."""

import filecmp
import re
from pathlib import Path

import httpx
import pytest

from ingest import coverage, readme
from ingest.pipeline import IngestResult
from ingest.query import open_version
from ingest.schema import VOCABULARIES
from service.settings import Settings
from tests.conftest import LiveServer, exchange_headers
from tests.test_lives import named_line_id
from tools import embedded

ROOT = Path(__file__).parent.parent


def query(version: IngestResult, sql: str) -> list[tuple[object, ...]]:
    return open_version(version.version_dir).execute(sql).fetchall()


def test_committed_files_are_what_the_script_writes(tmp_path: Path) -> None:
    built = embedded.build(
        embedded.read_table(embedded.FACTS), embedded.asset_classes(), embedded.read_links()
    )
    for venue, rows in built.items():
        embedded.write(venue, rows, tmp_path)
    committed = sorted(path.name for path in embedded.RAW_DIR.glob("*.csv"))
    assert sorted(path.name for path in tmp_path.glob("*.csv")) == committed
    _, mismatch, errors = filecmp.cmpfiles(embedded.RAW_DIR, tmp_path, committed, shallow=False)
    assert (mismatch, errors) == ([], [])


def test_every_record_is_sourced_with_zero_rejects(embedded_version: IngestResult) -> None:
    assert (embedded_version.rejected_rows, embedded_version.duplicates) == (0, 0)
    [(records, unsourced, undated)] = query(
        embedded_version,
        """SELECT count(*),
                  count(*) FILTER (WHERE source_kind NOT IN ('primary', 'secondary')
                                   OR source_url IS NULL OR source_document IS NULL),
                  count(*) FILTER (WHERE date_basis IS NULL OR uncertain IS NULL)
           FROM fees""",
    )
    assert (records, unsourced, undated) == (embedded_version.records, 0, 0)


def test_it_meets_the_coverage_targets(embedded_version: IngestResult) -> None:
    """The targets of issue 21: 2,000 sourced records on 24 venues, 40% primary with a stated
    date, every fee category present."""
    [(records, venues, primary_stated)] = query(
        embedded_version,
        """SELECT count(*), count(DISTINCT exchange),
                  count(*) FILTER (WHERE source_kind = 'primary' AND date_basis = 'stated')
           FROM fees""",
    )
    assert records >= 2000
    assert venues >= 24
    assert primary_stated / records >= 0.40
    categories = {
        value for (value,) in query(embedded_version, "SELECT DISTINCT fee_category FROM fees")
    }
    assert categories == set(VOCABULARIES["fee_category"])


def test_the_coverage_report_is_what_the_command_writes(embedded_version: IngestResult) -> None:
    written = (ROOT / "docs" / "data-coverage.md").read_text(encoding="utf-8")
    assert written == coverage.render(open_version(embedded_version.version_dir))


def test_the_readmes_paragraph_on_the_data_is_what_the_command_writes(
    embedded_version: IngestResult,
) -> None:
    """The README's headline figures come from `make coverage`, so they cannot drift from the
    data (issue 37: they said 2,413 records while the data had 2,490)."""
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    summary = readme.readme_summary(open_version(embedded_version.version_dir))
    assert readme.with_readme_summary(text, summary) == text


def test_a_readme_without_the_markers_is_refused_not_rewritten() -> None:
    assert readme.with_readme_summary("# A README\n\nNo markers.\n", "figures") is None
    marked = f"a\n{readme.README_BEGIN}\nold\n{readme.README_END}\nb\n"
    assert readme.with_readme_summary(marked, "new") == (
        f"a\n{readme.README_BEGIN}\nnew\n{readme.README_END}\nb\n"
    )


def test_the_facts_readmes_totals_are_the_tables() -> None:
    facts = embedded.read_table(embedded.FACTS)
    held_out = sum(1 for fact in facts if fact["held_out"])
    text = " ".join((ROOT / "data" / "facts" / "README.md").read_text(encoding="utf-8").split())
    totals = re.search(r"Of the ([\d,]+) facts, ([\d,]+) are published and ([\d,]+) held out", text)
    assert totals is not None
    assert [int(figure.replace(",", "")) for figure in totals.groups()] == [
        len(facts),
        len(facts) - held_out,
        held_out,
    ]


def test_the_facts_readmes_dimension_counts_are_the_tables() -> None:
    published = [fact for fact in embedded.read_table(embedded.FACTS) if not fact["held_out"]]
    text = " ".join((ROOT / "data" / "facts" / "README.md").read_text(encoding="utf-8").split())
    counts = re.search(
        r"Of the published facts, ([\d,]+) state fee codes, ([\d,]+) a price band, ([\d,]+) a "
        r"display, ([\d,]+) tapes and ([\d,]+) a tier",
        text,
    )
    assert counts is not None
    columns = ("fee_codes", "price_band", "display", "tapes", "tier")
    assert [int(figure.replace(",", "")) for figure in counts.groups()] == [
        sum(1 for fact in published if fact[column]) for column in columns
    ]


# Words that speak of how the data was made, not of the fee: the project's own files and its
# curation (issue 37). Such remarks go in facts.csv's unpublished `reviewer` column.
MAKING = re.compile(
    r"facts\.csv|links\.csv|sourced-fees|data/(?:raw|facts)|tools/|\bsample\b|\bdataset\b"
    r"|held out|recorded (?:as|once)|carried into|\bingest|line_name|reviewer",
    re.IGNORECASE,
)
PUBLISHED_TEXT = (
    "notes", "conditions", "extra_info", "exclusions", "action_details", "participant_details",
    "volume_criteria", "fee_name", "volume_tier", "source_document",
)  # fmt: skip


def test_no_published_text_speaks_of_how_the_data_was_made(
    embedded_version: IngestResult,
) -> None:
    columns = ", ".join(f"coalesce({column}, '')" for column in PUBLISHED_TEXT)
    texts = query(embedded_version, f"SELECT record_id, {columns} FROM fees")
    making = [
        (row[0], column, text)
        for row in texts
        for column, text in zip(PUBLISHED_TEXT, row[1:], strict=True)
        if MAKING.search(str(text))
    ]
    assert making == []


def test_an_undated_fact_is_held_out_with_its_reason_and_a_published_one_is_sourced() -> None:
    facts = embedded.read_table(embedded.FACTS)
    assert all(fact["held_out"] for fact in facts if not fact["effective_start"])
    published = [fact for fact in facts if not fact["held_out"]]
    assert all(
        fact["source_url"]
        and fact["source_kind"] in ("primary", "secondary")
        and fact["date_basis"]
        for fact in published
    )


def fact(venue: str, fee_type: str = "equity", **values: str) -> dict[str, str]:
    row = dict.fromkeys(embedded.FACT_COLUMNS, "")
    return row | {"venue": venue, "fee_type": fee_type, "fee_name": f"{venue} fee"} | values


def test_a_market_wide_fee_is_repeated_on_the_venues_of_its_class_with_facts_of_their_own() -> None:
    registry = {
        "nyse": {"equity"},
        "memx": {"equity", "option"},
        "box": {"option"},
        "txse": {"equity"},
    }
    built = embedded.build(
        [
            fact("nyse", effective_start="2010-01-04"),
            fact("memx", "option", effective_start="2023-09-27"),
            fact("box", "option", effective_start="2018-02-01"),
            fact("@equity", fee_name="Section 31", effective_start="2012-01-01"),
            fact(
                "@option",
                "option",
                fee_name="Old OCC fee",
                effective_start="2019-01-01",
                effective_end="2020-12-31",
            ),
            fact("@option", "option", fee_name="CAT fee", effective_start="2024-09-01"),
            fact("nyse", fee_name="Held", held_out="undated in its source"),
        ],
        registry,
    )
    names = {venue: [row["fee_name"] for row in rows] for venue, rows in built.items()}
    # memx has no equity facts of its own and txse none at all: no Section 31 there; the OCC
    # fee ended before memx's own options facts begin.
    assert names == {
        "box": ["CAT fee", "Old OCC fee", "box fee"],
        "memx": ["CAT fee", "memx fee"],
        "nyse": ["Section 31", "nyse fee"],
    }
    assert all(row["exchange"] == venue for venue, rows in built.items() for row in rows)


@pytest.mark.parametrize(
    ("facts", "message"),
    [
        ([fact("lse")], "facts.csv names venues missing from the registry: ['lse']"),
        ([fact("nyse"), fact("nyse")], "nyse: facts.csv holds the same line twice"),
        ([fact("nyse"), fact("@equity", "option")], "@equity fee: @equity with a option fee"),
    ],
    ids=["unknown-venue", "twice", "class-mismatch"],
)
def test_facts_that_cannot_be_published_stop_the_build(
    facts: list[dict[str, str]], message: str
) -> None:
    with pytest.raises(ValueError) as caught:
        embedded.build(facts, {"nyse": {"equity"}})
    assert str(caught.value) == message


# MEMX's standard rebate for adding displayed liquidity (fee codes B, D and J), one named line
# joining the readings printed as "Adding displayed liquidity, base" and as the fee code's row.
MEMX_DISPLAYED = named_line_id("memx", "equity", "Added displayed volume (fee codes B, D, J)")


def test_a_real_rate_history_is_one_line_across_labels(embedded_version: IngestResult) -> None:
    """From MEMX's launch pricing to its latest schedule read: each reading one record, ended
    the day before the next, whatever label the source printed."""
    history = query(
        embedded_version,
        f"""SELECT fee_amount, effective_start, effective_end, standard
            FROM fees WHERE line_id = '{MEMX_DISPLAYED}' ORDER BY effective_start""",
    )
    assert [(amount, str(start), str(end)) for amount, start, end, _ in history] == [
        ("($0.0029)", "2020-12-01", "2021-01-31"),
        ("($0.0034)", "2021-02-01", "2021-05-31"),
        ("($0.0031)", "2021-06-01", "2021-08-31"),
        ("($0.0028)", "2021-09-01", "2021-10-31"),
        ("($0.0028)", "2021-11-01", "2022-01-02"),
        ("($0.0022)", "2022-01-03", "2022-05-31"),
        ("($0.0020)", "2022-06-01", "2022-08-31"),
        ("($0.0020)", "2022-09-01", "2022-11-30"),
        ("($0.0020)", "2022-12-01", "2023-05-31"),
        ("($0.0018)", "2023-06-01", "None"),
    ]
    assert all(standard for *_, standard in history)


def test_the_real_rate_changes_are_listed_with_their_before_and_after(
    embedded_version: IngestResult, accounts_file: Path
) -> None:
    """`GET /fee-changes/` over the embedded data, through the server: every change of MEMX's
    standard displayed add rebate, each with both records; Trader Alert 21-37's cut from
    $0.0028 to $0.0022 on 2022-01-03 among them, with the alert as the source."""
    settings = Settings(
        data_dir=embedded_version.version_dir.parent.parent, accounts_file=accounts_file
    )
    params = {
        "exchange_name": "memx", "fee_action": "make", "standard": "true", "page_size": "100",
    }  # fmt: skip
    with LiveServer(settings) as live:
        response = httpx.get(
            f"{live.url}/api/v1/fee-changes/", params=params, headers=exchange_headers()
        )
    assert response.status_code == 200
    changes = [item for item in response.json()["data"] if item["line_id"] == MEMX_DISPLAYED]
    assert [
        (item["change_type"], item["effective_date"], (item["before"] or {}).get("fee_amount"),
         item["after"]["fee_amount"])
        for item in changes
    ] == [
        ("added", "2020-12-01", None, "($0.0029)"),
        ("changed", "2021-02-01", "($0.0029)", "($0.0034)"),
        ("changed", "2021-06-01", "($0.0034)", "($0.0031)"),
        ("changed", "2021-09-01", "($0.0031)", "($0.0028)"),
        ("changed", "2022-01-03", "($0.0028)", "($0.0022)"),
        ("changed", "2022-06-01", "($0.0022)", "($0.0020)"),
        ("changed", "2023-06-01", "($0.0020)", "($0.0018)"),
    ]  # fmt: skip
    cut = changes[4]
    assert cut["label"] == "Added displayed volume (fee codes B, D, J)"
    assert (cut["before"]["effective_end"], cut["after"]["unit"]) == ("2022-01-02", "per_share")
    assert cut["after"]["source_link"] == (
        "https://info.memxtrading.com/trader-alert-21-37-fee-schedule-update-effective-january-3-2022/"
    )


def test_cboe_s_standard_rates_show_their_changes_and_a_schedule_s_ends(
    embedded_version: IngestResult, accounts_file: Path
) -> None:
    """Cboe BZX cut its standard rebate for adding displayed liquidity from $0.0020 to $0.0016
    in the schedule of 2024-11-20; EDGA's inverted pricing of 2024-10-25 ended on 2024-10-31 by
    its own schedule's word, and its maker-taker pricing is read from 2025-03-13: a removal,
    then an addition."""
    settings = Settings(
        data_dir=embedded_version.version_dir.parent.parent, accounts_file=accounts_file
    )
    params = {"standard": "true", "fee_type": "equity", "fee_action": "make",
              "start_date": "2024-01-01", "end_date": "2025-12-31", "page_size": "100"}  # fmt: skip
    with LiveServer(settings) as live:
        changes = {
            venue: httpx.get(
                f"{live.url}/api/v1/fee-changes/",
                params=params | {"exchange_name": venue},
                headers=exchange_headers(),
            ).json()["data"]
            for venue in ("cboe_bzx", "cboe_edga")
        }
    assert [
        (item["change_type"], item["effective_date"], item["before"]["fee_amount"],
         item["after"]["fee_amount"])
        for item in changes["cboe_bzx"]
    ] == [("changed", "2024-11-20", "($0.0020)", "($0.0016)")]  # fmt: skip
    assert [(item["change_type"], item["effective_date"]) for item in changes["cboe_edga"]] == [
        ("changed", "2024-10-25"),
        ("removed", "2024-11-01"),
        ("added", "2025-03-13"),
    ]
