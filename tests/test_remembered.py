"""A memo no caller can make large (`service.remembered`): only short arguments' answers are
kept."""

from service import remembered


def test_only_a_short_arguments_answer_is_remembered() -> None:
    asked: list[str] = []

    @remembered.for_short(4)
    def length(text: str) -> int:
        asked.append(text)
        return len(text)

    assert [length("abc"), length("abc"), length("abcdefgh"), length("abcdefgh")] == [3, 3, 8, 8]
    assert asked == ["abc", "abcdefgh", "abcdefgh"]  # the long one worked out each time
