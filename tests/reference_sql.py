"""The plain SQL the service's answers are checked against, over the published Parquet files
(the `fees` view analysts get from `fees sql`, `ingest.query.open_version`): which records a
selection matches and how many (the service finds them in its index,
`service.dataset.index`), a page of them found by ordering every one (the index finds the same
page from its counts per sort value), and each record as a JSON answer prints it (the service
prints it from its printed records, `service.dataset.printed`)."""

from typing import Any, Final

import duckdb

from service.dataset.queries import (
    ISO_TIMESTAMP,
    ORDER_COLUMNS,
    RESULT_FILTERS,
    Included,
    Selection,
    result_item,
)

# A JSON answer's record in SQL: the dates as text, the decimal amount as a number.
JSON_SHAPE: Final = {
    "scraped_time": ISO_TIMESTAMP,
    "amount": "CAST(amount AS DOUBLE)",
    **{
        name: f"strftime({name}, '%Y-%m-%d')"
        for name in ("effective_start", "effective_end", "confirmed_through", "complete_as_of")
    },
}

# The filters on a list column: a record matches when its list holds a wanted value (for
# `tapes`, or is empty: the record is for every tape, so for the one asked about too).
LIST_FILTERS: Final = {
    "tape": "(len(tapes) = 0 OR list_has_any(tapes, [{members}]))",
    "fee_code": "list_has_any(fee_codes, [{members}])",
}

PAGE: Final = """
SELECT {projection}
{where}
ORDER BY {order}
LIMIT $limit
OFFSET $offset
"""


def rows(con: duckdb.DuckDBPyConnection, sql: str, parameters: dict[str, Any]) -> list[Any]:
    """A query's rows as dicts keyed by column name, as a JSON answer holds them."""
    result = con.execute(sql, parameters)
    names = [column[0] for column in result.description]
    return [dict(zip(names, row, strict=True)) for row in result.fetchall()]


def where(selection: Selection) -> tuple[str, dict[str, Any]]:
    """`FROM fees WHERE ...` and its parameters: only what the selection sets is a condition,
    each value its own bound parameter; a record is in a window when its effective period
    overlaps it (both ends inclusive)."""
    clauses: list[str] = []
    parameters: dict[str, Any] = {}
    lists = dict(selection.values)
    if selection.venues is not None:
        lists["exchange_name"] = selection.venues
    for name, values in lists.items():
        column = RESULT_FILTERS[name]  # the allow-list: a name that is not there fails here
        names = [f"{name}_{number}" for number in range(len(values))]
        parameters |= dict(zip(names, values, strict=True))
        members = ", ".join(f"${bound}" for bound in names)
        condition = LIST_FILTERS.get(name, f"{column} IN ({{members}})")
        clauses.append(condition.format(members=members) if values else "false")
    for name, condition in (
        ("end_date", "effective_start <= $end_date"),
        ("start_date", "(effective_end IS NULL OR effective_end >= $start_date)"),
        ("in_force_on", "effective_start <= $in_force_on"),
        ("in_force_on", "(effective_end IS NULL OR effective_end >= $in_force_on)"),
        ("version_id", "version_id = $version_id"),
    ):
        value = getattr(selection, name)
        if value is not None:
            clauses.append(condition)
            parameters[name] = value
    oldest = selection.oldest_confirmation()
    if oldest is not None:
        clauses.append("confirmed_through >= $oldest_confirmation")
        parameters["oldest_confirmation"] = oldest
    return "FROM fees\nWHERE " + ("\nAND ".join(clauses) or "true"), parameters


def count_matching(selection: Selection) -> tuple[str, dict[str, Any]]:
    sql, parameters = where(selection)
    return f"SELECT count(*)\n{sql}", parameters


def page_of_results(
    selection: Selection,
    *,
    order_by: str = "effective_start",
    order_dir: str = "desc",
    limit: int,
    offset: int,
    included: Included,
) -> tuple[str, dict[str, Any]]:
    """Results in an allow-listed order, with `record_id` breaking ties so pages are stable."""
    direction = {"asc": "ASC", "desc": "DESC"}[order_dir]
    order = f"{ORDER_COLUMNS[order_by]} {direction} NULLS LAST, record_id ASC"
    condition, parameters = where(selection)
    sql = PAGE.format(projection=result_item(JSON_SHAPE), where=condition, order=order)
    return sql, {**parameters, "limit": limit, "offset": offset, **included.parameters()}
