"""`make bench`: the discovery API under load, against a static-bytes ceiling, at scale.

For each dataset size the synthetic records are made once (`make synth`, cached under
`data/synth/`) and ingested once (cached under `.bench/`). Then, in one run and back to back:

- the ceiling: `static_app` below, a Starlette app answering fixed bytes, served by uvicorn
  with exactly the settings `python -m service serve` uses (one worker, same loop and HTTP
  implementation);
- the service itself, as `python -m service serve` runs it, for every discovery endpoint
  (warm: the same request repeated, so its response cache answers all but the first);
- the results pages and a CSV export, on a second start of the service with the cache off.

Each case reports: the server's own time per call (median and p99 of the `Server-Timing`
header over sequential calls, no concurrency), and requests/s with p50/p99 latency from wrk
at 32 connections for 10 s, with the ratio to the ceiling. Results are printed and written
between the markers of `docs/benchmarks.md`.
"""

import argparse
import os
import re
import shutil
import statistics
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import httpx
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from ingest.bench import ensure_synth, machine, write_section
from ingest.publish import current_version_dir
from ingest.serving import SERVING_FILE

STATIC_BODY = b'{"data":[{"name":"static","record_count":0}],"meta":{"record_count":1}}'


async def _static(request: Request) -> Response:
    # Answered on the event loop, as a cached answer is: the cheapest answer the server gives.
    return Response(STATIC_BODY, media_type="application/json")


static_app = Starlette(routes=[Route("/static", _static)])

KEY = "demo-key"
SUPPLIER_HEADERS = {"Authorization": f"Bearer {KEY}"}
EXCHANGE_HEADERS = {"x-service-api-access-key": KEY}


@dataclass(frozen=True)
class Case:
    name: str
    path: str
    headers: dict[str, str]


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


def ensure_dataset(rows: int, registry: Path) -> Path:
    data = Path(".bench") / f"warehouse-{rows}"
    current = current_version_dir(data)
    if current is None or not (current / SERVING_FILE).exists():  # none, or made before it
        shutil.rmtree(data, ignore_errors=True)
        raw = ensure_synth(rows, registry)
        subprocess.run(
            [sys.executable, "-m", "ingest", "--raw", str(raw), "--data", str(data),
             "--registry", str(registry)],
            check=True,
        )  # fmt: skip
    return data


