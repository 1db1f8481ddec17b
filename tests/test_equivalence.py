"""The fast paths give exactly what a plain DuckDB query over the published records gives.

Hypothesis draws suppliers (every venue, and one with no records), date windows (open on
either side, single days, days on which periods start or end, days in a venue's coverage gaps)
and results filters; each answer is compared with a GROUP BY or count(*) over the version's
Parquet files, which bypasses the rollups and the results index entirely.
"""

from collections.abc import Iterator
from datetime import date, timedelta
from pathlib import Path
from typing import Any

import duckdb
import httpx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ingest.layout import COUNTED
from service.dataset import queries
from service.settings import Settings
from service.vocabulary import DIMENSIONS
from tests import reference_sql
from tests.conftest import FILTER_VALUES, Indexed, LiveServer, supplier_headers

EXAMPLES = settings(
    max_examples=300,
    derandomize=True,  # the same draws on every run: CI stays bounded and repeatable
    deadline=None,  # shared machines are noisy; speed is make bench's business
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)

PLAIN_FEES = "read_parquet($files, hive_partitioning = true, hive_types = {'exchange': VARCHAR})"


def plain_counts_sql(column: str) -> str:
    return f"""
SELECT {column} AS value, count(*) FILTER (
    WHERE effective_start <= coalesce($end, DATE '9999-12-31')
    AND coalesce(effective_end, DATE '9999-12-31') >= coalesce($start, DATE '0001-01-01')
) AS records
FROM {PLAIN_FEES}
WHERE exchange = $exchange
GROUP BY 1
"""


@pytest.fixture(scope="module")
def plain(indexed: Indexed) -> Iterator[duckdb.DuckDBPyConnection]:
    """A connection of its own, with no view, rollup or index of the service's."""
    with duckdb.connect() as con:
        yield con


def parquet_files(indexed: Indexed) -> list[str]:
    return sorted(str(path) for path in indexed.dataset.version_dir.glob("fees/*/*.parquet"))


def plain_counts(
    plain: duckdb.DuckDBPyConnection,
    indexed: Indexed,
    column: str,
    venue: str,
    window: tuple[date | None, date | None],
) -> dict[str, int]:
    parameters = {
        "files": parquet_files(indexed),
        "exchange": venue,
        "start": window[0],
        "end": window[1],
    }
    rows = plain.execute(plain_counts_sql(column), parameters).fetchall()
    return {str(value): int(records) for value, records in rows}


@st.composite
def windows(draw: st.DrawFn, indexed: Indexed) -> tuple[date | None, date | None]:
    """Open sides, single days, edges of periods, days in gaps, and any day from 2017 to 2027."""

    def one_day() -> date:
        edge = st.sampled_from(indexed.days)
        near_edge = st.tuples(edge, st.integers(-2, 2)).map(lambda d: d[0] + timedelta(d[1]))
        return draw(st.one_of(edge, near_edge, st.dates(date(2017, 1, 1), date(2027, 12, 31))))

    kind = draw(st.sampled_from(["both", "single", "open start", "open end", "open"]))
    if kind == "open":
        return None, None
    first = one_day()
    if kind == "single":
        return first, first
    if kind == "open start":
        return None, first
    if kind == "open end":
        return first, None
    second = one_day()
    return min(first, second), max(first, second)


@st.composite
def discovery_calls(draw: st.DrawFn, indexed: Indexed) -> tuple[str, str, Any]:
    venue = draw(st.sampled_from([*indexed.venues, "no_such_venue"]))
    return draw(st.sampled_from(COUNTED)), venue, draw(windows(indexed))


def test_discovery_counts_are_those_of_plain_sql(
    indexed: Indexed, plain: duckdb.DuckDBPyConnection
) -> None:
    @EXAMPLES
    @given(discovery_calls(indexed))
    def check(call: tuple[str, str, tuple[date | None, date | None]]) -> None:
        column, venue, window = call
        expected = plain_counts(plain, indexed, column, venue, window)
        assert indexed.dataset.counts(column, venue, *window) == expected

    check()


def test_discovery_answers_over_http_count_what_plain_sql_counts(
    indexed: Indexed, plain: duckdb.DuckDBPyConnection, accounts_file: Path
) -> None:
    data_dir = indexed.dataset.version_dir.parent.parent
    with LiveServer(Settings(data_dir=data_dir, accounts_file=accounts_file)) as live:
        http = httpx.Client(base_url=live.url, headers=supplier_headers(), timeout=10)

        @settings(EXAMPLES, max_examples=100)
        @given(
            st.sampled_from(list(DIMENSIONS)),
            st.sampled_from(indexed.venues),
            windows(indexed),
        )
        def check(endpoint: str, venue: str, window: tuple[date | None, date | None]) -> None:
            column, terms = DIMENSIONS[endpoint]
            query = {
                name: day.isoformat()
                for name, day in zip(("start_date", "end_date"), window, strict=True)
                if day is not None
            }
            path = f"/api/v1/suppliers/{venue}/{endpoint.replace('_', '-')}"
            answer = http.get(path, params=query)
            assert answer.status_code == 200, answer.text
            expected = plain_counts(plain, indexed, column, venue, window)
            # The spec's identifier keys, written out here rather than read from the service.
            key = {"participants": "participant", "fee_categories": "category",
                   "actions": "action", "fee_types": "type"}[endpoint]  # fmt: skip
            found = {item[key]: item["record_count"] for item in answer.json()["data"][endpoint]}
            assert found == {
                term.identifier: sum(expected.get(value, 0) for value in term.stored)
                for term in terms
                if any(value in expected for value in term.stored)
            }

        with http:
            check()


def test_results_counts_with_filters_are_those_of_plain_sql(indexed: Indexed) -> None:
    filters = st.dictionaries(
        st.sampled_from([n for n, c in queries.RESULT_FILTERS.items() if c != "exchange"]),
        st.just(None),
        max_size=3,
    )

    @EXAMPLES
    @given(
        st.lists(st.sampled_from([*indexed.venues, "no_such_venue"]), max_size=3) | st.none(),
        filters,
        windows(indexed),
        st.data(),
    )
    def check(
        venues: list[str] | None,
        names: dict[str, None],
        window: tuple[date | None, date | None],
        data: st.DataObject,
    ) -> None:
        values = {
            name: data.draw(
                st.lists(
                    st.sampled_from(FILTER_VALUES[queries.RESULT_FILTERS[name]]),
                    min_size=1,
                    max_size=2,
                )
            )
            for name in names
        }
        selection = queries.Selection(
            venues=venues, values=values, start_date=window[0], end_date=window[1]
        )
        [(expected,)] = indexed.plain.execute(*reference_sql.count_matching(selection)).fetchall()
        count = indexed.index.count(selection)
        assert count == expected

    check()
