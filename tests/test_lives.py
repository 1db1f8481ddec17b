"""The lives of fee lines at ingest (`ingest.lives`, docs/raw-format.md): ends derived from the
line's next reading and from complete schedules, repeated readings confirming a record, lines
named by a reader, standard rates two at a time reported, and the rules on what a row says of
its life."""

import hashlib
import json
import tempfile
import uuid
from dataclasses import dataclass
from datetime import date, timedelta
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ingest import layout
from ingest.errors import IngestError
from ingest.pipeline import IngestResult, run_ingest
from ingest.schema import V4_RAW_COLUMNS
from tests.conftest import REGISTRY, fee_row, read_fees, write_raw
from tests.test_ingest import documented_line_id, read_rejects

PRICE_LIST = "https://example.test/nyse-price-list"  # `fee_row`'s source
JAN = "https://example.test/schedule-2024-01"
FEB = "https://example.test/schedule-2024-02"
MAR = "https://example.test/schedule-2024-03"


def ingest(tmp_path: Path, *files: list[dict[str, str]]) -> IngestResult:
    for number, rows in enumerate(files):
        write_raw(tmp_path / "raw" / f"{'abcdefg'[number]}.csv", rows)
    return run_ingest(tmp_path / "raw", tmp_path / "data", registry=REGISTRY)


def life(record: dict[str, Any]) -> tuple[object, ...]:
    """What the ingest settled of a record: its period, date basis, confirmation and ender."""
    return (
        record["fee_name"],
        str(record["effective_start"]),
        str(record["effective_end"]) if record["effective_end"] else None,
        record["date_basis"],
        str(record["confirmed_through"]),
        record["ended_by"],
    )


def named_line_id(exchange: str, fee_type: str, name: str) -> str:
    """docs/raw-format.md, "Fee lines": a named line's id, md5 of [venue, fee type, name]."""
    text = json.dumps([exchange, fee_type, name], separators=(",", ":"), ensure_ascii=False)
    return str(uuid.UUID(hashlib.md5(text.encode()).hexdigest()))


def in_schedule(as_of: str, url: str, scope: str = "fee_category", **values: str) -> dict[str, str]:
    """A row read in a complete schedule of `as_of`, shown in force from that day."""
    return fee_row(
        effective_start=as_of,
        date_basis="observed",
        source_url=url,
        complete_scope=scope,
        complete_as_of=as_of,
        **values,
    )


def test_an_open_record_ends_the_day_before_its_lines_next_reading(tmp_path: Path) -> None:
    result = ingest(
        tmp_path,
        [
            fee_row(),  # stated, no end
            fee_row(fee_amount="($0.0015)", effective_start="2021-06-01", date_basis="observed"),
            fee_row(fee_amount="($0.0015)", effective_start="2022-01-03"),  # same figure again
        ],
    )
    # The first figure changed by 2021-06-01, on a day no source shows: confirmed on its own
    # reading only. The second is read again from the day after its end: confirmed to it.
    assert [life(record) for record in read_fees(result.version_dir)] == [
        ("Adding credit", "2020-01-02", "2021-05-31", "stated", "2020-01-02", PRICE_LIST),
        ("Adding credit", "2021-06-01", "2022-01-02", "observed", "2022-01-02", PRICE_LIST),
        ("Adding credit", "2022-01-03", None, "stated", "2022-01-03", None),
    ]
    manifest = layout.read_manifest(result.version_dir)
    assert manifest["derived_ends"] == {"next_reading": 2, "complete_schedule": 0}
    assert result.rejected_rows == 0


def test_a_reading_inside_another_with_the_same_figure_confirms_it(tmp_path: Path) -> None:
    """A source showing a figure on its last day (the old rate in a change notice), inside the
    period another source states: one record, nothing rejected."""
    period = {"effective_start": "2025-03-01", "effective_end": "2025-04-30"}
    result = ingest(
        tmp_path,
        [
            fee_row(**period),
            fee_row(effective_start="2025-04-30", effective_end="2025-04-30",
                    date_basis="observed", source_url=MAR),
            fee_row(effective_start="2025-03-03", source_url=FEB),  # no end given
            fee_row(fee_amount="($0.0014)", effective_start="2025-05-01"),
        ],
    )  # fmt: skip
    assert [life(record) for record in read_fees(result.version_dir)] == [
        ("Adding credit", "2025-03-01", "2025-04-30", "stated", "2025-04-30", None),
        ("Adding credit", "2025-05-01", None, "stated", "2025-05-01", None),
    ]
    manifest = layout.read_manifest(result.version_dir)
    assert (manifest["repeated_readings"], result.rejected_rows) == (2, 0)


