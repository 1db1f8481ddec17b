"""`make bench`: the discovery API under load, against a static-bytes ceiling, at scale.

For each dataset size the synthetic records are made once (`make synth`, cached under
`data/synth/`) and ingested once (cached under `.bench/`). Then, in one run and back to back:

- the ceiling: `static_app` below, a Starlette app answering fixed bytes, served by uvicorn
  with exactly the options `python -m service serve` uses (`serve_static`: one worker, the same
  loop, the same bounded HTTP protocol, no `Server` header, no access lines);
- the service itself, as `python -m service serve` runs it (its access line for every
  request included, written to `ACCESS_LOG`), for every discovery endpoint (warm: the same
  request repeated, so its response cache answers all but the first), in rounds that
  alternate with rounds of the ceiling (both servers up, one loaded at a time); then what the
  access lines cost (the same server with `FEES_LOG_LEVEL=warning`, in `ACCESS_ROUNDS` rounds,
  each server first in half of them), and the discovery endpoints cold with the cache on
  (every request a new one, as shipped);
- the results pages, a fee line's history and a CSV export, on a second start of the service
  with the cache off.

Each case reports requests/s with p50/p99 latency from wrk at 32 connections for 10 s, with the
ratio to the ceiling; the cold and detailed cases also the server's own time per call (median
and p99 of the `Server-Timing` header over sequential calls, no concurrency: cached answers
carry none). Results are printed and written
between the markers of `docs/benchmarks.md`.
"""

import argparse
import itertools
import json
import os
import random
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, timedelta
from pathlib import Path

import httpx
import numpy as np
import pyarrow.parquet as pq
import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from ingest import layout, publish
from ingest.layout import (
    INDEX_DIR,
    ROLLUP_DIR,
    VERSION_KEY,
    current_version_dir,
    read_manifest,
    servable,
)
from service.app import server_options
from service.edge.cache import ENTRY_BYTES
from service.settings import Settings
from tools.bench_ingest import ensure_synth, machine, synth_digest, write_section

STATIC_BODY = b'{"data":[{"name":"static","record_count":0}],"meta":{"record_count":1}}'


async def _static(request: Request) -> Response:
    # Answered on the event loop, as a cached answer is: the cheapest answer the server gives.
    return Response(STATIC_BODY, media_type="application/json")


STATIC_HEADERS = len(Response(STATIC_BODY, media_type="application/json").raw_headers)


static_app = Starlette(routes=[Route("/static", _static)])
# A header the replayed answer does not carry: uvicorn writes its own `date` (and, as the
# service runs it, no `server`).
UNREPLAYED = (b"date", b"server")


def replay_app(answer: Path) -> Starlette:
    """The ceiling's app answering the bytes `capture` saved instead of its own: the service's
    answer, body and headers, with none of the service's work."""
    saved = json.loads(answer.read_text())
    body = saved["body"].encode("latin-1")
    headers = [(name.encode("latin-1"), text.encode("latin-1")) for name, text in saved["headers"]]

    async def replayed(request: Request) -> Response:
        response = Response(body)
        response.raw_headers = headers
        return response

    return Starlette(routes=[Route("/static", replayed)])


def serve_static(port: int, answer: str | None = None) -> None:
    """The ceiling on the server the service runs on: uvicorn with `python -m service serve`'s
    options (its bounded HTTP protocol, no `Server` header, no access lines). With `answer`
    (a file `capture` wrote), it answers those bytes instead of its own."""
    options = server_options(Settings(log_level="warning"))
    app = static_app if answer is None else replay_app(Path(answer))
    uvicorn.run(app, host="127.0.0.1", port=port, **options)


KEY = "demo-key"
SUPPLIER_HEADERS = {"Authorization": f"Bearer {KEY}"}
EXCHANGE_HEADERS = {"x-service-api-access-key": KEY}


@dataclass(frozen=True)
class Case:
    name: str
    path: str  # the request, or the first of `more`
    headers: dict[str, str]
    more: tuple[str, ...] = ()  # cold cases: every request a different one, in turn

    @property
    def paths(self) -> tuple[str, ...]:
        return (self.path, *self.more)


def cases(supplier: str) -> list[Case]:
    window = "?start_date=2022-01-01&end_date=2024-06-30"
    base = f"/api/v1/suppliers/{supplier}"
    windowed = [
        Case(f"{name} ({supplier}, window)", f"{base}/{name}{window}", SUPPLIER_HEADERS)
        for name in ("participants", "fee-categories", "actions", "fee-types")
    ]
    return [
        *windowed,
        Case(f"date-ranges ({supplier})", f"{base}/date-ranges", SUPPLIER_HEADERS),
        Case("exchanges", "/api/v1/exchanges/", EXCHANGE_HEADERS),
    ]


def static_server(port: int, answer: Path | None = None) -> list[str]:
    """The command that runs `serve_static` in a process of its own."""
    arguments = f"{port}" if answer is None else f"{port}, {str(answer)!r}"
    run = f"from tools.bench import serve_static; serve_static({arguments})"
    return [sys.executable, "-c", run]


def capture(port: int, case: Case, into: Path) -> tuple[int, int]:
    """Save the service's answer to `case` (body and headers, as `replay_app` reads them);
    returns the body's bytes and the headers' count."""
    response = httpx.get(f"http://127.0.0.1:{port}{case.path}", headers=case.headers)
    response.raise_for_status()
    headers = [
        (name.decode("latin-1"), value.decode("latin-1"))
        for name, value in response.headers.raw
        if name.lower() not in UNREPLAYED
    ]
    into.write_text(json.dumps({"body": response.content.decode("latin-1"), "headers": headers}))
    return len(response.content), len(headers)


