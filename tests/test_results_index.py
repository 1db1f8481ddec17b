"""The results index (`service.dataset.index`) against the plain SQL definition of a page.

Two versions are ingested (synthetic rows, then the same rows plus the fixture CSVs), so
records carry two version ids; then hundreds of seeded random requests (venues, every filter,
date windows, latest-only, every order and direction, page sizes, pages near and past the end)
must give the same count and the same record ids, in the same order, as `ORDER BY ... LIMIT
... OFFSET` over the Parquet files.
"""

import random
from collections.abc import Iterator
from datetime import date, timedelta
from pathlib import Path
from typing import Any

import duckdb
import pytest

from service.dataset import pager, queries
from service.dataset.index import Array, ResultsIndex
from service.dataset.order import ResultsOrder
from service.dataset.version import Dataset
from tests import reference_sql
from tests.conftest import FILTER_VALUES, Indexed

REPO = Path(__file__).resolve().parent.parent
REQUESTS = 400
RESULTS = "/api/v1/fee-schedule-results/"
PLAIN = queries.Included()  # no optional part, no day
PAGES = [
    {"page_size": "5"},
    {"page_size": "3", "page_number": "2", "order_by": "amount", "order_dir": "asc"},
    {"exchange_name": "nyse", "fee_action": "make", "order_by": "fee_category"},
    {"start_date": "2021-01-01", "latest_only": "true", "order_by": "exchange_name"},
    {"order_by": "created_on", "include_footnotes": "true", "include_source": "true"},
]


def random_selection(rng: random.Random, indexed: Indexed) -> queries.Selection:
    def maybe_day() -> date | None:
        """None, a day on which some period starts or ends (the edge cases), or any day."""
        draw = rng.random()
        if draw < 0.25:
            return rng.choice(indexed.days)
        return date(2018, 6, 1) + timedelta(days=rng.randrange(3200)) if draw < 0.45 else None

    venues = None
    if rng.random() < 0.6:
        venues = rng.sample([*indexed.venues, "no_such_venue"], rng.randrange(0, 4))
    values = {}
    for name, column in queries.RESULT_FILTERS.items():
        if column != "exchange" and rng.random() < 0.12:
            # From one value to all of them: more than `FEW_CODES` take the lookup table, so
            # both ways of testing a run's codes are held to the SQL.
            known = FILTER_VALUES[column]
            values[name] = rng.sample(known, rng.randrange(1, len(known) + 1))
    start, end = sorted([maybe_day() or date.min, maybe_day() or date.max])
    version_id = None
    if rng.random() < 0.15:
        version_id = rng.choice([*indexed.versions, "unknown-version"])
    day = maybe_day() if rng.random() < 0.3 else None
    return queries.Selection(
        venues=venues,
        values=values,
        start_date=None if start == date.min else start,
        end_date=None if end == date.max else end,
        in_force_on=day,
        max_age_days=rng.choice([None, 0, 365, 3650]) if day else None,
        version_id=version_id,
    )


def sql_page(
    plain: duckdb.DuckDBPyConnection, selection: queries.Selection, order_by: str, order_dir: str,
    offset: int, size: int, included: queries.Included = PLAIN,
) -> tuple[int, list[dict[str, Any]]]:  # fmt: skip
    """The count and the page's records, as plain SQL over the Parquet files gives them."""
    [(count,)] = plain.execute(*reference_sql.count_matching(selection)).fetchall()
    sql, parameters = reference_sql.page_of_results(
        selection, order_by=order_by, order_dir=order_dir, limit=size, offset=offset,
        included=included,
    )  # fmt: skip
    return int(count), reference_sql.rows(plain, sql, parameters)


def ids(rows: list[dict[str, Any]]) -> list[str]:
    return [row["record_id"] for row in rows]


def page(
    index: ResultsIndex, selection: queries.Selection, order_by: str, order_dir: str,
    offset: int, size: int,
) -> tuple[int, list[int]]:  # fmt: skip
    """A page as the service cuts one: the pager over the index's matches in order."""
    ordering = ResultsOrder(index, index.matches(selection), order_by, order_dir)
    return pager.page(ordering, offset, size)


def chunks(
    index: ResultsIndex, selection: queries.Selection, order_by: str, order_dir: str, size: int
) -> Iterator[Array]:
    """A download's chunks, as the service walks them."""
    matches = index.matches(selection)
    return pager.chunks(ResultsOrder(index, matches, order_by, order_dir, streamed=True), size)


def index_page(
    dataset: Dataset, index: ResultsIndex, selection: queries.Selection, order_by: str,
    order_dir: str, offset: int, size: int, included: queries.Included,
) -> tuple[int, list[dict[str, Any]]]:  # fmt: skip
    """The count and the page's records, as the service finds and prints them."""
    count, positions = page(index, selection, order_by, order_dir, offset, size)
    return count, dataset.printed.records(positions, queries.RESULT_FIELDS, included)