def test_a_complete_schedule_ends_what_it_omits_and_confirms_what_it_lists(
    tmp_path: Path,
) -> None:
    take = {"action": "take", "fee_name": "Removing fee", "fee_amount": "$0.0030"}
    tier = {"fee_name": "Tier 1 credit", "fee_amount": "($0.0020)"}
    other_scope = {"fee_category": "legal_regulatory_fee", "fee_name": "Regulatory fee"}
    result = ingest(
        tmp_path,
        [
            fee_row(),  # line 2: listed again by the schedule, same figure
            fee_row(**take),  # line 3: listed with a new figure
            fee_row(effective_start="2019-05-01", **tier),  # line 4: omitted
            fee_row(effective_start="2019-05-01", **other_scope),  # line 5: another scope
            fee_row(fee_name="Ended before", effective_end="2023-12-31"),  # line 6
            fee_row(fee_name="Starts on the day", effective_start="2024-03-01"),  # line 7
        ],
        [
            in_schedule("2024-03-01", MAR),
            in_schedule("2024-03-01", MAR, **take | {"fee_amount": "$0.0029"}),
        ],
    )
    records = {
        (record["fee_name"], str(record["effective_start"])): life(record)
        for record in read_fees(result.version_dir)
    }
    assert records == {
        ("Adding credit", "2020-01-02"): (
            "Adding credit", "2020-01-02", "2024-02-29", "stated", "2024-02-29", MAR),
        ("Adding credit", "2024-03-01"): (
            "Adding credit", "2024-03-01", None, "observed", "2024-03-01", None),
        ("Removing fee", "2020-01-02"): (  # a new figure: confirmed on its own reading
            "Removing fee", "2020-01-02", "2024-02-29", "stated", "2020-01-02", MAR),
        ("Removing fee", "2024-03-01"): (
            "Removing fee", "2024-03-01", None, "observed", "2024-03-01", None),
        # Gone by the schedule's day: ended the day before, last confirmed by its own reading.
        ("Tier 1 credit", "2019-05-01"): (
            "Tier 1 credit", "2019-05-01", "2024-02-29", "stated", "2019-05-01", MAR),
        ("Regulatory fee", "2019-05-01"): (
            "Regulatory fee", "2019-05-01", None, "stated", "2019-05-01", None),
        ("Ended before", "2020-01-02"): (
            "Ended before", "2020-01-02", "2023-12-31", "stated", "2023-12-31", None),
        ("Starts on the day", "2024-03-01"): (
            "Starts on the day", "2024-03-01", None, "stated", "2024-03-01", None),
    }  # fmt: skip
    manifest = layout.read_manifest(result.version_dir)
    assert manifest["derived_ends"] == {"next_reading": 2, "complete_schedule": 1}


def test_a_given_end_past_a_schedule_that_omits_the_line_is_rejected(tmp_path: Path) -> None:
    result = ingest(
        tmp_path,
        [fee_row(fee_name="Program rebate", effective_end="2025-12-31")],
        [in_schedule("2024-03-01", MAR)],
    )
    assert [record["fee_name"] for record in read_fees(result.version_dir)] == ["Adding credit"]
    [reject] = read_rejects(result.version_dir)
    assert reject == {
        "file": "a.csv",
        "line": "2",
        "column": "effective_end",
        "value": "2025-12-31",
        "reason": "in force to this end by its row, but the complete fee_category schedule of "
        f"2024-03-01 ({MAR}) does not list its fee line",
    }


def test_monthly_extracts_yield_a_history_without_hand_made_ends(tmp_path: Path) -> None:
    """Each month's full schedule, its lines with the start the extract gives: a line listed
    again is one record confirmed through the later month; a line left out ends."""
    kept = {"fee_name": "Kept line", "effective_start": "2023-06-01", "date_basis": "stated"}
    dropped = {"fee_name": "Dropped line", "effective_start": "2023-06-01"}
    january = [in_schedule("2024-01-01", JAN) | kept, in_schedule("2024-01-01", JAN) | dropped]
    february = [in_schedule("2024-02-01", FEB) | kept]
    result = ingest(tmp_path, january, february)
    assert sorted(life(record) for record in read_fees(result.version_dir)) == [
        ("Dropped line", "2023-06-01", "2024-01-31", "observed", "2024-01-01", FEB),
        ("Kept line", "2023-06-01", None, "stated", "2024-02-01", None),
    ]
    manifest = layout.read_manifest(result.version_dir)
    assert (manifest["repeated_readings"], manifest["records"], result.rejected_rows) == (1, 2, 0)


