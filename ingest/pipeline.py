"""The whole ingest: raw CSVs in, one new published version (or nothing) out."""

import errno
import hashlib
import json
import os
import re
import shutil
import sys
from collections.abc import Iterable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from functools import partial
from itertools import islice
from pathlib import Path
from typing import Any

import duckdb
import pyarrow as pa
import pyarrow.parquet as pq
from tqdm import tqdm

from ingest import layout, publish, rollups, serving, stage, write
from ingest.errors import IngestError, MalformedFile, RowsRejected, StorageFailed
from ingest.rawfiles import (
    check_header,
    digest_and_newlines,
    find_malformation,
    find_raw_files,
    is_regular,
    record_lines,
)
from ingest.registry import Venue, load_registry
from ingest.schema import SCHEMA_VERSION
from ingest.storage import Storage, is_s3, open_storage, s3_errors

LINE_MAP_BATCH = 100_000
HASHING_THREADS = 16
# What a version holds beside its records (serving copy, results index, rollups). It is part of
# the input digest, so raising it makes the next ingest rebuild unchanged inputs: a version
# from before lacks what the service now reads (rollups: 2), and the service refuses it.
LAYOUT_VERSION = 2


@dataclass(frozen=True)
class RawFile:
    path: Path
    shown: str  # path relative to the raw directory, as reported and stored
    sha256: str
    newlines: int
    columns: tuple[str, ...]  # its header: one of `schema.RAW_LAYOUTS`


@dataclass
class IngestResult:
    changed: bool
    version_id: str
    version_dir: Path | str  # an `s3://` URL when published to S3
    rows_read: int = 0
    records: int = 0
    rejected_rows: int = 0
    problems: int = 0
    duplicates: int = 0
    pruned: list[str] = field(default_factory=list)
    first_rejects: list[dict[str, Any]] = field(default_factory=list)
    unchanged_because: str = "nothing changed"  # why nothing was published, when it was not


def run_ingest(
    raw_dir: Path,
    data_dir: Path | str,
    *,
    registry: Path,
    strict: bool = False,
    keep: int = 3,
    memory_limit: str = "1GB",
    now: datetime | None = None,
    s3_endpoint_url: str | None = None,
    if_stale: bool = False,
) -> IngestResult:
    """Validate `raw_dir` and publish it as a new version of `data_dir` (a directory or an
    `s3://bucket/prefix` URL, `ingest.storage`), unless unchanged. With `if_stale`, publish only
    when no version is current or the current one is of another schema (`make run`: it never
    replaces data ingested from elsewhere, but does rebuild what this code cannot serve)."""
    venues = load_registry(registry)
    files = _inspect_all(raw_dir)
    digest = _input_digest(registry, files)
    storage = open_storage(data_dir, s3_endpoint_url=s3_endpoint_url)
    with _storage_errors(storage.root, data_dir), storage.lock():
        current = storage.current_version()
        unchanged = _unchanged(storage, current, data_dir, digest, keep=keep, if_stale=if_stale)
        if unchanged is not None:
            return unchanged
        created = now or datetime.now(UTC)
        version_id = f"{created:%Y%m%dT%H%M%S%fZ}-{digest[:8]}"
        work = publish.staging_dir(storage.root, version_id)
        try:
            previous = storage.previous_fees(current, work) if current is not None else None
            result = _build(
                work, files, venues, previous, strict, memory_limit, version_id, created
            )
            result.manifest["input_digest"] = digest
            publish.write_manifest(work / "version", result.manifest)
            storage.publish(work / "version", version_id)
        finally:
            shutil.rmtree(work, ignore_errors=True)
        pruned = storage.prune(keep=keep)
    counts = {name: result.manifest[name] for name in COUNTS}
    return IngestResult(
        changed=True, version_id=version_id, version_dir=_where(data_dir, version_id),
        pruned=pruned, first_rejects=result.first_rejects, **counts,
    )  # fmt: skip


def _inspect_all(raw_dir: Path) -> list[RawFile]:
    """Every raw file's header checked and its bytes hashed. hashlib releases the GIL on large
    buffers, so files are read on every core at once (five 280 MB files: 1.6 s on one thread,
    1.0 s on two). A thread per file (up to HASHING_THREADS) lets the system share the cores
    out, so none idles while the last file is hashed alone (0.85 s on five)."""
    paths = find_raw_files(raw_dir)
    with ThreadPoolExecutor(max(1, min(len(paths), HASHING_THREADS))) as pool:
        files = list(pool.map(partial(_inspect, raw_dir=raw_dir), paths))
    if not files:
        raise IngestError(f"no *.csv files under {raw_dir}")
    return files


