"""`make cluster-soak`: the deployment `docs/deploy.md` describes, run whole on one machine under
load and with faults.

Three replicas, each `fees serve --workers 2` started as `make run` starts the server (access
lines on, each replica's to `.cluster/replica-N.log`), behind HAProxy (Debian's, installed when
missing) with the repo's `deploy/haproxy.cfg`; the rate limits in Redis; the dataset in moto's
S3-compatible server, each replica caching versions in a directory of its own; all on loopback.
wrk drives the balancer with `make soak`'s mix of endpoints and keys (every answer checked
against the status its request expects) for `--seconds`, while:

- a new version is published to S3 every `--publish-every` seconds (the two raw inputs of `make
  soak` in turn), and each publish is timed from the pointer's replacement to every replica
  answering `/readyz` with the new version ten times in a row, each on a new connection so
  either of its processes may answer;
- at 35% of the run one replica is SIGKILLed (its whole process group, as a container runtime
  kills) and started again at once;
- at 55% Redis is restarted (nothing is saved, so every bucket starts full again);
- at 75% a key with a burst of `--burst` is sent three times as many requests through the
  balancer, each on a new connection: the burst (plus what the bucket refills meanwhile) may
  pass in total, whichever replicas answer; the replicas' access lines say which answered.

The run fails (exit 1) on any error, a publish some replica did not serve, or a broken limit.
"""

import argparse
import csv
import io
import json
import os
import signal
import statistics
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import boto3
import httpx

from ingest.storage import S3Storage
from service.accounts import key_entry
from service.edge.accesslog import LOGGER as ACCESS_LOGGER
from tools.bench_ingest import machine, write_section
from tools.servers import (
    AWS_TEST_CREDENTIALS,
    START_SECONDS,
    answers,
    debian_program,
    free_port,
    s3_server,
    start_redis,
    stop,
    wait_for,
)
from tools.soak import (
    Traffic,
    accounts_document,
    bearer,
    driving,
    inputs,
    mix,
    traffic,
    traffic_rows,
)

ROOT = Path(".cluster")
BALANCER_CONFIG = Path("deploy/haproxy.cfg")
REPLICAS, WORKERS = 3, 2  # the balancer's configuration names three replicas
BUCKET = "fees-cluster"
PROOF_KEY = "cluster-proof-key-0123456789"
PROOF_PATH = "/api/v1/suppliers/nasdaq/fee-types"
PROOF_PER_MINUTE = 1  # the proof key's refill: one request a minute beyond its burst
STREAK = 10  # answers in a row naming the new version before a replica counts as serving it
POLL = 0.05  # seconds between two looks at the pointer or a replica
KILL_AT, REDIS_AT, PROOF_AT = 0.35, 0.55, 0.75  # when the faults come, as parts of the run
SERVE_WITHIN = 60.0  # seconds a replica has to serve a new version before it counts as missed
# Seconds a killed replica has to be ready again: under the load, on two cores, its two
# processes take 10-30 s to start and open the version.
RESTART_WITHIN = 120.0


@dataclass
class Replica:
    """One `fees serve --workers 2`, in a process group of its own so a kill takes every
    process of it, as a container runtime's does."""

    number: int
    port: int
    environment: dict[str, str]
    log: Path
    process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> None:
        with open(self.log, "ab") as log:
            self.process = subprocess.Popen(
                [sys.executable, "-m", "service", "serve", "--port", str(self.port),
                 "--workers", str(WORKERS)],
                env=self.environment, stdout=subprocess.DEVNULL, stderr=log,
                start_new_session=True,
            )  # fmt: skip

    def signal(self, number: signal.Signals) -> None:
        assert self.process is not None
        os.killpg(self.process.pid, number)
        self.process.wait(timeout=30)

    def version(self) -> str | None:
        """The version `/readyz` names, on a new connection (so from either process), or None
        while the replica is not ready."""
        try:
            answer = httpx.get(f"{self.url}/readyz", timeout=1)
        except httpx.TransportError:
            return None
        found: str | None = answer.json().get("version_id") if answer.status_code == 200 else None
        return found

    def wait_ready(self, seconds: float = START_SECONDS) -> None:
        assert self.process is not None
        wait_for(lambda: self.version() is not None, f"replica {self.number}", self.process,
                 seconds)  # fmt: skip