def test_a_complete_standard_rates_schedule_ends_only_standard_lines(tmp_path: Path) -> None:
    standard = {"standard": "true"}
    result = ingest(
        tmp_path,
        [
            fee_row(fee_name="Base add rebate", **standard),
            fee_row(fee_name="Tier credit", fee_amount="($0.0030)"),
        ],
        [
            in_schedule(
                "2024-03-01", MAR, "standard_rates", fee_name="Standard add rebate", **standard
            )
        ],
    )
    assert sorted(life(record) for record in read_fees(result.version_dir)) == [
        ("Base add rebate", "2020-01-02", "2024-02-29", "stated", "2020-01-02", MAR),
        ("Standard add rebate", "2024-03-01", None, "observed", "2024-03-01", None),
        ("Tier credit", "2020-01-02", None, "stated", "2020-01-02", None),
    ]


def test_a_named_line_joins_readings_under_other_labels_tiers_and_classes(
    tmp_path: Path,
) -> None:
    name = "Added displayed volume"
    rows = [
        fee_row(fee_name="Adding displayed liquidity, base", line_name=name),
        fee_row(
            fee_name="Fee code B, D or J: Added displayed volume",
            fee_amount="($0.0020)",
            effective_start="2022-06-01",
            volume_tier="Base",
            trade_type="not_applicable",
            line_name=name,
        ),
    ]
    result = ingest(tmp_path, rows)
    records = read_fees(result.version_dir)
    assert {record["line_id"] for record in records} == {named_line_id("nyse", "equity", name)}
    assert [str(record["effective_end"]) for record in records] == ["2022-05-31", "None"]
    # A schema 4 file keeps its meaning: the name stands for the label, the tier still counts.
    write_raw(tmp_path / "v4" / "old.csv", rows, V4_RAW_COLUMNS)
    old = read_fees(run_ingest(tmp_path / "v4", tmp_path / "d4", registry=REGISTRY).version_dir)
    assert [record["line_id"] for record in old] == [documented_line_id(row) for row in rows]
    assert len({record["line_id"] for record in old}) == 2


def test_two_standard_lines_in_force_on_one_day_are_rejected_naming_each_other(
    tmp_path: Path,
) -> None:
    result = ingest(
        tmp_path,
        [
            fee_row(fee_name="Base add rebate", standard="true"),  # line 2
            fee_row(fee_name="Standard add rebate", fee_amount="($0.0016)",
                    effective_start="2021-01-01", standard="true"),  # line 3: with line 2
            fee_row(fee_name="Sub-dollar add", fee_amount="(0.05%)", fee_basis="of total dollar "
                    "value", standard="true"),  # line 4: another unit
            fee_row(fee_name="Old base rebate", effective_start="2015-01-02",
                    effective_end="2019-12-31", standard="true"),  # line 5: ended before
            fee_row(action="take", fee_name="Base take fee", fee_amount="$0.0030",
                    standard="true"),  # line 6: another action
            fee_row(fee_name="Non-displayed add", fee_amount="($0.0010)",
                    display="non_displayed", standard="true"),  # line 7: another display
            fee_row(fee_name="Add below $1.00", fee_amount="($0.0001)",
                    price_band="below_1", standard="true"),  # line 8: another price band
        ],
    )  # fmt: skip
    names = sorted(record["fee_name"] for record in read_fees(result.version_dir))
    assert names == [
        "Add below $1.00", "Base take fee", "Non-displayed add", "Old base rebate",
        "Sub-dollar add",
    ]  # fmt: skip
    what = (
        "another fee line standard for the same class, display, price band and unit, in force"
    )
    assert {(r["line"], r["column"], r["reason"]) for r in read_rejects(result.version_dir)} == {
        ("2", "standard", f"both standard: a.csv, line 3 ({what} 2021-01-01 to no end)"),
        ("3", "standard", f"both standard: a.csv, line 2 ({what} 2020-01-02 to no end)"),
    }


