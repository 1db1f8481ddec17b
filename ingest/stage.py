"""Loading raw files into a DuckDB staging table and checking every row there, in SQL.

Each file is appended on its own, so a table `rowid` minus the file's first rowid is the
record's ordinal in that file (DuckDB keeps insertion order); `files` remembers where each file
starts. Every rule is one narrow query over the columnar table, and every broken rule becomes
one row of `problems`.
"""

from pathlib import Path
from typing import Final

import duckdb

from ingest.schema import DATE_COLUMNS, RAW_COLUMNS, REQUIRED, VOCABULARIES

# The content id: md5 of the JSON array of the trimmed raw values (JSON keeps null apart from
# "" and quotes every value, so no two different rows share the text that is hashed), held as a
# UUID (16 bytes to group and join on; its text is the md5 hex digits in 8-4-4-4-12 groups).
RECORD_ID: Final = f"CAST(md5(to_json([{', '.join(RAW_COLUMNS)}])) AS UUID)"

CREATE_VENUES: Final = "CREATE TABLE venues AS SELECT unnest($codes) AS code"

CREATE_STAGING: Final = f"""
CREATE TABLE files (
    file_no INTEGER PRIMARY KEY,
    path VARCHAR NOT NULL,
    first_row BIGINT NOT NULL,
    records BIGINT NOT NULL
);
CREATE TABLE line_map (file_no INTEGER, ordinal BIGINT, line BIGINT);
CREATE TABLE staged (
    file_no INTEGER,
    {", ".join(f"{name} VARCHAR" for name in RAW_COLUMNS)},
    record_id UUID
);
CREATE TABLE problems (
    row_no BIGINT,
    file_no INTEGER,
    column_no INTEGER,
    column_name VARCHAR,
    value VARCHAR,
    reason VARCHAR
);
"""

# Values are trimmed of surrounding spaces (plain trim(): a character-set trim costs 2.5 times
# as much) and an empty value becomes NULL.
STAGE_FILE: Final = f"""
INSERT INTO staged
SELECT $file_no, *, {RECORD_ID}
FROM (
SELECT {", ".join(f"nullif(trim({name}), '') AS {name}" for name in RAW_COLUMNS)}
FROM read_csv(
    $path,
    header = true,
    columns = $columns,
    auto_detect = false,
    delim = ',',
    quote = '"',
    escape = '"',
    strict_mode = true,
    null_padding = false
)
)
"""

COUNT_STAGED: Final = "SELECT count(*) FROM staged"

# The physical line of a staged row (`row_no`, joined to `files` and `line_map`): its ordinal
# plus one for the header, unless the file's walk recorded it (blank lines, quoted breaks).
LINE_OF_ROW: Final = "coalesce(line_map.line, row_no - files.first_row + 2)"
JOIN_LINES: Final = """JOIN files ON files.file_no = located.file_no
LEFT JOIN line_map
    ON line_map.file_no = files.file_no
    AND line_map.ordinal = row_no - files.first_row + 1"""

WRITE_REJECTS: Final = f"""
SELECT
    files.path AS file,
    {LINE_OF_ROW} AS line,
    column_name AS column,
    value,
    reason
FROM problems AS located
{JOIN_LINES}
ORDER BY located.file_no, line, column_no
"""

REJECT_COUNTS: Final = """
SELECT file_no, count(*) AS problems, count(DISTINCT row_no) AS rows
FROM problems
GROUP BY file_no
"""

RECORD_FILE: Final = """
INSERT INTO files
VALUES ($file_no, $path, $first_row, $records)
"""

DATE_PATTERN: Final = r"[1-9][0-9]{3}-[0-9]{2}-[0-9]{2}"

# One CASE per column: the reason it is wrong, or NULL. The rules are documented, with their
# reason texts, in docs/raw-format.md.
MISSING: Final = "'required value is missing'"
BAD_DATE: Final = "'not a real date in the form YYYY-MM-DD'"


def _date_is_bad(column: str) -> str:
    return (
        f"NOT regexp_full_match({column}, '{DATE_PATTERN}') OR try_cast({column} AS DATE) IS NULL"
    )


def _reason(column: str) -> str:
    """The SQL expression giving a column's first broken rule, or "" when it has no rules."""
    rules = _value_rules(column)
    if column in REQUIRED:
        empty = f"WHEN {column} IS NULL THEN {MISSING}"
    elif rules:
        empty = f"WHEN {column} IS NULL THEN NULL"  # an empty optional value breaks no rule
    else:
        return ""
    return f"CASE {empty} {' '.join(rules)} END"


def _value_rules(column: str) -> list[str]:
    """`WHEN <broken> THEN <reason>` branches for a column's non-empty values."""
    rules = []
    if column == "exchange":
        rules.append("WHEN exchange NOT IN (SELECT code FROM venues) THEN 'unknown venue code'")
    if column in VOCABULARIES:
        allowed = ", ".join(VOCABULARIES[column])
        rules.append(f"WHEN NOT list_contains(${column}, {column}) THEN 'not one of: {allowed}'")
    if column in DATE_COLUMNS:
        rules.append(f"WHEN {_date_is_bad(column)} THEN {BAD_DATE}")
    if column == "effective_end":
        rules.append(
            f"WHEN effective_start IS NOT NULL AND NOT ({_date_is_bad('effective_start')}) "
            "AND CAST(effective_end AS DATE) < CAST(effective_start AS DATE) "
            "THEN 'effective_end is before effective_start'"
        )
    if column == "page_number":
        rules.append(
            "WHEN NOT regexp_full_match(page_number, '[1-9][0-9]{0,8}') "
            "THEN 'not a whole number of at least 1'"
        )
    return rules


def _check(column_no: int, column: str) -> str:
    reason = _reason(column)
    return f"""
INSERT INTO problems
SELECT row_no, file_no, {column_no}, '{column}', {column}, reason
FROM (SELECT rowid AS row_no, file_no, {column}, {reason} AS reason FROM staged)
WHERE reason IS NOT NULL
"""


# The checks, one statement per checked column (identifiers come only from RAW_COLUMNS).
CHECKS: Final = tuple(
    _check(number, column) for number, column in enumerate(RAW_COLUMNS) if _reason(column)
)


def check_rows(con: duckdb.DuckDBPyConnection) -> None:
    for statement in CHECKS:
        con.execute(statement, _vocabularies_used(statement))


def _vocabularies_used(statement: str) -> dict[str, list[str]]:
    return {
        column: list(values) for column, values in VOCABULARIES.items() if f"${column}" in statement
    }


def copy_rejects(target: Path) -> str:
    """The statement writing `rejects.csv` (a COPY target cannot be a bound parameter)."""
    return f"COPY ({WRITE_REJECTS}) TO {sql_string(str(target))} (HEADER)"


def sql_string(value: str) -> str:
    """A SQL string literal, for the few places DuckDB takes no parameter (COPY targets)."""
    return "'" + value.replace("'", "''") + "'"


def raw_column_types() -> dict[str, str]:
    return dict.fromkeys(RAW_COLUMNS, "VARCHAR")
