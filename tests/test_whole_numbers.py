"""Every whole number the service reads, read one way (`service.numbers.whole_number`):
query parameters of both families and the FEES_* settings."""

import pytest

from service.numbers import whole_number
from service.settings import Settings, SettingsError


@pytest.mark.parametrize(
    ("text", "low", "high", "expected"),
    [
        ("0", 0, None, 0),
        ("7", 1, 100, 7),
        ("000000100", 1, 100, 100),
        ("999999999", 0, None, 999_999_999),
        ("101", 1, 100, None),  # above the bound
        ("0", 1, None, None),  # below it
        ("", 0, None, None),
        ("+5", 0, None, None),  # no sign
        ("-1", 0, None, None),
        (" 5", 0, None, None),  # no space
        ("5.0", 0, None, None),
        ("1_000", 0, None, None),  # int() would take it
        ("\u0663", 0, None, None),  # an Arabic-Indic three: int() would take it too
        ("1234567890", 0, None, None),  # ten digits
    ],
)
def test_a_whole_number_is_plain_ascii_digits_within_bounds(
    text: str, low: int, high: int | None, expected: int | None
) -> None:
    assert whole_number(text, low, high) == expected


@pytest.mark.parametrize("text", ["+8000", "8_000", "\u0668\u0660\u0660\u0660"])
def test_a_setting_takes_no_other_spelling_of_a_number(text: str) -> None:
    with pytest.raises(SettingsError, match="must be an integer from 1 to 65535"):
        Settings.from_environ({"FEES_PORT": text})
