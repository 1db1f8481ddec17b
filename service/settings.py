"""Settings, read once from `FEES_*` environment variables and passed explicitly from there.

`Settings.from_environ` checks every value it reads and raises one `SettingsError` for the
first it cannot use, naming the variable, the value and what is allowed; the command line
prints it as one line. The checks that look at files (`check_data_dir` here, and
`service.accounts.check_accounts_file`) are separate: only the commands that use those files
make them. A leaf of the service: it imports nothing of it but `service.numbers`.
"""

import math
import os
import re
import tempfile
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from ingest.layout import DEFAULT_DATA_DIR
from ingest.storage import InvalidSetting, endpoint_url, has_valid_port, is_s3, location, setting
from service.numbers import whole_number

# A setting that cannot be used; the message says which, its value and what is allowed. The
# data commands read theirs the same way, and raise the same error (`ingest.storage.setting`).
SettingsError = InvalidSetting


@dataclass(frozen=True, kw_only=True)
class Settings:
    host: str = "127.0.0.1"  # `fees serve`'s address; loopback unless a proxy needs more
    port: int = 8000
    workers: int = 1  # `fees serve`'s processes, each with its own connection and cache
    data_dir: Path | str = DEFAULT_DATA_DIR  # a directory, or an s3://bucket/prefix URL
    accounts_file: Path = Path("data/accounts.json")
    duckdb_memory: str = "1GB"
    duckdb_threads: int = 2
    version_poll_seconds: float = 0.1
    cache_mb: int = 64  # response cache bound (bodies held); 0 turns it off
    log_level: str = "info"  # "info" and "debug" write an access line per request
    access_log: str = "-"  # where the access lines go: "-" standard error, else a file
    query_timeout_seconds: float = 5.0  # a query running longer is interrupted (503)
    redis_url: str | None = None  # rate-limit buckets shared by processes; None: per process
    max_age_seconds: int = 60  # Cache-Control: private, max-age of discovery and results answers
    cors_origins: tuple[str, ...] = ()  # origins a browser may call from; none: CORS off
    docs_key: str | None = None  # the key /docs and /explore start with; None: none
    s3_endpoint_url: str | None = None  # S3's own endpoint unless set (MinIO, moto, ...)
    # Where a service reading from S3 keeps its copies of versions.
    cache_dir: Path = Path(tempfile.gettempdir()) / "fees-cache"

    def __post_init__(self) -> None:
        # Only an S3 URL stays text; any other location is a path.
        if not is_s3(self.data_dir):
            object.__setattr__(self, "data_dir", Path(self.data_dir))

    @classmethod
    def from_environ(cls, environ: Mapping[str, str] | None = None) -> "Settings":
        """The defaults, overridden by every `FEES_*` variable that is set and not empty."""
        env = os.environ if environ is None else environ
        values: dict[str, Any] = {}
        for field, (variable, parse) in VARIABLES.items():
            value = setting(env, variable, parse)
            if value is not None:
                values[field] = value
        return cls(**values)

    def check_data_dir(self) -> None:
        """What `fees serve` needs: the directory versions are published to (none need be
        published yet: the service answers 503 until one is). An S3 URL is checked when the
        service first reads it."""
        if isinstance(self.data_dir, Path) and not self.data_dir.is_dir():
            raise SettingsError(
                f"FEES_DATA_DIR={str(self.data_dir)!r}: must be an existing directory "
                "(`fees ingest --data DIR` makes one and publishes a version into it)"
            )


def integer(*, minimum: int, maximum: int | None = None) -> Callable[[str], int]:
    allowed = f"from {minimum} to {maximum}" if maximum is not None else f">= {minimum}"

    def parse(text: str) -> int:
        value = whole_number(text, minimum, maximum)
        if value is None:
            raise ValueError(f"must be an integer {allowed}")
        return value

    return parse


def seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not (math.isfinite(value) and value > 0):
        raise ValueError("must be a number of seconds > 0 (such as 0.5 or 5)")
    return value


