"""The SQL the service builds: only the conditions asked for, every value bound."""

from datetime import date

import pytest

from service.dataset.queries import SELECTED_FEES, Selection
from tests.reference_sql import count_matching

FILES = ("/v/fees/exchange=nasdaq/data_0.parquet",)  # what `Dataset.scoped` fills in


def test_no_selection_means_every_record() -> None:
    assert Selection(files=FILES).where() == (
        f"FROM {SELECTED_FEES}\nWHERE true",
        {"files": list(FILES)},
    )


def test_the_files_read_are_a_bound_parameter_and_never_left_out() -> None:
    with pytest.raises(ValueError, match="reads no files"):
        Selection(venues=["nasdaq"]).where()


def test_each_value_is_its_own_parameter_and_windows_overlap() -> None:
    selection = Selection(
        venues=["nasdaq", "nyse"],
        values={"fee_action": ["make"]},
        start_date=date(2024, 1, 1),
        end_date=date(2024, 12, 31),
        files=FILES,
    )
    assert count_matching(selection) == (
        f"SELECT count(*)\nFROM {SELECTED_FEES}\n"
        "WHERE action IN ($fee_action_0)\n"
        "AND exchange IN ($exchange_name_0, $exchange_name_1)\n"
        "AND effective_start <= $end_date\n"
        "AND (effective_end IS NULL OR effective_end >= $start_date)",
        {
            "files": list(FILES),
            "fee_action_0": "make",
            "exchange_name_0": "nasdaq",
            "exchange_name_1": "nyse",
            "end_date": date(2024, 12, 31),
            "start_date": date(2024, 1, 1),
        },
    )


def test_an_empty_venue_list_selects_nothing() -> None:
    assert Selection(venues=[], files=FILES).where() == (
        f"FROM {SELECTED_FEES}\nWHERE false",
        {"files": list(FILES)},
    )


def test_a_filter_outside_the_allow_list_cannot_reach_the_sql() -> None:
    with pytest.raises(KeyError):
        Selection(values={"1=1; DROP TABLE fees; --": ["x"]}, files=FILES).where()
