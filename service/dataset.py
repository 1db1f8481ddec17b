"""One published dataset version, opened for queries, and the holder that swaps versions live.

Opening a version reads the rollups the ingest counted for it (`service.rollups`: discovery
counts, venue summaries, coverage runs) and memory-maps its results index; a request then runs
one small query on its own cursor, or none at all.
`VersionWatcher` notices a new `current` pointer, opens that version beside the old one and
swaps a single reference, so requests in flight finish on the version they started with.

Faults in the data are kept to the requests they touch. A version whose files do not match its
manifest (a venue's file missing, unreadable or holding another number of records; a serving
copy or index of another size) is refused at load, and the previous one goes on serving. A file
damaged after that fails only the queries that read it: they answer 503 (`DataFault`), the fault
is kept in `Dataset.faults` for the readiness probe, and everything else keeps working. A query
that runs past `Settings.query_timeout_seconds` is interrupted and answers 503 (`QueryTimeout`).
"""

import logging
import threading
import time
from collections import defaultdict
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from datetime import date
from pathlib import Path
from typing import Any

import duckdb
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from ingest.layout import COUNTED, INDEX_DIR, SERVING_FILE, read_manifest, sql_string
from ingest.schema import SCHEMA_VERSION
from service import memory, queries
from service.accounts import Account
from service.errors import Unavailable
from service.index import Array, ResultsIndex
from service.mirror import open_source
from service.rollups import ENCODED, DiscoveryCounts, read_rollup
from service.settings import Settings
from service.vocabulary import DATA_TYPE_OF_CATEGORY, DATA_TYPE_ORDER
from service.watchdog import WATCHDOG

log = logging.getLogger(__name__)

MAX_FAULTS = 20  # kept per version for the readiness probe (each is logged in full)
# What DuckDB raises when a file cannot be read: missing (IOException), not Parquet or cut short
# (InvalidInputException), a damaged footer or a block failing its checksum (the bare Error).
# Anything else escaping a query is a defect and stays a 500.
FILE_FAULTS = (duckdb.IOException, duckdb.InvalidInputException)


class DamagedVersion(Exception):
    """A version that cannot be served as it is (its files do not match its manifest, or it was
    written for another schema); it is refused at load."""


class DataFault(Unavailable):
    def __init__(self) -> None:
        super().__init__("part of the dataset cannot be read; the operator has been alerted")


class QueryTimeout(Unavailable):
    def __init__(self, seconds: float) -> None:
        super().__init__(f"the query ran longer than {seconds:g} s and was stopped; try again")


def is_file_fault(error: duckdb.Error) -> bool:
    return isinstance(error, FILE_FAULTS) or type(error) is duckdb.Error


# The filter dimensions of exchange details and the filters endpoint, in response order.
DETAIL_DIMENSIONS = (
    "fee_types",
    "fee_categories",
    "actions",
    "participants",
    "symbol_classifications",
    "symbol_types",
    "trade_types",
)


@dataclass(frozen=True)
class Venue:
    code: str
    display_name: str
    fee_types: tuple[str, ...]  # present in its records, sorted
    records: int
    categories: dict[str, tuple[str, ...]]  # fee_category -> fee types that have it
    earliest: date | None = None  # first day any record is in force
    latest: date | None = None  # last day (a record still in force runs to the as-of date)
    values: dict[str, tuple[str, ...]] = field(default_factory=dict)  # per DETAIL_DIMENSIONS


@dataclass(frozen=True)
class CoverageRun:
    starts: date
    ends: date
    data_types: tuple[str, ...]


