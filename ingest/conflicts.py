"""The records in conflict that the lives of the fee lines reject (`ingest.lives`: two records of
a line in force on one day, two standard lines for one class in force on one day, a record
running past a complete schedule that omits its line): a problem for each, naming the other
record or the schedule, at its raw file and line, and the records deleted. Which of two is
right is not the ingest's to guess.

The lives step leaves the pairs in a `conflicts` table (`position`, `other`) and the omissions
in `omitted` (`position`, `scope`, `as_of`, `source_url`).
"""

from typing import Final

import duckdb

from ingest.schema import RAW_COLUMNS
from ingest.serving import RECORDS

# A problem per record of a pair, naming the other at its raw file and line (the problems
# table is keyed by file number and ordinal: `ingest.stage.CREATE_TABLES`); `{reason}` is the
# SQL text of the reason before the other's place.
PERIOD_OF: Final = (
    "strftime(others.effective_start, '%Y-%m-%d') || ' to ' "
    "|| coalesce(strftime(others.effective_end, '%Y-%m-%d'), 'no end')"
)
# A record's place in the raw files: the key of the problems table.
PLACE: Final = "files.file_no, coalesce(line_map.ordinal, records.source_line - 1)"
PLACE_JOINS: Final = """JOIN files ON files.path = records.source_file
LEFT JOIN line_map
    ON line_map.file_no = files.file_no AND line_map.line = records.source_line"""
LIST_PAIRS: Final = f"""
INSERT INTO problems
SELECT
    {PLACE},
    $column_no,
    $column,
    CAST(records.{{column}} AS VARCHAR),
    {{reason}} || others.source_file || ', line ' || others.source_line
        || ' ({{what}}, in force ' || {PERIOD_OF} || ')'
FROM (
    SELECT position, other FROM conflicts UNION ALL SELECT other, position FROM conflicts
) AS pairs
JOIN {RECORDS} AS records ON records.rowid = pairs.position
JOIN {RECORDS} AS others ON others.rowid = pairs.other
{PLACE_JOINS}
"""
LIST_OVERLAPS: Final = LIST_PAIRS.format(
    column="effective_start", reason="'overlaps '", what="the same fee line"
)
LIST_STANDARD: Final = LIST_PAIRS.format(
    column="standard",
    reason="'both standard: '",
    what="another fee line standard for the same class, display, price band and unit",
)
LIST_OMITTED: Final = f"""
INSERT INTO problems
SELECT
    {PLACE},
    $column_no,
    'effective_end',
    strftime(records.effective_end, '%Y-%m-%d'),
    'in force to this end by its row, but the complete ' || omitted.scope || ' schedule of '
        || strftime(omitted.as_of, '%Y-%m-%d') || ' (' || omitted.source_url
        || ') does not list its fee line'
FROM omitted
JOIN {RECORDS} AS records ON records.rowid = omitted.position
{PLACE_JOINS}
"""
IN_CONFLICT: Final = "SELECT position FROM conflicts UNION SELECT other FROM conflicts"
COUNT_IN_CONFLICT: Final = f"SELECT count(*) FROM ({IN_CONFLICT})"
DELETE_IN_CONFLICT: Final = f"DELETE FROM {RECORDS} WHERE rowid IN ({IN_CONFLICT})"
DELETE_OMITTED: Final = f"DELETE FROM {RECORDS} WHERE rowid IN (SELECT position FROM omitted)"
COUNT_OMITTED: Final = "SELECT count(DISTINCT position) FROM omitted"


def reject_omitted(con: duckdb.DuckDBPyConnection) -> int:
    """List a problem for each record in `omitted` naming the schedule, and delete them;
    returns how many."""
    [(omitted,)] = con.execute(COUNT_OMITTED).fetchall()
    if omitted:
        con.execute(LIST_OMITTED, {"column_no": RAW_COLUMNS.index("effective_end")})
        con.execute(DELETE_OMITTED)
    return int(omitted)


def reject_pairs(con: duckdb.DuckDBPyConnection, listing: str, column: str) -> int:
    """List a problem for each record of the pairs in `conflicts` naming the other, and delete
    them all (which of two is right is not the ingest's to guess); returns how many."""
    [(count,)] = con.execute(COUNT_IN_CONFLICT).fetchall()
    if count:
        con.execute(listing, {"column_no": RAW_COLUMNS.index(column), "column": column})
        con.execute(DELETE_IN_CONFLICT)
    return int(count)
