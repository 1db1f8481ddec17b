"""Answers remembered for short arguments: a memo no caller can make large.

`functools.lru_cache` bounds how many answers it keeps, not how large their arguments are: a
request can carry 8 KB paths and parameters, and 4,096 of those would be held for as long as
the process runs. Here only an argument of at most a given length is remembered; a longer one
is answered afresh each time.
"""

import functools
from collections.abc import Callable, Hashable
from typing import Final, TypeVar

ANSWERS: Final = 4096  # the answers each memo keeps, the least recently used out first
# The longest path a memo keeps, here and in the service's own memos of paths (the dispatch
# table's, the access log's line templates): 4,096 of them hold at most about 1 MB.
PATH_CHARS: Final = 256
Answer = TypeVar("Answer")
Key = TypeVar("Key", bound=Hashable)


def keep(memo: dict[Key, Answer], key: Key, answer: Answer, most: int) -> None:
    """Keep an answer in a memo of at most `most`, forgetting them all first when it is full:
    the service's own memos on the hot path (paths resolved, keys, raw requests, log line
    templates), where a least-recently-used order would cost every hit its bookkeeping and a
    full memo is rare and cheap to fill again."""
    if len(memo) >= most:
        memo.clear()
    memo[key] = answer


def for_short(longest: int) -> Callable[[Callable[[str], Answer]], Callable[[str], Answer]]:
    """Remember a function's answers for arguments of at most `longest` characters."""

    def remembering(function: Callable[[str], Answer]) -> Callable[[str], Answer]:
        remembered = functools.lru_cache(maxsize=ANSWERS)(function)

        @functools.wraps(function)
        def answer(text: str) -> Answer:
            return remembered(text) if len(text) <= longest else function(text)

        return answer

    return remembering
