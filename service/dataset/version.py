"""One published dataset version, opened and checked, and the questions it answers.

Opening a version checks it against its manifest, attaches its serving copy, memory-maps its
results index (`index`), its line index (`lines`), its change list (`changes`) and its record
summary (`summary`) and reads the rollups the ingest counted
for it (`rollups`: discovery counts; `venues`: venue summaries, coverage runs, versions); a
request then runs one small query on its own cursor (`engine`), or none at all. A version
whose files do not match its manifest (a venue's file missing, unreadable or holding another
number of records; a serving copy or an index of another size or missing) is refused at open
(`DamagedVersion`), and the previous one goes on serving (`watcher`).
"""

from collections import defaultdict
from collections.abc import Iterable, Iterator
from datetime import date
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from ingest import layout
from ingest.layout import (
    COUNTED,
    DISCOVERY_GROUPS,
    INDEX_DIR,
    SERVING_FILE,
    read_manifest,
    sql_string,
)
from ingest.schema import SCHEMA_VERSION
from service.accounts import Account
from service.dataset import pager, pricing, queries
from service.dataset.changes import ChangeFilter, ChangeList
from service.dataset.classes import ClassIndex, Spread
from service.dataset.engine import Engine, batches_of
from service.dataset.index import EPOCH, Array, Holding, ResultsIndex
from service.dataset.lines import LineIndex
from service.dataset.order import ResultsOrder
from service.dataset.printed import TEXT, PrintedRecords
from service.dataset.records import Records
from service.dataset.rollups import DiscoveryCounts, read_rollup
from service.dataset.venues import DETAIL_COLUMNS, coverage_of, venues_of, versions_of
from service.settings import Settings


class DamagedVersion(Exception):
    """A version that cannot be served as it is (its files do not match its manifest, or it was
    written for another schema); it is refused at load."""


