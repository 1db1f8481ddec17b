"""The lives of the fee lines, settled once every valid record is in the serving table
(`docs/raw-format.md`: "Fee lines", "Complete schedules", "Confirmed through", "Standard
rates"). In order, each step over the records the steps before it kept:

    schedules     the complete schedules the rows declare (venue, fee type, scope, day) and the
                  lines each lists, read before anything is dropped
    repeats       readings of one line with the same start, figure and end, or one showing
                  the same figure inside an earlier one's period, are one record:
                  the first stays, confirmed through the latest day any of them shows; the
                  others are counted, like exact duplicates
    conflicts     two records of a line in force on one day by their own dates (a start
                  shared, or an end a row gives reaching the line's next record), and a record
                  whose given end runs past a complete schedule of its scope omitting its line:
                  rejected, each problem naming the other record or the schedule
    standard      two lines of one venue standard for one class and unit in force on one day,
                  by the periods the next step will give them: both rejected, and the periods
                  found again (a rejected record no longer ends the one before it)
    ends          a record with no end ends the day before its line's next record starts, or
                  the day before the first complete schedule of its scope omitting its line;
                  `ended_by` names the source that gives the end (the reading or the schedule),
                  and `date_basis` keeps saying how the row's own dates are known

A record's `confirmed_through` is the latest day its own readings show (its given end, else the
later of its start and its schedules' days), or its end when the line's next reading shows the
same figure from the day after (the figure held throughout). An end derived otherwise is not a
confirmation: a next reading of another figure shows that the figure changed by then, not when;
a schedule's omission, that the line was gone by then.

Every step is a query over the serving table; the tables they make are small (the schedules,
the lines continued by a later reading, the few records in conflict), so an input with none of
these costs one pass over the lines (the window that finds repeats, conflicts and
continuations) and a few filtered scans.
"""

from typing import Final

import duckdb
import pyarrow as pa

from ingest import conflicts
from ingest.changes import SEEN_FIGURE
from ingest.layout import CLASSED
from ingest.serving import RECORDS

# A line's records in effective order (ties by record id, as the table orders them), and the
# key of the earlier record reaching furthest (its own end, else its start; ties: the first).
LINE_ORDER: Final = "PARTITION BY line_id ORDER BY effective_start, record_id"
REACH: Final = "{'end': coalesce(effective_end, effective_start), 'first': -rowid}"
NO_END: Final = "DATE '9999-12-31'"


def same(columns: tuple[str, ...], a: str, b: str) -> str:
    """SQL: the rows aliased `a` and `b` agree on every column (NULL agreeing with NULL)."""
    return "\n    AND ".join(f"{a}.{c} IS NOT DISTINCT FROM {b}.{c}" for c in columns)


# A complete schedule, and a record's standard class (its class and penny class, its display
# and price band, and the unit): two standard lines of one venue in force on one day may not
# share one.
SCHEDULE: Final = ("exchange", "fee_type", "scope", "category", "as_of")
STANDARD_CLASS: Final = ("exchange", *CLASSED, "symbol_type", "display", "price_band", "unit")

SCHEDULE_OF: Final = """
    exchange,
    fee_type,
    complete_scope AS scope,
    CASE WHEN complete_scope = 'fee_category' THEN fee_category END AS category,
    complete_as_of AS as_of"""
CREATE_SCHEDULES: Final = f"""
CREATE TABLE schedules AS
SELECT {SCHEDULE_OF}, min(source_url) AS source_url
FROM {RECORDS}
WHERE complete_as_of IS NOT NULL
GROUP BY ALL;
CREATE TABLE listings AS
SELECT DISTINCT {SCHEDULE_OF}, line_id
FROM {RECORDS}
WHERE complete_as_of IS NOT NULL
"""
COUNT_SCHEDULES: Final = "SELECT count(*) FROM schedules"

# The records of a schedule's scope that were in force the day before it (by their own start)
# and whose line it does not list: `records`, aliased `r`, joined to the schedules `s`.
IN_SCOPE_OMITTED: Final = f"""
JOIN schedules AS s
    ON s.exchange = r.exchange
    AND s.fee_type = r.fee_type
    AND (s.scope = 'standard_rates' AND r.standard OR s.category = r.fee_category)
    AND r.effective_start < s.as_of
WHERE NOT EXISTS (
    SELECT 1
    FROM listings AS l
    WHERE l.line_id = r.line_id
    AND {same(SCHEDULE, "l", "s")}
)"""

