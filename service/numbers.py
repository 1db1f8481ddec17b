"""Every whole number the service reads, read one way: query parameters of both families and
the `FEES_*` settings. A leaf: it imports nothing of the service."""

import re

# A whole number as the service reads one: ASCII digits only (no sign, space or separator), at
# most nine of them, so every value fits and `int` is never handed a huge string.
WHOLE = re.compile(r"[0-9]{1,9}")
# The largest it reads: a parameter declared with this maximum has no bound of its own.
LARGEST_WHOLE = 999_999_999


def whole_number(text: str, low: int, high: int | None = None) -> int | None:
    """The number `text` writes, when it is a whole number from `low` to `high` (no upper bound
    when `high` is None); None otherwise."""
    if not WHOLE.fullmatch(text):
        return None
    number = int(text)
    return number if number >= low and (high is None or number <= high) else None
