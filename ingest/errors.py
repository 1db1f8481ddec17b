"""Why an ingest can stop. Every one means: nothing was published, `current` is unchanged.

IngestError
 +-- MalformedFile        a raw file cannot be parsed at all (header, encoding, ragged row)
 +-- RowsRejected         --strict and at least one row broke a rule
 +-- IngestLocked         another ingest holds the data directory's lock
 +-- StorageFailed        the disk is full, or a path is read-only or forbidden

A broken venue registry stops an ingest too (`ingest.registry.InvalidRegistry`, kept beside the
registry's reader, which is part of the dataset contract).
"""

import os


class IngestError(Exception):
    """An ingest that stopped on purpose, with a message meant for the person running it."""


class MalformedFile(IngestError):
    def __init__(self, path: str, line: int | None, problem: str) -> None:
        where = f"{path}, line {line}" if line is not None else path
        super().__init__(f"malformed file {where}: {problem}")
        self.path = path
        self.line = line


class RowsRejected(IngestError):
    pass


class IngestLocked(IngestError):
    pass


class StorageFailed(IngestError):
    def __init__(self, path: str | os.PathLike[str], cause: str) -> None:
        super().__init__(f"{os.fspath(path)}: {cause}; nothing published")
        self.path = os.fspath(path)
        self.cause = cause
