"""The serving copy of a version: row-addressable records and the index of the results pages.

Analysts read the Parquet files; the service answers a results page from two things the
ingest writes beside them, because finding 20 rows in Parquet means decoding whole row groups
(10M records: 0.5 s for an unfiltered first page):

    serving.duckdb   table `rows`: every record in the files' order (venue, fee type,
                     effective start, record id); a record's rowid is its position
    index/*.npy      one array per filter and sort column, a value per position: small integer
                     codes (vocabulary columns), days since 1970 (dates), ranks (record id,
                     amount); `codes.json` names what each code stands for

The service memory-maps the arrays, so opening a version costs nothing and a page touches only
the parts of the arrays it reads (`service.index`).
"""

import json
from pathlib import Path
from typing import Any, Final

import duckdb
import numpy as np

from ingest.schema import VOCABULARIES
from ingest.stage import sql_string

SERVING_FILE: Final = "serving.duckdb"
INDEX_DIR: Final = "index"
CODES_FILE: Final = "codes.json"
NO_END: Final = np.iinfo(np.int32).max  # an effective_end that is still open
NULL_RANK: Final = np.iinfo(np.uint32).max  # an amount that is not a plain money figure

# The code of a vocabulary value is its 1-based place in the vocabulary (0: no value).
CODED: Final = tuple(VOCABULARIES)

COPY_ROWS: Final = "CREATE TABLE serving.rows AS SELECT * FROM final"

# Per position, in table order (`final` is in the files' order; its rowid is the position).
# Each code is cast to its array's type in SQL, so no wider copy is ever fetched.
SELECT_CODES: Final = f"""
SELECT
    CAST(list_position($venues, exchange) AS UTINYINT) AS exchange,
    {
    ", ".join(
        f"CAST(coalesce(list_position(${name}, {name}), 0) AS UTINYINT) AS {name}" for name in CODED
    )
},
    CAST(effective_start - DATE '1970-01-01' AS INTEGER) AS effective_start,
    coalesce(CAST(effective_end - DATE '1970-01-01' AS INTEGER), {NO_END}) AS effective_end,
    CAST(list_position($versions, version_id) AS USMALLINT) AS version_id
FROM final
"""

# Ranks are scattered back to positions: a window's output is not in table order.
RANKS: Final = f"""
SELECT
    rowid AS position,
    CAST(row_number() OVER (ORDER BY record_id) - 1 AS UINTEGER) AS record_rank,
    CAST(CASE
        WHEN amount IS NULL THEN {NULL_RANK}
        ELSE dense_rank() OVER (ORDER BY amount) - 1
    END AS UINTEGER) AS amount_rank
FROM final
"""

DISTINCT_VALUES: Final = "SELECT list(DISTINCT {column} ORDER BY {column}) FROM final"

CODE_TYPES: Final[dict[str, type[np.integer[Any]]]] = {
    "exchange": np.uint8,
    **dict.fromkeys(CODED, np.uint8),
    "effective_start": np.int32,
    "effective_end": np.int32,
    "version_id": np.uint16,
}


def write_serving(con: duckdb.DuckDBPyConnection, version: Path) -> None:
    """Write `serving.duckdb` and `index/` for the records in `final`."""
    con.execute(f"ATTACH {sql_string(str(version / SERVING_FILE))} AS serving")
    try:
        con.execute(COPY_ROWS)
    finally:
        con.execute("DETACH serving")
    names = {
        "exchange": _distinct(con, "exchange"),
        "version_id": _distinct(con, "version_id"),
        **{name: list(VOCABULARIES[name]) for name in CODED},
    }
    if len(names["exchange"]) > np.iinfo(np.uint8).max:
        raise ValueError("more venues than the index's 8-bit venue code holds")
    index = version / INDEX_DIR
    index.mkdir()
    columns = con.execute(
        SELECT_CODES,
        {"venues": names["exchange"], "versions": names["version_id"]}
        | {name: names[name] for name in CODED},
    ).fetchnumpy()
    for name, kind in CODE_TYPES.items():
        np.save(index / f"{name}.npy", np.asarray(columns.pop(name), dtype=kind))
    ranks = con.execute(RANKS).fetchnumpy()
    for name in ("record_rank", "amount_rank"):
        placed = np.empty(len(ranks["position"]), dtype=np.uint32)
        placed[ranks["position"]] = ranks.pop(name)
        np.save(index / f"{name}.npy", placed)
    (index / CODES_FILE).write_text(json.dumps(names, indent=1) + "\n", encoding="utf-8")


def _distinct(con: duckdb.DuckDBPyConnection, column: str) -> list[str]:
    found = con.execute(DISTINCT_VALUES.format(column=column)).fetchall()[0][0]
    return [str(value) for value in found or []]
