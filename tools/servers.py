"""Real servers the tools and the tests start: Debian's programs, installed on demand, and
throwaway Redis and S3-compatible servers on loopback ports."""

import fcntl
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path

import httpx

START_SECONDS = 30
INSTALL_LOCK = Path(tempfile.gettempdir()) / "fees-debian-install.lock"
# What boto3 needs to talk to moto's server, which checks no keys.
AWS_TEST_CREDENTIALS = {
    "AWS_ACCESS_KEY_ID": "test",
    "AWS_SECRET_ACCESS_KEY": "test",
    "AWS_DEFAULT_REGION": "us-east-1",
}


class Unavailable(RuntimeError):
    """A program is missing and cannot be installed here."""


def debian_program(program: str, package: str) -> str:
    """The path of `program`, installing Debian's `package` first when it is missing; raises
    `Unavailable`, saying why, only where it cannot be installed (not root, no apt-get, no
    registry)."""
    found = shutil.which(program)
    if found:
        return found
    if os.geteuid() != 0 or shutil.which("apt-get") is None:
        raise Unavailable(f"{program} is missing and Debian's {package} cannot be installed "
                          f"here (needs root and apt-get): apt-get install {package}")  # fmt: skip
    # One install at a time on this machine: the test workers may want the same program at
    # once, and apt-get fails rather than waits while another holds its locks.
    with INSTALL_LOCK.open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        found = shutil.which(program)  # another process may have installed it meanwhile
        if found:
            return found
        done = _apt_get("install", "-y", "--no-install-recommends", package)
        if done.returncode != 0:  # the package lists may be stale: refresh them once
            _apt_get("update")
            done = _apt_get("install", "-y", "--no-install-recommends", package)
    found = shutil.which(program)
    if found is None:
        tail = (done.stderr or done.stdout).strip().splitlines()[-1:]
        raise Unavailable(f"Debian's {package} could not be installed: {' '.join(tail)}")
    return found


def _apt_get(*args: str) -> subprocess.CompletedProcess[str]:
    environment = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    return subprocess.run(["apt-get", *args], env=environment, capture_output=True, text=True)


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


def wait_for(
    check: Callable[[], bool],
    what: str,
    process: subprocess.Popen[bytes],
    seconds: float = START_SECONDS,
) -> None:
    deadline = time.monotonic() + seconds
    while not check():
        if process.poll() is not None:
            raise RuntimeError(f"{what} exited with {process.returncode} before it was ready")
        if time.monotonic() > deadline:
            raise RuntimeError(f"{what} was not ready within {seconds:g} s")
        time.sleep(0.05)


def answers(url: str) -> bool:
    """Whether `url` answers 200 (a readiness probe)."""
    try:
        return httpx.get(url, timeout=1).status_code == 200
    except httpx.TransportError:
        return False


def connects(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=0.2):
            return True
    except OSError:
        return False


def start_redis(program: str, port: int) -> subprocess.Popen[bytes]:
    """redis-server on this loopback port, nothing saved to disk, once it accepts connections."""
    process = subprocess.Popen(
        [program, "--port", str(port), "--bind", "127.0.0.1", "--save", "",
         "--appendonly", "no", "--protected-mode", "yes"],
        stdout=subprocess.DEVNULL,
    )  # fmt: skip
    wait_for(lambda: connects(port), "redis-server", process)
    return process


def stop(process: subprocess.Popen[bytes], seconds: float = 10) -> None:
    process.terminate()
    process.wait(timeout=seconds)


@contextmanager
def service(
    environment: Mapping[str, str], *args: str, cwd: Path | None = None
) -> Iterator[tuple[str, subprocess.Popen[bytes]]]:
    """`python -m service serve ARGS` (what `fees serve` runs) on a free loopback port, with
    exactly `environment`; yields its URL and process once it answers (it answers once its
    version is open), and stops it (a parent of workers waits for them first)."""
    port = free_port()
    process = subprocess.Popen(
        [sys.executable, "-m", "service", "serve", "--port", str(port), *args],
        cwd=cwd,
        env=dict(environment),
        stdout=subprocess.DEVNULL,
    )
    url = f"http://127.0.0.1:{port}"
    try:
        wait_for(lambda: answers(f"{url}/healthz"), "the service", process)
        yield url, process
    finally:
        stop(process, seconds=20)


@contextmanager
def redis_server(program: str) -> Iterator[tuple[str, subprocess.Popen[bytes]]]:
    """A throwaway Redis on a free loopback port; yields its URL and process (a test may stop
    it to see what an outage does)."""
    port = free_port()
    process = start_redis(program, port)
    try:
        yield f"redis://127.0.0.1:{port}/0", process
    finally:
        stop(process)


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
        wait_for(lambda: connects(port), "moto's server", process)
        yield f"http://127.0.0.1:{port}"
    finally:
        stop(process)