def test_the_index_pages_exactly_as_sql_orders_them(indexed: Indexed) -> None:
    rng = random.Random(20261123)
    nonempty = 0
    for _ in range(REQUESTS):
        selection = random_selection(rng, indexed)
        order_by = rng.choice(list(queries.ORDER_COLUMNS))
        order_dir = rng.choice(queries.ORDER_DIRECTIONS)
        size = rng.choice([1, 7, 20, 100])
        expected_count, _ = sql_page(indexed.plain, selection, order_by, order_dir, 0, 1)
        last_page = max(expected_count - 1, 0) // size
        number = rng.choice([0, 1, rng.randrange(last_page + 1), last_page, last_page + 1])
        offset = number * size
        # Every optional part, and the day's `presumed` (a results list for a day is printed
        # with it), drawn, so each way of printing a record is held to the SQL's.
        included = queries.Included(
            source=rng.random() < 0.5,
            relationships=rng.random() < 0.5,
            day=selection.in_force_on or rng.choice([None, *indexed.days]),
        )
        arguments = (selection, order_by, order_dir, offset, size, included)
        expected = sql_page(indexed.plain, *arguments)
        found = index_page(indexed.dataset, indexed.index, *arguments)
        assert found == expected, (selection, order_by, order_dir, offset, size, included)
        nonempty += bool(expected[1])
    assert nonempty > REQUESTS // 3  # the draw must exercise real pages, not only empty ones


@pytest.mark.parametrize("order_by", list(queries.ORDER_COLUMNS))
@pytest.mark.parametrize("order_dir", queries.ORDER_DIRECTIONS)
def test_walking_every_page_lists_every_record_once(
    indexed: Indexed, order_by: str, order_dir: str
) -> None:
    selection = queries.Selection(venues=indexed.venues[:3])
    total, _ = page(indexed.index, selection, order_by, order_dir, 0, 1)
    walked: list[int] = []
    for offset in range(0, total, 100):
        walked += page(indexed.index, selection, order_by, order_dir, offset, 100)[1]
    assert len(walked) == total == len(set(walked))
    assert walked[:250] == [
        position
        for offset in range(0, 250, 50)
        for position in page(indexed.index, selection, order_by, order_dir, offset, 50)[1]
    ]


@pytest.mark.parametrize("chunk", [7, 1_000])
def test_ordered_chunks_give_every_match_in_the_order_sql_gives(
    indexed: Indexed, chunk: int
) -> None:
    """Exports walk these chunks; small chunks make a sort value span several of them."""
    rng = random.Random(chunk)
    nonempty = 0
    for _ in range(40):
        selection = random_selection(rng, indexed)
        order_by = rng.choice(list(queries.ORDER_COLUMNS))
        order_dir = rng.choice(queries.ORDER_DIRECTIONS)
        total, expected = sql_page(indexed.plain, selection, order_by, order_dir, 0, 10**9)
        walked = list(chunks(indexed.index, selection, order_by, order_dir, chunk))
        assert all(0 < len(positions) <= chunk for positions in walked)
        found = [int(position) for positions in walked for position in positions]
        assert len(found) == total
        printed = indexed.dataset.printed.records(found, queries.RESULT_FIELDS, PLAIN)
        assert ids(printed) == ids(expected), (selection, order_by)
        nonempty += bool(found)
    assert nonempty > 10


def test_an_export_reads_its_rows_a_chunk_at_a_time(indexed: Indexed) -> None:
    """What keeps an export's memory flat: no batch, and no query, holds more than a chunk."""
    selection = queries.Selection(venues=indexed.venues)
    total, _ = page(indexed.index, selection, "amount", "asc", 0, 1)
    walked = chunks(indexed.index, selection, "amount", "asc", 500)
    included = queries.Included(source=True, relationships=True)
    batches = indexed.dataset.batches_at(walked, shape="csv", included=included, size=500)
    sizes = [batch.num_rows for batch in batches]
    assert sum(sizes) == total > 5_000
    assert max(sizes) <= 500 and len(sizes) >= total // 500


def test_every_record_is_found_by_its_id_and_nothing_else_is(indexed: Indexed) -> None:
    """A record by id is a binary search over the printed ids in `record_order`."""
    dataset = indexed.dataset
    every = [row[0] for row in indexed.plain.execute("SELECT record_id FROM fees").fetchall()]
    assert len(every) == dataset.records > 1000
    positions = [dataset.printed.position_of(record_id) for record_id in every]
    printed = dataset.printed.records(positions, queries.RESULT_FIELDS, PLAIN)
    assert ids(printed) == every
    lowest, highest = min(every), max(every)
    for absent in ("", "0", lowest[:-1], lowest.upper(), highest + "0", "g", "~"):
        assert dataset.printed.position_of(absent) is None, absent
