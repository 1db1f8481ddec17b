"""The serving copy of a version: row-addressable records and the index of the results pages.

Analysts read the Parquet files; the service answers a results page from two things the
ingest writes beside them, because finding 20 rows in Parquet means decoding whole row groups
(10M records: 0.5 s for an unfiltered first page):

    serving.duckdb   table `rows`: every record in the files' order (venue, fee type,
                     effective start, record id); a record's rowid is its position
    index/*.npy      one array per filter and sort column, a value per position: small integer
                     codes (vocabulary columns), days since 1970 (dates), ranks (record id,
                     amount); `codes.json` names what each code stands for; the line
                     index, each fee line's positions in effective order (`LINE_FILES`);
                     the class index (`ingest.classes`); the change list of the lines
                     (`ingest.changes`); and the price keys (`ingest.price_keys`)
    index/records.arrow  the record summary: the printed fields the history answers read,
                     by position (`SUMMARY_COLUMNS`)
    index/printed.arrow, printed_codes.npy  the printed records: a record's fields as a
                     JSON answer prints them, a row per position (`PRINTED_COLUMNS`, then
                     `PRINTED_CODES`); `record_order.npy`, the positions in record id order

The service memory-maps the arrays, so opening a version costs nothing and a page touches only
the parts of the arrays it reads (`service.dataset.index`).
"""

import json
from pathlib import Path
from typing import Any, Final

import duckdb
import numpy as np
import numpy.typing as npt
import pyarrow as pa

from ingest.arrays import lower_memory, query_arrays
from ingest.changes import CHANGES_READ, write_changes
from ingest.classes import CLASSES_READ, write_classes
from ingest.layout import (
    CLASSED,
    CODE_TYPES,
    CODED,
    CODED_VALUES,
    CODES_FILE,
    HELD_VALUES,
    INDEX_DIR,
    LINE_FILES,
    LINE_TEXT,
    MAPPED_BATCH,
    NO_END,
    NULL_RANK,
    PRINTED_CODES,
    PRINTED_CODES_FILE,
    PRINTED_COLUMNS,
    PRINTED_FILE,
    RECORD_ORDER,
    SERVING_FILE,
    SUMMARY_COLUMNS,
    SUMMARY_FILE,
    TEXT_ID,
    class_numbers,
    sql_string,
)
from ingest.price_keys import write_price_keys

# The sorted records live in the serving file from the start: `ingest.write` creates this
# table and writes the Parquet files from it, so the rows are materialized once, not twice
# (5M rows: 12.8 s saved, and the venue files write faster from it than from memory).
RECORDS: Final = "serving.rows"
ATTACH: Final = "ATTACH {path} AS serving"
DETACH: Final = "DETACH serving"

# Per position, in table order (the table is in the files' order; its rowid is the position).
# Each code is cast to its array's type in SQL, so no wider copy is ever fetched.
SELECT_CODES: Final = f"""
SELECT
    CAST(list_position($venues, exchange) AS UTINYINT) AS exchange,
    {
    ", ".join(
        f"CAST(coalesce(list_position(${name}, CAST({name} AS VARCHAR)), 0) AS UTINYINT) AS {name}"
        for name in CODED
    )
},
    CAST(effective_start - DATE '1970-01-01' AS INTEGER) AS effective_start,
    coalesce(CAST(effective_end - DATE '1970-01-01' AS INTEGER), {NO_END}) AS effective_end,
    CAST(confirmed_through - DATE '1970-01-01' AS INTEGER) AS confirmed_through,
    CAST(list_position($versions, version_id) AS USMALLINT) AS version_id,
    {
    ", ".join(
        f"CAST(coalesce(list_position(${name}, {value}), 0) AS "
        f"{'USMALLINT' if CODE_TYPES[name] is np.uint16 else 'UTINYINT'}) AS {name}"
        for name, value in HELD_VALUES.items()
    )
}
FROM {RECORDS}
"""

# The positions in record id order: a record's rank is its place in this list. A sort of the
# positions alone; a row_number() window over the same order cost four times as much.
BY_RECORD_ID: Final = f"SELECT rowid AS position FROM {RECORDS} ORDER BY record_id"

# The dense rank of each position's amount, made once per distinct amount and joined back
# (scattered by position, since a join's output is not in table order).
AMOUNT_RANKS: Final = f"""
WITH ranks AS (
    SELECT amount, CAST(row_number() OVER (ORDER BY amount) - 1 AS UINTEGER) AS rank
    FROM (SELECT DISTINCT amount FROM {RECORDS} WHERE amount IS NOT NULL)
)
SELECT records.rowid AS position, coalesce(ranks.rank, {NULL_RANK}) AS rank
FROM {RECORDS} AS records LEFT JOIN ranks USING (amount)
"""