# One pass over the lines: per record, the earlier record it repeats, if any (the one before
# it with the same start, figure and end; or the earlier record holding the latest end, when
# this one shows the same figure inside that one's period: it ends by then, or gives no end),
# how far the earlier records reach by their own dates (a given end, else their start: an open
# record is ended by the next, not in conflict with it) and which holds that reach, and whether
# a later record follows it. Only the records something happens to are kept.
CREATE_STEPS: Final = f"""
CREATE TABLE steps AS
SELECT *
FROM (
    SELECT
        *,
        CASE
            WHEN same_as_previous THEN previous
            WHEN coalesce(effective_end, effective_start) <= reach AND seen = reacher_seen
                THEN reacher
        END AS repeats
    FROM (
        SELECT
            rowid AS position,
            line_id,
            effective_start,
            effective_end,
            {SEEN_FIGURE} AS seen,
            lag(rowid) OVER line AS previous,
            lag(effective_start) OVER line = effective_start
                AND lag(effective_end) OVER line IS NOT DISTINCT FROM effective_end
                AND lag({SEEN_FIGURE}) OVER line = {SEEN_FIGURE} AS same_as_previous,
            max(coalesce(effective_end, effective_start)) OVER earlier AS reach,
            arg_max(rowid, {REACH}) OVER earlier AS reacher,
            arg_max({SEEN_FIGURE}, {REACH}) OVER earlier AS reacher_seen,
            lead(effective_start) OVER line IS NOT NULL AS continued
        FROM {RECORDS}
        WINDOW
            line AS ({LINE_ORDER}),
            earlier AS ({LINE_ORDER} ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING)
    )
)
WHERE repeats IS NOT NULL
OR effective_start <= reach
OR (effective_end IS NULL AND continued)
"""
REPEATED: Final = "SELECT position, repeats FROM steps WHERE repeats IS NOT NULL"

# The repeats (`position` repeats `first`, the record it joins): the first is confirmed through
# the latest day any of them shows, and the others go.
CREATE_REPEATS: Final = "CREATE TABLE repeats (position BIGINT, first BIGINT)"
INSERT_REPEATS: Final = "INSERT INTO repeats SELECT position, first FROM folded"
COLLAPSE_REPEATS: Final = f"""
UPDATE {RECORDS} AS records
SET confirmed_through = shown.day
FROM (
    SELECT repeats.first, max(r.confirmed_through) AS day
    FROM repeats JOIN {RECORDS} AS r ON r.rowid = repeats.position
    GROUP BY repeats.first
) AS shown
WHERE records.rowid = shown.first AND shown.day > records.confirmed_through;
DELETE FROM {RECORDS}
WHERE rowid IN (SELECT position FROM repeats)
"""

# Records in conflict, as pairs of positions (`position`, `other`) or a record and a schedule
# (`ingest.conflicts` lists and rejects them).
CREATE_LINE_CONFLICTS: Final = """
CREATE TABLE conflicts AS
SELECT position, reacher AS other
FROM steps
WHERE repeats IS NULL AND effective_start <= reach
"""
CREATE_SCHEDULE_CONFLICTS: Final = f"""
CREATE TABLE omitted AS
SELECT r.rowid AS position, s.scope, s.as_of, s.source_url
FROM {RECORDS} AS r
{IN_SCOPE_OMITTED}
AND r.effective_end >= s.as_of
"""

# The ends the `ends` step gives: per open record continued by a later record of its line or
# omitted from a complete schedule of its scope, the day before the earlier of the two, whether
# the schedule gives it, the address of the source that does (the schedule's, or the next
# reading's), and whether the line's next reading (when it is the one) shows the same figure,
# which confirms the record up to it.
CREATE_ENDS: Final = f"""
CREATE OR REPLACE TABLE ends AS
WITH continued AS (
    SELECT DISTINCT line_id FROM steps WHERE effective_end IS NULL
),
nexts AS (
    SELECT position, next_start, next_url, next_seen = seen AS same_figure
    FROM (
        SELECT
            rowid AS position,
            effective_end,
            {SEEN_FIGURE} AS seen,
            lead(effective_start) OVER ({LINE_ORDER}) AS next_start,
            lead(source_url) OVER ({LINE_ORDER}) AS next_url,
            lead({SEEN_FIGURE}) OVER ({LINE_ORDER}) AS next_seen
        FROM {RECORDS}
        WHERE line_id IN (SELECT line_id FROM continued)
    )
    WHERE effective_end IS NULL AND next_start IS NOT NULL
),
omissions AS (
    SELECT r.rowid AS position, min(s.as_of) AS as_of, arg_min(s.source_url, s.as_of) AS source_url
    FROM {RECORDS} AS r
    {IN_SCOPE_OMITTED}
    AND r.effective_end IS NULL
    GROUP BY r.rowid
)
SELECT
    position,
    least(nexts.next_start, omissions.as_of) - 1 AS effective_end,
    coalesce(omissions.as_of <= coalesce(nexts.next_start, {NO_END}), false) AS by_schedule,
    CASE WHEN by_schedule THEN omissions.source_url ELSE nexts.next_url END AS ended_by,
    NOT by_schedule AND coalesce(nexts.same_figure, false) AS confirmed_to_end
FROM nexts FULL JOIN omissions USING (position)
"""