class Dataset:
    """A read-only view of one version; safe to share between threads (a cursor per query)."""

    def __init__(self, version_dir: Path, settings: Settings) -> None:
        self.version_dir = version_dir
        self.manifest = read_manifest(version_dir)
        if self.manifest.get("schema_version") != SCHEMA_VERSION:
            raise DamagedVersion(
                f"{version_dir.name}: written for schema {self.manifest.get('schema_version')}, "
                f"this service reads schema {SCHEMA_VERSION}: run `fees ingest` to rebuild it"
            )
        self.version_id: str = self.manifest["version_id"]
        self.records: int = self.manifest["records"]
        self.faults: list[str] = []  # what failed since it was opened, for the readiness probe
        self._timeout = settings.query_timeout_seconds
        self._paths = _checked_files(version_dir, self.manifest)
        self._every = tuple(str(path) for path in self._paths)  # `scoped`, per request
        self._files: dict[str, tuple[str, ...]] = defaultdict(tuple)  # venue -> its files
        for path in self._every:
            self._files[_venue_of(Path(path))] += (path,)
        self._con = _connect(settings)
        self._con.execute(
            queries.CREATE_FEES_VIEW.format(
                files=", ".join(sql_string(str(f)) for f in self._paths)
            )
        )
        self._con.execute(
            queries.CREATE_REGISTRY_VIEW.format(
                registry=sql_string(str(version_dir / "exchanges.parquet"))
            )
        )
        # Every results page is found by the index and read from the serving copy: a version
        # without either cannot be served.
        for part in (SERVING_FILE, INDEX_DIR):
            if not (version_dir / part).exists():
                raise DamagedVersion(f"{version_dir.name}: {part} is missing")
        serving = sql_string(str(version_dir / SERVING_FILE))
        self._con.execute(f"ATTACH {serving} AS serving (READ_ONLY)")
        self.index = ResultsIndex(version_dir / INDEX_DIR)
        self._check_serving(self.index)
        self.venues, self._names = self._load_venues()
        self.coverage = self._load_coverage()
        self.versions = self._load_versions()
        self._discovery = DiscoveryCounts(self._rollup("counts", dictionary=ENCODED))

    def close(self) -> None:
        self._con.close()

    def query(self, sql: str, parameters: dict[str, Any] | None = None) -> list[tuple[Any, ...]]:
        cursor = self._con.cursor()
        try:
            with self._guarded(cursor, parameters):
                return cursor.execute(sql, parameters or {}).fetchall()
        finally:
            cursor.close()

    def rows(self, sql: str, parameters: dict[str, Any]) -> list[dict[str, Any]]:
        """The query's rows as dicts keyed by column name (for JSON answers)."""
        cursor = self._con.cursor()
        try:
            with self._guarded(cursor, parameters):
                result = cursor.execute(sql, parameters)
                names = [column[0] for column in result.description]
                return [dict(zip(names, row, strict=True)) for row in result.fetchall()]
        finally:
            cursor.close()

    @contextmanager
    def _guarded(
        self, cursor: duckdb.DuckDBPyConnection, parameters: dict[str, Any] | None
    ) -> Iterator[None]:
        """The one place DuckDB's errors become the service's: a query past its time is
        interrupted (`QueryTimeout`), a file that cannot be read is a `DataFault`. A streamed
        result reports both as Arrow's OSError, with DuckDB's text."""
        try:
            with WATCHDOG.watch(cursor, self._timeout):
                yield
        except duckdb.InterruptException:
            raise QueryTimeout(self._timeout) from None
        except duckdb.Error as error:
            if not is_file_fault(error):
                raise
            raise self._fault(str(error), parameters) from None
        except OSError as error:  # from a streamed result (`_stream`)
            if str(error).startswith("INTERRUPT"):
                raise QueryTimeout(self._timeout) from None
            raise self._fault(str(error), parameters) from None

    def _fault(self, message: str, parameters: dict[str, Any] | None) -> DataFault:
        """Log a file fault and keep it for the readiness probe, with the files the query read
        when it names them (DuckDB does not always), shown relative to the version so the probe
        reveals no more than the dataset's own layout."""
        line = message.splitlines()[0]
        files = (parameters or {}).get("files")
        if files:
            line += f" (reading {', '.join(files)})"
        line = line.replace(f"{self.version_dir}/", "")
        log.error("dataset version %s: %s", self.version_id, line)
        if line not in self.faults and len(self.faults) < MAX_FAULTS:
            self.faults.append(line)
        return DataFault()

    def _check_serving(self, index: ResultsIndex) -> None:
        """The serving copy and the index hold as many records as the manifest says."""
        [(rows,)] = self.query(queries.COUNT_SERVING)
        for name, size in {"serving copy": rows, "results index": index.size}.items():
            if size != self.records:
                raise DamagedVersion(
                    f"{self.version_dir.name}: the {name} holds {size} records, "
                    f"the manifest says {self.records}"
                )

    def scoped(self, selection: queries.Selection) -> queries.Selection:
        """`selection`, reading only its venues' files (all of them when it names none)."""
        if selection.venues is None:
            return replace(selection, files=self._every)
        files = tuple(path for venue in selection.venues for path in self._files.get(venue, ()))
        # Venues without records have no file, but read_parquet needs one: any file will do,
        # since the venue condition keeps every record of it out.
        return replace(selection, files=files or self._every[:1])

    def rows_at(self, sql: str, parameters: dict[str, Any]) -> list[dict[str, Any]]:
        """The rows of a query of `queries.ROWS_AT`, in the order of its `positions`."""
        positions: list[int] = parameters["positions"]
        if not positions:
            return []
        by_position = {row.pop("position"): row for row in self.rows(sql, parameters)}
        return [by_position[position] for position in positions]

    def batches_at(
        self, chunks: Iterable[Array], *, shape: str, included: queries.Included, size: int
    ) -> Iterator[pa.RecordBatch]:
        """The serving copy's records at each chunk of positions, in the chunks' order, as
        Arrow record batches shaped for an export format (a key of `queries.SHAPES`)."""
        sql = queries.rows_in_order(shape)

        def steps() -> Iterator[tuple[str, dict[str, Any], pa.Table]]:
            empty = True
            for positions in chunks:
                empty = False
                yield sql, *_at(positions, included)
            if empty:  # one query still runs, so a download always carries its columns
                yield sql, *_at(np.empty(0, dtype=np.int64), included)

        return self._stream(steps(), size)

    def _stream(
        self, steps: Iterable[tuple[str, dict[str, Any], pa.Table | None]], size: int
    ) -> Iterator[pa.RecordBatch]:
        """The rows of each query in turn (its `wanted` table registered first, if any)."""
        cursor = self._con.cursor()
        try:
            empty = True
            for sql, parameters, wanted in steps:
                if wanted is not None:
                    cursor.register("wanted", wanted)
                # The relational API streams; an execute() result would be copied whole.
                with self._guarded(cursor, parameters):
                    reader = cursor.sql(sql, params=parameters).to_arrow_reader(size)
                # Watched per batch: the time the client takes to read one is not the query's.
                while (batch := self._next_batch(cursor, reader, parameters)) is not None:
                    empty = False
                    yield batch
            if empty:  # still one (empty) batch, so a download always carries its columns
                yield pa.RecordBatch.from_pylist([], schema=reader.schema)
        finally:
            cursor.close()

    def _next_batch(
        self,
        cursor: duckdb.DuckDBPyConnection,
        reader: pa.RecordBatchReader,
        parameters: dict[str, Any],
    ) -> pa.RecordBatch | None:
        with self._guarded(cursor, parameters):
            try:
                return reader.read_next_batch()
            except StopIteration:
                return None

    def visible(self, account: Account) -> list[str]:
        """The venue codes an account may see."""
        return [code for code in self.venues if account.may_see(code)]

    def resolve(self, name: str) -> str | None:
        """The venue code for a code, display name or alias, in any letter case."""
        return self._names.get(name.strip().casefold())

    def counts(
        self, column: str, code: str, start: date | None, end: date | None
    ) -> dict[str, int]:
        """Records per stored value of `column` for one venue, in the window; every value the
        venue has any record for is present, with 0 when none is in the window."""
        if column not in COUNTED:
            raise ValueError(f"no rollup for {column!r}")
        return self._discovery.count(column, code, start, end)

    def _rollup(self, name: str, *, dictionary: tuple[str, ...] = ()) -> pa.Table:
        return read_rollup(self.version_dir, name, self.version_id, dictionary=dictionary)

    def _load_venues(self) -> tuple[dict[str, Venue], dict[str, str]]:
        names: dict[str, str] = {}
        summary: dict[str, dict[str, dict[str, int]]] = defaultdict(lambda: defaultdict(dict))
        for row in self._rollup("summary").to_pylist():
            summary[row["exchange"]][row["fee_category"]][row["fee_type"]] = row["records"]
        venues = {}
        for code, display_name, aliases in self.query(queries.REGISTRY):
            for name in (code, display_name, *aliases):
                names[name.casefold()] = code
            categories = summary.get(code, {})
            venues[code] = Venue(
                code=code,
                display_name=display_name,
                fee_types=tuple(sorted({t for types in categories.values() for t in types})),
                records=sum(n for types in categories.values() for n in types.values()),
                categories={c: tuple(sorted(types)) for c, types in categories.items()},
            )
        for row in self._rollup("details").to_pylist():
            values = {
                name: tuple(sorted(value for value in row[name] if value is not None))
                for name in DETAIL_DIMENSIONS
            }
            venues[row["exchange"]] = replace(
                venues[row["exchange"]],
                earliest=row["earliest"],
                latest=row["latest"],
                values=values,
            )
        return venues, names

    def _load_coverage(self) -> dict[str, list[CoverageRun]]:
        coverage: dict[str, list[CoverageRun]] = defaultdict(list)
        for row in self._rollup("coverage").to_pylist():
            present = {DATA_TYPE_OF_CATEGORY[category] for category in row["categories"]}
            data_types = tuple(kind for kind in DATA_TYPE_ORDER if kind in present)
            coverage[row["exchange"]].append(CoverageRun(row["starts"], row["ends"], data_types))
        return dict(coverage)

    def _load_versions(self) -> dict[str, dict[str, int]]:
        """Each version id that first published records still present: records per venue."""
        versions: dict[str, dict[str, int]] = defaultdict(dict)
        for row in self._rollup("versions").to_pylist():
            versions[row["version_id"]][row["exchange"]] = row["records"]
        return dict(versions)


