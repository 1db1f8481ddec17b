"""Versions on disk and the atomic switch of `current`.

    <data dir>/
        current -> versions/<version id>       (a symlink, replaced atomically)
        versions/<version id>/
            manifest.json  fees/exchange=<code>/*.parquet  exchanges.parquet  rejects.csv
            serving.duckdb  index/                    (the service's copy: ingest.serving)
            rollups/                                  (discovery's counts: ingest.rollups)
        versions/.staging-<version id>/         (being built; never read)
        versions/.pruning-<version id>/         (being deleted; never read)
        .ingest.lock

A version is built under a staging name, flushed to disk, renamed into place, and only then
does `current` move to it: a crash at any point leaves the previous version current, complete
and readable. A pruned version is renamed out of sight before it is deleted, so every
`versions/<version id>` is whole. What a killed run leaves (dot-named entries of `versions/`,
a `.current.*` pointer) is removed by the next ingest as soon as it holds the lock.
"""

import fcntl
import json
import os
import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from ingest.errors import IngestLocked
from ingest.layout import CURRENT, MANIFEST, VERSIONS, current_version_dir
from ingest.storage import LocalStorage, Storage

STAGING_PREFIX = ".staging-"
PRUNING_PREFIX = ".pruning-"
POINTER_PREFIX = f".{CURRENT}."


@contextmanager
def ingest_lock(data_dir: Path) -> Iterator[None]:
    """One ingest per data directory at a time; the lock dies with its process."""
    data_dir.mkdir(parents=True, exist_ok=True)
    with (data_dir / ".ingest.lock").open("a") as handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise IngestLocked(f"another ingest is running on {data_dir}") from None
        # Cleared here, not when a version is built: an ingest killed after its switch leaves
        # its staging directory, and the rerun finds nothing changed and builds nothing.
        _clear_leftovers(data_dir)
        yield


def _clear_leftovers(data_dir: Path) -> None:
    """Remove what killed runs left; safe only under the lock, when no run owns any of it."""
    for pointer in data_dir.glob(POINTER_PREFIX + "*"):
        pointer.unlink()
    versions = data_dir / VERSIONS
    if versions.is_dir():
        for stale in versions.glob(".*"):
            shutil.rmtree(stale)


def staging_dir(data_dir: Path, version_id: str) -> Path:
    """A fresh directory to build a version in."""
    versions = data_dir / VERSIONS
    versions.mkdir(parents=True, exist_ok=True)
    path = versions / (STAGING_PREFIX + version_id)
    path.mkdir()
    return path


def write_manifest(version_dir: Path, manifest: dict[str, Any]) -> None:
    text = json.dumps(manifest, indent=2, sort_keys=True) + "\n"
    (version_dir / MANIFEST).write_text(text, encoding="utf-8")


def publish(data_dir: Path, staged: Path, version_id: str) -> Path:
    """Make the staged version durable, then point `current` at it in one rename."""
    _fsync_tree(staged)
    final = data_dir / VERSIONS / version_id
    os.rename(staged, final)
    _fsync_dir(final.parent)
    try:
        _point_current(data_dir, version_id)
    except OSError:  # raised by the symlink or the replace, so `current` has not moved
        # It never became current: back under the staging name, for the caller to clear, so a
        # failed ingest leaves no version behind.
        os.rename(final, staged)
        raise
    _fsync_dir(data_dir)
    return final


def publish_to(storage: Storage, staged: Path, version_id: str) -> Path | str:
    """Publish the staged version where `storage` keeps versions: on local disk by the protocol
    above, on S3 by uploading it and then its pointer (`ingest.storage.S3Storage.publish`)."""
    if isinstance(storage, LocalStorage):
        return publish(storage.root, staged, version_id)
    return storage.publish(staged, version_id)


def prune_in(storage: Storage, *, keep: int) -> list[str]:
    """Delete all but the newest `keep` versions of `storage`; never the current one."""
    if isinstance(storage, LocalStorage):
        return prune(storage.root, keep=keep)
    return storage.prune(keep=keep)


def _point_current(data_dir: Path, version_id: str) -> None:
    """Replace `current` in one rename, so a reader sees the old target or the new, never none."""
    pointer = data_dir / f"{POINTER_PREFIX}{version_id}"
    os.symlink(Path(VERSIONS) / version_id, pointer)
    os.replace(pointer, data_dir / CURRENT)


def prune(data_dir: Path, *, keep: int) -> list[str]:
    """Delete all but the newest `keep` versions; never the current one. Returns the deleted."""
    current = current_version_dir(data_dir)
    versions = sorted(
        (path for path in (data_dir / VERSIONS).iterdir() if _is_version(path)),
        key=lambda path: path.name,
        reverse=True,
    )
    doomed = [path for path in versions[keep:] if path != current]
    for path in doomed:
        # Out of sight in one rename first: a run killed while deleting leaves a dot-named
        # remnant for the next ingest to clear, never a half version under a version's name.
        hidden = path.with_name(PRUNING_PREFIX + path.name)
        os.rename(path, hidden)
        # Pruning is housekeeping, never a reason to fail a run (it follows the switch): what
        # will not go stays hidden, and the next ingest's clearing retries it before it builds.
        shutil.rmtree(hidden, ignore_errors=True)
    return [path.name for path in doomed]


def _is_version(path: Path) -> bool:
    return path.is_dir() and not path.name.startswith(".")


def _fsync_tree(root: Path) -> None:
    for directory, _, names in os.walk(root):
        for name in names:
            fd = os.open(os.path.join(directory, name), os.O_RDONLY)
            try:
                os.fsync(fd)
            finally:
                os.close(fd)
        _fsync_dir(Path(directory))


def _fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
