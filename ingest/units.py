"""A record's figure and the canonical unit it is counted in (`docs/raw-format.md`, "Amounts
and units"), as SQL over the raw `fee_amount` and `fee_basis`.

A printed amount is either a plain money figure (`$0.0030`, `($0.0020)`), a plain percentage
(`0.30%`, `(0.075%) of TDV`) or anything else (`Free`, `$0.10 - $0.25`, which keep only their
text). A figure's unit is one of `schema.UNITS`: for money, the first rule of `MONEY_RULES`
whose pattern the lower-cased basis matches, else `other`; for a percentage, `percent_of_value`
when the amount or its basis says of what value (`PERCENT_OF_VALUE`), else `other`. The printed
basis is published beside the unit, so `other` loses nothing.
"""

from typing import Final

from ingest.layout import sql_string
from ingest.schema import UNITS

# A plain money figure: `$0.0030`, `($0.0020)`, `-$0.25`, `$1,500.00`.
MONEY: Final = r"(?:[0-9]{1,3}(?:,[0-9]{3})+|[0-9]{1,12})(?:\.[0-9]{1,8})?"
PLAIN_MONEY: Final = rf"\(\${MONEY}\)|-?\${MONEY}"

# A plain percentage, alone or saying of what: `0.30%`, `(0.075%)`, `-0.05%`, `0.30% of TDV`,
# `(0.15% of TDV)`.
PERCENT: Final = r"[0-9]{1,3}(?:\.[0-9]{1,8})?%(?: of [A-Za-z ]+)?"
PLAIN_PERCENT: Final = rf"\({PERCENT}\)|-?{PERCENT}"

# A limit, not a rate, whatever it is counted per: a basis naming a cap or a maximum (`per month
# cap`), or a label that is one (`Maximum rebate per share provided by the Exchange`, `Minimum
# rebate to add displayed liquidity`). Only a label that begins so: `Tier rebate (without TCV
# minimum)` or `Surcharge after Monthly Cap` are rates. Tested on the lower-cased basis and label.
LIMIT_BASIS: Final = r"\bcap\b|\bmaximum\b"
LIMIT_LABEL: Final = r"^(?:(?:daily|monthly|annual) )?(?:maximum|minimum)\b"
IS_LIMIT: Final = (
    f"(regexp_matches(lower(coalesce(fee_basis, '')), {sql_string(LIMIT_BASIS)})"
    f" OR regexp_matches(lower(fee_name), {sql_string(LIMIT_LABEL)}))"
)

# The money rules after the limits, in order: (unit, pattern over the lower-cased basis). A
# port's fee is per port whatever its period; what is left per month or per year is a periodic
# fee of that period (its basis says per what: user, firm, issue).
MONEY_RULES: Final = (
    ("per_million_dollars_of_value", r"^per \$1m\b|\bper million\b"),
    ("one_time", r"\bone[- ]time\b"),
    ("per_share", r"^per (executed |incremental )?(equivalent )?shares?\b"),
    ("per_contract", r"^per (executed )?contracts?\b"),
    ("per_order", r"^per orders?\b"),
    ("per_port", r"^per port(?:$|,| per\b)"),
    ("per_year", r"\bper (?:calendar )?year\b|\bannual(?:ly)?\b"),
    ("per_month", r"\bper month\b"),
)

# A percentage is of a traded value when its text or basis names one.
PERCENT_OF_VALUE: Final = r"\btdv\b|\bdollar (?:value|volume)\b|\bnotional value\b"

assert {unit for unit, _ in MONEY_RULES} <= set(UNITS)


def _money_unit() -> str:
    branches = " ".join(
        f"WHEN regexp_matches(lower(fee_basis), {sql_string(pattern)}) THEN '{unit}'"
        for unit, pattern in MONEY_RULES
    )
    return f"CASE WHEN {IS_LIMIT} THEN 'other' {branches} ELSE 'other' END"


# `form` ('money', 'percent' or NULL) is computed once per row by the caller (`FORM`).
FORM: Final = f"""CASE
    WHEN regexp_full_match(fee_amount, {sql_string(PLAIN_MONEY)}) THEN 'money'
    WHEN regexp_full_match(fee_amount, {sql_string(PLAIN_PERCENT)}) THEN 'percent'
END"""

# The figure, signed: parentheses or `-` make it negative (a rebate). A percentage is its
# number of percent (`0.30%` is 0.30).
FIGURE: Final = f"""CASE form
    WHEN 'money' THEN replace(regexp_extract(fee_amount, {sql_string(MONEY)}), ',', '')
    ELSE regexp_extract(fee_amount, '[0-9]+(?:[.][0-9]+)?')
END"""
AMOUNT: Final = f"""CASE WHEN form IS NOT NULL THEN
    CAST(
        CASE WHEN fee_amount[1] IN ('(', '-') THEN -1 ELSE 1 END
        * CAST({FIGURE} AS DECIMAL(20, 8))
        AS DECIMAL(20, 8)
    )
END"""

CURRENCY: Final = "CASE WHEN form = 'money' THEN 'USD' END"

UNIT: Final = f"""CASE form
    WHEN 'money' THEN {_money_unit()}
    WHEN 'percent' THEN CASE
        WHEN regexp_matches(lower(fee_amount || ' ' || coalesce(fee_basis, '')),
                            {sql_string(PERCENT_OF_VALUE)}) THEN 'percent_of_value'
        ELSE 'other'
    END
END"""