COLD_REQUESTS = 2_000  # distinct requests per cold case, drawn once with a fixed seed
# With the cache on, no request may come twice in a run: more than a run asks (a round of 3 s
# asked at most 45,000 in part 6 of #40). A fresh case has this many for each of its rounds.
FRESH_REQUESTS = 100_000


def cold_cases(data: Path, count: int = COLD_REQUESTS) -> list[Case]:
    """Every request a different supplier and date window (open sides included), `count` of
    them; the exchange list takes neither, so its cold case is the same request on a server
    with no cache."""
    current = current_version_dir(data)
    assert current is not None
    venues = pq.read_table(current / ROLLUP_DIR / "details.parquet")["exchange"].to_pylist()
    rng = random.Random(5)

    def window() -> str:
        start = date(2018, 6, 1) + timedelta(days=rng.randrange(3000))
        end = start + timedelta(days=rng.randrange(1, 1500))
        sides = rng.choice(["both", "both", "start", "end"])
        query = {"start_date": start.isoformat(), "end_date": end.isoformat()}
        return "?" + "&".join(f"{k}={v}" for k, v in query.items() if sides in ("both", k[:-5]))

    def case(name: str, windowed: bool) -> Case:
        paths = [
            f"/api/v1/suppliers/{rng.choice(venues)}/{name}" + (window() if windowed else "")
            for _ in range(count)
        ]
        return Case(f"{name} (cold)", paths[0], SUPPLIER_HEADERS, tuple(paths[1:]))

    windowed = ("participants", "fee-categories", "actions", "fee-types")
    return [
        *(case(name, True) for name in windowed),
        case("date-ranges", False),
        Case("exchanges (cold)", "/api/v1/exchanges/", EXCHANGE_HEADERS),
    ]


def ensure_dataset(rows: int, registry: Path) -> Path:
    """The synthetic records ingested, once: again when the generator, the schema or the
    version layout changed."""
    data = Path(".bench") / f"warehouse-{rows}"
    raw = ensure_synth(rows, registry)
    made_from = data / ".synth"  # the generator digest of the files it was ingested from
    current = current_version_dir(data)
    if (
        current is None
        or not servable(read_manifest(current))
        or not made_from.exists()
        or made_from.read_text() != synth_digest()
    ):
        shutil.rmtree(data, ignore_errors=True)
        subprocess.run(
            [sys.executable, "-m", "ingest", "--raw", str(raw), "--data", str(data),
             "--registry", str(registry)],
            check=True,
        )  # fmt: skip
        made_from.write_text(synth_digest())
    return data


@contextmanager
def serving(
    command: list[str], port: int, probe: Case, env: dict[str, str], log: Path | None = None
) -> Iterator[tuple[subprocess.Popen[bytes], float]]:
    """Start a server process, its standard error appended to `log` (else dropped); yields
    it and the seconds from start until it answered `probe`."""
    started = time.perf_counter()
    with open(log or os.devnull, "ab") as errors:
        process = subprocess.Popen(command, env=env, stdout=subprocess.DEVNULL, stderr=errors)
    try:
        url = f"http://127.0.0.1:{port}{probe.path}"
        while True:
            if process.poll() is not None:
                raise SystemExit(f"server exited early: {' '.join(command)}")
            try:
                if httpx.get(url, headers=probe.headers, timeout=1).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            time.sleep(0.02)
        yield process, time.perf_counter() - started
    finally:
        process.terminate()
        process.wait(timeout=30)


RESULTS = "/api/v1/fee-schedule-results/"
# Detailed data: server time only (a deep page at 32 connections would measure the queue),
# over this many sequential calls, against issue #5's targets (median server time, ms).
RESULT_CASES = [
    (Case("results, filtered first page", f"{RESULTS}?exchange_name=box&fee_type=option"
          "&fee_action=make&page_size=20", EXCHANGE_HEADERS), 100, 10.0),
    (Case("results, first page, no filter", f"{RESULTS}?page_size=20", EXCHANGE_HEADERS), 50,
     None),
    (Case("results, page 10,000", f"{RESULTS}?page_size=20&page_number=10000",
          EXCHANGE_HEADERS), 50, 30.0),
]  # fmt: skip
# A different results page each call, unfiltered and filtered, on the cache-on server: what
# the results cases leave in a replica's memory (#40).
SWEEP_PAGES = 300
RESULTS_SWEEP = Case(
    "results pages, a different one each call",
    f"{RESULTS}?page_size=100&page_number=1",
    EXCHANGE_HEADERS,
    tuple(
        f"{RESULTS}?page_size=100&page_number={page}{query}"
        for page in range(1, SWEEP_PAGES + 1)
        for query in ("", "&fee_type=equity")
    )[1:],
)
CHANGES, COMPARE = "/api/v1/fee-changes/", "/api/v1/compare/"
HISTORY_TARGET = 20.0  # p50 ms of a page of fee changes, and of a comparison (#23)
HISTORY_CASES = [
    (Case("fee changes, one venue in one year", f"{CHANGES}?exchange_name=box"
          "&start_date=2024-01-01&end_date=2024-12-31", EXCHANGE_HEADERS), 100, HISTORY_TARGET),
    (Case("fee changes, newest first, no filter", f"{CHANGES}?order_dir=desc",
          EXCHANGE_HEADERS), 100, HISTORY_TARGET),
    (Case("fee changes, equity take, page 100", f"{CHANGES}?fee_type=equity&fee_action=take"
          "&page_number=100", EXCHANGE_HEADERS), 100, HISTORY_TARGET),
    (Case("compare, equity take on 2024-06-30", f"{COMPARE}?fee_type=equity&fee_action=take"
          "&as_of=2024-06-30", EXCHANGE_HEADERS), 100, HISTORY_TARGET),
    (Case("compare, every option line today", f"{COMPARE}?fee_type=option",
          EXCHANGE_HEADERS), 100, HISTORY_TARGET),
]  # fmt: skip
LINE_CALLS, LINE_TARGET = 200, 5.0  # a fee line's history: calls, p50 ms