def test_a_rejected_reading_no_longer_ends_the_record_before_it(tmp_path: Path) -> None:
    """The second standard conflict only shows once the first is settled: the record the
    rejected reading ended runs on, into another standard line."""
    result = ingest(
        tmp_path,
        [
            fee_row(fee_name="Base", standard="true"),  # line 2: ended by line 3, until...
            fee_row(fee_name="Base", fee_amount="($0.0014)", effective_start="2021-01-01",
                    effective_end="2021-12-31", standard="true"),  # line 3: rejected with 4
            fee_row(fee_name="Promo", fee_amount="($0.0016)", effective_start="2021-06-01",
                    effective_end="2021-06-30", standard="true"),  # line 4
            fee_row(fee_name="Later", fee_amount="($0.0018)", effective_start="2022-01-03",
                    standard="true"),  # line 5: meets line 2 once line 3 is gone
            fee_row(fee_name="Tier credit"),  # line 6: not standard
        ],
    )  # fmt: skip
    assert [record["fee_name"] for record in read_fees(result.version_dir)] == ["Tier credit"]
    assert sorted({int(reject["line"]) for reject in read_rejects(result.version_dir)}) == [
        2,
        3,
        4,
        5,
    ]


@pytest.mark.parametrize(
    ("values", "column", "reason"),
    [
        ({"standard": "true", "fee_name": "Maximum rebate per share"}, "standard",
         "a standard rate is a plain figure (a fee or rebate), not a cap, a maximum, a minimum "
         "or text"),
        ({"standard": "true", "fee_amount": "Free"}, "standard",
         "a standard rate is a plain figure (a fee or rebate), not a cap, a maximum, a minimum "
         "or text"),
        ({"standard": "yes"}, "standard", "not one of: false, true"),
        ({"complete_scope": "standard_rates", "complete_as_of": "2020-01-02"}, "complete_scope",
         "a row of a complete standard-rates schedule is a standard rate: standard must be true"),
        ({"complete_scope": "fee_category"}, "complete_as_of",
         "complete_scope needs complete_as_of"),
        ({"complete_as_of": "2020-01-02"}, "complete_scope",
         "complete_as_of needs complete_scope: fee_category or standard_rates"),
        ({"complete_scope": "fee_category", "complete_as_of": "2019-12-31"}, "complete_as_of",
         "the row is not in force on complete_as_of"),
        ({"complete_scope": "fee_category", "complete_as_of": "2020-02-01",
          "effective_end": "2020-01-31"}, "complete_as_of",
         "the row is not in force on complete_as_of"),
        ({"complete_scope": "all", "complete_as_of": "2020-01-02"}, "complete_scope",
         "not one of: fee_category, standard_rates"),
    ],
    ids=lambda value: str(value)[:60],
)  # fmt: skip
def test_what_a_row_says_of_its_life_must_hold_of_the_row(
    tmp_path: Path, values: dict[str, str], column: str, reason: str
) -> None:
    write_raw(tmp_path / "raw" / "one.csv", [fee_row(**values), fee_row(fee_name="Valid")])
    result = run_ingest(tmp_path / "raw", tmp_path / "data", registry=REGISTRY)
    assert [(r["column"], r["reason"]) for r in read_rejects(result.version_dir)] == [
        (column, reason)
    ]


@pytest.mark.parametrize(
    ("label", "basis", "unit"),
    [
        ("Maximum rebate per share provided by the Exchange", "per share executed", "other"),
        ("Monthly minimum fee", "per month", "other"),
        ("Mega Step Up Tier rebate (without TCV minimum)", "per share executed", "per_share"),
        ("Market Maker surcharge after Monthly Cap", "per contract", "per_contract"),
    ],
    ids=lambda value: str(value)[:40],
)
def test_a_label_that_is_a_limit_is_not_counted_as_a_rate(
    tmp_path: Path, label: str, basis: str, unit: str
) -> None:
    write_raw(tmp_path / "raw" / "one.csv", [fee_row(fee_name=label, fee_basis=basis)])
    result = run_ingest(tmp_path / "raw", tmp_path / "d", registry=REGISTRY)
    [record] = read_fees(result.version_dir)
    assert record["unit"] == unit


def test_an_input_whose_every_row_conflicts_publishes_nothing(tmp_path: Path) -> None:
    write_raw(
        tmp_path / "raw" / "one.csv",
        # one line, one start, two figures; the third repeats the first
        [fee_row(), fee_row(fee_amount="($0.0015)"), fee_row(source_url=MAR)],
    )
    with pytest.raises(IngestError, match="no valid records"):
        run_ingest(tmp_path / "raw", tmp_path / "data", registry=REGISTRY)


# The rules of "Ends the ingest derives" and "Confirmed through, or presumed", written out plainly
# for inputs of open readings (the property test below holds the ingest to them).
DAY0 = date(2024, 1, 1)
LABELS = ("Line A", "Line B", "Line C")
FIGURES = ("($0.0010)", "($0.0020)")


