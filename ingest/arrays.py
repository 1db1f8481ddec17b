"""A query's whole columns as NumPy arrays, for the index the ingest writes beside a version,
and DuckDB's memory while they are made.

DuckDB's `fetchnumpy` holds the whole result in DuckDB beside the arrays it makes: the codes of
10M records (314 MB of arrays) took a process 1,060 MB above where it started, and were the
ingest's peak. Here the result is streamed as Arrow batches into arrays made once, at their
final type: the same arrays, 503 MB above it and in half the time (`docs/benchmarks.md`, #40
part 10).
"""

from typing import Any, Final

import duckdb
import numpy as np
import numpy.typing as npt

from ingest.layout import MAPPED_BATCH, sql_string

Array = npt.NDArray[Any]

MEMORY_LIMIT: Final = "SELECT current_setting('memory_limit')"
# How DuckDB prints a memory limit: a number, then one of these units.
LIMIT_UNITS: Final = ("bytes", "KiB", "MiB", "GiB", "TiB", "PiB")


def query_arrays(
    con: duckdb.DuckDBPyConnection,
    sql: str,
    rows: int,
    types: dict[str, Any],
    parameters: dict[str, Any] | None = None,
) -> dict[str, Array]:
    """The columns `types` names of `sql`'s `rows` rows, each as an array of its type. The query
    gives each column as that type (no copy is made to cast it here); a column of another type
    is an error, as is a null or another number of rows."""
    arrays = {name: np.empty(rows, dtype=kind) for name, kind in types.items()}
    at = 0
    for batch in con.sql(sql, params=parameters).to_arrow_reader(MAPPED_BATCH):
        size = batch.num_rows
        if at + size > rows:
            raise ValueError(f"the query gave more than the {rows:,} rows expected")
        for name, array in arrays.items():
            column = batch.column(name)
            if np.dtype(column.type.to_pandas_dtype()) != array.dtype:
                raise TypeError(f"{name}: the query gives {column.type}, not {array.dtype}")
            if column.null_count:
                raise ValueError(f"{name}: a null where every row has a value")
            array[at : at + size] = column.to_numpy()
        at += size
    if at != rows:
        raise ValueError(f"the query gave {at:,} rows, {rows:,} expected")
    return arrays


def lower_memory(con: duckdb.DuckDBPyConnection, limit: str) -> None:
    """DuckDB's memory limit lowered to `limit`, never raised. Lowering it has DuckDB let go of
    the pages it keeps cached beyond the new limit."""
    with duckdb.connect(config={"memory_limit": limit}) as sizing:  # `limit` as DuckDB reads it
        lowered = _memory_limit(sizing) < _memory_limit(con)
    if lowered:
        con.execute(f"SET memory_limit = {sql_string(limit)}")


def _memory_limit(con: duckdb.DuckDBPyConnection) -> float:
    """DuckDB's memory limit in bytes (it prints it as `953.6 MiB`)."""
    [(text,)] = con.execute(MEMORY_LIMIT).fetchall()
    number, unit = text.split()
    return float(number) * float(1024 ** LIMIT_UNITS.index(unit))
