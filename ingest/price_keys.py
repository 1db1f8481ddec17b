"""The price keys, and the price lines they name: how a fill finds the records it may pay, and
what the engine reads of them, without reading the others.

Pricing a batch of fills is a join of the fills with the records in force on their days. At
10M synthetic records about two million of them carry a fee code, and a join that scans them
took 98 ms for 1,000 fills. So the ingest writes a key per priceable record and fee code (and
per standard or tier record and action, and per tier record and tier): the distinct keys
sorted, where each one's records begin, and the records' rows among the price lines
(`ingest.layout.PRICE_KEYS_FILE`, `PRICE_KEY_STARTS_FILE`, `PRICE_ROWS_FILE`); the service
looks a batch's keys up with a binary search in the memory-mapped distinct keys.

The price lines hold, for each record a key names, what the rule tests and an answer prints
(`PRICE_LINES_FILE`, `PRICE_ANSWERS_FILE`). Read from the results index and the record summary
instead, a million random fills touched nearly every page of both: 1.6 GB of mapped files.
"""

from collections.abc import Iterator
from pathlib import Path
from typing import Final

import duckdb
import numpy as np
import pyarrow as pa

from ingest.layout import (
    CODE_TYPES,
    LINE_TEXT,
    MAPPED_BATCH,
    PRICE_ANSWER_COLUMNS,
    PRICE_ANSWERS_FILE,
    PRICE_KEY_SEPARATOR,
    PRICE_KEY_STARTS_FILE,
    PRICE_KEYS_FILE,
    PRICE_LINE_CODES,
    PRICE_LINES_FILE,
    PRICE_ROWS_FILE,
    PRICED_UNITS,
    TEXT_ID,
    key_bytes,
    sql_string,
)

UNITS: Final = ", ".join(sql_string(unit) for unit in PRICED_UNITS)
SEPARATOR: Final = sql_string(PRICE_KEY_SEPARATOR)
# A record a fill may pay: of fees and rebates, with an amount in a unit the engine counts.
PRICEABLE: Final = (
    f"coalesce(fee_category = 'fees_and_rebates' AND amount IS NOT NULL AND unit IN ({UNITS}), "
    "false)"
)
# A record keyed by its action (and its tier, if it has one): one a fill without a code may pay.
BY_ACTION: Final = f"({PRICEABLE} AND (standard OR tier IS NOT NULL))"

# Every key of `{records}` with its record's position, in key order (DuckDB orders text by its
# bytes, as NumPy orders the keys' bytes). Every record with a fee code is keyed by it (the
# results' `fee_code` filter finds them so); only the records a fill may pay by their action and
# tier.
PRICE_KEYS: Final = f"""
SELECT concat_ws({SEPARATOR}, kind, exchange, fee_type, value) AS key, position
FROM (
    SELECT 'C' AS kind, exchange, fee_type, unnest(fee_codes) AS value, rowid AS position
    FROM {{records}}
    WHERE len(fee_codes) > 0
    UNION ALL
    SELECT 'A', exchange, fee_type, action, rowid FROM {{records}} WHERE {BY_ACTION}
    UNION ALL
    SELECT 'T', exchange, fee_type, tier, rowid FROM {{records}}
    WHERE {PRICEABLE} AND tier IS NOT NULL
)
ORDER BY key, position
"""

# The records some key names, in table (position) order, as the record summary is written:
# whether a fill may pay each, and what an answer prints of it.
PRICE_LINES: Final = f"""
SELECT
    rowid AS position,
    {PRICEABLE} AS priceable,
    {TEXT_ID} AS record_id,
    {LINE_TEXT} AS line_id,
    fee_name,
    amount,
    source_url
FROM {{records}}
WHERE len(fee_codes) > 0 OR {BY_ACTION}
"""


def write_price_keys(con: duckdb.DuckDBPyConnection, records: str, index: Path) -> None:
    """Write the price keys and lines of the records in `records` (a table) into `index/`,
    beside the results index's arrays (whose codes the lines copy). The answers are streamed
    batch by batch, as the record summary is, never whole in memory."""
    reader = con.sql(PRICE_LINES.format(records=records)).to_arrow_reader(MAPPED_BATCH)
    answers = pa.schema([reader.schema.field(name) for name in PRICE_ANSWER_COLUMNS])
    batches_positions, batches_priceable = [], []
    with pa.ipc.new_file(index / PRICE_ANSWERS_FILE, answers) as writer:
        for batch in _rebatched(reader, MAPPED_BATCH):
            batches_positions.append(np.asarray(batch["position"], dtype=np.uint32))
            batches_priceable.append(np.asarray(batch["priceable"], dtype=np.uint8))
            writer.write_batch(batch.select(list(PRICE_ANSWER_COLUMNS)))
    # Each price line's record position (an empty first part: a version may have none).
    positions = np.concatenate([np.zeros(0, np.uint32), *batches_positions])
    if np.any(np.diff(positions.astype(np.int64)) <= 0):
        raise ValueError("the price lines are not in table order")
    rule = np.zeros(
        len(positions),
        dtype=[("position", np.uint32), ("priceable", np.uint8)]
        + [(name, CODE_TYPES[name]) for name in PRICE_LINE_CODES],
    )
    rule["position"] = positions
    rule["priceable"] = np.concatenate([np.zeros(0, np.uint8), *batches_priceable])
    for name in PRICE_LINE_CODES:
        rule[name] = np.load(index / f"{name}.npy", mmap_mode="r")[positions]
    np.save(index / PRICE_LINES_FILE, rule)
    del rule
    # The keys too a batch at a time, each batch's as bytes as wide as its longest; NumPy joins
    # them at the widest.
    keys, rows = [np.zeros(0, "S1")], [np.zeros(0, np.uint32)]
    for batch in con.sql(PRICE_KEYS.format(records=records)).to_arrow_reader(MAPPED_BATCH):
        keys.append(key_bytes(batch["key"]))
        rows.append(np.searchsorted(positions, np.asarray(batch["position"])).astype(np.uint32))
    # Each key once, with where its run of rows begins: a fill's lines are one search of the
    # distinct keys away (555,000 of 3.4 million at 10M synthetic records), not two of them all.
    every = np.concatenate(keys)
    first = np.ones(len(every), bool)
    first[1:] = every[1:] != every[:-1]
    starts = np.flatnonzero(first)
    np.save(index / PRICE_KEYS_FILE, every[starts])
    np.save(index / PRICE_KEY_STARTS_FILE, np.append(starts, len(every)).astype(np.uint32))
    np.save(index / PRICE_ROWS_FILE, np.concatenate(rows))


def _rebatched(reader: pa.RecordBatchReader, rows: int) -> Iterator[pa.RecordBatch]:
    """The reader's batches joined into batches of `rows` (the last one shorter). DuckDB
    yields a filtered row group's rows as one batch (about 29,000 of 122,880 for the price
    lines at 10M synthetic records), and the service takes rows a batch at a time."""
    pending: list[pa.RecordBatch] = []
    count = 0
    for batch in reader:
        pending.append(batch)
        count += batch.num_rows
        while count >= rows:
            joined = pa.Table.from_batches(pending).combine_chunks()
            yield joined.slice(0, rows).to_batches()[0]
            rest = joined.slice(rows)
            pending, count = rest.to_batches(), rest.num_rows
    if count:
        yield pa.Table.from_batches(pending, reader.schema).combine_chunks().to_batches()[0]