def line_case(data: Path) -> Case:
    """A fee line's history, a different line each call (drawn once with a fixed seed)."""
    current = current_version_dir(data)
    assert current is not None
    index = current / INDEX_DIR
    highs, lows = (
        np.load(index / f"{name}.npy", mmap_mode="r") for name in ("lines_hi", "lines_lo")
    )
    rng = random.Random(7)
    paths = []
    for _ in range(LINE_CALLS):
        at = rng.randrange(len(highs))
        line_id = uuid.UUID(int=(int(highs[at]) << 64) | int(lows[at]))
        paths.append(f"/api/v1/fee-lines/{line_id}")
    return Case("fee line history, a different line each call", paths[0], EXCHANGE_HEADERS,
                tuple(paths[1:]))  # fmt: skip


EXPORT_TARGET = 200_000  # rows/s
EXPORT = Case("CSV export (venue box)", f"{RESULTS}?exchange_name=box&format=csv", EXCHANGE_HEADERS)


def rss_mb(process: subprocess.Popen[bytes]) -> tuple[int, int]:
    """Current and peak resident memory of a process, in MB (Linux /proc)."""
    memory = memory_kb(process.pid)
    return memory["VmRSS"] // 1024, memory["VmHWM"] // 1024


def memory_kb(pid: int) -> dict[str, int]:
    """A process's memory figures from /proc (VmRSS, VmHWM, RssAnon, RssFile, ...), in KiB."""
    lines = Path(f"/proc/{pid}/status").read_text().splitlines()
    fields = dict(line.split(":", 1) for line in lines)
    return {
        name: int(value.split()[0])
        for name, value in fields.items()
        if name.startswith(("Vm", "Rss"))
    }


def resident_parts_mb(process: subprocess.Popen[bytes]) -> tuple[int, int]:
    """A process's resident memory in MB as (anonymous, file-backed)."""
    memory = memory_kb(process.pid)
    return memory["RssAnon"] // 1024, memory["RssFile"] // 1024


def anonymous_mb(process: subprocess.Popen[bytes]) -> int:
    """A process's anonymous resident memory, in MB: its own, apart from mapped files' pages
    (what a replica must be given; `fees_process_resident_bytes{part="anonymous"}`)."""
    return resident_parts_mb(process)[0]


def export_rate(port: int) -> tuple[int, float]:
    """Rows and rows/s of one CSV download, streamed."""
    started, lines = time.perf_counter(), 0
    url = f"http://127.0.0.1:{port}{EXPORT.path}"
    with httpx.stream("GET", url, headers=EXPORT.headers, timeout=600) as response:
        for chunk in response.iter_bytes():
            lines += chunk.count(b"\n")
    rows = lines - 1  # the header
    return rows, rows / (time.perf_counter() - started)


def server_times(port: int, case: Case, calls: int) -> tuple[float, float]:
    """Median and p99 of the server's own time (ms) over sequential calls (the case's
    requests in turn)."""
    durations = []
    base = f"http://127.0.0.1:{port}"
    with httpx.Client(base_url=base, headers=case.headers, timeout=300) as client:
        for path in itertools.islice(itertools.cycle(case.paths), calls):
            answer = client.get(path)
            if answer.status_code != 200:
                raise SystemExit(f"{case.name}: {path} answered {answer.status_code}")
            durations.append(float(answer.headers["server-timing"].split("dur=")[1]))
    durations.sort()
    return statistics.median(durations), durations[int(len(durations) * 0.99) - 1]


@dataclass(frozen=True)
class Load:
    requests_per_second: float
    p50_ms: float
    p99_ms: float


WRK_UNITS = {"us": 0.001, "ms": 1.0, "s": 1000.0}


WRK_THREADS = 2
# The wrk threads walk the case's requests in turn, each its own share (thread n takes every
# WRK_THREADS-th request from the n-th), so no request comes twice until all have come.
ROTATE = """
paths = {%s}
local threads = 0
function setup(thread)
    thread:set("id", threads)
    threads = threads + 1
end
counter = 0
request = function()
    local path = paths[((counter * %d + id) %% #paths) + 1]
    counter = counter + 1
    return wrk.format(nil, path)
end
"""


def require_wrk(target: str) -> None:
    """Stop with the install command when wrk, the load generator, is missing."""
    if shutil.which("wrk") is None:
        raise SystemExit(f"{target} needs wrk: apt-get install wrk (Debian package)")


def wrk_command(port: int, case: Case, seconds: int, connections: int, scratch: Path) -> list[str]:
    command = ["wrk", f"-t{WRK_THREADS}", f"-c{connections}", f"-d{seconds}s", "--latency"]
    for name, value in case.headers.items():
        command += ["-H", f"{name}: {value}"]
    if case.more:
        script = scratch / "rotate.lua"
        paths = ", ".join(f'"{path}"' for path in case.paths)
        script.write_text(ROTATE % (paths, WRK_THREADS))
        command += ["-s", str(script)]
    return [*command, f"http://127.0.0.1:{port}{case.path}"]


def failures(output: str) -> int:
    """Requests wrk saw fail: non-2xx answers and socket errors of any kind."""
    found = re.search(r"Non-2xx or 3xx responses: (\d+)", output)
    return (int(found.group(1)) if found else 0) + socket_errors(output)


def socket_errors(output: str) -> int:
    """Connect, read and write errors and time-outs (wrk prints the line only when there are
    some)."""
    found = re.search(r"Socket errors: connect (\d+), read (\d+), write (\d+), timeout (\d+)",
                      output)  # fmt: skip
    return sum(int(number) for number in found.groups()) if found else 0