# Two standard lines of one venue for one class and unit in force on one day, by their periods
# once the open ones are ended (`ends`): a pair per conflict, the earlier position first.
CREATE_STANDARD_CONFLICTS: Final = f"""
CREATE OR REPLACE TABLE conflicts AS
WITH periods AS (
    SELECT
        r.rowid AS position,
        r.line_id,
        {", ".join(f"r.{column}" for column in STANDARD_CLASS)},
        r.effective_start,
        coalesce(r.effective_end, ends.effective_end, {NO_END}) AS effective_end
    FROM {RECORDS} AS r LEFT JOIN ends ON ends.position = r.rowid
    WHERE r.standard
)
SELECT a.position, b.position AS other
FROM periods AS a
JOIN periods AS b
    ON {same(STANDARD_CLASS, "a", "b")}
    AND a.line_id <> b.line_id
    AND a.effective_start <= b.effective_end
    AND b.effective_start <= a.effective_end
    AND a.position < b.position
"""

APPLY_ENDS: Final = f"""
UPDATE {RECORDS} AS records
SET
    effective_end = ends.effective_end,
    ended_by = ends.ended_by,
    confirmed_through = CASE WHEN ends.confirmed_to_end THEN ends.effective_end
        ELSE least(records.confirmed_through, ends.effective_end) END
FROM ends
WHERE records.rowid = ends.position
"""

COUNT_ENDS: Final = (
    "SELECT count(*) FILTER (NOT by_schedule), count(*) FILTER (by_schedule) FROM ends"
)
CLEAN_UP: Final = "".join(
    f"DROP TABLE IF EXISTS {name};\n"
    for name in ("schedules", "listings", "steps", "repeats", "conflicts", "omitted", "ends")
)


def settle(con: duckdb.DuckDBPyConnection) -> dict[str, int]:
    """Settle the lines' lives in `RECORDS` (the module docstring's steps); returns what was
    done: `repeats` collapsed, `rejected` records, ends derived from the `next_reading` and from
    a `complete_schedule`."""
    con.execute(CREATE_SCHEDULES)
    [(schedules,)] = con.execute(COUNT_SCHEDULES).fetchall()
    con.execute(CREATE_STEPS)
    repeated = _collapse_repeats(con)
    con.execute(CREATE_LINE_CONFLICTS)
    rejected = conflicts.reject_pairs(con, conflicts.LIST_OVERLAPS, "effective_start")
    if schedules:
        con.execute(CREATE_SCHEDULE_CONFLICTS)
        rejected += conflicts.reject_omitted(con)
    while True:
        con.execute(CREATE_ENDS)
        con.execute(CREATE_STANDARD_CONFLICTS)
        standard = conflicts.reject_pairs(con, conflicts.LIST_STANDARD, "standard")
        if not standard:
            break
        rejected += standard
    [(by_next, by_schedule)] = con.execute(COUNT_ENDS).fetchall()
    con.execute(APPLY_ENDS)
    con.execute(CLEAN_UP)
    return {
        "repeats": int(repeated),
        "rejected": rejected,
        "next_reading": int(by_next),
        "complete_schedule": int(by_schedule),
    }


def _collapse_repeats(con: duckdb.DuckDBPyConnection) -> int:
    """Fold each repeated reading into the record it repeats (through a chain of repeats, to
    the first); returns how many were folded."""
    repeats = dict(con.execute(REPEATED).fetchall())
    con.execute(CREATE_REPEATS)
    if not repeats:
        return 0

    def first(position: int) -> int:
        while position in repeats:
            position = repeats[position]
        return position

    # One insert of an Arrow table: a monthly extract can repeat most of its lines.
    folded = pa.table(
        {
            "position": pa.array(list(repeats), pa.int64()),
            "first": pa.array([first(position) for position in repeats], pa.int64()),
        }
    )
    con.register("folded", folded)
    con.execute(INSERT_REPEATS)
    con.unregister("folded")
    con.execute(COLLAPSE_REPEATS)
    return len(repeats)