def stop_replicas(replicas: list[Replica]) -> None:
    """Stop them all at once (each drains its connections: one at a time took seconds)."""
    for replica in replicas:
        assert replica.process is not None
        os.killpg(replica.process.pid, signal.SIGTERM)
    for replica in replicas:
        assert replica.process is not None
        replica.process.wait(timeout=30)


@dataclass
class Publish:
    """One publish: the ingest's duration and each replica's time from the pointer's
    replacement to serving the new version (absent where it never did within the wait)."""

    ingest_seconds: float
    version_id: str = ""
    served: dict[int, float] = field(default_factory=dict)

    @property
    def slowest(self) -> float | None:
        return max(self.served.values()) if len(self.served) == REPLICAS else None


@dataclass(frozen=True)
class Proof:
    sent: int
    seconds: float
    statuses: dict[int, int]

    def allowed(self, burst: int) -> int:
        return burst + int(self.seconds * PROOF_PER_MINUTE / 60)


@dataclass(frozen=True)
class Result:
    seconds: int
    connections: int
    rows: int
    publish_every: float
    burst: int
    traffic: Traffic
    publishes: list[Publish]
    killed_back_seconds: float | None
    redis_down_seconds: float
    proof: Proof
    proof_by_replica: dict[int, Counter[int]]
    lines_by_replica: dict[int, int]
    balancer: dict[str, dict[str, str]]

    @property
    def ok(self) -> bool:
        passed = self.proof.statuses.get(200, 0)
        return (
            self.traffic.errors == 0
            and all(publish.slowest is not None for publish in self.publishes)
            and self.killed_back_seconds is not None
            and self.burst <= passed <= self.proof.allowed(self.burst)
        )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tools.cluster", description=__doc__)
    parser.add_argument("--seconds", type=int, default=300)
    parser.add_argument("--connections", type=int, default=64)
    parser.add_argument("--rows", type=int, default=100_000)
    parser.add_argument("--publish-every", type=float, default=30.0)
    parser.add_argument("--burst", type=int, default=30, help="the proof key's burst")
    parser.add_argument("--registry", type=Path, default=Path("data/exchanges.csv"))
    parser.add_argument("--root", type=Path, default=ROOT, help="inputs, caches and logs")
    parser.add_argument("--doc", type=Path, default=Path("docs/deploy.md"))
    args = parser.parse_args(argv)
    result = rehearse(args)
    table = report(result)
    print(table)
    write_section(args.doc, f"Machine: {machine()}\n\n{table}", marker="cluster-soak",
                  title="Scale-out rehearsal (`make cluster-soak`)")  # fmt: skip
    return 0 if result.ok else 1


def rehearse(args: argparse.Namespace) -> Result:
    programs = {name: debian_program(name, name) for name in ("haproxy", "redis-server", "wrk")}
    base, more = inputs(args.rows, args.registry, args.root)
    os.environ.update(AWS_TEST_CREDENTIALS)  # moto checks no keys, but boto3 needs some
    with ExitStack() as stack:
        endpoint = stack.enter_context(s3_server())
        boto3.client("s3", endpoint_url=endpoint).create_bucket(Bucket=BUCKET)
        location = f"s3://{BUCKET}/warehouse"
        ingest = Ingest(location, endpoint, args.registry)
        ingest(base)
        redis_port = free_port()
        redis = Restartable(lambda: start_redis(programs["redis-server"], redis_port))
        stack.callback(redis.stop)
        replicas = start_replicas(args, stack, location, endpoint, redis_port)
        balancer, stats = stack.enter_context(
            balancing(programs["haproxy"], replicas, args.root / "haproxy.log")
        )
        with driving(balancer, mix(balancer), args.seconds, args.connections) as wrk:
            run = Run(args, wrk, replicas, ingest, (base, more))
            run.events(redis, balancer)
            output, _ = wrk.communicate()
        (args.root / "wrk.txt").write_text(output, encoding="utf-8")
        run.join()
        lines, proofs = access_lines(replicas)
        return Result(
            seconds=args.seconds,
            connections=args.connections,
            rows=args.rows,
            publish_every=args.publish_every,
            burst=args.burst,
            traffic=traffic(output),
            publishes=run.publishes,
            killed_back_seconds=run.killed_back,
            redis_down_seconds=redis.down_seconds,
            proof=run.proof,
            proof_by_replica=proofs,
            lines_by_replica=lines,
            balancer=balancer_counters(stats),
        )


