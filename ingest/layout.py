"""A published version on disk: the contract between the ingest, which writes versions, and the
service, which reads them. The service imports from `ingest` only this module, `ingest.schema`
(the columns and their values) and `ingest.storage` (local or S3); `tests/test_imports.py`
holds it to that.

    <data dir>/
        current -> versions/<version id>       (a symlink, replaced atomically)
        versions/<version id>/
            manifest.json                       what was read and published (`read_manifest`)
            fees/exchange=<code>/*.parquet      the records (docs/dataset.md)
            exchanges.parquet                   the venue registry of this version
            rejects.csv                         the rows refused, and why
            serving.duckdb                      table `rows`: the records, row-addressable
            index/*.npy, index/codes.json       the results index (`CODE_TYPES`, `ingest.serving`),
                                                the line index (`LINE_FILES`), the class index
                                                (`CLASS_FILES`, `ingest.classes`) and the
                                                change list (`CHANGE_FILES`, `ingest.changes`)
            index/records.arrow                 the record summary (`SUMMARY_COLUMNS`)
            index/printed*                      the records as answers print them (`PRINTED_FILE`)
            index/price_*                       the price keys, lines, answers (`ingest.price_keys`)
            rollups/*.parquet                   discovery's counts (`ingest.rollups`)
            rollups/discovery_*.npy             those counts as a search (`DISCOVERY_ARRAYS`)

How each part is written lives with its writer (`ingest.publish`, `ingest.serving`,
`ingest.rollups`); what a reader needs to find and decode them lives here.
"""

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Final

import numpy as np
import numpy.typing as npt
import pyarrow as pa
import pyarrow.compute as pc

from ingest.schema import CLOSED_VALUES, SCHEMA_VERSION, UNITS

# What a version holds beside its records (serving copy, indexes, rollups), numbered. A version
# of another layout lacks what the service reads, and is refused there (`servable`); it is part
# of the input digest, so raising it makes the next ingest rebuild unchanged inputs. 2: the
# rollups; 3: the record summary, the change list and the unit codes; 4: the class index and
# the change list by class; 5: the confirmations (`confirmed_through`, `class_confirmed`), the
# `standard` codes and `ended_by` in the record summary; 6: the `display`, `price_band`, `tier`
# and `tapes` codes (and a `priceable` table in the serving copy); 7: the price keys in its place;
# 8: the price lines and answers beside the keys; 9: the printed records and the record order
# (a results page, a supplier page, a record by id, read without the serving copy); 10:
# discovery's counts as a search (`DISCOVERY_ARRAYS`), so opening a version sorts nothing; 11:
# each price key once, with where its rows begin (`PRICE_KEY_STARTS_FILE`).
LAYOUT_VERSION: Final = 11

# Where versions are published when neither `--data` nor FEES_DATA_DIR says.
DEFAULT_DATA_DIR: Final = Path("data/warehouse")

CURRENT: Final = "current"
VERSIONS: Final = "versions"
MANIFEST: Final = "manifest.json"

SERVING_FILE: Final = "serving.duckdb"
INDEX_DIR: Final = "index"
CODES_FILE: Final = "codes.json"
ROLLUP_DIR: Final = "rollups"
# The Parquet key-value metadata key of each rollup file: the version it was counted for.
VERSION_KEY: Final = b"fees:version_id"

# The discovery dimensions (spec endpoints 1-4), counted per effective period in the rollups.
COUNTED: Final = ("fee_type", "fee_category", "action", "participant")

# Discovery's counts as a search, written by the ingest so opening a version builds nothing
# (`ingest.rollups.write_discovery_search`, read by `service.dataset.rollups`). A group is one
# dimension, venue and value: `discovery_groups.parquet` lists them (stamped like every rollup),
# the n-th group numbered n. Each period of the counts rollup is a search key, the group in the
# high 32 bits and a day in the low (days since 1970 plus `DAY_OFFSET`; an open side the
# extreme): `discovery_starts.npy` holds the keys by start, sorted, and `discovery_started.npy`
# the records up to each (a leading 0); `discovery_ends.npy` and `discovery_ended.npy` the same
# by end. All int64.
DISCOVERY_GROUPS: Final = "discovery_groups"
GROUP_COLUMNS: Final = ("dimension", "exchange", "value")  # of the counts rollup and the groups
DISCOVERY_ARRAYS: Final = ("starts", "started", "ends", "ended")
DAY_OFFSET: Final = 2**31
OPEN_START: Final = 0
OPEN_END: Final = 2**32 - 1