def wrk(port: int, case: Case, seconds: int, connections: int) -> Load:
    with tempfile.TemporaryDirectory() as scratch:
        command = wrk_command(port, case, seconds, connections, Path(scratch))
        output = subprocess.run(command, check=True, capture_output=True, text=True).stdout
    if failures(output):
        raise SystemExit(f"wrk saw failed requests for {case.name}:\n{output}")
    return parse_load(output)


# A warm case's load is measured in this many rounds, each paired with a round of the ceiling
# just before it: on a shared 2-core machine one ceiling run and one case run minutes apart
# differ by up to a third on noise alone (the same build measured 61% and 90% of the ceiling).
ROUNDS = 3
STATIC_CASE = Case("static bytes (ceiling)", "/static", {})


def paired(
    port: int,
    case: Case,
    against_port: int,
    seconds: int,
    connections: int,
    against: Case = STATIC_CASE,
    rounds: int = ROUNDS,
    alternate: bool = False,
) -> list[tuple[Load, Load]]:
    """(case, reference) loads of each round, the reference (the ceiling, unless `against`)
    run just before, or, when `alternate`, just after in every other round; the case's
    `seconds` are split over the rounds, and a case of many paths gives each round paths of its
    own (`rounds_of`)."""
    each = max(2, round(seconds / rounds))
    loads = []
    for number, asked in enumerate(rounds_of(case, rounds) if case.more else [case] * rounds):
        if alternate and number % 2:
            measured = wrk(port, asked, each, connections)
            loads.append((measured, wrk(against_port, against, each, connections)))
        else:
            reference = wrk(against_port, against, each, connections)
            loads.append((wrk(port, asked, each, connections), reference))
    return loads


def rounds_of(case: Case, rounds: int = ROUNDS) -> list[Case]:
    """A case of many paths cut into `rounds` cases of paths none of the others asks: each
    wrk run asks its paths from the first, so a cold case repeated whole asked again, from
    its second round on, what its first round had put in the response cache (a round of
    fee-types found 39,179 of 44,820 requests there, #40 part 6)."""
    share = len(case.paths) // rounds
    parts = [case.paths[share * number : share * (number + 1)] for number in range(rounds)]
    return [Case(case.name, part[0], case.headers, part[1:]) for part in parts]


def median_load(loads: list[Load]) -> Load:
    return Load(
        statistics.median(load.requests_per_second for load in loads),
        statistics.median(load.p50_ms for load in loads),
        statistics.median(load.p99_ms for load in loads),
    )


@dataclass(frozen=True)
class Warm:
    """A warm case: load only, since cached answers carry no `Server-Timing`."""

    name: str
    load: Load  # medians over the rounds
    ratio: float  # median of the rounds' ratios to the ceiling

    @classmethod
    def of(cls, name: str, rounds: list[tuple[Load, Load]]) -> "Warm":
        loads = [case for case, _ in rounds]
        ratios = [case.requests_per_second / top.requests_per_second for case, top in rounds]
        return cls(name, median_load(loads), statistics.median(ratios))


def parse_load(output: str) -> Load:
    rate = float(re.search(r"Requests/sec:\s+([\d.]+)", output).group(1))  # type: ignore[union-attr]
    latency = {
        percent: float(value) * WRK_UNITS[unit]
        for percent, value, unit in re.findall(r"\s(50|99)%\s+([\d.]+)(us|ms|s)\b", output)
    }
    return Load(rate, latency["50"], latency["99"])


def stage_copy(data: Path) -> tuple[Path, str]:
    """The current version staged again under a new id, ready for `publish.publish`: its files
    are hard links, its manifest and rollups rewritten with the new id."""
    current = current_version_dir(data)
    assert current is not None
    version_id = f"{datetime.now(UTC):%Y%m%dT%H%M%S%fZ}-bench"
    staged = publish.staging_dir(data, version_id)
    staged.rmdir()
    shutil.copytree(current, staged, copy_function=os.link)
    manifest = layout.read_manifest(current) | {"version_id": version_id}
    (staged / layout.MANIFEST).unlink()  # a link to the current version's file: replace it
    publish.write_manifest(staged, manifest)
    for path in (staged / ROLLUP_DIR).glob("*.parquet"):
        table = pq.read_table(path)
        path.unlink()
        stamped = {**(table.schema.metadata or {}), VERSION_KEY: version_id.encode()}
        pq.write_table(table.replace_schema_metadata(stamped), path)
    return staged, version_id


@dataclass(frozen=True)
class Switch:
    publishing: float  # seconds the publish took (making the version durable, then the swap)
    served_after: float | None  # seconds from the swap to the first answer from the version
    failed: int  # requests wrk saw fail while it ran
    load: Load


def switch(port: int, data: Path, case: Case, seconds: int, connections: int) -> Switch:
    """Publish a new version a third of the way into a wrk run of `case`, by the ingest's own
    protocol (made durable, then `current` swapped in one rename); time from the swap until an
    answer names the new version, and count the requests that failed."""
    with tempfile.TemporaryDirectory() as scratch:
        command = wrk_command(port, case, seconds, connections, Path(scratch))
        load = subprocess.Popen(command, stdout=subprocess.PIPE, text=True)
        staged, version_id = stage_copy(data)
        time.sleep(seconds / 3)
        started = time.perf_counter()
        publish.publish(data, staged, version_id)
        swapped = time.perf_counter()  # the swap is publish()'s last step but one (a dir fsync)
        served = None
        url = f"http://127.0.0.1:{port}{case.path}"
        with httpx.Client(headers=case.headers, timeout=10) as client:
            while served is None and time.perf_counter() - swapped < 30:
                if client.get(url).headers.get("x-dataset-version") == version_id:
                    served = time.perf_counter() - swapped
                else:
                    time.sleep(0.005)
        output, _ = load.communicate()
    publish.prune(data, keep=2)
    return Switch(swapped - started, served, failures(output), parse_load(output))