# Every record's position in line order (line id, then effective start), with its line id as
# the two 64-bit halves of the UUID's number (which order as the UUID and its text do). The
# position comes as the array's own 32-bit type, so no 64-bit copy of 10M of them is made.
LINE_ORDER: Final = f"""
SELECT
    CAST(rowid AS UINTEGER) AS position,
    CAST(CAST(line_id AS UHUGEINT) >> 64 AS UBIGINT) AS line_hi,
    CAST(CAST(line_id AS UHUGEINT) & CAST(18446744073709551615 AS UHUGEINT) AS UBIGINT) AS line_lo
FROM {RECORDS}
ORDER BY line_id, effective_start
"""
LINE_ORDER_TYPES: Final = {"position": np.uint32, "line_hi": np.uint64, "line_lo": np.uint64}

# The record summary (`SUMMARY_COLUMNS`), in table order; a record's label is the name of its
# line (`docs/raw-format.md`, "Fee lines").
SUMMARY: Final = f"""
SELECT
    {TEXT_ID} AS record_id,
    {LINE_TEXT} AS line_id,
    coalesce(line_name, fee_name) AS label,
    volume_tier,
    fee_name,
    fee_amount,
    CAST(amount AS DOUBLE) AS amount,
    currency,
    fee_basis,
    source_document,
    source_url,
    ended_by
FROM {RECORDS}
"""

# How a JSON answer prints a column whose stored value JSON has no type for: the ids as text (the
# serving copy holds UUIDs), the decimal amount as a number, days as `YYYY-MM-DD` and the
# publication time in UTC to the microsecond.
JSON_VALUES: Final = {
    "record_id": TEXT_ID,
    "line_id": LINE_TEXT,
    "amount": "CAST(amount AS DOUBLE)",
    "ingested_at": "strftime(timezone('UTC', ingested_at), '%Y-%m-%dT%H:%M:%S.%fZ')",
    "complete_as_of": "strftime(complete_as_of, '%Y-%m-%d')",
}
# The printed records (`PRINTED_COLUMNS`), in table order: one JSON array per record.
PRINTED: Final = f"""
SELECT CAST(json_array({", ".join(JSON_VALUES.get(column, column) for column in PRINTED_COLUMNS)})
    AS VARCHAR) AS record
FROM {RECORDS}
"""

# DuckDB's memory limit while the index is written (or the ingest's own, when lower). Its
# queries stream their rows (`ingest.arrays`) or sort a column or two, and between them the
# index is NumPy work on arrays held whole: beside those arrays, the pages DuckDB kept cached
# from the phases before (up to `--memory-limit`) were the ingest's peak. 10M records: the
# phase peaked at 1,907 MB with them and 1,239 without, in 49.8 s against 46.8-48.1.
INDEX_MEMORY_LIMIT: Final = "256MB"

DISTINCT_VALUES: Final = (
    f"SELECT list(DISTINCT {{column}} ORDER BY {{column}}) FILTER ({{column}} IS NOT NULL) "
    f"FROM {RECORDS}"
)


def attach(con: duckdb.DuckDBPyConnection, version: Path) -> None:
    """Open the version's serving file as `serving`, for `ingest.write` to fill."""
    con.execute(ATTACH.format(path=sql_string(str(version / SERVING_FILE))))


def write_index(con: duckdb.DuckDBPyConnection, version: Path, records: int) -> None:
    """Write `index/` for the `records` records in `RECORDS`, then close the serving file. The
    last work on `con` (`ingest.build` closes it next), so its memory limit stays lowered."""
    lower_memory(con, INDEX_MEMORY_LIMIT)
    try:
        _write_index(con, version / INDEX_DIR, records)
    finally:
        con.execute(DETACH)