def discovery_array_path(version_dir: Path, name: str) -> Path:
    return version_dir / ROLLUP_DIR / f"discovery_{name}.npy"


# The index: one array per column, a value per record position. A closed column's value (a
# vocabulary's, or `uncertain`'s `false`/`true`) is coded as its 1-based place in its list of
# values (0: no value); `codes.json` lists the values of each coded column. The canonical unit
# is derived, not raw, but as closed: the comparisons find amounts of one unit by its code.
CODED_VALUES: Final = CLOSED_VALUES | {"unit": UNITS}
CODED: Final = tuple(CODED_VALUES)
# Open columns coded by the values the version holds (each value's 1-based place in their sorted
# list, 0: no value), as `exchange` and `version_id` are: a column -> the SQL of its value. A
# record's tapes are coded as their text (`A C`; `` for every tape).
HELD_VALUES: Final = {"tier": "tier", "tapes": "array_to_string(tapes, ' ')"}
CODE_TYPES: Final[dict[str, type[np.integer[Any]]]] = {
    "exchange": np.uint8,
    **dict.fromkeys(CODED, np.uint8),
    "tier": np.uint16,
    "tapes": np.uint8,
    "effective_start": np.int32,
    "effective_end": np.int32,
    "confirmed_through": np.int32,
    "version_id": np.uint16,
}
# The price keys (`ingest.price_keys`, read by `service.dataset.pricing`): the keys a fill looks
# its candidate lines up by, each once, sorted, as UTF-8 bytes; where each key's run of rows
# begins among the rows (and last, how many rows there are); and the rows: for each key in
# turn, the rows of the price lines it names. A key is its kind, venue, fee type and value
# joined by `PRICE_KEY_SEPARATOR`: `C` and a fee code the record carries (every record with
# codes), `A` and the action of a standard or tier record, `T` and a tier record's tier (only
# the records a fill may pay: fees and rebates with an amount in `PRICED_UNITS`).
PRICE_KEYS_FILE: Final = "price_keys.npy"
PRICE_KEY_STARTS_FILE: Final = "price_key_starts.npy"
PRICE_ROWS_FILE: Final = "price_rows.npy"
PRICE_KEY_SEPARATOR: Final = "\x1f"
# The price lines: one row per record a key names, in position order, with what the pricing
# rule reads of it, row by row (a NumPy structured array: its `position`, `priceable` (1: a
# line a fill may pay) and its codes of `PRICE_LINE_CODES`, as the results index codes them);
# and beside it, row for row, what an answer prints of it (`PRICE_ANSWER_COLUMNS`, an
# uncompressed Arrow IPC file in batches of `MAPPED_BATCH` rows, as the summary). Together a
# ninth of the index and the summary's size at 10M synthetic records, and all a batch of fills
# reads (`docs/dataset.md`).
PRICE_LINES_FILE: Final = "price_lines.npy"
PRICE_ANSWERS_FILE: Final = "price_answers.arrow"
PRICE_LINE_CODES: Final = (
    "action",
    "participant",
    "symbol_type",
    "display",
    "tapes",
    "price_band",
    "tier",
    "standard",
    "unit",
    "effective_start",
    "effective_end",
    "confirmed_through",
)
PRICE_ANSWER_COLUMNS: Final = ("record_id", "line_id", "fee_name", "amount", "source_url")
PRICED_UNITS: Final = ("per_share", "per_contract", "percent_of_value")


def key_bytes(keys: pa.Array | pa.ChunkedArray) -> npt.NDArray[np.bytes_]:
    """Text without nulls as NumPy fixed-width bytes (UTF-8, NUL-padded), as the price keys are
    stored and searched: padded by Arrow, never a Python object per value (a million keys:
    0.5 against 1.0 s; at the ingest, 3.4 million objects took 500 MB)."""
    if isinstance(keys, pa.ChunkedArray):
        keys = keys.combine_chunks()
    data = keys.cast(pa.binary())
    lengths = pc.binary_length(data)
    width = pc.max(lengths).as_py() or 1
    padding = pc.binary_repeat(pa.scalar(b"\0"), pc.subtract(width, lengths))
    padded = pc.binary_join_element_wise(data, padding, b"").cast(pa.binary(width))
    return np.frombuffer(
        padded.buffers()[1], dtype=f"S{width}", count=len(padded), offset=padded.offset * width
    )


