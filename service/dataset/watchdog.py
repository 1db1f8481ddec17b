"""Stops DuckDB queries that run too long: one thread per process watches every query in flight
and interrupts any that passes its deadline (DuckDB has no time limit of its own).

A query is watched only while DuckDB works on it: an export re-arms its deadline for each batch
it reads, so a slow client never counts against it. Each entry carries its own deadline, so the
queries of every dataset version share `WATCHDOG`; its thread starts with the first query and
sleeps whenever nothing is watched. A thread per query, or per burst of queries, would cost more
than the answers it guards (a cached page is answered in tens of microseconds); here a query
costs a lock and two dict operations, and a deadline is met to within `TICK_SECONDS`.
"""

import itertools
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Protocol

TICK_SECONDS = 0.02


class Interruptible(Protocol):
    def interrupt(self) -> None: ...


class Watchdog:
    def __init__(self) -> None:
        self._watched: dict[int, tuple[float, Interruptible]] = {}
        self._tickets = itertools.count()
        self._busy = threading.Event()  # set while anything is watched
        self._lock = threading.Lock()  # `_busy` and the emptiness of `_watched` change together
        self._thread: threading.Thread | None = None

    @contextmanager
    def watch(self, cursor: Interruptible, seconds: float) -> Iterator[None]:
        """Interrupt `cursor` if the block has not finished within `seconds`."""
        ticket = next(self._tickets)
        with self._lock:
            self._watched[ticket] = (time.monotonic() + seconds, cursor)
            if not self._busy.is_set():
                self._busy.set()
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="watchdog", daemon=True)
                self._thread.start()
        try:
            yield
        finally:
            del self._watched[ticket]

    def _run(self) -> None:
        while self._busy.wait():
            time.sleep(TICK_SECONDS)
            now = time.monotonic()
            for deadline, cursor in list(self._watched.values()):
                if deadline <= now:
                    cursor.interrupt()
            with self._lock:
                if not self._watched:
                    self._busy.clear()


WATCHDOG = Watchdog()