def _write_index(con: duckdb.DuckDBPyConnection, index: Path, rows: int) -> None:
    names = {
        "exchange": _distinct(con, "exchange"),
        "version_id": _distinct(con, "version_id"),
        **{name: list(CODED_VALUES[name]) for name in CODED},
        **{name: _distinct(con, value) for name, value in HELD_VALUES.items()},
    }
    for name in ("exchange", *HELD_VALUES):
        if len(names[name]) > np.iinfo(CODE_TYPES[name]).max:
            raise ValueError(f"more values of {name} than the index's code of it holds")
    index.mkdir()
    columns = query_arrays(
        con,
        SELECT_CODES,
        rows,
        CODE_TYPES,
        {"venues": names["exchange"], "versions": names["version_id"]}
        | {name: names[name] for name in (*CODED, *HELD_VALUES)},
    )
    # What the class index and the change list read; the other arrays are let go once saved.
    read = {*CLASSED, *CLASSES_READ, *CHANGES_READ}
    arrays = {}
    printed = np.empty(rows, dtype=[(name, CODE_TYPES[name]) for name in PRINTED_CODES])
    for name in CODE_TYPES:
        array = columns.pop(name)
        np.save(index / f"{name}.npy", array)
        if name in PRINTED_CODES:
            printed[name] = array
        if name in read:
            arrays[name] = array
    del array
    np.save(index / PRINTED_CODES_FILE, printed)
    del printed
    arrays["record_rank"], arrays["amount_rank"] = _write_ranks(con, index, rows)
    classes = class_numbers(arrays)
    write_classes(index, arrays, classes, len(names["exchange"]))
    arrays = {name: arrays[name] for name in CHANGES_READ}  # the rest let go before the list
    write_changes(con, RECORDS, index, arrays, classes, _write_lines(con, index, rows))
    del arrays, classes
    _write_mapped(con, SUMMARY, SUMMARY_COLUMNS, index / SUMMARY_FILE)
    _write_mapped(con, PRINTED, ("record",), index / PRINTED_FILE)
    write_price_keys(con, RECORDS, index)
    (index / CODES_FILE).write_text(json.dumps(names, indent=1) + "\n", encoding="utf-8")


def _write_ranks(
    con: duckdb.DuckDBPyConnection, index: Path, rows: int
) -> tuple[npt.NDArray[np.uint32], npt.NDArray[np.uint32]]:
    """Each position's rank in record id order, and its amount's rank (both returned)."""
    by_record = query_arrays(con, BY_RECORD_ID, rows, {"position": np.int64})["position"]
    np.save(index / f"{RECORD_ORDER}.npy", np.asarray(by_record, dtype=np.uint32))
    records = _by_position(by_record, np.arange(len(by_record)))
    del by_record
    np.save(index / "record_rank.npy", records)
    amounts = query_arrays(con, AMOUNT_RANKS, rows, {"position": np.int64, "rank": np.uint32})
    ranks = _by_position(amounts["position"], amounts["rank"])
    np.save(index / "amount_rank.npy", ranks)
    return records, ranks


def _write_lines(
    con: duckdb.DuckDBPyConnection, index: Path, rows: int
) -> tuple[npt.NDArray[Any], npt.NDArray[Any]]:
    """The line index (`LINE_FILES`): the records of each fee line, found by its id. Returns
    `line_order` and `line_bounds`."""
    line_rows = query_arrays(con, LINE_ORDER, rows, LINE_ORDER_TYPES)
    hi, lo = line_rows["line_hi"], line_rows["line_lo"]
    firsts = np.flatnonzero(np.concatenate(([True], (hi[1:] != hi[:-1]) | (lo[1:] != lo[:-1]))))
    arrays = {
        "line_order": line_rows["position"],
        "lines_hi": hi[firsts],
        "lines_lo": lo[firsts],
        "line_bounds": np.append(firsts, len(hi)).astype(np.int64),
    }
    for name in LINE_FILES:
        np.save(index / f"{name}.npy", arrays[name])
    return arrays["line_order"], arrays["line_bounds"]


def _write_mapped(
    con: duckdb.DuckDBPyConnection, sql: str, columns: tuple[str, ...], path: Path
) -> None:
    """A query's rows (the record summary, the printed records), streamed batch by batch into
    an Arrow IPC file the service memory-maps (never whole in memory)."""
    reader = con.sql(sql).to_arrow_reader(MAPPED_BATCH)
    if list(reader.schema.names) != list(columns):
        raise ValueError(f"the columns of {path.name} are not those of its layout")
    with pa.OSFile(str(path), "wb") as sink, pa.ipc.new_file(sink, reader.schema) as writer:
        for batch in reader:
            writer.write_batch(batch)


def _by_position(positions: npt.NDArray[Any], ranks: npt.NDArray[Any]) -> npt.NDArray[np.uint32]:
    """Ranks listed in some order, placed at their positions (as 32-bit ranks)."""
    placed = np.empty(len(positions), dtype=np.uint32)
    placed[positions] = ranks
    return placed


def _distinct(con: duckdb.DuckDBPyConnection, column: str) -> list[str]:
    values = con.execute(DISTINCT_VALUES.format(column=column)).fetchall()[0][0]
    return [str(value) for value in values or []]
