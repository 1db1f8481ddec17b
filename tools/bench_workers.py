"""`make bench-workers`: one warm discovery case served by 1 and by 2 processes.

`fees serve --workers 1` and `fees serve --workers 2` run side by side over the same data (the
1M-record benchmark dataset of `make bench` when it exists, else `data/warehouse`), both up,
one loaded at a time: wrk at 64 connections for 10 s on the same discovery request (so each
process's response cache answers all but its first), alternating 1 and 2 workers, 3 runs each
(a shared 2-core machine varies by a third from one minute to the next). Each run and the
medians, and the resident memory of each server's processes after its runs, are printed and
written between the markers of the "Workers (1 vs 2)" section of `docs/benchmarks.md`.
"""

import argparse
import os
import statistics
import sys
from contextlib import ExitStack
from pathlib import Path

from ingest.layout import current_version_dir
from tools.bench import SUPPLIER_HEADERS, Case, Load, memory_kb, require_wrk, serving, wrk
from tools.bench_ingest import machine, write_section

WORKERS = (1, 2)
WARM_UP_SECONDS = 3  # before the first run: every worker opens the version and fills its cache


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tools.bench_workers", description=__doc__)
    parser.add_argument("--data", type=Path, help="default: .bench/warehouse-1000000, if built")
    parser.add_argument("--supplier", default="box")
    parser.add_argument("--runs", type=int, default=3, help="runs per worker count")
    parser.add_argument("--seconds", type=int, default=10)
    parser.add_argument("--connections", type=int, default=64)
    parser.add_argument("--port", type=int, default=8775, help="and the next one")
    parser.add_argument("--doc", type=Path, default=Path("docs/benchmarks.md"))
    args = parser.parse_args(argv)
    require_wrk("make bench-workers")
    data = args.data or default_data()
    if current_version_dir(data) is None:
        raise SystemExit(f"no published version under {data}: run `make ingest` first")
    case = Case(
        f"actions ({args.supplier})", f"/api/v1/suppliers/{args.supplier}/actions", SUPPLIER_HEADERS
    )
    env = {
        **os.environ,
        "FEES_DATA_DIR": str(data),
        "FEES_ACCOUNTS_FILE": "data/demo-accounts.json",
        "FEES_LOG_LEVEL": "warning",
    }
    fees = str(Path(sys.executable).with_name("fees"))
    ports = {workers: args.port + index for index, workers in enumerate(WORKERS)}
    runs: dict[int, list[Load]] = {workers: [] for workers in WORKERS}
    with ExitStack() as servers:
        pids = {}
        for workers, port in ports.items():
            command = [fees, "serve", "--port", str(port), "--workers", str(workers)]
            process, _ = servers.enter_context(serving(command, port, case, env))
            pids[workers] = process.pid
            wrk(port, case, WARM_UP_SECONDS, args.connections)
        for _ in range(args.runs):
            for workers, port in ports.items():
                runs[workers].append(wrk(port, case, args.seconds, args.connections))
                print(f"{workers} worker(s): {runs[workers][-1].requests_per_second:,.0f} req/s")
        memory = {workers: tree_rss_mb(pid) for workers, pid in pids.items()}
    table = report(runs, memory, case, data, args)
    print(table)
    write_section(args.doc, table, marker="bench-workers", title="Workers (1 vs 2)")
    return 0


def default_data() -> Path:
    bench = Path(".bench/warehouse-1000000")
    return bench if current_version_dir(bench) is not None else Path("data/warehouse")


def tree_rss_mb(pid: int) -> int:
    """Resident memory of a process and its children, in MB (Linux /proc): a worker count's
    whole cost (uvicorn's parent, the workers and multiprocessing's resource tracker)."""
    children = Path(f"/proc/{pid}/task/{pid}/children").read_text().split()
    return sum(memory_kb(process)["VmRSS"] for process in [pid, *map(int, children)]) // 1024


def report(
    runs: dict[int, list[Load]],
    memory: dict[int, int],
    case: Case,
    data: Path,
    args: argparse.Namespace,
) -> str:
    medians = {workers: statistics.median(r.requests_per_second for r in runs[workers])
               for workers in runs}  # fmt: skip
    one = medians[WORKERS[0]]
    lines = [
        f"Machine: {machine()} (`nproc`: {os.cpu_count()})",
        "",
        f"`make bench-workers`: `GET {case.path}` (warm), `wrk -t2 -c{args.connections} "
        f"-d{args.seconds}s`",
        f"against `fees serve --workers N` over `{data}`; runs alternate between the worker "
        "counts.",
        "",
        "| workers | requests/s, each run | median | p50 / p99 (median) | vs 1 worker | RSS |",
        "|---|---|---|---|---|---|",
    ]
    for workers, loads in runs.items():
        each = ", ".join(f"{load.requests_per_second:,.0f}" for load in loads)
        p50 = statistics.median(load.p50_ms for load in loads)
        p99 = statistics.median(load.p99_ms for load in loads)
        lines.append(
            f"| {workers} | {each} | {medians[workers]:,.0f} | {p50:.2f} / {p99:.2f} ms "
            f"| {medians[workers] / one:.2f}x | {memory[workers]} MB |"
        )
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(main())
