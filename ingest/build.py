"""One version's build: its raw files read, checked and sorted into the serving table, the
rejected rows accounted for, and the records written with what is derived from them, into a
staging directory (`ingest.pipeline` publishes it).

The steps of `build` hand each other small values, and the rows themselves as tables of the one
connection: at 10M rows the records outgrow memory, and a DuckDB table (spilling to
`work/spill`) moves them from step to step without a copy. Which step makes what:

    _sort_rows            files, line_map, problems (empty), previous; attaches the serving
                          file and fills serving.rows, with an ENUM type per vocabulary column
    _list_rule_problems   rejected, and the problems of its rows; reads files and line_map
    _settle_records       deletes later duplicates from serving.rows, then settles the lines'
                          lives (`ingest.lives`): collapses repeated readings, rejects records
                          in conflict listing their problems, derives ends and confirmations;
                          reads files and line_map
    _account_rejects      reads problems, files and line_map; writes rejects.csv
    _write_records        reads serving.rows; detaches the serving file when the index is
                          written, last
"""

import sys
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from datetime import datetime
from itertools import islice
from pathlib import Path
from typing import Any

import duckdb
import pyarrow as pa
import pyarrow.parquet as pq
from tqdm import tqdm

from ingest import layout, lives, rollups, serving, stage, write
from ingest.errors import IngestError, MalformedFile, RowsRejected
from ingest.failures import storage_cause
from ingest.rawfiles import RawFile, find_malformation, is_regular, record_lines
from ingest.registry import Venue
from ingest.schema import SCHEMA_VERSION

LINE_MAP_BATCH = 100_000


@dataclass
class Built:
    manifest: dict[str, Any]
    first_rejects: list[dict[str, Any]]


@dataclass(frozen=True)
class _Build:
    """What one version's build holds: its connection (in memory, spilling to `work/spill`
    past the memory limit), where it writes (`work/version`), and what it reads."""

    con: duckdb.DuckDBPyConnection
    version: Path
    files: list[RawFile]
    codes: list[str]  # the registry's venue codes
    version_id: str
    created: datetime


@dataclass(frozen=True)
class _Rejects:
    per_file: dict[int, tuple[int, int]]  # file number -> (problems, rejected rows)
    problems: int
    rows: int
    first: list[dict[str, Any]]


def build(
    work: Path,
    files: list[RawFile],
    venues: list[Venue],
    previous: Path | None,
    strict: bool,
    memory_limit: str,
    version_id: str,
    created: datetime,
) -> Built:
    """Read, check and write one version's files into `work/version`: sort the valid rows,
    account for the rejected ones, write the records and what is derived from them, then the
    registry and the manifest (the module docstring says which step makes what)."""
    version = work / "version"
    version.mkdir()
    con = duckdb.connect()
    try:
        _configure(con, work, memory_limit)
        build = _Build(con, version, files, [v.code for v in venues], version_id, created)
        rows_read, valid_rows = _sort_rows(build, previous)
        _list_rule_problems(build, rows_read, valid_rows)
        duplicates, settled = _settle_records(build)
        rejects = _account_rejects(build, rows_read, valid_rows - settled["rejected"], strict)
        venue_counts = _write_records(build)
    finally:
        con.close()
    _write_registry(version / "exchanges.parquet", venues)
    manifest = _manifest(build, rows_read, rejects, duplicates, settled, venue_counts)
    return Built(manifest, rejects.first)


def _manifest(
    build: _Build,
    rows_read: int,
    rejects: _Rejects,
    duplicates: int,
    settled: dict[str, int],
    venues: dict[str, int],
) -> dict[str, Any]:
    """What the version holds and how it was made (`input_digest` is added by the caller)."""
    return {
        "version_id": build.version_id,
        "created_at": build.created.isoformat(),
        "as_of": build.created.date().isoformat(),
        "schema_version": SCHEMA_VERSION,
        "layout_version": layout.LAYOUT_VERSION,
        "files": [
            {
                "path": raw.shown,
                "sha256": raw.sha256,
                "rejected_rows": rejects.per_file.get(n, (0, 0))[1],
            }
            for n, raw in enumerate(build.files)
        ],
        "rows_read": rows_read,
        "records": sum(venues.values()),
        "rejected_rows": rejects.rows,
        "problems": rejects.problems,
        "duplicates": duplicates,
        "repeated_readings": settled["repeats"],
        "derived_ends": {
            "next_reading": settled["next_reading"],
            "complete_schedule": settled["complete_schedule"],
        },
        "venues": venues,
    }