def _unchanged(
    storage: Storage,
    current: str | None,
    data_dir: Path | str,
    digest: str,
    *,
    keep: int,
    if_stale: bool,
) -> IngestResult | None:
    """The answer when nothing is to be published: the `current` version was built from the
    same input, or (`if_stale`) it is of this schema. None when a new version is due."""
    if current is None:
        return None
    manifest = storage.manifest(current)
    if if_stale and manifest.get("schema_version") == SCHEMA_VERSION:
        return IngestResult(
            changed=False, version_id=current, version_dir=_where(data_dir, current),
            unchanged_because=f"a version of schema {SCHEMA_VERSION} is current (--if-stale)",
        )  # fmt: skip
    if manifest["input_digest"] != digest:
        return None
    # Pruned all the same: a run killed between its switch and its prune leaves one version
    # too many, and rerunning it is how that is put right.
    return IngestResult(
        changed=False, version_id=current, version_dir=_where(data_dir, current),
        pruned=storage.prune(keep=keep),
    )  # fmt: skip


def _where(data_dir: Path | str, version_id: str) -> Path | str:
    """Where a published version is: its directory, or its URL on S3."""
    if is_s3(data_dir):
        return f"{str(data_dir).rstrip('/')}/{layout.VERSIONS}/{version_id}"
    return Path(data_dir) / layout.VERSIONS / version_id


# The counts an ingest reports, kept once: in the manifest.
COUNTS = ("rows_read", "records", "rejected_rows", "problems", "duplicates")

# Causes the person running the ingest fixes on the machine (space, permissions, a read-only
# mount), not in the data or the code: they get one line, not a traceback. Other OS errors are
# unexpected and keep theirs.
STORAGE_ERRNOS = (errno.ENOSPC, errno.EDQUOT, errno.EROFS, errno.EACCES, errno.EPERM)
# DuckDB reports an OS error only as text, naming the file in quotes (escaped when the message
# is nested JSON): `Could not write file "<path>": No space left on device`.
QUOTED_PATH = re.compile(r'\\?"([^"\\]*/[^"\\]*)\\?"')


@contextmanager
def _storage_errors(data_dir: Path, location: Path | str) -> Iterator[None]:
    """The one place where a full disk or an unwritable data directory, whether met by Python,
    pyarrow or DuckDB, becomes an `IngestError` that names the path and the cause; so does an
    S3 request that failed (no such bucket, access denied, no connection), naming the URL."""
    try:
        yield
    except s3_errors() as error:  # evaluated only as an error passes: botocore loads lazily
        raise StorageFailed(location, str(error).splitlines()[0]) from error
    except (OSError, duckdb.Error) as error:
        failure = _storage_failure(error, data_dir)
        if failure is None:
            raise
        raise failure from error


def _storage_failure(error: OSError | duckdb.Error, data_dir: Path) -> StorageFailed | None:
    if isinstance(error, OSError):
        if error.errno not in STORAGE_ERRNOS:
            return None
        # The second name is what symlink() and rename() were creating (the first is the link's
        # target, or the source). pyarrow names no file: the data directory is the best guess.
        path = error.filename2 or error.filename or data_dir
        return StorageFailed(path, os.strerror(error.errno))
    cause = _storage_cause(str(error))
    if cause is None:
        return None
    quoted = QUOTED_PATH.search(str(error))
    return StorageFailed(quoted.group(1) if quoted else data_dir, cause)


def _storage_cause(message: str) -> str | None:
    """The storage cause a DuckDB message reports, as the C library words it (DuckDB's text)."""
    return next((os.strerror(n) for n in STORAGE_ERRNOS if os.strerror(n) in message), None)


@dataclass
class _Built:
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


def _build(
    work: Path,
    files: list[RawFile],
    venues: list[Venue],
    previous: Path | None,
    strict: bool,
    memory_limit: str,
    version_id: str,
    created: datetime,
) -> _Built:
    """Read, check and write one version's files into `work/version`: sort the valid rows,
    account for the rejected ones, write the records and what is derived from them, then the
    registry and the manifest."""
    version = work / "version"
    version.mkdir()
    con = duckdb.connect()
    try:
        _configure(con, work, memory_limit)
        build = _Build(con, version, files, [v.code for v in venues], version_id, created)
        rows_read, kept = _sort_rows(build, previous)
        rejects = _account_rejects(build, rows_read, kept, strict)
        duplicates, venue_counts = _write_records(build)
    finally:
        con.close()
    _write_registry(version / "exchanges.parquet", venues)
    manifest = _manifest(build, rows_read, rejects, duplicates, venue_counts)
    return _Built(manifest, rejects.first)