class Dataset:
    """A read-only view of one version; safe to share between threads (a cursor per query)."""

    def __init__(self, version_dir: Path, settings: Settings) -> None:
        self.version_dir = version_dir
        self.manifest = read_manifest(version_dir)
        if not layout.servable(self.manifest):
            raise DamagedVersion(
                f"{version_dir.name}: written for schema {self.manifest.get('schema_version')} "
                f"and layout {self.manifest.get('layout_version')}, this service reads schema "
                f"{SCHEMA_VERSION} and layout {layout.LAYOUT_VERSION}: run `fees ingest` to "
                "rebuild it"
            )
        self.version_id: str = self.manifest["version_id"]
        self.records: int = self.manifest["records"]
        self.as_of = date.fromisoformat(self.manifest["as_of"])  # the day it was built
        _check_files(version_dir, self.manifest)
        self.db = Engine(settings, self.version_id, str(version_dir))
        self.index = self._attach()
        registry = self.db.query(queries.REGISTRY)
        self.venues, self._names = venues_of(
            registry, self._rollup("summary"), self._rollup("details")
        )
        self.coverage = coverage_of(self._rollup("coverage"))
        self.versions = versions_of(self._rollup("versions"))
        self._discovery = DiscoveryCounts(self._rollup(DISCOVERY_GROUPS), version_dir)

    def _attach(self) -> ResultsIndex:
        """The registry's view, the serving copy attached, and the index and printed records,
        once each holds as many records as the manifest says: every page is found by the index
        and printed from the printed records, and every download read from the serving copy,
        so a version without one of them cannot be served."""
        registry = sql_string(str(self.version_dir / "exchanges.parquet"))
        self.db.con.execute(queries.CREATE_REGISTRY_VIEW.format(registry=registry))
        for part in (
            SERVING_FILE,
            INDEX_DIR,
            f"{INDEX_DIR}/{layout.SUMMARY_FILE}",
            f"{INDEX_DIR}/{layout.PRINTED_FILE}",
        ):
            if not (self.version_dir / part).exists():
                raise DamagedVersion(f"{self.version_dir.name}: {part} is missing")
        serving = sql_string(str(self.version_dir / SERVING_FILE))
        self.db.con.execute(f"ATTACH {serving} AS serving (READ_ONLY)")
        index = ResultsIndex(self.version_dir / INDEX_DIR)
        self.lines = LineIndex(self.version_dir / INDEX_DIR)
        self.summary = Records(self.version_dir / INDEX_DIR, index)
        self.printed = PrintedRecords(self.version_dir / INDEX_DIR, index)
        self.changes = ChangeList(self.version_dir / INDEX_DIR, index)
        self.classes = ClassIndex(self.version_dir / INDEX_DIR, index)
        self._pricing = pricing.Pricing(index)
        if self.summary.columns != list(layout.SUMMARY_COLUMNS):
            raise DamagedVersion(f"{self.version_dir.name}: the record summary's columns differ")
        if self.printed.columns != [TEXT] or self.printed.code_columns != list(
            layout.PRINTED_CODES
        ):
            raise DamagedVersion(f"{self.version_dir.name}: the printed records' columns differ")
        [(rows,)] = self.db.query(queries.COUNT_SERVING)
        sizes = {
            "serving copy": rows,
            "results index": index.size,
            "line index": self.lines.size,
            "record summary": self.summary.size,
            **self.printed.sizes,
        }
        for name, size in sizes.items():
            if size != self.records:
                raise DamagedVersion(
                    f"{self.version_dir.name}: the {name} holds {size} records, "
                    f"the manifest says {self.records}"
                )
        return index

    @property
    def faults(self) -> list[str]:
        """What failed since it was opened, for the readiness probe."""
        return self.db.faults

    def close(self) -> None:
        self.db.close()

    def batches_at(
        self, chunks: Iterable[Array], *, shape: str, included: queries.Included, size: int
    ) -> Iterator[pa.RecordBatch]:
        """The serving copy's records at each chunk of positions, in the chunks' order, as
        Arrow record batches shaped for an export format (a key of `queries.SHAPES`). A chunk
        is read whole and put in order by Arrow (`queries.ROWS_IN_ORDER`): 65,536 rows of one
        venue in 175 ms, where DuckDB ordering them took 250."""
        sql = queries.rows_in_order(shape)
        empty = True
        for positions in chunks:
            empty = False
            yield from _in_order(self.db.table(sql, *_at(positions, included)), size)
        if empty:  # one query still runs, so a download always carries its columns
            yield from _in_order(self.db.table(sql, *_at(np.empty(0, np.int64), included)), size)

    # ---- the questions the handlers ask (they never reach past these into the parts)

    def results_page(
        self,
        selection: queries.Selection,
        order: tuple[str, str],
        offset: int,
        size: int,
        included: queries.Included,
    ) -> tuple[int, list[dict[str, Any]]]:
        """How many records match, and one page of them in the order asked (`order`: column,
        direction): the index finds the page from its counts per sort value, rather than by
        ordering every match, so a deep page costs about what the first one does."""
        ordering = ResultsOrder(self.index, self.index.matches(selection), *order)
        total, positions = pager.page(ordering, offset, size)
        return total, self.printed.records(positions, queries.RESULT_FIELDS, included)

    def results_batches(
        self,
        selection: queries.Selection,
        order: tuple[str, str],
        shape: str,
        included: queries.Included,
        size: int,
    ) -> Iterator[pa.RecordBatch]:
        """Every match in the order asked, as Arrow batches of `size` shaped for a download;
        the index orders positions a chunk at a time, so memory stays flat."""
        matches = self.index.matches(selection)
        chunks = pager.chunks(ResultsOrder(self.index, matches, *order, streamed=True), size)
        return self.batches_at(chunks, shape=shape, included=included, size=size)

    def supplier_page(
        self, selection: queries.Selection, offset: int, limit: int, as_of: date | None
    ) -> tuple[int, list[dict[str, Any]]]:
        """How many records match, and those from `offset` in effective-start order (then by
        id), as the supplier family shows them."""
        matches = self.index.matches(selection)
        ordering = ResultsOrder(self.index, matches, "effective_start", "asc")
        total, positions = pager.page(ordering, offset, limit)
        # The supplier family always names a record's source.
        included = queries.Included(source=True, day=as_of)
        return total, self.printed.records(positions, queries.SUPPLIER_FIELDS, included)

    def count(self, selection: queries.Selection) -> int:
        return self.index.count(selection)

    def record(self, record_id: str, included: queries.Included) -> dict[str, Any] | None:
        """One record by id, as the results list shows it."""
        position = self.printed.position_of(record_id)
        if position is None:
            return None
        return self.printed.records([position], queries.RESULT_FIELDS, included)[0]

    def line_records(self, line_id: str) -> list[dict[str, Any]] | None:
        """A fee line's records, oldest first, as the record summary holds them; None when
        there is no such line."""
        positions = self.lines.positions(line_id)
        if positions is None:
            return None
        records: list[dict[str, Any]] = self.summary.table(np.asarray(positions)).to_pylist()
        return records

    def records_at(self, parts: list[Array]) -> list[pa.Table]:
        """The summary of the records at each array of positions (`-1`: a row of nulls)."""
        return self.summary.tables(parts)

    def spreads(self, selection: queries.Selection, unit: str) -> dict[str, Spread]:
        """Per venue, its lowest and highest record in `unit` in force on the selection's day
        (`service.dataset.classes`)."""
        return self.classes.spreads(selection, unit)

    def price(self, fills: pa.Table) -> pa.Table:
        """What each fill (`pricing.FILLS_SCHEMA`) pays: its line and fee, or why it has none."""
        return self._pricing.price(fills)

    def changes_page(
        self, chosen: ChangeFilter | None, descending: bool, offset: int, size: int
    ) -> tuple[int, Array]:
        """How many changes match, and the change list's entries of one page of them."""
        if chosen is None:
            return 0, np.empty(0, np.int64)
        total, entries = pager.page(self.changes.ordering(chosen, descending), offset, size)
        return total, np.asarray(entries, np.int64)

    def changes_ordered(
        self, chosen: ChangeFilter | None, descending: bool, size: int
    ) -> Iterable[Array]:
        """Every matching change's entries, a chunk of `size` at a time."""
        if chosen is None:
            return []
        return pager.chunks(self.changes.ordering(chosen, descending), size)

    def change_sides(self, entries: Array) -> tuple[dict[str, Array], list[pa.Table]]:
        """The changes at `entries`: their columns (type, day, the records before and after)
        and the summary of the records before and after each."""
        columns = self.changes.columns(entries)
        return columns, self.summary.tables([columns["before"], columns["after"]])

    def in_force(self, codes: list[str], day: date, max_age_days: int | None = None) -> Holding:
        """What the venues' records in force on `day` hold (those confirmed at most
        `max_age_days` before it, when given), per detail dimension (as the venue model keys
        them) and `exchange`."""
        selection = queries.Selection(venues=codes, in_force_on=day, max_age_days=max_age_days)
        columns = {"exchange": "exchange", **DETAIL_COLUMNS}
        return self.index.holding(selection, columns, self.as_of)

    def change_filter(
        self,
        selection: queries.Selection,
        types: list[str] | None,
        first: date | None,
        last: date | None,
    ) -> ChangeFilter | None:
        """The change list's filter for a selection's venues and values, change types and
        window on the change's day; None when nothing can match."""
        wanted = self.index.wanted_codes(selection)
        if wanted is None:
            return None
        venues = wanted.pop("exchange", None)
        return ChangeFilter(
            venues=None if venues is None else np.flatnonzero(venues).tolist(),
            wanted=wanted,
            types=types,
            first_day=None if first is None else (first - EPOCH).days,
            last_day=None if last is None else (last - EPOCH).days,
        )

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

    def _rollup(self, name: str) -> pa.Table:
        return read_rollup(self.version_dir, name, self.version_id)