def _sort_rows(build: _Build, previous: Path | None) -> tuple[int, int]:
    """Read every file, check every row, and sort the valid ones into the serving table;
    returns the rows read and the rows kept."""
    con = build.con
    con.execute(stage.CREATE_TABLES)
    write.load_previous(con, previous)
    serving.attach(con, build.version)
    _phase("reading, checking and sorting the rows")
    raw_rows = _raw_rows(build.files, range(len(build.files)))
    valid_rows = write.sort_records(
        con,
        raw_rows,
        venues=build.codes,
        paths=[raw.shown for raw in build.files],
        version_id=build.version_id,
        ingested_at=build.created.isoformat(),
    )
    _record_files(con, build.files, raw_rows.records)
    return sum(raw_rows.records.values()), valid_rows


def _list_rule_problems(build: _Build, rows_read: int, valid_rows: int) -> None:
    """List every problem of the rows that broke a rule (reading only their files again)."""
    if valid_rows < rows_read:
        _phase(f"listing the problems of {rows_read - valid_rows:,} rejected rows")
        rejected_files = write.files_with_rejects(build.con)
        stage.list_problems(build.con, _raw_rows(build.files, rejected_files), build.codes)


def _settle_records(build: _Build) -> tuple[int, dict[str, int]]:
    """Collapse exact duplicates, then settle the lines' lives (`ingest.lives.settle`); returns
    the duplicates dropped and what the settling did."""
    duplicates = write.delete_later_duplicates(build.con)
    _phase("settling each fee line's records: repeats, conflicts, ends")
    settled = lives.settle(build.con)
    if duplicates or settled["repeats"] or settled["rejected"]:
        write.compact(build.con, build.version)
    return duplicates, settled


def _account_rejects(build: _Build, rows_read: int, valid_rows: int, strict: bool) -> _Rejects:
    """Check that every row not kept has its problems listed, and write `rejects.csv`; under
    `strict` any problem, and in any case an input with no valid row, stops the build."""
    con = build.con
    per_file = {row[0]: (row[1], row[2]) for row in con.execute(stage.REJECT_COUNTS).fetchall()}
    rejects = _Rejects(
        per_file,
        problems=sum(count for count, _ in per_file.values()),
        rows=sum(rows for _, rows in per_file.values()),
        first=_first_rejects(con),
    )
    if rejects.rows != rows_read - valid_rows:
        raise IngestError(
            f"internal error: {rows_read - valid_rows} rows were dropped but {rejects.rows} "
            "have problems listed; nothing published"
        )
    if strict and rejects.problems:
        raise RowsRejected(
            f"--strict: {rejects.rows} row(s) rejected with {rejects.problems} problem(s); "
            f"nothing published. First: {describe_reject(rejects.first[0])}"
        )
    con.execute(stage.copy_rejects(build.version / "rejects.csv"))
    # What is left to publish (the rows kept, less their duplicates and repeated readings).
    [(records,)] = con.execute(write.COUNT_RECORDS).fetchall()
    if records == 0:
        raise IngestError("no valid records in the raw files; nothing published")
    return rejects


def _write_records(build: _Build) -> dict[str, int]:
    """Write the venue files, the rollups and the results index; returns the records per
    venue."""
    _phase("writing Parquet (a file per venue)")
    venue_counts = write.write_venue_files(build.con, build.version / "fees")
    _phase("counting the rollups")
    rollups.write_rollups(
        build.con, build.version, version_id=build.version_id, as_of=build.created.date()
    )
    _phase("writing the results index")
    serving.write_index(build.con, build.version, sum(venue_counts.values()))
    return venue_counts


