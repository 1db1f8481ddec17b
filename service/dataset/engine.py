"""The DuckDB boundary: one connection per version, a cursor per query, the time limit, and
DuckDB's and Arrow's errors turned into the service's in exactly one place (`Engine._guarded`).

A query that runs past `Settings.query_timeout_seconds` is interrupted and answers 503
(`QueryTimeout`). A file that cannot be read fails only the queries that read it: they answer
503 (`DataFault`), and the fault is kept in `Engine.faults` for the readiness probe.
"""

import logging
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import duckdb
import pyarrow as pa

from service.dataset.watchdog import WATCHDOG
from service.errors import Unavailable
from service.settings import Settings

log = logging.getLogger(__name__)

MAX_FAULTS = 20  # kept per version for the readiness probe (each is logged in full)
# What DuckDB raises when a file cannot be read: missing (IOException), not Parquet or cut short
# (InvalidInputException), a damaged footer or a block failing its checksum (the bare Error).
# Anything else escaping a query is a defect and stays a 500.
FILE_FAULTS = (duckdb.IOException, duckdb.InvalidInputException)


class DataFault(Unavailable):
    def __init__(self) -> None:
        super().__init__("part of the dataset cannot be read; the operator has been alerted")


class QueryTimeout(Unavailable):
    def __init__(self, seconds: float) -> None:
        super().__init__(f"the query ran longer than {seconds:g} s and was stopped; try again")


def is_file_fault(error: duckdb.Error) -> bool:
    return isinstance(error, FILE_FAULTS) or type(error) is duckdb.Error


def connect(settings: Settings) -> duckdb.DuckDBPyConnection:
    con = duckdb.connect(
        config={"memory_limit": settings.duckdb_memory, "threads": settings.duckdb_threads}
    )
    con.execute("SET enable_progress_bar = false")
    con.execute("SET TimeZone = 'UTC'")  # timestamps are rendered as UTC ISO text
    # Freed pages go back to the system after a second, not at DuckDB's next allocation
    # (`service.memory`).
    con.execute("SET allocator_background_threads = true")
    # A published version's files never change, so their footers are read once, not per query
    # (10M rows: an unfiltered results page 477 -> 438 ms, opening a version 3.4 -> 3.1 s).
    con.execute("SET parquet_metadata_cache = true")
    return con


def batches_of(table: pa.Table, size: int | None = None) -> list[pa.RecordBatch]:
    """A table's record batches of up to `size` rows, at least one: a table of no rows gives
    one empty batch, so a download made of it still carries its columns."""
    return table.to_batches(size) or [pa.RecordBatch.from_pylist([], schema=table.schema)]


class Engine:
    """Queries over one version's files; safe to share between threads (a cursor per query).
    `shown_from` is the version's directory: fault reports name files inside it."""

    def __init__(self, settings: Settings, version_id: str, shown_from: str) -> None:
        self.con = connect(settings)
        self.faults: list[str] = []  # what failed since it was opened, for the readiness probe
        self._timeout = settings.query_timeout_seconds
        self._version_id = version_id
        self._shown_from = shown_from

    def close(self) -> None:
        self.con.close()

    def query(self, sql: str, parameters: dict[str, Any] | None = None) -> list[tuple[Any, ...]]:
        cursor = self.con.cursor()
        try:
            with self._guarded(cursor, parameters):
                return cursor.execute(sql, parameters or {}).fetchall()
        finally:
            cursor.close()

    def rows(self, sql: str, parameters: dict[str, Any]) -> list[dict[str, Any]]:
        """The query's rows as dicts keyed by column name (for JSON answers)."""
        cursor = self.con.cursor()
        try:
            with self._guarded(cursor, parameters):
                result = cursor.execute(sql, parameters)
                names = [column[0] for column in result.description]
                return [dict(zip(names, row, strict=True)) for row in result.fetchall()]
        finally:
            cursor.close()

    def table(self, sql: str, parameters: dict[str, Any], tables: dict[str, pa.Table]) -> pa.Table:
        """The query's rows as an Arrow table, with `tables` registered under their names."""
        cursor = self.con.cursor()
        try:
            for name, table in tables.items():
                cursor.register(name, table)
            with self._guarded(cursor, parameters):
                return cursor.sql(sql, params=parameters or None).to_arrow_table()
        finally:
            cursor.close()

    @contextmanager
    def _guarded(
        self, cursor: duckdb.DuckDBPyConnection, parameters: dict[str, Any] | None
    ) -> Iterator[None]:
        """The one place DuckDB's errors become the service's: a query past its time is
        interrupted (`QueryTimeout`), a file that cannot be read is a `DataFault`."""
        try:
            with WATCHDOG.watch(cursor, self._timeout):
                yield
        except duckdb.InterruptException:
            raise QueryTimeout(self._timeout) from None
        except duckdb.Error as error:
            if not is_file_fault(error):
                raise
            raise self._fault(str(error), parameters) from None

    def _fault(self, message: str, parameters: dict[str, Any] | None) -> DataFault:
        """Log a file fault and keep it for the readiness probe, with the files the query read
        when it names them (DuckDB does not always), shown relative to the version so the probe
        reveals no more than the dataset's own layout."""
        line = message.splitlines()[0]
        files = (parameters or {}).get("files")
        if files:
            line += f" (reading {', '.join(files)})"
        line = line.replace(f"{self._shown_from}/", "")
        log.error("dataset version %s: %s", self._version_id, line)
        if line not in self.faults and len(self.faults) < MAX_FAULTS:
            self.faults.append(line)
        return DataFault()