# The line index: `line_order`, every position in line order (line id, then effective start);
# `lines_hi` and `lines_lo`, each line's id (the UUID's number, high and low 64 bits) in that
# order; `line_bounds`, where each line's run begins in `line_order` (and, last, its length).
LINE_FILES: Final = ("line_order", "lines_hi", "lines_lo", "line_bounds")
# The record summary: per position, the printed fields the history answers (a fee line, its
# changes, a comparison) read and the index does not code, as an uncompressed Arrow IPC file
# the service memory-maps. Slicing it reads a few pages; the serving copy decodes a whole
# vector per column for each record (a line's history: 0.4 ms against 10 ms at 10M records).
SUMMARY_FILE: Final = "records.arrow"
# Rows per record batch of the memory-mapped Arrow files (the summary, the price answers), as
# the ingest streams them: DuckDB's row group.
MAPPED_BATCH: Final = 122_880
SUMMARY_COLUMNS: Final = (
    "record_id",
    "line_id",
    "label",
    "volume_tier",
    "fee_name",
    "fee_amount",
    "amount",
    "currency",
    "fee_basis",
    "source_document",
    "source_url",
    "ended_by",
)
# The printed records: what a results page, a supplier page and a record by id print, a row per
# record, so a record is read from two or three pages of disk rather than one per column (a
# page not in memory costs 50-200 us on the benchmark machine; the summary's columns, 7 ms for
# 20 random records at 10M). `printed.arrow`: per position, the JSON array of the record's
# values of `PRINTED_COLUMNS` as a JSON answer prints them (`ingest.serving.PRINTED`: ids, days
# and the publication time as text, the amount as a number), an uncompressed Arrow IPC file of
# one text column, `record`, in batches of `MAPPED_BATCH`. `printed_codes.npy`: per position,
# a NumPy structured array of the index's codes of `PRINTED_CODES` (as `CODE_TYPES`), the
# days as days since 1970 (`NO_END` for an open end).
PRINTED_FILE: Final = "printed.arrow"
PRINTED_CODES_FILE: Final = "printed_codes.npy"
PRINTED_COLUMNS: Final = (
    "record_id",
    "line_id",
    "ingested_at",
    "source_document",
    "source_url",
    "page_number",
    "fee_name",
    "fee_amount",
    "amount",
    "currency",
    "fee_basis",
    "action_details",
    "participant_details",
    "volume_tier",
    "volume_criteria",
    "symbols",
    "excluded_symbols",
    "conditions",
    "exclusions",
    "notes",
    "extra_info",
    "ended_by",
    "fee_codes",
    "tapes",
    "complete_as_of",
    "source_file",
    "source_line",
)
PRINTED_CODES: Final = (
    "exchange",
    "version_id",
    "tier",
    *CODED,
    "effective_start",
    "effective_end",
    "confirmed_through",
)
# Every position in record id order (`record_order.npy`, 32-bit): a record is found by its id
# with a binary search over the printed records' ids in this order.
RECORD_ORDER: Final = "record_order"
# A record's class: its codes of `CLASSED`, the dimensions a comparison and a filtered change
# list select by, as one number in mixed radix (`class_numbers`, in code order: a fee type's
# classes are one range of numbers, and a fee category's within it). There are `CLASSES`
# numbers (about a thousand), so a class fits 16 bits and a table of every class is small.
CLASSED: Final = ("fee_type", "fee_category", "action", "participant")
CLASS_RADIX: Final = tuple(len(CODED_VALUES[column]) + 1 for column in CLASSED)
CLASSES: Final = int(np.prod(CLASS_RADIX))
# The class index (`ingest.classes`), for the comparisons: the positions grouped by venue code,
# class and slot (a slot: the unit's code * 2, plus 1 when the amount is not a plain money
# figure), in amount order within a group (amount rank, then record id), as `class_order`;
# beside it, in the same order, `class_start`, `class_end`, `class_confirmed` (as
# `effective_start`, `effective_end` and `confirmed_through`) and `class_amount` (as
# `amount_rank`); each group's starts and ends again,
# each sorted on its own (`class_sorted_start`, `class_sorted_end`: a group's records in force
# on a day are those started by then less those ended before it, two binary searches);
# `class_bounds`, where each group begins (indexed by `group_number`; then the length); and for
# an age limit (`max_age_days`), the last confirmations of each group's open records, sorted
# (`class_sorted_open_confirmed`, beginning at `class_open_bounds`), and the places of the few
# ended records last confirmed before their end (`class_ended_presumed`): a record in force
# and stale is one of those.
SLOTS: Final = 2 * (len(UNITS) + 1)
CLASS_FILES: Final = (
    "class_order",
    "class_start",
    "class_end",
    "class_confirmed",
    "class_amount",
    "class_sorted_start",
    "class_sorted_end",
    "class_bounds",
    "class_sorted_open_confirmed",
    "class_open_bounds",
    "class_ended_presumed",
)
# The change list (`ingest.changes`), one entry per change of a fee line, grouped by venue code
# and in change order within a venue (effective date, then line id): `change_day` (days since
# 1970), `change_type` (a 1-based place in `CHANGE_TYPES`), `change_before` and `change_after`
# (positions, `NO_RECORD` for none), `change_rank` (the place in change order across venues),
# `change_class` (the line's class), and `change_bounds`, where each venue code's entries begin
# (indexed by the code; then the length). Then the entries again grouped by class, in change
# order within a class, for a filter on the classed columns across venues: `change_by_class`
# (the entries), `change_class_rank`, `change_class_venue` and `change_class_type` (their
# ranks, venue codes and types, read in runs there) and `change_class_bounds` (where each class
# begins; then the length).
CHANGE_TYPES: Final = ("added", "changed", "removed")
CHANGE_FILES: Final = (
    "change_day",
    "change_type",
    "change_before",
    "change_after",
    "change_rank",
    "change_class",
    "change_bounds",
    "change_by_class",
    "change_class_rank",
    "change_class_venue",
    "change_class_type",
    "change_class_bounds",
)
NO_RECORD: Final = -1
NO_END: Final = np.iinfo(np.int32).max  # an effective_end that is still open
NULL_RANK: Final = np.iinfo(np.uint32).max  # an amount that is not a plain money figure