def _check_files(version_dir: Path, manifest: dict[str, Any]) -> None:
    """Refuse a version whose Parquet files are not the manifest's: the venues it counts and no
    others, each with as many rows as it says (read from the files' footers). The service
    answers from its own copies, but serves no version the analysts' files contradict."""
    expected: dict[str, int] | None = manifest.get("venues")
    if expected is None:
        raise DamagedVersion(f"{version_dir.name}: the manifest has no record counts by venue")
    actual: dict[str, int] = defaultdict(int)
    files = sorted((version_dir / "fees").glob("exchange=*/*.parquet"))
    for path in files:
        try:
            rows = pq.read_metadata(path).num_rows
        except (OSError, pa.ArrowException) as error:
            shown = path.relative_to(version_dir)
            raise DamagedVersion(f"{version_dir.name}: {shown} cannot be read: {error}") from None
        actual[_venue_of(path)] += rows
    if actual != expected:
        differ = sorted(
            code
            for code in actual.keys() | expected.keys()
            if actual.get(code) != expected.get(code)
        )
        raise DamagedVersion(
            f"{version_dir.name}: the files do not match the manifest for venue(s) "
            + ", ".join(
                f"{code} ({actual.get(code, 0)} records, manifest {expected.get(code, 0)})"
                for code in differ
            )
        )


def _venue_of(path: Path) -> str:
    return path.parent.name.removeprefix("exchange=")


def _at(
    positions: Array, included: queries.Included
) -> tuple[dict[str, Any], dict[str, pa.Table]]:
    """The parameters and `wanted` table of `queries.ROWS_IN_ORDER` for a chunk of positions."""
    bounds = (int(positions.min()), int(positions.max())) if len(positions) else (0, -1)
    parameters = {"first": bounds[0], "last": bounds[1], **included.parameters()}
    wanted = pa.table({"position": positions, queries.ORDINAL: np.arange(len(positions))})
    return parameters, {"wanted": wanted}


def _in_order(rows: pa.Table, size: int) -> list[pa.RecordBatch]:
    """A chunk's rows in the chunk's order, without their ordinals, as batches of `size`."""
    ordinals = rows.column(queries.ORDINAL).to_numpy()
    order = np.empty(len(ordinals), dtype=np.int64)
    order[ordinals] = np.arange(len(ordinals))  # the ordinals are a permutation of the chunk
    return batches_of(rows.drop_columns([queries.ORDINAL]).take(order), size)
