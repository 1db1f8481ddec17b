"""The index's arrays are fetched streamed, as `fetchnumpy` would give them, or not at all."""

from pathlib import Path

import duckdb
import numpy as np
import pytest

from ingest import arrays, serving
from ingest.layout import MAPPED_BATCH

ROWS = MAPPED_BATCH * 2 + 17  # several batches, the last one short
NUMBERS = f"""
SELECT CAST(i % 251 AS UTINYINT) AS code, CAST(i * 7 AS UINTEGER) AS position,
    hash(i) AS seen, i AS place
FROM range({ROWS}) AS t(i) ORDER BY i DESC
"""
TYPES = {"code": np.uint8, "position": np.uint32, "seen": np.uint64, "place": np.int64}


@pytest.fixture
def con() -> duckdb.DuckDBPyConnection:
    return duckdb.connect()


def test_the_arrays_are_what_fetchnumpy_gives_in_the_querys_order(
    con: duckdb.DuckDBPyConnection,
) -> None:
    fetched = arrays.query_arrays(con, NUMBERS, ROWS, TYPES)
    whole = con.execute(NUMBERS).fetchnumpy()
    for name, kind in TYPES.items():
        assert fetched[name].dtype == kind
        assert np.array_equal(fetched[name], whole[name])
    assert fetched["place"][0] == ROWS - 1  # the ORDER BY's order, across batches


def test_parameters_are_bound(con: duckdb.DuckDBPyConnection) -> None:
    sql = (
        "SELECT CAST(list_position($names, name) AS UTINYINT) AS code "
        "FROM (VALUES ('b'), ('a')) AS t(name)"
    )
    fetched = arrays.query_arrays(con, sql, 2, {"code": np.uint8}, {"names": ["a", "b"]})
    assert fetched["code"].tolist() == [2, 1]


@pytest.mark.parametrize(
    ("rows", "types", "error", "message"),
    [
        (ROWS, {"position": np.int64}, TypeError, "position: the query gives uint32, not int64"),
        (ROWS + 1, TYPES, ValueError, f"gave {ROWS:,} rows, {ROWS + 1:,} expected"),
        (ROWS - 1, TYPES, ValueError, f"more than the {ROWS - 1:,} rows expected"),
    ],
)
def test_another_type_or_count_is_an_error(
    con: duckdb.DuckDBPyConnection,
    rows: int,
    types: dict[str, type],
    error: type[Exception],
    message: str,
) -> None:
    with pytest.raises(error, match=message):
        arrays.query_arrays(con, NUMBERS, rows, types)


def test_a_null_is_an_error(con: duckdb.DuckDBPyConnection) -> None:
    sql = "SELECT CAST(CASE WHEN i = 5 THEN NULL ELSE i END AS UINTEGER) AS n FROM range(10) t(i)"
    with pytest.raises(ValueError, match="n: a null where every row has a value"):
        arrays.query_arrays(con, sql, 10, {"n": np.uint32})


def limit(con: duckdb.DuckDBPyConnection) -> str:
    [(text,)] = con.execute("SELECT current_setting('memory_limit')").fetchall()
    return str(text)


@pytest.mark.parametrize(
    ("given", "lowered"),
    [("1GB", "244.1 MiB"), ("100MB", "95.3 MiB")],  # to 256 MB, never raised
)
def test_duckdbs_memory_is_lowered_never_raised(given: str, lowered: str) -> None:
    con = duckdb.connect(config={"memory_limit": given})
    arrays.lower_memory(con, "256MB")
    assert limit(con) == lowered


def test_the_index_is_written_within_its_memory_limit(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    con = duckdb.connect(config={"memory_limit": "1GB"})
    seen: list[str] = []
    monkeypatch.setattr(
        serving, "_write_index", lambda con, index, rows: seen.append(limit(con))
    )
    con.execute(f"ATTACH '{tmp_path / 'serving.duckdb'}' AS serving")
    serving.write_index(con, tmp_path, 0)
    assert seen == ["244.1 MiB"]  # serving.INDEX_MEMORY_LIMIT