def _configure(con: duckdb.DuckDBPyConnection, work: Path, memory_limit: str) -> None:
    """Bound memory (spilling to `work`) so a 10M-row input fits a small machine."""
    con.execute(f"SET memory_limit = {layout.sql_string(memory_limit)}")
    # Blocks are kept for reuse, up to the memory limit (100% of it, once it is set), instead of
    # going back to the system and being faulted in again (5M rows: the sort 0.7 s faster,
    # 1.5 CPU-seconds less; peak memory unchanged, since the limit already bounds them).
    con.execute("SET block_allocator_memory = '100%'")
    con.execute(f"SET temp_directory = {layout.sql_string(str(work / 'spill'))}")
    con.execute("SET enable_progress_bar = false")


def _phase(message: str) -> None:
    """Say what a long ingest is doing, in a terminal only (CI and pipes stay quiet)."""
    if sys.stderr.isatty():
        tqdm.write(f"{message}...", file=sys.stderr)


def _raw_rows(files: list[RawFile], numbers: Iterable[int]) -> stage.RawRows:
    """The files with the given numbers, for one scan."""

    def failure(file_no: int, error: duckdb.Error) -> Exception:
        if storage_cause(str(error)) is not None:
            return error  # a full disk, say: not the file's fault
        return _malformed(files[file_no], error)

    chosen = [(number, files[number]) for number in numbers]
    return stage.RawRows(
        paths={number: raw.path for number, raw in chosen},
        layouts={number: raw.columns for number, raw in chosen},
        failure=failure,
    )


def _record_files(
    con: duckdb.DuckDBPyConnection, files: list[RawFile], records: dict[int, int]
) -> None:
    """Note each file and its record count; map the lines of files where a record's line is not
    its ordinal plus one (blank lines, quoted line breaks), and give their records those lines."""
    irregular = False
    for number, raw in enumerate(files):
        count = records[number]
        con.execute(stage.RECORD_FILE, {"file_no": number, "path": raw.shown, "records": count})
        if not is_regular(raw.newlines, count):
            _map_lines(con, number, record_lines(raw.path))
            irregular = True
    if irregular:
        write.fix_lines(con)


def _malformed(raw: RawFile, error: duckdb.Error) -> MalformedFile:
    """DuckDB refused the file: name the exact line if a plain walk of the file finds it."""
    malformation = find_malformation(raw.path, raw.shown, len(raw.columns))
    if malformation is not None:
        return malformation
    return MalformedFile(raw.shown, None, str(error).splitlines()[0])


def _map_lines(
    con: duckdb.DuckDBPyConnection, file_no: int, lines: Iterable[tuple[int, int]]
) -> None:
    for batch in _batches(lines, LINE_MAP_BATCH):
        ordinals, starts = zip(*batch, strict=True)
        table = pa.table(
            {
                "file_no": pa.array([file_no] * len(batch), pa.int32()),
                "ordinal": pa.array(ordinals, pa.int64()),
                "line": pa.array(starts, pa.int64()),
            }
        )
        con.register("line_batch", table)
        con.execute("INSERT INTO line_map SELECT * FROM line_batch")
        con.unregister("line_batch")


def _batches(items: Iterable[tuple[int, int]], size: int) -> Iterator[list[tuple[int, int]]]:
    iterator = iter(items)
    while batch := list(islice(iterator, size)):
        yield batch


def _first_rejects(con: duckdb.DuckDBPyConnection, limit: int = 10) -> list[dict[str, Any]]:
    cursor = con.execute(f"{stage.WRITE_REJECTS} LIMIT {int(limit)}")
    names = [column[0] for column in cursor.description]
    return [dict(zip(names, row, strict=True)) for row in cursor.fetchall()]


def describe_reject(reject: dict[str, Any]) -> str:
    return (
        f"{reject['file']}, line {reject['line']}, {reject['column']}"
        f" = {reject['value']!r}: {reject['reason']}"
    )


def _write_registry(target: Path, venues: list[Venue]) -> None:
    table = pa.table(
        {
            "code": [venue.code for venue in venues],
            "display_name": [venue.display_name for venue in venues],
            "aliases": [list(venue.aliases) for venue in venues],
            "mic": [venue.mic for venue in venues],
            "asset_classes": [list(venue.asset_classes) for venue in venues],
        }
    )
    pq.write_table(table, target, compression="zstd")