def _manifest(
    build: _Build, rows_read: int, rejects: _Rejects, duplicates: int, venues: dict[str, int]
) -> dict[str, Any]:
    """What the version holds and how it was made (`input_digest` is added by the caller)."""
    return {
        "version_id": build.version_id,
        "created_at": build.created.isoformat(),
        "as_of": build.created.date().isoformat(),
        "schema_version": SCHEMA_VERSION,
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
    kept = write.sort_records(
        con,
        raw_rows,
        venues=build.codes,
        paths=[raw.shown for raw in build.files],
        version_id=build.version_id,
        ingested_at=build.created.isoformat(),
    )
    _record_files(con, build.files, raw_rows.records)
    return sum(raw_rows.records.values()), kept


def _account_rejects(build: _Build, rows_read: int, kept: int, strict: bool) -> _Rejects:
    """List every problem of the rows not kept (reading only their files again), check that
    they are all accounted for, and write `rejects.csv`; under `strict` any problem, and in any
    case an input with no valid row, stops the build."""
    con = build.con
    if kept < rows_read:
        _phase(f"listing the problems of {rows_read - kept:,} rejected rows")
        rejected_files = write.files_with_rejects(con)
        stage.list_problems(con, _raw_rows(build.files, rejected_files), build.codes)
    per_file = {row[0]: (row[1], row[2]) for row in con.execute(stage.REJECT_COUNTS).fetchall()}
    rejects = _Rejects(
        per_file,
        problems=sum(count for count, _ in per_file.values()),
        rows=sum(rows for _, rows in per_file.values()),
        first=_first_rejects(con),
    )
    if rejects.rows != rows_read - kept:
        raise IngestError(
            f"internal error: {rows_read - kept} rows were dropped but {rejects.rows} "
            "have problems listed; nothing published"
        )
    if strict and rejects.problems:
        raise RowsRejected(
            f"--strict: {rejects.rows} row(s) rejected with {rejects.problems} problem(s); "
            f"nothing published. First: {describe_reject(rejects.first[0])}"
        )
    con.execute(stage.copy_rejects(build.version / "rejects.csv"))
    if kept == 0:
        raise IngestError("no valid records in the raw files; nothing published")
    return rejects


def _write_records(build: _Build) -> tuple[int, dict[str, int]]:
    """Collapse exact duplicates, then write the venue files, the rollups and the results
    index; returns the duplicates dropped and the records per venue."""
    duplicates = write.drop_later_duplicates(build.con, build.version)
    _phase("writing Parquet (a file per venue)")
    venue_counts = write.write_venue_files(build.con, build.version / "fees")
    _phase("counting the rollups")
    rollups.write_rollups(
        build.con, build.version, version_id=build.version_id, as_of=build.created.date()
    )
    _phase("writing the results index")
    serving.write_index(build.con, build.version)
    return duplicates, venue_counts


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


def _inspect(path: Path, raw_dir: Path) -> RawFile:
    shown = path.relative_to(raw_dir).as_posix()
    columns = check_header(path, shown)
    sha256, newlines = digest_and_newlines(path)
    return RawFile(path, shown, sha256, newlines, columns)


def _input_digest(registry: Path, files: list[RawFile]) -> str:
    """What a version is made from: the schema and layout, the registry and every raw file's
    bytes."""
    inputs = {
        "schema_version": SCHEMA_VERSION,
        "layout_version": LAYOUT_VERSION,
        "registry": hashlib.sha256(registry.read_bytes()).hexdigest(),
        "files": [[raw.shown, raw.sha256] for raw in files],
    }
    return hashlib.sha256(json.dumps(inputs, sort_keys=True).encode()).hexdigest()


def _raw_rows(files: list[RawFile], numbers: Iterable[int]) -> stage.RawRows:
    """The files with the given numbers, for one scan."""

    def failure(file_no: int, error: duckdb.Error) -> Exception:
        if _storage_cause(str(error)) is not None:
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
    found = find_malformation(raw.path, raw.shown, len(raw.columns))
    if found is not None:
        return found
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
