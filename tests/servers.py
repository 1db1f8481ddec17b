"""Real servers the tests run against: Debian's programs installed on demand, and the service
itself as its own process (`python -m service serve`), as an operator starts it."""

import os
import subprocess
import sys
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path

import pytest

from tools import servers
from tools.servers import answers, free_port, wait_for

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
    port = free_port()
    inherited = {name: value for name, value in os.environ.items() if not name.startswith("FEES_")}
    process = subprocess.Popen(
        [sys.executable, "-m", "service", "serve", "--port", str(port), *args],
        cwd=ROOT,
        env={**inherited, "FEES_LOG_LEVEL": "warning", **environment},
        stdout=subprocess.DEVNULL,
    )
    url = f"http://127.0.0.1:{port}"
    try:
        wait_for(lambda: answers(f"{url}/healthz"), "the service", process)
        yield url, process.pid
    finally:
        process.terminate()
        process.wait(timeout=20)  # a parent of workers waits for them first
