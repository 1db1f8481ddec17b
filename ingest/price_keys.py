"""The price keys: how a fill finds the records it may pay without reading the others.

Pricing a batch of fills is a join of the fills with the records in force on their days. At
10M synthetic records about two million of them carry a fee code, and a join that scans them
took 98 ms for 1,000 fills. So the ingest writes a sorted key per priceable record and fee code
(and per standard or tier record and action, and per tier record and tier), with the record's
position (`ingest.layout.PRICE_KEYS_FILE`); the service looks a batch's keys up with a binary
search in the memory-mapped array and joins only the candidates it finds.
"""

from pathlib import Path
from typing import Final

import duckdb
import numpy as np

from ingest.layout import (
    PRICE_KEY_SEPARATOR,
    PRICE_KEYS_FILE,
    PRICE_POSITIONS_FILE,
    PRICED_UNITS,
    sql_string,
)

UNITS: Final = ", ".join(sql_string(unit) for unit in PRICED_UNITS)
SEPARATOR: Final = sql_string(PRICE_KEY_SEPARATOR)

# Every key of `{records}` with its position, in key order (DuckDB orders text by its bytes, as
# NumPy orders the keys' bytes). Every record with a fee code is keyed by it (the results'
# `fee_code` filter finds them so); only the records a fill may pay by their action and tier.
PRICE_KEYS: Final = f"""
WITH priced AS (
    SELECT rowid AS position, exchange, fee_type, action, tier, standard
    FROM {{records}}
    WHERE fee_category = 'fees_and_rebates' AND amount IS NOT NULL AND unit IN ({UNITS})
)
SELECT concat_ws({SEPARATOR}, kind, exchange, fee_type, value) AS key, position
FROM (
    SELECT 'C' AS kind, exchange, fee_type, unnest(fee_codes) AS value, rowid AS position
    FROM {{records}}
    WHERE len(fee_codes) > 0
    UNION ALL
    SELECT 'A', exchange, fee_type, action, position FROM priced
    WHERE standard OR tier IS NOT NULL
    UNION ALL
    SELECT 'T', exchange, fee_type, tier, position FROM priced WHERE tier IS NOT NULL
)
ORDER BY key, position
"""


def write_price_keys(con: duckdb.DuckDBPyConnection, records: str, index: Path) -> None:
    """Write the price keys of the records in `records` (a table) into `index/`."""
    table = con.sql(PRICE_KEYS.format(records=records)).to_arrow_table()
    keys = [key.encode() for key in table["key"].to_pylist()]
    np.save(index / PRICE_KEYS_FILE, np.array(keys, dtype=np.bytes_))
    np.save(index / PRICE_POSITIONS_FILE, np.asarray(table["position"], dtype=np.uint32))
