"""The review of a venue's fee lines (`tools.lines`): candidates listed, decisions kept in the
links table and applied by the build, a decided pair never listed again."""

import csv
from pathlib import Path

import pytest

from tests.test_lives import named_line_id
from tools import embedded, lines

BASE = "Adding displayed liquidity, base"
CODE = "Fee code B, D or J: Added displayed volume"
RETAIL = "Retail order adding displayed liquidity"
TIER = "Adding displayed volume, step-up"


def fact(fee_name: str, amount: str, start: str, url: str, **values: str) -> embedded.Row:
    row = dict.fromkeys(embedded.FACT_COLUMNS, "")
    return row | {
        "venue": "memx",
        "fee_type": "equity",
        "fee_category": "fees_and_rebates",
        "action": "make",
        "participant": "all",
        "fee_name": fee_name,
        "fee_amount": amount,
        "fee_basis": "per share",
        "effective_start": start,
        "source_document": "MEMX alert",
        "source_url": url,
        "source_kind": "primary",
        "date_basis": "stated",
        "uncertain": "false",
        **values,
    }


@pytest.fixture
def facts(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A small facts table and an empty links table in place of the embedded ones."""
    rows = [
        fact(BASE, "($0.0029)", "2020-12-01", "https://example.test/20-11"),
        fact(BASE, "($0.0034)", "2021-02-01", "https://example.test/21-05"),
        fact(CODE, "($0.0022)", "2022-01-03", "https://example.test/21-37"),
        fact(RETAIL, "($0.0034)", "2020-12-01", "https://example.test/20-11", participant="other"),
        fact(TIER, "($0.0032)", "2020-12-01", "https://example.test/20-11"),
        fact("Removing liquidity", "$0.0030", "2020-12-01", "https://example.test/20-11",
             action="take"),
    ]  # fmt: skip
    monkeypatch.setattr(embedded, "FACTS", tmp_path / "facts.csv")
    monkeypatch.setattr(embedded, "LINKS", tmp_path / "links.csv")
    for path, columns, table in (
        (embedded.FACTS, embedded.FACT_COLUMNS, rows),
        (embedded.LINKS, embedded.LINK_COLUMNS, []),
    ):
        with path.open("w", newline="", encoding="utf-8") as handle:
            writer = csv.DictWriter(handle, fieldnames=columns, lineterminator="\n")
            writer.writeheader()
            writer.writerows(table)
    return tmp_path


def pairs() -> list[tuple[str, str]]:
    found = lines.candidates(lines.venue_lines("memx"), embedded.read_links())
    return [tuple(sorted((one.name, other.name))) for _, one, other in found]  # type: ignore[misc]


def short(name: str) -> str:
    [line] = [line for line in lines.venue_lines("memx").values() if line.name == name]
    return line.short


def test_candidates_share_class_and_unit_and_were_never_read_together(facts: Path) -> None:
    # The retail rebate is another participant's, the removal fee another action's; the step-up
    # is most like the base rebate, but one alert printed both.
    assert sorted(pairs()) == [(BASE, CODE), (TIER, CODE)]


def test_a_join_names_both_labels_and_the_build_puts_them_on_one_line(
    facts: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    evidence = "both print the row 'B, D or J Added displayed volume'"
    args = ["join", "memx", short(BASE), short(CODE), "--evidence", evidence]
    assert lines.main(args) == 0
    assert "make embedded" in capsys.readouterr().out
    links = embedded.read_links()
    assert [
        (link["line_name"], link["fee_name"], link["participant"], link["decision"])
        for link in links
    ] == [(CODE, BASE, "all", "joined"), (CODE, CODE, "all", "joined")]
    built = embedded.build(embedded.read_table(embedded.FACTS), embedded.asset_classes(), links)
    joined = [row for row in built["memx"] if row["fee_name"] in (BASE, CODE)]
    assert {lines.line_id(row) for row in joined} == {named_line_id("memx", "equity", CODE)}
    assert pairs() == []  # the joined line was read with the step-up now


def test_an_apart_decision_is_never_listed_again(facts: Path) -> None:
    assert lines.main(["apart", "memx", short(BASE), short(CODE), "--evidence", "no"]) == 0
    assert pairs() == [(TIER, CODE)]
    [link] = embedded.read_links()
    assert (link["line_name"], link["fee_name"], link["decision"]) == (BASE, CODE, "apart")


def test_a_link_may_keep_to_one_participant_of_a_label_printed_for_several(
    facts: Path,
) -> None:
    """One label printed for two participants: a decision naming one joins that one alone,
    a decision naming none joins both."""
    shared = "Non-Customer adding liquidity"
    facts_table = embedded.read_table(embedded.FACTS) + [
        fact(shared, "($0.40)", "2026-01-28", "https://example.test/s", participant=who)
        for who in ("firm", "broker_dealer")
    ]
    link = dict.fromkeys(embedded.LINK_COLUMNS, "") | {
        "venue": "memx", "fee_type": "equity", "line_name": "Firm add", "fee_name": shared,
        "participant": "firm", "decision": "joined", "evidence": "e",
    }  # fmt: skip
    registry = embedded.asset_classes()
    rows = embedded.build(facts_table, registry, [link])["memx"]
    named = {row["participant"]: row["line_name"] for row in rows if row["fee_name"] == shared}
    assert named == {"firm": "Firm add", "broker_dealer": ""}
    rows = embedded.build(facts_table, registry, [link | {"participant": ""}])["memx"]
    assert {row["line_name"] for row in rows if row["fee_name"] == shared} == {"Firm add"}


def test_a_link_naming_no_fact_or_joining_a_label_twice_stops_the_build(facts: Path) -> None:
    link = dict(zip(embedded.LINK_COLUMNS, ("memx", "equity", "X", BASE, "", "", "joined", "e"),
                    strict=True))  # fmt: skip
    facts_table = embedded.read_table(embedded.FACTS)
    registry = embedded.asset_classes()
    with pytest.raises(ValueError, match="is joined to two lines"):
        embedded.build(facts_table, registry, [link, link | {"line_name": "Y"}])
    with pytest.raises(ValueError, match="no fact has the label"):
        embedded.build(facts_table, registry, [link | {"fee_name": "Nothing"}])
