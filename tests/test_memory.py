"""Handing freed memory back to the system (`service.memory`)."""

import platform
import subprocess
import sys
from pathlib import Path

import pytest

from ingest.pipeline import IngestResult
from service import memory
from tools.bench import SIZING

# In a fresh interpreter, so the heap is this scenario's alone (the suite's servers and their
# threads allocate beside it): 2,000 heap blocks of 64 KB, each followed by a small block that
# stays, so once the large ones are freed they are holes inside the heap, which glibc keeps
# resident by itself. Prints the MB the release handed back.
FRAGMENTED_HEAP = """
import ctypes, ctypes.util
from pathlib import Path
from service import memory

def anonymous_mb():
    status = Path("/proc/self/status").read_text().splitlines()
    return next(int(line.split()[1]) / 1024 for line in status if line.startswith("RssAnon:"))

libc = ctypes.CDLL(ctypes.util.find_library("c"))
libc.malloc.restype = ctypes.c_void_p
libc.free.argtypes = [ctypes.c_void_p]
libc.memset.argtypes = [ctypes.c_void_p, ctypes.c_int, ctypes.c_size_t]
blocks, kept = [], []
for _ in range(2000):
    blocks.append(libc.malloc(65536))
    libc.memset(blocks[-1], 1, 65536)  # touched, so resident
    kept.append(libc.malloc(64))
for block in blocks:
    libc.free(block)
held = anonymous_mb()
memory.release()
print(held - anonymous_mb())
"""


@pytest.mark.skipif(platform.libc_ver()[0] != "glibc", reason="malloc_trim is glibc's")
def test_release_hands_back_freed_heap_that_glibc_keeps() -> None:
    ran = subprocess.run(
        [sys.executable, "-c", FRAGMENTED_HEAP], capture_output=True, text=True, check=True
    )
    assert float(ran.stdout) > 100  # of the 125 MB freed


def test_duckdb_allocator_options_are_a_default_the_operator_can_override() -> None:
    unset: dict[str, str] = {}
    memory.configure_duckdb_allocator(unset)
    assert unset == {memory.DUCKDB_ALLOCATOR_ENV: memory.DUCKDB_ALLOCATOR_CONF}
    chosen = {memory.DUCKDB_ALLOCATOR_ENV: "dirty_decay_ms:5000"}
    memory.configure_duckdb_allocator(chosen)
    assert chosen == {memory.DUCKDB_ALLOCATOR_ENV: "dirty_decay_ms:5000"}


def test_the_deploy_page_states_the_sizing_formula_make_bench_checks() -> None:
    """`docs/deploy.md` tells a deployer the formula `make bench` holds each size to."""
    page = (Path(__file__).parent.parent / "docs" / "deploy.md").read_text(encoding="utf-8")
    assert SIZING.formula() in " ".join(page.split())


# A version opened, then opened again in its place, in a fresh interpreter (the collector's
# freeze is the process's): prints whether the collector was frozen once the first was in
# place, whether the replaced one was freed, and whether the second serves.
SETTLED = """
import gc, sys, weakref
from pathlib import Path
from service.dataset.watcher import DatasetHolder, VersionWatcher
from service.settings import Settings

holder = DatasetHolder()
watcher = VersionWatcher(holder, Settings(data_dir=Path(sys.argv[1])))
watcher.load_now()
frozen = gc.get_freeze_count()
first = weakref.ref(holder.current)
watcher.load_now()
print(frozen > 0, first() is None, holder.current is not None)
"""


def test_a_version_in_place_is_frozen_and_the_one_it_replaced_is_freed(
    fixture_version: IngestResult,
) -> None:
    data_dir = str(fixture_version.version_dir.parent.parent)
    printed = subprocess.run(
        [sys.executable, "-c", SETTLED, data_dir], capture_output=True, text=True, check=True
    ).stdout
    assert printed.split() == ["True", "True", "True"]
