"""The records of one fee line, found by its id in the version's line index (written by
`ingest.serving`; `ingest.layout.LINE_FILES` says what each array holds).

The lines' ids are sorted, as two 64-bit halves, so a line is two binary searches away, and
its records' positions are one run of `line_order`, in effective order. The arrays are
memory-mapped: a lookup reads a few pages of them.
"""

import re
from pathlib import Path
from typing import Any, Final

import numpy as np
import numpy.typing as npt

from ingest.layout import LINE_FILES
from service.dataset.mapped import mapped_array

# A line id as the answers print it (`ingest.layout.LINE_TEXT`): no other spelling names one.
LINE_ID: Final = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")
LOW_BITS: Final = (1 << 64) - 1


class LineIndex:
    def __init__(self, directory: Path) -> None:
        arrays: dict[str, npt.NDArray[Any]] = {
            name: mapped_array(directory / f"{name}.npy") for name in LINE_FILES
        }
        self._order = arrays["line_order"]
        self._hi, self._lo = arrays["lines_hi"], arrays["lines_lo"]
        self._bounds = arrays["line_bounds"]
        self.size = len(self._order)  # records, as many as the version holds

    def positions(self, line_id: str) -> list[int] | None:
        """The positions of the line's records in effective order, or None: no such line (or
        not a line id at all)."""
        if not LINE_ID.fullmatch(line_id):
            return None
        number = int(line_id.replace("-", ""), 16)
        hi, lo = np.uint64(number >> 64), np.uint64(number & LOW_BITS)
        first = int(np.searchsorted(self._hi, hi, side="left"))
        last = int(np.searchsorted(self._hi, hi, side="right"))
        line_place = first + int(np.searchsorted(self._lo[first:last], lo, side="left"))
        if line_place == last or self._lo[line_place] != lo:
            return None
        begin, end = int(self._bounds[line_place]), int(self._bounds[line_place + 1])
        return [int(position) for position in self._order[begin:end]]
