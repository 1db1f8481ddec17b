"""The version requests are answered from, and the thread that swaps it live.

`VersionWatcher` notices a new `current` pointer (in a directory or on S3: `sources`), opens
that version beside the old one and swaps a single reference, so requests in flight finish on
the version they started with. A version that cannot be opened is refused and reported by the
readiness probe; the one before it goes on serving.
"""

import logging
import threading
import time
from pathlib import Path

from service import memory
from service.dataset.sources import open_source
from service.dataset.version import DamagedVersion, Dataset
from service.settings import Settings

log = logging.getLogger(__name__)


class DatasetHolder:
    """The version requests are answered from; `current` is read once per request. `opening`
    is set while a new version is being opened beside it."""

    def __init__(self) -> None:
        self.current: Dataset | None = None
        self.opening = threading.Event()


class VersionWatcher:
    """Polls the `current` pointer and opens a newly published version in the background."""

    def __init__(self, holder: DatasetHolder, settings: Settings) -> None:
        self._holder = holder
        self._settings = settings
        self._source = open_source(settings)
        self._stop = threading.Event()
        self._failed: Path | None = None
        self.refused: str | None = None  # why the newest published version was not opened
        self._thread = threading.Thread(target=self._run, name="version-watcher", daemon=True)

    def load_now(self) -> None:
        """Open the current version, if any (at start-up, before serving)."""
        target = self._source.current()
        if target is None:
            log.warning("no published version under %s", self._settings.data_dir)
            return
        self._open(target)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=5)

    def _refuse(self, target: Path, reason: str) -> None:
        self._failed, self.refused = target, reason

    def _run(self) -> None:
        while not self._stop.wait(self._source.poll_seconds):
            try:
                target = self._source.current()
            except Exception:  # S3 out of reach, say: keep serving, look again next time
                log.exception("could not read the current version pointer")
                continue
            loaded = self._holder.current
            if target is None or target == self._failed:
                continue
            if loaded is None or target != loaded.version_dir:
                self._open(target)

    def _open(self, target: Path) -> None:
        started = time.perf_counter()
        self._holder.opening.set()
        try:
            dataset = Dataset(self._source.fetch(target), self._settings)
        except DamagedVersion as error:
            self._refuse(target, str(error))
            log.error("refused dataset version %s: %s", target.name, error)
            return
        except Exception as error:
            # A version that cannot be opened must not take the service down: keep serving
            # the previous one and do not retry this target until `current` moves again.
            self._refuse(target, f"{target.name} could not be opened: {error}")
            log.exception("could not open dataset version %s; keeping the previous one", target)
            return
        finally:
            self._holder.opening.clear()
        previous, self._holder.current = self._holder.current, dataset
        self._failed, self.refused = None, None
        in_use = {dataset.version_dir, *([previous.version_dir] if previous else [])}
        del previous  # the replaced version: requests in flight may still hold it
        self._source.trim(in_use)
        memory.settle_collector()
        memory.release()  # what the open built and dropped (and the version it replaced)
        log.info(
            "serving dataset version %s (opened in %.2f s)",
            dataset.version_id,
            time.perf_counter() - started,
        )
