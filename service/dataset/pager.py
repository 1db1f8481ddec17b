"""One pager for every ordered, filtered, paged answer: the results (`index.py`) and the changes
(`changes.py`) each say which positions stand at places `first` to `last` of their answer
(`Ordering`); a page and a download's chunks are cut here, the same way for both."""

from collections.abc import Iterator
from typing import Protocol

import numpy as np
import numpy.typing as npt

Array = npt.NDArray[np.int64]


class Ordering(Protocol):
    """The matches of one selection, in the answer's order, addressable by place."""

    @property
    def total(self) -> int:
        """How many there are."""
        ...

    def places(self, first: int, last: int) -> Array:
        """The positions at places `first` to `last` (0-based, both inclusive, within
        `total`), in the answer's order."""
        ...


def page(ordering: Ordering, offset: int, size: int) -> tuple[int, list[int]]:
    """How many match, and the positions of the page of `size` from place `offset` (none when
    it starts past the last)."""
    total = ordering.total
    if offset >= total:
        return total, []
    return total, ordering.places(offset, min(offset + size, total) - 1).tolist()


def chunks(ordering: Ordering, size: int) -> Iterator[Array]:
    """Every position in the answer's order, `size` at a time."""
    total = ordering.total
    for first in range(0, total, size):
        yield ordering.places(first, min(first + size, total) - 1)
