"""The rules every raw row is checked against, as SQL: one expression per column giving the
reason a value is wrong, or NULL (`reason`), and `BROKEN`, true for a row breaking any. The
rules and their reason texts are documented in docs/raw-format.md; `ingest.stage` lists each
broken one, `ingest.write` keeps the rows that break none.
"""

from typing import Final

from ingest.layout import sql_string
from ingest.schema import (
    CLOSED_VALUES,
    DATE_COLUMNS,
    RAW_COLUMNS,
    REQUIRED,
    SOURCED_KINDS,
    TAPES,
)
from ingest.units import FORM, IS_LIMIT

DATE_PATTERN: Final = r"[1-9][0-9]{3}-[0-9]{2}-[0-9]{2}"

# One CASE per column: the reason it is wrong, or NULL. The rules are documented, with their
# reason texts, in docs/raw-format.md.
MISSING: Final = "'required value is missing'"
WEB_ADDRESS: Final = r"'(?i)https?://[^\s/]+\S*'"  # http or https, a host, no spaces
NOT_WEB: Final = "'not a web address: http:// or https://, a host, and no spaces'"
BAD_DATE: Final = "'not a real date in the form YYYY-MM-DD'"


def _date_is_bad(column: str) -> str:
    return (
        f"NOT regexp_full_match({column}, '{DATE_PATTERN}') OR try_cast({column} AS DATE) IS NULL"
    )


SOURCED: Final = f"source_kind IN ({', '.join(sql_string(kind) for kind in SOURCED_KINDS)})"

# When an empty optional value breaks a rule, and why: a row names its source unless it is
# illustrative (a row of an older layout has no kind, and always names one), and a sourced row
# its URL; a file of the current layout states every row's provenance (`date_basis` only for a
# sourced row: nothing states, derives or observes an illustrative row's dates).
EMPTY_RULES: Final = {
    "source_document": ("coalesce(source_kind, '') <> 'illustrative'", MISSING),
    "source_url": (SOURCED, "'a primary or secondary row needs its source URL'"),
    "source_kind": ("provenance_given", MISSING),
    "date_basis": (f"provenance_given AND {SOURCED}", MISSING),
    "uncertain": ("provenance_given", MISSING),
    # A complete schedule is a scope and a day (`docs/raw-format.md`, "Complete schedules").
    "complete_scope": (
        "complete_as_of IS NOT NULL",
        "'complete_as_of needs complete_scope: fee_category or standard_rates'",
    ),
    "complete_as_of": ("complete_scope IS NOT NULL", "'complete_scope needs complete_as_of'"),
}
# What an illustrative row must leave empty, and why.
NAMES_NO_SOURCE: Final = (
    "'an illustrative row names no source: leave source_document, source_url and page_number empty'"
)
NOT_ILLUSTRATIVE: Final = {
    "source_document": NAMES_NO_SOURCE,
    "source_url": NAMES_NO_SOURCE,
    "page_number": NAMES_NO_SOURCE,
    "date_basis": "'an illustrative row''s dates have no basis: leave date_basis empty'",
}


def reason(column: str) -> str:
    """The SQL expression giving a column's first broken rule, or "" when it has no rules."""
    rules = _value_rules(column)
    if column in REQUIRED:
        empty = f"WHEN {column} IS NULL THEN {MISSING}"
    elif column in EMPTY_RULES:
        condition, reason = EMPTY_RULES[column]
        empty = f"WHEN {column} IS NULL THEN CASE WHEN {condition} THEN {reason} END"
    elif rules:
        empty = f"WHEN {column} IS NULL THEN NULL"  # an empty optional value breaks no rule
    else:
        return ""
    return f"CASE {empty} {' '.join(rules)} END"


def _value_rules(column: str) -> list[str]:
    """`WHEN <broken> THEN <reason>` branches for a column's non-empty values."""
    rules = []
    if column == "exchange":
        # A list, not a subquery: a join in the main query could be planned with the raw rows
        # (whose count DuckDB cannot know) as its build side.
        rules.append("WHEN NOT list_contains($exchange, exchange) THEN 'unknown venue code'")
    if column in NOT_ILLUSTRATIVE:
        rules.append(f"WHEN source_kind = 'illustrative' THEN {NOT_ILLUSTRATIVE[column]}")
    if column == "source_url":
        # A public source is one a reader can open: a web address, whole. (A page links it,
        # and a `javascript:` or `data:` address there would be something else to click.)
        rules.append(f"WHEN NOT regexp_full_match(source_url, {WEB_ADDRESS}) THEN {NOT_WEB}")
    if column in CLOSED_VALUES:
        allowed = ", ".join(CLOSED_VALUES[column])
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
    rules.extend(LIFE_RULES.get(column, ()))
    rules.extend(LIST_RULES.get(column, ()))
    return rules


# The lists of the raw format (`schema.LIST_COLUMNS`): values separated by spaces. A fee code is
# the code an execution report carries: letters and digits (Cboe's `HA`, MEMX's `Br`, `R1`).
FEE_CODE: Final = "[0-9A-Za-z]{1,8}"
TAPE: Final = f"[{''.join(TAPES)}]"
LIST_RULES: Final = {
    "fee_codes": (
        rf"WHEN NOT regexp_full_match(fee_codes, '{FEE_CODE}(\s+{FEE_CODE})*') "
        "THEN 'fee codes are letters and digits (at most 8 each), separated by spaces'",
    ),
    "tapes": (
        rf"WHEN NOT regexp_full_match(tapes, '{TAPE}(\s+{TAPE})*') "
        f"THEN 'tapes are {', '.join(TAPES)}, separated by spaces (empty for every tape)'",
    ),
}


# What a row says of its line's life must hold of the row itself (`docs/raw-format.md`,
# "Standard rates" and "Complete schedules"): a standard rate is a rate, a row of a complete
# standard-rates schedule is a standard rate, and a schedule's row is in force on its day.
LIFE_RULES: Final = {
    "standard": (
        f"WHEN standard = 'true' AND (({FORM}) IS NULL OR {IS_LIMIT}) "
        "THEN 'a standard rate is a plain figure (a fee or rebate), not a cap, a maximum, "
        "a minimum or text'",
    ),
    "complete_scope": (
        "WHEN complete_scope = 'standard_rates' AND coalesce(standard, '') <> 'true' "
        "THEN 'a row of a complete standard-rates schedule is a standard rate: standard must "
        "be true'",
    ),
    "complete_as_of": (
        "WHEN try_cast(complete_as_of AS DATE) < try_cast(effective_start AS DATE) "
        "OR try_cast(complete_as_of AS DATE) > try_cast(effective_end AS DATE) "
        "THEN 'the row is not in force on complete_as_of'",
    ),
}


CHECKED: Final = tuple(
    (number, column) for number, column in enumerate(RAW_COLUMNS) if reason(column)
)

# True for a row that breaks any rule: the main query drops it, the rejects query keeps it.
BROKEN: Final = f"coalesce({', '.join(reason(column) for _, column in CHECKED)}) IS NOT NULL"


def allowed_values(venues: list[str]) -> dict[str, list[str]]:
    """The values each closed column may hold: the registry's venue codes, the vocabularies."""
    return {"exchange": venues} | {column: list(values) for column, values in CLOSED_VALUES.items()}


def rule_parameters(statement: str, venues: list[str]) -> dict[str, list[str]]:
    """The value lists a statement's rules name (`$exchange`, `$fee_type`, ...)."""
    lists = allowed_values(venues)
    return {name: values for name, values in lists.items() if f"${name}" in statement}