@dataclass
class Size:
    rows: int
    ready: float = 0.0  # seconds from start to the first answer (cache off)
    cold: dict[str, tuple[tuple[float, float], Load | None]] = field(default_factory=dict)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tools.bench", description=__doc__)
    parser.add_argument("--sizes", default="100000,1000000,10000000",
                        help="dataset sizes (records), comma-separated; the largest gets the "
                        "warm, switch and detailed cases")  # fmt: skip
    parser.add_argument("--seconds", type=int, default=10)
    parser.add_argument("--connections", type=int, default=32)
    parser.add_argument("--calls", type=int, default=300, help="sequential calls per case")
    parser.add_argument("--supplier", default="box")
    parser.add_argument("--port", type=int, default=8765)
    parser.add_argument("--registry", type=Path, default=Path("data/exchanges.csv"))
    parser.add_argument("--doc", type=Path, default=Path("docs/benchmarks.md"))
    args = parser.parse_args(argv)
    require_wrk("make bench")
    sizes = sorted(int(size) for size in args.sizes.split(","))
    datasets = {rows: ensure_dataset(rows, args.registry) for rows in sizes}
    largest = sizes[-1]
    # As `make run` starts it: the default log level, so an access line per request.
    env = {**os.environ, "FEES_ACCOUNTS_FILE": "data/demo-accounts.json"}
    ACCESS_LOG.parent.mkdir(exist_ok=True)
    ACCESS_LOG.unlink(missing_ok=True)
    ceiling_port = args.port + 1
    serve = [sys.executable, "-m", "service", "serve", "--port", str(args.port)]
    probe = cases(args.supplier)[-1]

    # Warm, each case in rounds alternating with the ceiling (both servers up, one loaded at a
    # time), and a publish under load: the service as users run it, cache on.
    warm: list[Warm] = []
    ceilings: list[Load] = []
    big = {**env, "FEES_DATA_DIR": str(datasets[largest])}
    quiet_port = args.port + 2  # the same server writing no access lines
    quiet = [sys.executable, "-m", "service", "serve", "--port", str(quiet_port)]
    with (
        serving(static_server(ceiling_port), ceiling_port, STATIC_CASE, env),
        serving(serve, args.port, probe, big, ACCESS_LOG) as (process, ready_seconds),
        serving(quiet, quiet_port, probe, {**big, "FEES_LOG_LEVEL": "warning"}),
    ):
        ready_rss, _ = rss_mb(process)
        ready_anonymous = anonymous_mb(process)
        loaded = (ceiling_port, args.seconds, args.connections)
        for case in cases(args.supplier):
            rounds = paired(args.port, case, *loaded)
            ceilings += [ceiling for _, ceiling in rounds]
            warm.append(Warm.of(case.name, rounds))
        warm.insert(0, Warm(STATIC_CASE.name, median_load(ceilings), 1.0))
        warm_at_once = answered_at_once(args.port)
        first = cases(args.supplier)[0]
        logging_cost = Warm.of(
            first.name,
            paired(
                args.port, first, quiet_port, ACCESS_SECONDS * ACCESS_ROUNDS, args.connections,
                first, rounds=ACCESS_ROUNDS, alternate=True,
            ),
        )  # fmt: skip
        # The same answer's bytes served by the ceiling's app: what the service's own work per
        # request leaves of what those bytes allow.
        answer = ACCESS_LOG.parent / "answer.json"
        answer_size = capture(args.port, first, answer)
        replay_port = args.port + 3
        replayed = Case(f"{first.name}, replayed", STATIC_CASE.path, first.headers)
        with serving(static_server(replay_port, answer), replay_port, replayed, env):
            same_bytes = Warm.of(
                first.name,
                paired(args.port, first, replay_port, args.seconds, args.connections, replayed),
            )
        fresh = [
            Warm.of(
                case.name, paired(args.port, case, ceiling_port, args.seconds, args.connections)
            )
            for case in cold_cases(datasets[largest], FRESH_REQUESTS * ROUNDS)
            if case.more  # the exchange list is one request: the cache answers it
        ]
        filled = Filled(
            ready_rss, rss_mb(process)[0], ready_anonymous, anonymous_mb(process),
            *cache_held(args.port),
        )  # fmt: skip
        switched = switch(
            args.port, datasets[largest], cases(args.supplier)[0], args.seconds, args.connections
        )
        warm_rss = rss_mb(process)
        # The results pages on the same server, cache on: the memory a replica must have
        # after the warm, cold and results cases (#40), a different page each call.
        server_times(args.port, RESULTS_SWEEP, len(RESULTS_SWEEP.paths))
        served_anonymous = anonymous_mb(process), cache_held(args.port)[1]

    # At every size, a cache-on server as shipped: its cache filled by the cold cases, then
    # turned over by the results pages; its anonymous memory against the sizing formula.
    sized_memory = []
    for rows in sizes:
        sized = {**env, "FEES_DATA_DIR": str(datasets[rows])}
        with serving(serve, args.port, probe, sized, ACCESS_LOG) as (process, _):
            ready = anonymous_mb(process)
            for case in cold_cases(datasets[rows], FRESH_REQUESTS):
                if case.more:
                    wrk(args.port, case, args.seconds, args.connections)
            server_times(args.port, RESULTS_SWEEP, len(RESULTS_SWEEP.paths))
            sized_memory.append((rows, ready, anonymous_mb(process)))

    # Cold at every size, with the response cache off (so it cannot help), then at the largest
    # the results pages and the export.
    measured = []
    for rows in sizes:
        size = Size(rows)
        sized = {**env, "FEES_DATA_DIR": str(datasets[rows]), "FEES_CACHE_MB": "0"}
        with serving(serve, args.port, probe, sized, ACCESS_LOG) as (process, size.ready):
            for case in cold_cases(datasets[rows]):
                times = server_times(args.port, case, args.calls)
                load = (
                    wrk(args.port, case, args.seconds, args.connections)
                    if rows == largest
                    else None
                )
                size.cold[case.name] = (times, load)
            if rows == largest:
                detail = [
                    (case, calls, target, server_times(args.port, case, calls))
                    for case, calls, target in [
                        *RESULT_CASES,
                        *HISTORY_CASES,
                        (line_case(datasets[rows]), LINE_CALLS, LINE_TARGET),
                    ]
                ]
                before = rss_mb(process)
                exported, rate = export_rate(args.port)
                ended = rss_mb(process)
                time.sleep(SETTLE_SECONDS)
                after, after_parts = rss_mb(process), resident_parts_mb(process)
        measured.append(size)
    table = "\n\n".join(
        [
            report(warm, args, largest, ready_seconds),
            at_once_report(*warm_at_once),
            same_bytes_report(same_bytes, *answer_size),
            fresh_report(fresh, logging_cost),
            cold_report(measured),
            detail_report(detail),
            f"{EXPORT.name}: {exported:,} rows at {rate:,.0f} rows/s "
            f"(target {EXPORT_TARGET:,}: {met(rate >= EXPORT_TARGET)}).",
            others_report(switched, warm_rss, (before, ended, after), after_parts, ready_seconds),
            anonymous_report(*served_anonymous),
            sizing_report(sized_memory),
            filled.report(),
        ]
    )
    print(table)
    write_section(args.doc, table, marker="bench-http", title="HTTP (`make bench`)")
    return 0


