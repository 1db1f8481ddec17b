"""The plain SQL the index is held to (`tests/reference_sql.py`): only the conditions asked for,
every value bound, and filter names only through the service's allow-list."""

from datetime import date

import pytest

from service.dataset.queries import Selection
from tests.conftest import Indexed
from tests.reference_sql import count_matching, where


def test_no_selection_means_every_record() -> None:
    assert where(Selection()) == ("FROM fees\nWHERE true", {})


def test_each_value_is_its_own_parameter_and_windows_overlap() -> None:
    selection = Selection(
        venues=["nasdaq", "nyse"],
        values={"fee_action": ["make"]},
        start_date=date(2024, 1, 1),
        end_date=date(2024, 12, 31),
    )
    assert count_matching(selection) == (
        "SELECT count(*)\nFROM fees\n"
        "WHERE action IN ($fee_action_0)\n"
        "AND exchange IN ($exchange_name_0, $exchange_name_1)\n"
        "AND effective_start <= $end_date\n"
        "AND (effective_end IS NULL OR effective_end >= $start_date)",
        {
            "fee_action_0": "make",
            "exchange_name_0": "nasdaq",
            "exchange_name_1": "nyse",
            "end_date": date(2024, 12, 31),
            "start_date": date(2024, 1, 1),
        },
    )


def test_an_empty_venue_list_selects_nothing() -> None:
    assert where(Selection(venues=[])) == ("FROM fees\nWHERE false", {})


def test_a_filter_outside_the_allow_list_is_refused_by_the_index_and_the_sql(
    indexed: Indexed,
) -> None:
    hostile = Selection(values={"1=1; DROP TABLE fees; --": ["x"]})
    with pytest.raises(KeyError):
        indexed.index.count(hostile)
    with pytest.raises(KeyError):
        where(hostile)