# What DuckDB's `memory_limit` takes, less its looser forms (bare numbers are an error there).
MEMORY_PATTERN = re.compile(r"(\d+(?:\.\d+)?)\s*(?:[KMGT]i?B|%)", re.IGNORECASE)


def memory_size(text: str) -> str:
    match = MEMORY_PATTERN.fullmatch(text)
    if match is None or float(match[1]) == 0:
        raise ValueError(
            "must be a size above 0 with a unit, KB MB GB TB (powers of 1000) or KiB MiB GiB "
            "TiB (of 1024), such as 512MB or 1GB, or a share of memory such as 50%"
        )
    return text


LOG_LEVELS = ("critical", "error", "warning", "info", "debug")
VERBOSE = ("info", "debug")  # the levels that write the access lines


def log_level(text: str) -> str:
    if text.lower() not in LOG_LEVELS:
        raise ValueError(f"must be one of {', '.join(LOG_LEVELS)}")
    return text.lower()


def redis_url(text: str) -> str:
    parts = urlsplit(text)
    network = parts.scheme in ("redis", "rediss") and bool(parts.hostname)
    if not (
        (network and has_valid_port(text) and re.fullmatch(r"/?\d*", parts.path))
        or (parts.scheme == "unix" and parts.path not in ("", "/"))
    ):
        raise ValueError(
            "must be redis://[:password@]host[:port][/db], rediss://... (TLS) or "
            "unix:///path/to/redis.sock"
        )
    return text


# An origin as browsers send it: scheme, host and an optional port; no path, no slash at the end.
ORIGIN_PATTERN = re.compile(r"https?://(?:[A-Za-z0-9-]+(?:\.[A-Za-z0-9-]+)*|\[[0-9A-Fa-f:.]+\])"
                            r"(?::\d{1,5})?")  # fmt: skip


def origins(text: str) -> tuple[str, ...]:
    given = tuple(origin.strip() for origin in text.split(",") if origin.strip())
    for origin in given:
        if origin != "*" and not ORIGIN_PATTERN.fullmatch(origin):
            raise ValueError(
                f"{origin!r} is not an origin: each comma-separated entry must be "
                "http(s)://host[:port] (no path, no trailing slash) or *"
            )
    return given


def cache_directory(text: str) -> Path:
    path = Path(text)
    if path.exists() and not path.is_dir():
        raise ValueError("must be a directory (made if missing), not a file")
    return path


# Every setting: the field, its variable and how its text is read (README "Settings" lists them).
VARIABLES: dict[str, tuple[str, Callable[[str], Any]]] = {
    "host": ("FEES_HOST", str),
    "port": ("FEES_PORT", integer(minimum=1, maximum=65535)),
    "workers": ("FEES_WORKERS", integer(minimum=1)),
    "data_dir": ("FEES_DATA_DIR", location),
    "accounts_file": ("FEES_ACCOUNTS_FILE", Path),
    "duckdb_memory": ("FEES_DUCKDB_MEMORY", memory_size),
    "duckdb_threads": ("FEES_DUCKDB_THREADS", integer(minimum=1)),
    "version_poll_seconds": ("FEES_VERSION_POLL_SECONDS", seconds),
    "cache_mb": ("FEES_CACHE_MB", integer(minimum=0)),
    "log_level": ("FEES_LOG_LEVEL", log_level),
    "access_log": ("FEES_ACCESS_LOG", str),
    "query_timeout_seconds": ("FEES_QUERY_TIMEOUT_SECONDS", seconds),
    "redis_url": ("FEES_REDIS_URL", redis_url),
    "max_age_seconds": ("FEES_MAX_AGE_SECONDS", integer(minimum=0)),
    "cors_origins": ("FEES_CORS_ORIGINS", origins),
    "docs_key": ("FEES_DOCS_KEY", str),
    "s3_endpoint_url": ("FEES_S3_ENDPOINT_URL", endpoint_url),
    "cache_dir": ("FEES_CACHE_DIR", cache_directory),
}