class Ingest:
    """`fees ingest` of a raw directory into the S3 location, as its own process."""

    def __init__(self, location: str, endpoint: str, registry: Path) -> None:
        self.location, self.registry = location, registry
        self.storage = S3Storage(location, endpoint)
        self.environment = {**os.environ, "FEES_S3_ENDPOINT_URL": endpoint}

    def __call__(self, raw: Path) -> float:
        begun = time.monotonic()
        subprocess.run(
            [sys.executable, "-m", "ingest", "--raw", str(raw), "--data", self.location,
             "--registry", str(self.registry)],
            check=True, stdout=subprocess.DEVNULL, env=self.environment,
        )  # fmt: skip
        return time.monotonic() - begun

    def current(self) -> str | None:
        return self.storage.current_version()


class Restartable:
    """A server process started by `start`, stopped and started again on demand."""

    def __init__(self, start: Callable[[], subprocess.Popen[bytes]]) -> None:
        self._start = start
        self.process = start()
        self.down_seconds = 0.0

    def restart(self) -> None:
        begun = time.monotonic()
        stop(self.process)
        self.process = self._start()
        self.down_seconds = time.monotonic() - begun

    def stop(self) -> None:
        stop(self.process)


def start_replicas(
    args: argparse.Namespace, stack: ExitStack, location: str, endpoint: str, redis_port: int
) -> list[Replica]:
    """The replicas, configured as `make run` configures the server plus the deployment's
    settings (`docs/deploy.md`), once each answers `/readyz`."""
    accounts = args.root / "accounts.json"
    document = accounts_document()
    when = "2026-11-24T00:00:00+00:00"
    document["accounts"]["proof"] = {  # type: ignore[index]
        "exchanges": None,
        "rate_limit": {"burst": args.burst, "per_minute": PROOF_PER_MINUTE},
        "keys": [key_entry(PROOF_KEY, when, None)],
    }
    accounts.write_text(json.dumps(document), encoding="utf-8")
    inherited = {name: value for name, value in os.environ.items() if not name.startswith("FEES_")}
    replicas = []
    for number in range(1, REPLICAS + 1):
        log = args.root / f"replica-{number}.log"
        log.unlink(missing_ok=True)
        environment = {
            **inherited,
            "FEES_DATA_DIR": location,
            "FEES_S3_ENDPOINT_URL": endpoint,
            "FEES_CACHE_DIR": str(args.root / f"replica-{number}-cache"),
            "FEES_REDIS_URL": f"redis://127.0.0.1:{redis_port}/0",
            "FEES_ACCOUNTS_FILE": str(accounts),
        }
        replica = Replica(number, free_port(), environment, log)
        replica.start()
        replicas.append(replica)
    stack.callback(stop_replicas, replicas)
    for replica in replicas:
        replica.wait_ready()
    return replicas


@contextmanager
def balancing(program: str, replicas: list[Replica], log: Path) -> Iterator[tuple[str, str]]:
    """HAProxy over the replicas with the repo's configuration, its log lines (a request that
    failed or was retried) to `log`; yields its URL and its statistics' URL once it routes a
    request."""
    port, stats = free_port(), free_port()
    environment = {
        **os.environ,
        "FEES_BALANCER_ADDRESS": f"127.0.0.1:{port}",
        "FEES_BALANCER_STATS": f"127.0.0.1:{stats}",
        **{f"FEES_REPLICA_{r.number}": f"127.0.0.1:{r.port}" for r in replicas},
    }
    with open(log, "wb") as lines:
        process = subprocess.Popen(
            [program, "-db", "-f", str(BALANCER_CONFIG)], env=environment, stdout=lines
        )
    url = f"http://127.0.0.1:{port}"
    try:
        wait_for(lambda: answers(f"{url}/readyz"), "haproxy", process)
        yield url, f"http://127.0.0.1:{stats}/stats;csv"
    finally:
        stop(process)