@dataclass(frozen=True)
class Filled:
    """The cache-on server's memory at ready and after the cold cases filled its response
    cache, with what the cache then held (its `/metrics`)."""

    ready_mb: int
    filled_mb: int
    ready_anonymous_mb: int
    filled_anonymous_mb: int
    answers: int
    held_bytes: int

    def report(self) -> str:
        grown, held = self.filled_mb - self.ready_mb, self.held_bytes / 2**20
        anonymous = self.filled_anonymous_mb - self.ready_anonymous_mb
        return (
            f"Memory and the response cache: the server's RSS was {self.ready_mb:,} MB when "
            f"ready and {self.filled_mb:,} MB once the cold cases had filled its cache with "
            f"{self.answers:,} answers of {held:,.1f} MB (bound: FEES_CACHE_MB, 64 by default): "
            f"{grown:+,} MB, {grown / held if held else 0:.1f} times what the cache holds; its "
            f"anonymous memory went from {self.ready_anonymous_mb:,} to "
            f"{self.filled_anonymous_mb:,} MB ({anonymous:+,} MB, "
            f"{anonymous / held if held else 0:.1f} times). The bound counts each answer's body, "
            f"its key's text and {ENTRY_BYTES:,} bytes beside them."
        )


def scraped(port: int) -> dict[str, int]:
    """A server's `/metrics`: each metric's samples summed over their labels."""
    text = httpx.get(f"http://127.0.0.1:{port}/metrics", timeout=5).text
    totals: dict[str, float] = {}
    for name, value in re.findall(r"^(\w+)(?:\{.*\})? (\S+)$", text, re.MULTILINE):
        totals[name] = totals.get(name, 0.0) + float(value)
    return {name: int(total) for name, total in totals.items()}


def answered_at_once(port: int) -> tuple[int, int]:
    """Of the requests a server answered, those the connection answered at once, and all."""
    metrics = scraped(port)
    return metrics["fees_answered_at_once_total"], metrics["fees_requests_total"]


def at_once_report(at_once: int, answered: int) -> str:
    return (
        f"Of the {answered:,} requests the server had answered by the end of its warm cases, "
        f"{at_once:,} ({at_once / answered:.1%}) were answered at once by the connection, from "
        "the response cache or by a quick endpoint's handler (`fees_answered_at_once_total`); "
        "the rest took the ASGI path."
    )


def cache_held(port: int) -> tuple[int, int]:
    """The answers and bytes the response cache holds, from the server's `/metrics`."""
    metrics = scraped(port)
    return metrics["fees_response_cache_answers"], metrics["fees_response_cache_bytes"]


WARM_TARGET = 0.90  # of the ceiling
# A cached answer's req/s with access lines, of the same without: #40's "no more than 5% of
# a warm request's cost" (0.90 here until 2026-11-28, looser than the issue)
ACCESS_TARGET = 0.95
# The lines cost a few percent, and two servers alike differed by 0.83-1.28 round to round on
# this shared machine (8 rounds of 3 s, median 0.99; #40 part 11): three rounds could not tell
# that from the lines' cost, so they are measured in more rounds, each server first in half.
ACCESS_ROUNDS, ACCESS_SECONDS = 12, 2
FRESH_TARGET, FRESH_P50 = 0.30, 3.0  # cold with the cache on: of the ceiling; wrk's p50, ms
COLD_RATE, COLD_P50, COLD_GROWTH = 2_000, 3.0, 1.5  # req/s, ms, p50 at largest / smallest
ANONYMOUS_TARGET = 300  # MB, after the cache-on server's cases and the results pages (#40)


@dataclass(frozen=True)
class Sizing:
    """The anonymous memory one worker needs (`docs/deploy.md`, "Memory per process"), in MB,
    once its response cache has filled with discovery answers and turned over to results
    pages, as the dataset's size and the cache bound give it. Fitted on make bench's runs of
    2026-11-28 (the cache grows to about 2.5 times its bound as small answers are replaced by
    large ones: freed heap between them is not handed back), and again on its layout 10 run
    (discovery's search memory-mapped, no longer built in memory: 20-38 MB less at ready);
    make bench checks it at every size, with the default bound."""

    base_mb: float = 75
    per_million_mb: float = 1  # per million records
    cache_factor: float = 2.5  # times FEES_CACHE_MB
    tolerance: float = 0.10

    def anonymous_mb(self, records: int, cache_mb: float) -> float:
        return self.base_mb + self.per_million_mb * records / 1e6 + self.cache_factor * cache_mb

    def formula(self) -> str:
        """As `docs/deploy.md` states it (a test holds the page to it)."""
        return (
            f"{self.base_mb:g} MB + {self.per_million_mb:g} MB per million records + "
            f"{self.cache_factor:g} times `FEES_CACHE_MB`"
        )


