"""Real servers the tests run against: Debian's programs installed on demand, and the service
itself as its own process (`python -m service serve`), as an operator starts it."""

import os
import shutil
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path

import httpx
import pytest

ROOT = Path(__file__).parent.parent
START_SECONDS = 30


def debian_program(program: str, package: str) -> str:
    """The path of `program`, installing Debian's `package` first when it is missing. Skips
    the test, saying why, only where it cannot be installed (not root, no apt-get, no
    registry)."""
    found = shutil.which(program)
    if found:
        return found
    if os.geteuid() != 0 or shutil.which("apt-get") is None:
        pytest.skip(f"{program} is missing and Debian's {package} cannot be installed here "
                    "(needs root and apt-get)")  # fmt: skip
    done = _apt_get("install", "-y", "--no-install-recommends", package)
    if done.returncode != 0:  # the package lists may be stale: refresh them once
        _apt_get("update")
        done = _apt_get("install", "-y", "--no-install-recommends", package)
    found = shutil.which(program)
    if found is None:
        tail = (done.stderr or done.stdout).strip().splitlines()[-1:]
        pytest.skip(f"Debian's {package} could not be installed: {' '.join(tail)}")
    return found


def _apt_get(*args: str) -> subprocess.CompletedProcess[str]:
    environment = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    return subprocess.run(["apt-get", *args], env=environment, capture_output=True, text=True)


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


def wait_for(check: Callable[[], bool], what: str, process: subprocess.Popen[bytes]) -> None:
    deadline = time.monotonic() + START_SECONDS
    while not check():
        if process.poll() is not None:
            raise RuntimeError(f"{what} exited with {process.returncode} before it was ready")
        if time.monotonic() > deadline:
            raise RuntimeError(f"{what} was not ready within {START_SECONDS} s")
        time.sleep(0.05)


def _connects(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=0.2):
            return True
    except OSError:
        return False


@contextmanager
def redis_server() -> Iterator[tuple[str, subprocess.Popen[bytes]]]:
    """A throwaway Redis on a free loopback port, nothing saved to disk; yields its URL and
    process (a test may stop it to see what an outage does)."""
    program = debian_program("redis-server", "redis-server")
    port = free_port()
    process = subprocess.Popen(
        [program, "--port", str(port), "--bind", "127.0.0.1", "--save", "",
         "--appendonly", "no", "--protected-mode", "yes"],
        stdout=subprocess.DEVNULL,
    )  # fmt: skip
    try:
        wait_for(lambda: _connects(port), "redis-server", process)
        yield f"redis://127.0.0.1:{port}/0", process
    finally:
        process.terminate()
        process.wait(timeout=10)


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

    def answers() -> bool:
        try:
            return httpx.get(f"{url}/healthz", timeout=1).status_code == 200
        except httpx.TransportError:
            return False

    try:
        wait_for(answers, "the service", process)
        yield url, process.pid
    finally:
        process.terminate()
        process.wait(timeout=20)  # a parent of workers waits for them first


@contextmanager
def s3_server() -> Iterator[str]:
    """moto's standalone S3-compatible server on a free loopback port; yields its endpoint URL.
    The client side needs the AWS variables set (any keys: moto checks none)."""
    port = free_port()
    process = subprocess.Popen(
        [sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        wait_for(lambda: _connects(port), "moto's server", process)
        yield f"http://127.0.0.1:{port}"
    finally:
        process.terminate()
        process.wait(timeout=10)
