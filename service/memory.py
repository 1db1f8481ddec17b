"""This process's memory: what it holds by part (`resident`, for `/metrics`), handing freed
memory back to the operating system at the few moments that free a lot, and keeping the
cyclic collector off what lives as long as a version serves (`settle_collector`).

Opening a version builds short-lived arrays and tables (before layout 10, about 100 MB at 10M
records for discovery's prefix sums, which the ingest now writes), and an export streams
hundreds of MB of Arrow batches. Both are freed, but glibc keeps freed memory that lies inside
its heap, and Arrow's mimalloc pool keeps what it had. Measured on the served 10M version
(layout 9): 405 MB once it was ready, 272 MB when this module's `release` followed the open.

DuckDB allocates through its own jemalloc, which keeps freed ("dirty") pages for reuse and
purges them only when DuckDB allocates again. `configure_duckdb_allocator` has it purge them
after a second, on jemalloc's background threads (`SET allocator_background_threads`, set where
the service connects): 10M records, a CSV export of 942k rows left the server at 484-492 MB
as it ended and 419-437 MB two seconds later (make bench), against 567-585 MB that stayed.

Returning memory on every free was measured too (a fixed low mmap threshold for glibc, a decay
of 0 for jemalloc): each made results pages fault in fresh pages and slowed them by a third to a
half, so memory is handed back only after large frees, or after a second.
"""

import ctypes
import ctypes.util
import gc
import logging
import os
import sys
from collections.abc import Callable, MutableMapping
from pathlib import Path
from typing import Final

import pyarrow as pa

log = logging.getLogger(__name__)

# The parts of this process's resident set, as Linux's /proc status names them: anonymous
# memory is the process's own (its heap, the response cache, Arrow's and DuckDB's buffers) and
# bounds what a replica needs; file-backed pages are the mapped dataset files' pages (and the
# libraries'), which the kernel drops and reads again under memory pressure.
RESIDENT_PARTS: Final = {"anonymous": "RssAnon", "file": "RssFile", "shared": "RssShmem"}
STATUS: Final = Path("/proc/self/status")

DUCKDB_ALLOCATOR_ENV = "DUCKDB_JE_MALLOC_CONF"
DUCKDB_ALLOCATOR_CONF = "dirty_decay_ms:1000,muzzy_decay_ms:0"


def _malloc_trim() -> Callable[[int], int] | None:
    """glibc's `malloc_trim`, or None where the C library has none (musl, macOS)."""
    try:
        trim: Callable[[int], int] = ctypes.CDLL(ctypes.util.find_library("c")).malloc_trim
    except (OSError, AttributeError):
        return None
    return trim


_TRIM = _malloc_trim()


def release() -> None:
    """Give freed heap pages back to the system (a few ms; call after large frees only)."""
    pa.default_memory_pool().release_unused()
    if _TRIM is not None:
        _TRIM(0)


def settle_collector() -> None:
    """Collect, then freeze what survives (`gc.freeze`), once a version is in place: the
    version's objects and the service's own live as long as it serves, and every full
    collection walked them again, a pause for every request in flight. At 1M records, frozen
    after load, a cold request's p99 went from 55 to 27 ms (`docs/benchmarks.md`, #40 part 4).
    The freeze before is undone first, so what a replaced version left in cycles is collected
    here (it is freed by its reference counts otherwise, frozen or not)."""
    gc.unfreeze()
    gc.collect()
    gc.freeze()


def resident() -> dict[str, int]:
    """This process's resident bytes by part (`RESIDENT_PARTS`); none where the system has no
    /proc status (not Linux)."""
    try:
        text = STATUS.read_text(encoding="ascii")
    except OSError:
        return {}
    fields = dict(line.split(":", 1) for line in text.splitlines() if ":" in line)
    return {
        part: int(fields[name].split()[0]) * 1024  # the status gives kB
        for part, name in RESIDENT_PARTS.items()
        if name in fields
    }


def configure_duckdb_allocator(environ: MutableMapping[str, str] = os.environ) -> None:
    """Set DuckDB's jemalloc options (unless the operator set their own). jemalloc reads them
    once, when DuckDB loads, so this must run before anything imports duckdb."""
    if "duckdb" in sys.modules:
        log.warning("duckdb is already loaded: %s has no effect", DUCKDB_ALLOCATOR_ENV)
    environ.setdefault(DUCKDB_ALLOCATOR_ENV, DUCKDB_ALLOCATOR_CONF)