def _checked_files(version_dir: Path, manifest: dict[str, Any]) -> list[Path]:
    """The version's Parquet files, once they are shown to be the manifest's: the venues it
    counts and no others, each with as many rows as it says (read from the files' footers)."""
    expected: dict[str, int] | None = manifest.get("venues")
    if expected is None:
        raise DamagedVersion(f"{version_dir.name}: the manifest has no record counts by venue")
    found: dict[str, int] = defaultdict(int)
    files = sorted((version_dir / "fees").glob("exchange=*/*.parquet"))
    for path in files:
        try:
            rows = pq.read_metadata(path).num_rows
        except (OSError, pa.ArrowException) as error:
            shown = path.relative_to(version_dir)
            raise DamagedVersion(f"{version_dir.name}: {shown} cannot be read: {error}") from None
        found[_venue_of(path)] += rows
    if found != expected:
        differ = sorted(
            code for code in found.keys() | expected.keys() if found.get(code) != expected.get(code)
        )
        raise DamagedVersion(
            f"{version_dir.name}: the files do not match the manifest for venue(s) "
            + ", ".join(
                f"{code} ({found.get(code, 0)} records, manifest {expected.get(code, 0)})"
                for code in differ
            )
        )
    return files


def _venue_of(path: Path) -> str:
    return path.parent.name.removeprefix("exchange=")