class Run:
    """The events during the load: publishes, the kill, Redis's restart and the proof, each at
    its time; waits for replicas run in threads so the schedule holds."""

    def __init__(
        self,
        args: argparse.Namespace,
        wrk: subprocess.Popen[str],
        replicas: list[Replica],
        ingest: Ingest,
        raws: tuple[Path, Path],
    ) -> None:
        self.args, self.wrk, self.replicas = args, wrk, replicas
        self.ingest, self.raws = ingest, raws
        self.publishes: list[Publish] = []
        self.killed_back: float | None = None
        self.proof = Proof(0, 0.0, {})
        self._threads: list[threading.Thread] = []
        self._publisher = threading.Thread(target=self._publishing, daemon=True)
        self._started = time.monotonic()

    def events(self, redis: Restartable, balancer: str) -> None:
        """Publish on a thread of its own, one ingest after another (one at a time per
        prefix), and bring the faults at their times meanwhile."""
        self._publisher.start()
        seconds = self.args.seconds
        faults = [(KILL_AT, self.kill), (REDIS_AT, redis.restart),
                  (PROOF_AT, lambda: self.prove(balancer))]  # fmt: skip
        for at, fault in faults:
            if not self._until(at * seconds):
                return
            fault()

    def _until(self, due: float) -> bool:
        """Wait until `due` seconds into the run; False if the load ended first."""
        while time.monotonic() < self._started + due:
            if self.wrk.poll() is not None:
                return False
            time.sleep(POLL)
        return True

    def _publishing(self) -> None:
        base, more = self.raws  # base is published already: more first, then in turn
        every = self.args.publish_every
        number = 1
        while number * every < self.args.seconds and self._until(number * every):
            raw = more if number % 2 == 1 else base
            publish = Publish(0.0)
            before = self.ingest.current()
            done = threading.Event()
            self._background(self._watch, publish, before, done)
            publish.ingest_seconds = self.ingest(raw)
            done.set()
            self.publishes.append(publish)
            number += 1

    def _watch(self, publish: Publish, before: str | None, ingested: threading.Event) -> None:
        """Time each replica from the pointer's replacement to serving the new version."""
        while (current := self.ingest.current()) == before:
            if ingested.is_set():
                return  # the ingest ended without replacing the pointer
            time.sleep(POLL)
        assert current is not None
        publish.version_id, replaced = current, time.monotonic()
        deadline = replaced + SERVE_WITHIN
        first: dict[int, float] = {}
        streak: Counter[int] = Counter()
        while len(publish.served) < len(self.replicas) and time.monotonic() < deadline:
            for replica in self.replicas:
                if replica.number in publish.served:
                    continue
                if replica.version() != current:
                    streak[replica.number] = 0
                    continue
                if streak[replica.number] == 0:
                    first[replica.number] = time.monotonic()
                streak[replica.number] += 1
                if streak[replica.number] == STREAK:
                    publish.served[replica.number] = first[replica.number] - replaced
            time.sleep(POLL)

    def kill(self) -> None:
        replica = self.replicas[1]
        killed = time.monotonic()
        replica.signal(signal.SIGKILL)
        replica.start()

        def back() -> None:
            try:
                replica.wait_ready(RESTART_WITHIN)
            except RuntimeError:
                return  # reported as never back
            self.killed_back = time.monotonic() - killed

        self._background(back)

    def prove(self, balancer: str) -> None:
        sent = 3 * self.args.burst
        statuses: Counter[int] = Counter()
        begun = time.monotonic()
        for number in range(sent):
            answer = httpx.get(
                f"{balancer}{PROOF_PATH}",
                headers={**bearer(PROOF_KEY), "X-Request-ID": f"proof-{number}"},
                timeout=10,
            )
            statuses[answer.status_code] += 1
        self.proof = Proof(sent, time.monotonic() - begun, dict(statuses))

    def _background(self, work: Callable[..., None], *args: object) -> None:
        thread = threading.Thread(target=work, args=args, daemon=True)
        thread.start()
        self._threads.append(thread)

    def join(self) -> None:
        self._publisher.join()  # it starts the last watcher
        for thread in self._threads:
            thread.join()


