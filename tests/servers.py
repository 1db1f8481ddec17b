"""Real servers the tests run against: Debian's programs installed on demand, and the service
itself as its own process (`python -m service serve`), as an operator starts it."""

import os
import subprocess
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path

import pytest

from tools import servers

ROOT = Path(__file__).parent.parent


def debian_program(program: str, package: str) -> str:
    """The path of `program`, installed from Debian when missing; skips the test, saying why,
    only where it cannot be installed."""
    try:
        return servers.debian_program(program, package)
    except servers.Unavailable as missing:
        pytest.skip(str(missing))


@contextmanager
def redis_server() -> Iterator[tuple[str, subprocess.Popen[bytes]]]:
    """A throwaway Redis on a free loopback port; yields its URL and process."""
    with servers.redis_server(debian_program("redis-server", "redis-server")) as running:
        yield running


@contextmanager
def service_process(environment: Mapping[str, str], *args: str) -> Iterator[tuple[str, int]]:
    """`fees serve ARGS` on a free port with these `FEES_*` settings (and none inherited from
    the environment the tests run in); yields its URL and process id once it answers."""
    inherited = {name: value for name, value in os.environ.items() if not name.startswith("FEES_")}
    settings = {**inherited, "FEES_LOG_LEVEL": "warning", **environment}
    with servers.service(settings, *args, cwd=ROOT) as (url, process):
        yield url, process.pid