@dataclass(frozen=True)
class Reading:
    line: int  # LABELS[line]; the last label is of another fee category
    day: int  # its start, days after DAY0
    figure: int  # FIGURES[figure]
    listed: bool  # read in a complete schedule: of its start day, or `later` days after it
    later: int

    @property
    def as_of(self) -> int:
        return self.day + self.later

    def row(self, number: int) -> dict[str, str]:
        start = (DAY0 + timedelta(days=self.day)).isoformat()
        values = {
            "fee_name": LABELS[self.line],
            "fee_amount": FIGURES[self.figure],
            "effective_start": start,
            "source_url": f"https://example.test/r{number}",
        }
        if self.line == len(LABELS) - 1:
            values["fee_category"] = "port_fees_and_other_services"
        if self.listed:
            values |= {
                "source_url": f"https://example.test/schedule-{self.as_of}",
                "complete_scope": "fee_category",
                "complete_as_of": (DAY0 + timedelta(days=self.as_of)).isoformat(),
            }
        return fee_row(**values)


NEXT = "the line's next record"


def expected_lives(readings: list[Reading]) -> dict[tuple[str, str], tuple[object, ...]]:
    """Per (label, start) of each published record: its end, its confirmation, the source that
    ended it (`NEXT`: the next record's)."""
    category = {line: line == len(LABELS) - 1 for line in range(len(LABELS))}
    schedules = {(category[r.line], r.as_of) for r in readings if r.listed}
    listed = {(r.line, r.as_of) for r in readings if r.listed}
    records = {}  # (line, start) -> its figure and the latest day its readings show
    for line, day in {(r.line, r.day) for r in readings}:
        group = [r for r in readings if (r.line, r.day) == (line, day)]
        if len({r.figure for r in group}) == 1:  # one figure: repeats; two: a conflict
            records[line, day] = group[0].figure, max(r.as_of if r.listed else r.day for r in group)
    found = {}
    for (line, day), (figure, shown) in records.items():
        later = [start for (other, start) in records if other == line and start > day]
        omitted = [
            when for (kind, when) in schedules
            if kind == category[line] and when > day and (line, when) not in listed
        ]  # fmt: skip
        by_next, by_schedule = min(later, default=None), min(omitted, default=None)
        end: int | None = None
        ended_by = None
        if by_schedule is not None and (by_next is None or by_schedule <= by_next):
            end, ended_by = by_schedule - 1, f"https://example.test/schedule-{by_schedule}"
            confirmed = min(shown, end)
        elif by_next is not None:
            end = by_next - 1  # confirmed to it when the next reading shows the same figure
            confirmed = end if records[line, by_next][0] == figure else min(shown, end)
            ended_by = NEXT
        else:
            confirmed = shown
        found[LABELS[line], str(DAY0 + timedelta(days=day))] = (
            None if end is None else str(DAY0 + timedelta(days=end)),
            str(DAY0 + timedelta(days=confirmed)),
            ended_by,
        )
    return found


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.lists(
        st.builds(
            Reading,
            line=st.integers(0, len(LABELS) - 1),
            day=st.integers(0, 40).map(lambda day: day - day % 4),  # days that often meet
            figure=st.integers(0, len(FIGURES) - 1),
            listed=st.booleans(),
            later=st.sampled_from((0, 4)),
        ),
        min_size=1,
        max_size=10,
    )
)
def test_ends_and_confirmations_follow_the_documented_rules(readings: list[Reading]) -> None:
    with tempfile.TemporaryDirectory() as scratch:
        raw = Path(scratch) / "raw"
        write_raw(raw / "a.csv", [reading.row(number) for number, reading in enumerate(readings)])
        try:
            result = run_ingest(raw, Path(scratch) / "data", registry=REGISTRY)
        except IngestError:  # every row in conflict: nothing to publish
            assert expected_lives(readings) == {}
            return
        records = sorted(
            read_fees(result.version_dir),
            key=lambda record: (record["fee_name"], record["effective_start"]),
        )
    published = {}
    for record, after in zip(records, [*records[1:], None], strict=True):
        next_url = after["source_url"] if after and after["fee_name"] == record["fee_name"] else ""
        published[record["fee_name"], str(record["effective_start"])] = (
            str(record["effective_end"]) if record["effective_end"] else None,
            str(record["confirmed_through"]),
            NEXT if record["ended_by"] and record["ended_by"] == next_url else record["ended_by"],
        )
    assert published == expected_lives(readings)