def access_lines(replicas: list[Replica]) -> tuple[dict[int, int], dict[int, Counter[int]]]:
    """Each replica's access lines (its answers), and the proof's statuses it answered."""
    lines: dict[int, int] = {}
    proofs: dict[int, Counter[int]] = {}
    for replica in replicas:
        lines[replica.number], proofs[replica.number] = 0, Counter()
        for text in replica.log.read_text(encoding="utf-8").splitlines():
            try:
                line = json.loads(text)
            except ValueError:
                continue  # uvicorn's own start-up lines
            if line.get("logger") == ACCESS_LOGGER:
                lines[replica.number] += 1
                if str(line.get("request_id", "")).startswith("proof-"):
                    proofs[replica.number][line["status"]] += 1
    return lines, proofs


def balancer_counters(stats: str) -> dict[str, dict[str, str]]:
    """HAProxy's counters for each replica and the backend, by server name."""
    text = httpx.get(stats, timeout=5).text.removeprefix("# ")
    return {
        row["svname"]: row
        for row in csv.DictReader(io.StringIO(text))
        if row["pxname"] == "replicas"
    }


def _served(publish: Publish) -> str:
    """A publish's slowest replica, or where some replica missed it, those that served it."""
    if publish.slowest is not None:
        return f"{publish.slowest:.1f}"
    served = ", ".join(f"replica {n} {s:.1f}" for n, s in sorted(publish.served.items()))
    return f"missed ({served or 'by every replica'})"


def report(result: Result) -> str:
    served = [p.slowest for p in result.publishes if p.slowest is not None]
    missed = len(result.publishes) - len(served)
    each = ", ".join(_served(publish) for publish in result.publishes)
    within = (
        f"median {statistics.median(served):.2f} s, slowest {max(served):.2f} s" if served else "-"
    )
    ingests = statistics.median(p.ingest_seconds for p in result.publishes)
    passed = result.proof.statuses.get(200, 0)
    allowed = result.proof.allowed(result.burst)
    limit = "met" if result.burst <= passed <= allowed else "not met"
    by_replica = ", ".join(
        f"replica {n}: {counts.get(200, 0)}" for n, counts in result.proof_by_replica.items()
    )
    backend = result.balancer.get("BACKEND", {})
    back = (
        f"not ready within {RESTART_WITHIN:g} s"
        if result.killed_back_seconds is None
        else f"ready again after {result.killed_back_seconds:.1f} s"
    )
    answered = ", ".join(f"{n}: {count:,}" for n, count in result.lines_by_replica.items())
    return "\n".join(
        [
            f"{result.seconds} s of `make soak`'s mix at {result.connections} connections through "
            f"HAProxy to {REPLICAS} replicas of `fees serve --workers {WORKERS}` (access lines "
            f"on), Redis for the rate limits, {result.rows:,} synthetic records in moto's S3 "
            f"server, a version published every {result.publish_every:g} s; all on loopback "
            f"on the same cores as the load.",
            "",
            "| measure | result | target | met |",
            "|---|---|---|---|",
            *traffic_rows(result.traffic, result.seconds),
            f"| versions published | {len(result.publishes)} (ingest {ingests:.1f} s each, "
            f"median) | | |",
            f"| from a publish to every replica serving it | {within} ({each} s) | every publish | "
            f"{'met' if missed == 0 else f'not met ({missed} missed)'} |",
            f"| replica 2 SIGKILLed at {KILL_AT:.0%} of the run, started again | {back}; the "
            f"balancer retried "
            f"{backend.get('wretr', '?')} requests and redispatched {backend.get('wredis', '?')}"
            f" | no failed request | |",
            f"| Redis restarted at {REDIS_AT:.0%} of the run | down {result.redis_down_seconds:.2f}"
            f" s | no failed request | |",
            f"| a key with burst {result.burst}: {result.proof.sent} requests through the "
            f"balancer in {result.proof.seconds:.1f} s | {passed} answered 200 ({by_replica}), "
            f"{result.proof.statuses.get(429, 0)} answered 429 | {result.burst} (≤ {allowed} "
            f"with the refill) | {limit} |",
            f"| answers per replica (access lines) | {answered} | | |",
        ]
    )


if __name__ == "__main__":
    sys.exit(main())