SIZING = Sizing()
DEFAULT_CACHE_MB = Settings().cache_mb  # FEES_CACHE_MB when unset
WARM_RSS_TARGET, RSS_TARGET = 400, 500  # MB: after the cache-on server's cases; after an export
READY_TARGET, SERVED_TARGET = 3.0, 1.0  # s, s
# Where the server's standard error goes, so its access lines are written (`make run`'s go to
# the terminal, or to whatever collects the process's output).
ACCESS_LOG = Path(".bench/access.log")
# RSS after an export is read again this long after it ended: DuckDB's allocator hands freed
# pages back after a second (`service.memory`), so the figure is what the server keeps.
SETTLE_SECONDS = 2.0


def met(ok: bool) -> str:
    return "met" if ok else "**not met**"


def _against(p50: float, target: float | None) -> str:
    if target is None:
        return "—"
    return f"< {target:g} ms: {met(p50 < target)}"


def report(
    rows: list[Warm],
    args: argparse.Namespace,
    records: int,
    ready_seconds: float,
) -> str:
    lines = [
        f"Machine: {machine()}",
        "",
        f"{records:,} synthetic records unless stated; supplier `{args.supplier}`; wrk "
        f"{args.connections} connections x {args.seconds} s per case; server time = "
        f"`Server-Timing` over {args.calls} sequential calls.",
        "",
        "What differs from `make run`: the server is `python -m service serve` (what `fees "
        "serve` runs) with the same accounts file, one worker and the default log level (an "
        "access line per request), but over synthetic data, without `FEES_DOCS_KEY`, and "
        f"with its standard error appended to a file (`{ACCESS_LOG}`), where `make run` "
        "writes to the terminal.",
        "",
        "Warm (the same request repeated; the response cache answers all but the first). Each "
        f"case runs in {ROUNDS} rounds, each right after a round of the ceiling; the figures "
        "are medians over the rounds, and the ratio is the median of the rounds' ratios (the "
        "ceiling row: over all its rounds):",
        "",
        "| case | req/s | ratio to ceiling | latency p50 / p99 (ms) "
        f"| ≥ {WARM_TARGET:.0%} of ceiling |",
        "|---|---|---|---|---|",
    ]
    for row in rows:
        load = row.load
        verdict = "—" if row.name == STATIC_CASE.name else met(row.ratio >= WARM_TARGET)
        lines.append(
            f"| {row.name} | {load.requests_per_second:,.0f} | {row.ratio:.0%} | "
            f"{load.p50_ms:.2f} / {load.p99_ms:.2f} | {verdict} |"
        )
    return "\n".join(lines)


def same_bytes_report(same_bytes: Warm, body_bytes: int, headers: int) -> str:
    return (
        f"Same bytes: {same_bytes.name} (cached) at {same_bytes.load.requests_per_second:,.0f} "
        f"req/s, {same_bytes.ratio:.0%} of the ceiling's app answering that answer's own bytes "
        f"({body_bytes:,} bytes of body and {headers} headers, replayed; in alternate rounds). "
        f"The ceiling above answers {len(STATIC_BODY)} bytes and {STATIC_HEADERS} headers, so "
        "this ratio is what the service's own work leaves; the rest of the warm gap is the "
        "answer's size."
    )


def fresh_report(fresh: list[Warm], logging_cost: Warm) -> str:
    """The access lines' cost on a cached answer, and the cold cases with the cache on."""
    load = logging_cost.load
    lines = [
        f"Access lines: {logging_cost.name} (cached) at {load.requests_per_second:,.0f} req/s "
        f"with them, {logging_cost.ratio:.0%} of the same server's throughput without "
        f"(`FEES_LOG_LEVEL=warning`; the median of {ACCESS_ROUNDS} rounds of {ACCESS_SECONDS} "
        f"s, each server first in half of them; target ≥ {ACCESS_TARGET:.0%}: "
        f"{met(logging_cost.ratio >= ACCESS_TARGET)}).",
        "",
        f"Cold with the cache on, as shipped (every request a new supplier and window, "
        f"each round {FRESH_REQUESTS:,} of its own in turn, none twice), in rounds after the "
        "ceiling's as above; "
        "latency from wrk, end to end under that load:",
        "",
        f"| case | req/s | ratio to ceiling | latency p50 / p99 (ms) | ≥ {FRESH_TARGET:.0%} of "
        f"ceiling, p50 ≤ {FRESH_P50:g} ms |",
        "|---|---|---|---|---|",
    ]
    for row in fresh:
        ok = row.ratio >= FRESH_TARGET and row.load.p50_ms <= FRESH_P50
        lines.append(
            f"| {row.name} | {row.load.requests_per_second:,.0f} | {row.ratio:.0%} | "
            f"{row.load.p50_ms:.2f} / {row.load.p99_ms:.2f} | {met(ok)} |"
        )
    return "\n".join(lines)


