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


def test_a_memo_never_holds_more_than_its_bound_and_starts_afresh_when_full() -> None:
    memo: dict[int, int] = {}
    for number in range(10):
        remembered.keep(memo, number, number * number, 4)
        assert len(memo) <= 4
    assert memo == {8: 64, 9: 81}  # forgotten at the ninth, then two kept