# The record id as the answers carry it: text (it is a UUID in the serving file).
TEXT_ID: Final = "CAST(record_id AS VARCHAR)"
LINE_TEXT: Final = "CAST(line_id AS VARCHAR)"  # the fee line's id, likewise


def class_numbers(codes: Mapping[str, Any]) -> Any:
    """The class of each record whose codes of `CLASSED` are given (arrays of codes, under
    their columns), as 16-bit numbers."""
    number = np.zeros(np.shape(codes[CLASSED[0]]), dtype=np.uint16)
    for column, radix in zip(CLASSED, CLASS_RADIX, strict=True):
        number = number * np.uint16(radix) + np.asarray(codes[column], dtype=np.uint16)
    return number


def group_number(venue: Any, klass: Any, slot: Any) -> Any:
    """The class index's group of a venue code, class and slot (numbers or arrays of them)."""
    return (venue * CLASSES + klass) * SLOTS + slot


def class_codes() -> dict[str, Any]:
    """The code of each column of `CLASSED` in every class, as arrays indexed by class."""
    number, codes = np.arange(CLASSES), {}
    for column, radix in reversed(list(zip(CLASSED, CLASS_RADIX, strict=True))):
        codes[column], number = number % radix, number // radix
    return codes


def current_version_dir(data_dir: Path) -> Path | None:
    link = data_dir / CURRENT
    return link.resolve() if link.is_symlink() else None


def read_manifest(version_dir: Path) -> dict[str, Any]:
    with (version_dir / MANIFEST).open(encoding="utf-8") as handle:
        manifest: dict[str, Any] = json.load(handle)
    return manifest


def servable(manifest: dict[str, Any]) -> bool:
    """Whether a version's manifest says it is of this schema and layout."""
    return (
        manifest.get("schema_version") == SCHEMA_VERSION
        and manifest.get("layout_version") == LAYOUT_VERSION
    )


def sql_string(value: str) -> str:
    """A SQL string literal, for the few places DuckDB takes no parameter (file paths in
    `read_parquet` views, COPY targets, ATTACH)."""
    return "'" + value.replace("'", "''") + "'"