@contextmanager
def serving(
    command: list[str], port: int, probe: Case, env: dict[str, str]
) -> Iterator[tuple[subprocess.Popen[bytes], float]]:
    """Start a server process; yields it and the seconds from start until it answered `probe`."""
    started = time.perf_counter()
    process = subprocess.Popen(
        command, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
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
# over this many sequential calls, against issue #4's targets (median server time, ms).
RESULT_CASES = [
    (Case("results, filtered first page", f"{RESULTS}?exchange_name=box&fee_type=option"
          "&fee_action=make&page_size=20", EXCHANGE_HEADERS), 100, 20.0),
    (Case("results, first page, no filter", f"{RESULTS}?page_size=20", EXCHANGE_HEADERS), 50,
     None),
    (Case("results, page 10,000", f"{RESULTS}?page_size=20&page_number=10000",
          EXCHANGE_HEADERS), 50, 50.0),
]  # fmt: skip
EXPORT_TARGET = 200_000  # rows/s
EXPORT = Case("CSV export (venue box)", f"{RESULTS}?exchange_name=box&format=csv", EXCHANGE_HEADERS)


def rss_mb(process: subprocess.Popen[bytes]) -> tuple[int, int]:
    """Current and peak resident memory of a process, in MB (Linux /proc)."""
    fields = dict(
        line.split(":", 1) for line in Path(f"/proc/{process.pid}/status").read_text().splitlines()
    )
    return int(fields["VmRSS"].split()[0]) // 1024, int(fields["VmHWM"].split()[0]) // 1024


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
    """Median and p99 of the server's own time (ms) over sequential calls."""
    durations = []
    base = f"http://127.0.0.1:{port}"
    with httpx.Client(base_url=base, headers=case.headers, timeout=300) as client:
        for _ in range(calls):
            timing = client.get(case.path).headers["server-timing"]
            durations.append(float(timing.split("dur=")[1]))
    durations.sort()
    return statistics.median(durations), durations[int(len(durations) * 0.99) - 1]


@dataclass(frozen=True)
class Load:
    requests_per_second: float
    p50_ms: float
    p99_ms: float


WRK_UNITS = {"us": 0.001, "ms": 1.0, "s": 1000.0}


def wrk(port: int, case: Case, seconds: int, connections: int) -> Load:
    command = ["wrk", "-t2", f"-c{connections}", f"-d{seconds}s", "--latency"]
    for name, value in case.headers.items():
        command += ["-H", f"{name}: {value}"]
    output = subprocess.run(
        [*command, f"http://127.0.0.1:{port}{case.path}"],
        check=True, capture_output=True, text=True,
    ).stdout  # fmt: skip
    if "Non-2xx" in output:
        raise SystemExit(f"wrk saw failed requests for {case.name}:\n{output}")
    rate = float(re.search(r"Requests/sec:\s+([\d.]+)", output).group(1))  # type: ignore[union-attr]
    latency = {
        percent: float(value) * WRK_UNITS[unit]
        for percent, value, unit in re.findall(r"\s(50|99)%\s+([\d.]+)(us|ms|s)\b", output)
    }
    return Load(rate, latency["50"], latency["99"])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m service.bench", description=__doc__)
    parser.add_argument("--rows", type=int, default=10_000_000)
    parser.add_argument("--seconds", type=int, default=10)
    parser.add_argument("--connections", type=int, default=32)
    parser.add_argument("--calls", type=int, default=300, help="sequential calls per case")
    parser.add_argument("--supplier", default="box")
    parser.add_argument("--port", type=int, default=8765)
    parser.add_argument("--registry", type=Path, default=Path("data/exchanges.csv"))
    parser.add_argument("--doc", type=Path, default=Path("docs/benchmarks.md"))
    args = parser.parse_args(argv)
    if shutil.which("wrk") is None:
        raise SystemExit("make bench needs wrk: apt-get install wrk (Debian package)")
    data = ensure_dataset(args.rows, args.registry)
    env = {
        **os.environ,
        "FEES_DATA_DIR": str(data),
        "FEES_ACCOUNTS_FILE": "data/demo-accounts.json",
        "FEES_LOG_LEVEL": "warning",
    }
    uvicorn = [sys.executable, "-m", "uvicorn", "--port", str(args.port), "--log-level", "warning"]
    static_case = Case("static bytes (ceiling)", "/static", {})
    with serving([*uvicorn, "service.bench:static_app"], args.port, static_case, env):
        ceiling = wrk(args.port, static_case, args.seconds, args.connections)
    serve = [sys.executable, "-m", "service", "serve", "--port", str(args.port)]
    rows: list[tuple[str, tuple[float, float] | None, Load]] = [
        ("static bytes (ceiling)", None, ceiling)
    ]
    probe = cases(args.supplier)[-1]
    with serving(serve, args.port, probe, env) as (process, ready_seconds):
        for case in cases(args.supplier):
            times = server_times(args.port, case, args.calls)
            rows.append((case.name, times, wrk(args.port, case, args.seconds, args.connections)))
    # Pages and the export are timed with the response cache off: repeating one page would
    # otherwise time the cache, not the page.
    with serving(serve, args.port, probe, {**env, "FEES_CACHE_MB": "0"}) as (process, _):
        detail = [
            (case, calls, target, server_times(args.port, case, calls))
            for case, calls, target in RESULT_CASES
        ]
        before = rss_mb(process)
        exported, rate = export_rate(args.port)
        after = rss_mb(process)
    table = report(rows, ceiling, args, ready_seconds)
    table += "\n\n| detailed data (cache off) | calls | server time p50 / p99 (ms) | target p50 |\n"
    table += "|---|---|---|---|\n"
    table += "\n".join(
        f"| {case.name} | {calls} | {p50:.1f} / {p99:.1f} | {_against(p50, target)} |"
        for case, calls, target, (p50, p99) in detail
    )
    table += (
        f"\n\n{EXPORT.name}: {exported:,} rows at {rate:,.0f} rows/s "
        f"(target {EXPORT_TARGET:,}: {'met' if rate >= EXPORT_TARGET else 'not met'}); server RSS "
        f"{before[0]:,} MB before, {after[0]:,} MB after, peak {after[1]:,} MB."
    )
    print(table)
    write_section(args.doc, table, marker="bench-http", title="HTTP (`make bench`)")
    return 0


def _against(p50: float, target: float | None) -> str:
    if target is None:
        return "—"
    return f"< {target:g} ms: {'met' if p50 < target else 'not met'}"


def report(
    rows: list[tuple[str, tuple[float, float] | None, Load]],
    ceiling: Load,
    args: argparse.Namespace,
    ready_seconds: float,
) -> str:
    lines = [
        f"Machine: {machine()}",
        "",
        f"{args.rows:,} synthetic records; supplier `{args.supplier}`; wrk {args.connections} "
        f"connections x {args.seconds} s per case; server time = `Server-Timing` over "
        f"{args.calls} sequential calls; start to ready {ready_seconds:.1f} s.",
        "",
        "| case | server time p50 / p99 (ms) | req/s | ratio to ceiling | latency p50 / p99 (ms) |",
        "|---|---|---|---|---|",
    ]
    for name, times, load in rows:
        server = f"{times[0]:.2f} / {times[1]:.2f}" if times else "—"
        lines.append(
            f"| {name} | {server} | {load.requests_per_second:,.0f} | "
            f"{load.requests_per_second / ceiling.requests_per_second:.0%} | "
            f"{load.p50_ms:.2f} / {load.p99_ms:.2f} |"
        )
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(main())
