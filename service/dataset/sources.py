"""Where the watcher finds the current version: the data directory's `current`, or, for an S3
data location, a local copy of the version S3's `current` object names.

A version is downloaded whole into `Settings.cache_dir` under a temporary name and renamed into
place only then, so a directory named for a version in the cache is always complete. One
process of the machine downloads it, holding a lock file named for it; the others sharing the
cache (a replica's workers) wait and open its copy. Where locks do not hold (a cache on a
network file system), processes race harmlessly: the rename of the loser fails and its copy is
dropped. The cache keeps the version being served and the one before it (requests may still be
on it).
"""

import fcntl
import logging
import shutil
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from ingest.layout import current_version_dir
from ingest.storage import S3Storage
from service.settings import Settings

log = logging.getLogger(__name__)

CACHE_KEEP = 2
DOWNLOAD_PREFIX = ".download-"
LOCK_PREFIX = ".lock-"
S3_MIN_POLL_SECONDS = 1.0  # each look at S3 is a request (and a bill)


@dataclass
class LocalSource:
    data_dir: Path
    poll_seconds: float

    def current(self) -> Path | None:
        return current_version_dir(self.data_dir)

    def fetch(self, target: Path) -> Path:
        return target

    def trim(self, keep: set[Path]) -> None:
        """Nothing to do: the ingest prunes the data directory."""


class S3Source:
    def __init__(self, settings: Settings) -> None:
        self._storage = S3Storage(str(settings.data_dir), settings.s3_endpoint_url)
        self._cache = settings.cache_dir
        self.poll_seconds = max(settings.version_poll_seconds, S3_MIN_POLL_SECONDS)

    def current(self) -> Path | None:
        """Where the version `current` names is (or will be, once fetched) in the cache."""
        version_id = self._storage.current_version()
        return self._cache / version_id if version_id else None

    def fetch(self, target: Path) -> Path:
        """`target`, downloaded whole first if the cache does not hold it yet."""
        if target.is_dir():
            return target
        self._cache.mkdir(parents=True, exist_ok=True)
        # Each of a replica's workers downloading it too multiplied the work: under load, 10-30 s
        # a version (`make cluster-soak`, 2 workers a replica) against 2.3 s for one download.
        with _exclusive(self._cache / f"{LOCK_PREFIX}{target.name}"):
            if target.is_dir():  # downloaded while this process waited
                return target
            partial = Path(tempfile.mkdtemp(prefix=DOWNLOAD_PREFIX + target.name, dir=self._cache))
            started = time.perf_counter()
            try:
                self._storage.download(target.name, partial)
                partial.rename(target)
                log.info("downloaded dataset version %s in %.2f s (%d MB)", target.name,
                         time.perf_counter() - started, _megabytes(target))  # fmt: skip
            except OSError:
                if not target.is_dir():  # not another process's copy, renamed first
                    raise
            finally:
                shutil.rmtree(partial, ignore_errors=True)
        return target

    def trim(self, keep: set[Path]) -> None:
        """Remove cached versions but the newest `CACHE_KEEP` and those in `keep`."""
        cached = sorted(
            (path for path in self._cache.iterdir() if not path.name.startswith(".")),
            key=lambda path: path.name,
            reverse=True,
        )
        for path in cached[CACHE_KEEP:]:
            if path not in keep:
                shutil.rmtree(path, ignore_errors=True)
        # Version ids sort by time: a lock older than every version kept guards nothing now.
        oldest = min((path.name for path in [*cached[:CACHE_KEEP], *keep]), default="")
        for lock in self._cache.glob(LOCK_PREFIX + "*"):
            if lock.name.removeprefix(LOCK_PREFIX) < oldest:
                lock.unlink(missing_ok=True)


def _megabytes(directory: Path) -> int:
    return sum(path.stat().st_size for path in directory.rglob("*") if path.is_file()) // 2**20


@contextmanager
def _exclusive(path: Path) -> Iterator[None]:
    """Held by one holder of the machine at a time (an advisory lock on `path`)."""
    with open(path, "a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


Source = LocalSource | S3Source


def open_source(settings: Settings) -> Source:
    if isinstance(settings.data_dir, Path):
        return LocalSource(settings.data_dir, settings.version_poll_seconds)
    return S3Source(settings)
