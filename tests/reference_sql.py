"""The plain SQL the service's fast paths are checked against: counting the matches of a
selection, and a page of them found by ordering every one (the index finds the same page from
its counts per sort value, `service.dataset.index`), each record as a JSON answer prints it
(the service prints it from the record summary, details and index: `service.dataset.records`)."""

from typing import Any, Final

from service.dataset.queries import (
    ISO_TIMESTAMP,
    ORDER_COLUMNS,
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

PAGE: Final = """
SELECT {projection}
{where}
ORDER BY {order}
LIMIT $limit
OFFSET $offset
"""


def count_matching(selection: Selection) -> tuple[str, dict[str, Any]]:
    where, parameters = selection.where()
    return f"SELECT count(*)\n{where}", parameters


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
    where, parameters = selection.where()
    sql = PAGE.format(projection=result_item(JSON_SHAPE), where=where, order=order)
    return sql, {**parameters, "limit": limit, "offset": offset, **included.parameters()}
