"""Stops DuckDB queries that run too long: one thread watches every query in flight and
interrupts any that passes its deadline (DuckDB has no time limit of its own).

A query is watched only while DuckDB works on it: an export re-arms its deadline for each batch
it reads, so a slow client never counts against it. A thread and a lock per query would cost
more than the answers they guard (a cached page is answered in tens of microseconds); here a
query costs two dict operations, and a deadline is met to within `TICK_SECONDS`.
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
    """The thread runs only while something is watched, so a dataset version's watchdog ends
    with the version's last query."""

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds
        self._watched: dict[int, tuple[float, Interruptible]] = {}
        self._tickets = itertools.count()
        self._running = False
        self._lock = threading.Lock()  # `_running` and the emptiness of `_watched` change together

    @contextmanager
    def watch(self, cursor: Interruptible) -> Iterator[None]:
        """Interrupt `cursor` if the block has not finished within `seconds`."""
        ticket = next(self._tickets)
        with self._lock:
            self._watched[ticket] = (time.monotonic() + self.seconds, cursor)
            if not self._running:
                self._running = True
                threading.Thread(target=self._run, name="watchdog", daemon=True).start()
        try:
            yield
        finally:
            del self._watched[ticket]

    def _run(self) -> None:
        while True:
            time.sleep(TICK_SECONDS)
            with self._lock:
                if not self._watched:
                    self._running = False
                    return
            now = time.monotonic()
            for deadline, cursor in list(self._watched.values()):
                if deadline <= now:
                    cursor.interrupt()
