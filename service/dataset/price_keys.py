"""The version's price keys and the price lines they name (`ingest.price_keys`): the lines a key
names, found for a whole batch of keys by binary search in the memory-mapped sorted keys, and
what the rule reads and an answer prints of each line, read by row from two small files.

The engine looks fills' candidates up here (`service.dataset.pricing`), and the results' and
comparisons' `fee_code` filter the records that carry a code (`ResultsIndex.wanted_codes`).
"""

from pathlib import Path

import numpy as np
import numpy.typing as npt
import pyarrow as pa
import pyarrow.compute as pc

from ingest.layout import (
    PRICE_ANSWERS_FILE,
    PRICE_KEY_SEPARATOR,
    PRICE_KEY_STARTS_FILE,
    PRICE_KEYS_FILE,
    PRICE_LINES_FILE,
    PRICE_ROWS_FILE,
    key_bytes,
)
from service.dataset.mapped import MappedTable, mapped_array


class PriceKeys:
    def __init__(self, directory: Path) -> None:
        self._keys = mapped_array(directory / PRICE_KEYS_FILE)  # each once, sorted
        self._starts = mapped_array(directory / PRICE_KEY_STARTS_FILE)  # and their rows
        self._rows = mapped_array(directory / PRICE_ROWS_FILE)
        # Per row: `position`, `priceable` and the results index's codes (`PRICE_LINE_CODES`).
        self.lines = mapped_array(directory / PRICE_LINES_FILE)
        self._answers = MappedTable(directory / PRICE_ANSWERS_FILE)

    def find(self, keys: pa.Array) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]]:
        """The price lines each key names: for each, the key's place in `keys` and the line's
        row, in the keys' order (a null key names none)."""
        if not len(self._keys):  # a version no record of which a key names
            return np.zeros(0, np.int64), np.zeros(0, np.int64)
        # Only the keys given are encoded and searched (most fills name no tier).
        given = np.flatnonzero(np.asarray(pc.is_valid(keys).to_numpy(zero_copy_only=False)))
        sought = key_bytes(keys.take(pa.array(given)))
        # A key longer than every key written names no record; the rest are looked up as the
        # keys' own type (a longer type would not compare with them).
        known = np.char.str_len(sought) <= self._keys.itemsize
        wanted = np.where(known, sought, b"").astype(self._keys.dtype)
        # Searched in the order of the keys' first bytes, so each search starts near the last
        # one of its venue: sorted whole, 400,000 keys took 322 ms to sort, and unsorted, the
        # searches took 816 ms against 353 ms so (random keys among 555,000).
        order = np.argsort(_heads(wanted))
        place = np.empty(len(wanted), np.int64)
        place[order] = np.searchsorted(self._keys, wanted[order])
        place = np.minimum(place, len(self._keys) - 1)  # past the last key: none is its own
        held = known & (self._keys[place] == wanted)
        first = self._starts[place].astype(np.int64)
        counts = np.where(held, self._starts[place + 1] - first, 0)
        # Each key's run, one after another: its first match, then the next ones.
        at = np.repeat(first - np.cumsum(counts) + counts, counts) + np.arange(counts.sum())
        owner = np.repeat(given, counts)
        return owner, self._rows[at].astype(np.int64)

    def answers(self, rows: npt.NDArray[np.int64], columns: tuple[str, ...]) -> pa.Table:
        """What an answer prints of the lines at `rows` (`PRICE_ANSWER_COLUMNS`), in order."""
        return self._answers.take(rows, columns)

    def coded(self, pairs: list[tuple[str, str]], codes: list[str]) -> npt.NDArray[np.int64]:
        """The positions of the records of any of these venues and fee types that carry any of
        these fee codes, sorted."""
        keys = [
            PRICE_KEY_SEPARATOR.join(("C", venue, fee_type, code))
            for venue, fee_type in pairs
            for code in codes
        ]
        _, rows = self.find(pa.array(keys, pa.string()))
        # The lines are in position order, so their rows sorted give the positions sorted.
        return self.lines["position"][np.unique(rows)].astype(np.int64)


def _heads(keys: npt.NDArray[np.bytes_]) -> npt.NDArray[np.uint64]:
    """Each key's first 8 bytes as a number that sorts as they do (big-endian, NUL-padded)."""
    width = min(keys.itemsize, 8)
    heads = np.zeros((len(keys), 8), np.uint8)
    heads[:, :width] = keys.view(np.uint8).reshape(len(keys), keys.itemsize)[:, :width]
    return heads.view(">u8").ravel().astype(np.uint64)


def key(fills: pa.Table, kind: str | pa.Array, value: pa.Array) -> pa.Array:
    """Each fill's price key of a kind (null where the value is), as the ingest writes them."""
    return pc.binary_join_element_wise(
        kind, fills["exchange"], fills["fee_type"], value, PRICE_KEY_SEPARATOR
    )
