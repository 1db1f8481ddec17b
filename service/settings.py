"""Settings, read once from `FEES_*` environment variables and passed explicitly from there."""

import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True, kw_only=True)
class Settings:
    data_dir: Path = Path("data/warehouse")
    accounts_file: Path = Path("data/accounts.json")
    duckdb_memory: str = "1GB"
    duckdb_threads: int = 2
    version_poll_seconds: float = 0.1
    cache_mb: int = 64  # response cache bound (bodies held); 0 turns it off
    log_level: str = "info"
    query_timeout_seconds: float = 5.0  # a query running longer is interrupted (503)
    redis_url: str | None = None  # rate-limit buckets shared by processes; None: per process
    max_age_seconds: int = 60  # Cache-Control: private, max-age of discovery and results answers
    cors_origins: tuple[str, ...] = ()  # origins a browser may call from; none: CORS off

    @classmethod
    def from_environ(cls, environ: Mapping[str, str] | None = None) -> "Settings":
        env = os.environ if environ is None else environ
        defaults = cls()
        return cls(
            data_dir=Path(env.get("FEES_DATA_DIR", str(defaults.data_dir))),
            accounts_file=Path(env.get("FEES_ACCOUNTS_FILE", str(defaults.accounts_file))),
            duckdb_memory=env.get("FEES_DUCKDB_MEMORY", defaults.duckdb_memory),
            duckdb_threads=int(env.get("FEES_DUCKDB_THREADS", defaults.duckdb_threads)),
            version_poll_seconds=float(
                env.get("FEES_VERSION_POLL_SECONDS", defaults.version_poll_seconds)
            ),
            cache_mb=int(env.get("FEES_CACHE_MB", defaults.cache_mb)),
            log_level=env.get("FEES_LOG_LEVEL", defaults.log_level),
            query_timeout_seconds=float(
                env.get("FEES_QUERY_TIMEOUT_SECONDS", defaults.query_timeout_seconds)
            ),
            redis_url=env.get("FEES_REDIS_URL") or None,
            max_age_seconds=int(env.get("FEES_MAX_AGE_SECONDS", defaults.max_age_seconds)),
            cors_origins=tuple(
                origin.strip()
                for origin in env.get("FEES_CORS_ORIGINS", "").split(",")
                if origin.strip()
            ),
        )