def cold_report(sizes: list[Size]) -> str:
    """Server time per size, and the load at the largest, for every cold case."""
    smallest, largest = sizes[0], sizes[-1]
    head = " | ".join(f"p50 / p99 at {size.rows:,}" for size in sizes)
    lines = [
        f"Cold (every request a different supplier and window, {COLD_REQUESTS:,} in turn; cache "
        "off). Server time in ms; load at the largest size; start to ready: "
        + ", ".join(f"{size.ready:.1f} s at {size.rows:,}" for size in sizes)
        + ".",
        "",
        f"| case | {head} | growth | req/s | latency p50 / p99 (ms) | targets |",
        "|---" * (len(sizes) + 5) + "|",
    ]
    for name, (times, load) in largest.cold.items():
        cells = " | ".join("{:.2f} / {:.2f}".format(*size.cold[name][0]) for size in sizes)
        growth = times[0] / smallest.cold[name][0][0]
        assert load is not None
        ok = (
            load.requests_per_second >= COLD_RATE and times[0] <= COLD_P50 and growth <= COLD_GROWTH
        )
        lines.append(
            f"| {name} | {cells} | {growth:.2f}x | {load.requests_per_second:,.0f} | "
            f"{load.p50_ms:.2f} / {load.p99_ms:.2f} | {met(ok)} |"
        )
    lines.append("")
    lines.append(
        f"Targets: ≥ {COLD_RATE:,} req/s, p50 ≤ {COLD_P50:g} ms, p50 at the largest size ≤ "
        f"{COLD_GROWTH:g}x the p50 at the smallest."
    )
    return "\n".join(lines)


def detail_report(
    detail: list[tuple[Case, int, float | None, tuple[float, float]]],
) -> str:
    lines = [
        "| detailed data (cache off) | calls | server time p50 / p99 (ms) | target p50 |",
        "|---|---|---|---|",
    ]
    lines += [
        f"| {case.name} | {calls} | {p50:.1f} / {p99:.1f} | {_against(p50, target)} |"
        for case, calls, target, (p50, p99) in detail
    ]
    return "\n".join(lines)


def sizing_report(measured: list[tuple[int, int, int]]) -> str:
    """Each size's anonymous memory (at ready; after the cold cases and the results pages, its
    cache full) against the sizing formula."""
    lines = [
        f"Memory a worker needs: a cache-on server per size (the default bound, "
        f"{DEFAULT_CACHE_MB} MB), its cache filled by the cold cases (wrk, as above) and turned "
        f"over by {len(RESULTS_SWEEP.paths)} different results pages of 100, against "
        f"`docs/deploy.md`'s formula, {SIZING.formula()}:",
        "",
        "| records | anonymous at ready | after the cases | formula | measured / formula | "
        f"within {SIZING.tolerance:.0%} |",
        "|---|---|---|---|---|---|",
    ]
    for rows, ready, after in measured:
        predicted = SIZING.anonymous_mb(rows, DEFAULT_CACHE_MB)
        ratio = after / predicted
        lines.append(
            f"| {rows:,} | {ready:,} MB | {after:,} MB | {predicted:,.0f} MB | {ratio:.2f} | "
            f"{met(abs(ratio - 1) <= SIZING.tolerance)} |"
        )
    return "\n".join(lines)


def anonymous_report(anonymous: int, cached_bytes: int) -> str:
    """The cache-on server's anonymous memory after its warm, cold, switch and results cases,
    against #40's target, with what its response cache then held."""
    return (
        f"Anonymous memory of the cache-on server after its warm, cold (cache on), switch and "
        f"results cases ({len(RESULTS_SWEEP.paths):,} different results pages of 100): "
        f"{anonymous:,} MB, its cache holding {cached_bytes / 2**20:,.1f} MB (target ≤ "
        f"{ANONYMOUS_TARGET} MB with the default cache bound: "
        f"{met(anonymous <= ANONYMOUS_TARGET)})."
    )


def others_report(
    switched: Switch,
    warm_rss: tuple[int, int],
    export_rss: tuple[tuple[int, int], tuple[int, int], tuple[int, int]],
    export_parts: tuple[int, int],
    ready_seconds: float,
) -> str:
    """`export_rss`: (current, peak) before the export, as it ended, and `SETTLE_SECONDS`
    later; `export_parts`: the last as (anonymous, file-backed)."""
    served = switched.served_after
    before, ended, after = export_rss
    anonymous, file = export_parts
    peak = max(warm_rss[1], after[1])
    return "\n".join(
        [
            "| measure | result | target |",
            "|---|---|---|",
            f"| start to ready (cache on, largest size) | {ready_seconds:.2f} s | ≤ "
            f"{READY_TARGET:g} s: {met(ready_seconds <= READY_TARGET)} |",
            f"| publish to served, under load (from the swap of `current`; the publish itself "
            f"took {switched.publishing:.2f} s) | "
            f"{'never' if served is None else f'{served:.2f} s'} | ≤ {SERVED_TARGET:g} s: "
            f"{met(served is not None and served <= SERVED_TARGET)} |",
            f"| failed requests during the switch ({switched.load.requests_per_second:,.0f} "
            f"req/s) | {switched.failed} | 0: {met(switched.failed == 0)} |",
            f"| server RSS after its warm, cold (cache on) and switch cases | {warm_rss[0]:,} "
            f"MB (peak {warm_rss[1]:,}) | ≤ {WARM_RSS_TARGET} MB: "
            f"{met(warm_rss[0] <= WARM_RSS_TARGET)} |",
            f"| server RSS before / as it ended / {SETTLE_SECONDS:g} s after the export (cache "
            f"off) | {before[0]:,} / {ended[0]:,} / {after[0]:,} MB (peak {after[1]:,}) | < "
            f"{RSS_TARGET} MB after: {met(after[0] < RSS_TARGET)} |",
            # #40 (3) bounds what a replica needs by its anonymous memory: a mapped file's
            # pages are page cache, which the kernel drops and reads again under pressure.
            f"| of which the server's own (anonymous) / the mapped version's file pages, "
            f"{SETTLE_SECONDS:g} s after the export | {anonymous:,} / {file:,} MB | anonymous "
            f"< {RSS_TARGET} MB: {met(anonymous < RSS_TARGET)} |",
            f"| largest peak RSS seen | {peak:,} MB | — |",
        ]
    )


if __name__ == "__main__":
    sys.exit(main())