def _at(positions: Array, included: queries.Included) -> tuple[dict[str, Any], pa.Table]:
    """The parameters and `wanted` table of `queries.ROWS_IN_ORDER` for a chunk of positions."""
    bounds = (int(positions.min()), int(positions.max())) if len(positions) else (0, -1)
    parameters = {"first": bounds[0], "last": bounds[1], **included.parameters()}
    return parameters, pa.table({"position": positions, "ordinal": np.arange(len(positions))})


def _connect(settings: Settings) -> duckdb.DuckDBPyConnection:
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


class DatasetHolder:
    """The version requests are answered from; `current` is read once per request."""

    def __init__(self) -> None:
        self.current: Dataset | None = None


class VersionWatcher:
    """Polls the `current` pointer and opens a newly published version in the background."""

    def __init__(self, holder: DatasetHolder, settings: Settings) -> None:
        self._holder = holder
        self._settings = settings
        self._source = open_source(settings)
        self._stop = threading.Event()
        self._failed: Path | None = None
        self.refused: str | None = None  # why the newest published version was not opened
        self._thread = threading.Thread(target=self._run, name="version-watcher", daemon=True)

    def load_now(self) -> None:
        """Open the current version, if any (at start-up, before serving)."""
        target = self._source.current()
        if target is None:
            log.warning("no published version under %s", self._settings.data_dir)
            return
        self._open(target)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=5)

    def _refuse(self, target: Path, reason: str) -> None:
        self._failed, self.refused = target, reason

    def _run(self) -> None:
        while not self._stop.wait(self._source.poll_seconds):
            try:
                target = self._source.current()
            except Exception:  # S3 out of reach, say: keep serving, look again next time
                log.exception("could not read the current version pointer")
                continue
            loaded = self._holder.current
            if target is None or target == self._failed:
                continue
            if loaded is None or target != loaded.version_dir:
                self._open(target)

    def _open(self, target: Path) -> None:
        started = time.perf_counter()
        try:
            dataset = Dataset(self._source.fetch(target), self._settings)
        except DamagedVersion as error:
            self._refuse(target, str(error))
            log.error("refused dataset version %s: %s", target.name, error)
            return
        except Exception as error:
            # A version that cannot be opened must not take the service down: keep serving
            # the previous one and do not retry this target until `current` moves again.
            self._refuse(target, f"{target.name} could not be opened: {error}")
            log.exception("could not open dataset version %s; keeping the previous one", target)
            return
        previous, self._holder.current = self._holder.current, dataset
        self._failed, self.refused = None, None
        kept = {dataset.version_dir, *([previous.version_dir] if previous else [])}
        self._source.trim(kept)
        memory.release()  # what the open built and dropped (and the version it replaced)
        log.info(
            "serving dataset version %s (opened in %.2f s)",
            dataset.version_id,
            time.perf_counter() - started,
        )
