"""Where the ingest's storage failures become one-line errors: a full disk or an unwritable data
directory, met by Python, pyarrow or DuckDB, and an S3 request that failed."""

import errno
import os
import re
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import duckdb

from ingest.errors import StorageFailed
from ingest.storage import s3_errors

# Causes the person running the ingest fixes on the machine (space, permissions, a read-only
# mount), not in the data or the code: they get one line, not a traceback. Other OS errors are
# unexpected and keep theirs.
STORAGE_ERRNOS = (errno.ENOSPC, errno.EDQUOT, errno.EROFS, errno.EACCES, errno.EPERM)
# DuckDB reports an OS error only as text, naming the file in quotes (escaped when the message
# is nested JSON): `Could not write file "<path>": No space left on device`.
QUOTED_PATH = re.compile(r'\\?"([^"\\]*/[^"\\]*)\\?"')


@contextmanager
def storage_errors(data_dir: Path, location: Path | str) -> Iterator[None]:
    """The one place where a full disk or an unwritable data directory, whether met by Python,
    pyarrow or DuckDB, becomes an `IngestError` that names the path and the cause; so does an
    S3 request that failed (no such bucket, access denied, no connection), naming the URL."""
    try:
        yield
    except s3_errors() as error:  # evaluated only as an error passes: botocore loads lazily
        raise StorageFailed(location, str(error).splitlines()[0]) from error
    except (OSError, duckdb.Error) as error:
        failure = _storage_failure(error, data_dir)
        if failure is None:
            raise
        raise failure from error


def _storage_failure(error: OSError | duckdb.Error, data_dir: Path) -> StorageFailed | None:
    if isinstance(error, OSError):
        if error.errno not in STORAGE_ERRNOS:
            return None
        # The second name is what symlink() and rename() were creating (the first is the link's
        # target, or the source). pyarrow names no file: the data directory is the best guess.
        path = error.filename2 or error.filename or data_dir
        return StorageFailed(path, os.strerror(error.errno))
    cause = storage_cause(str(error))
    if cause is None:
        return None
    quoted = QUOTED_PATH.search(str(error))
    return StorageFailed(quoted.group(1) if quoted else data_dir, cause)


def storage_cause(message: str) -> str | None:
    """The storage cause a DuckDB message reports, as the C library words it (DuckDB's text)."""
    return next((os.strerror(n) for n in STORAGE_ERRNOS if os.strerror(n) in message), None)
