"""`make bench` (its second part): what pricing executions costs, at the largest synthetic size.

Fills are drawn from the version itself: records of fees and rebates that carry a fee code
(a third of the synthetic lines do, each its own code) and price per share, per contract or as
a percentage of value, each on a day of its record's period, so a fill finds its line as a
member's execution report would name it. Then, against the issue's targets:

- `POST /api/v1/fee-estimates` with 1,000 and with 100,000 fills, on the service as
  `python -m service serve` runs it (as `make run` starts it: one worker, access lines on,
  written to `.bench/access.log`): the server's own time per call (`Server-Timing`), median
  over sequential calls;
- `fees price` on 1,000,000 fills written to a CSV: wall time (median of three runs) and peak
  memory: the largest maximum resident set of the runs, and the peaks of its anonymous and
  file-backed parts (`Run`).

Results are printed and written between the markers of `docs/benchmarks.md`.
"""

import argparse
import csv
import os
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import duckdb
import httpx

from tools.bench import (
    ACCESS_LOG,
    EXCHANGE_HEADERS,
    Case,
    ensure_dataset,
    memory_kb,
    met,
    serving,
)
from tools.bench_ingest import machine, write_section

PATH = "/api/v1/fee-estimates"
# The targets: server time p50 per call, and the command's wall time and peak memory.
BATCHES = ((1_000, 50, 50.0), (100_000, 5, 2_000.0))  # fills, calls, target ms
COMMAND_FILLS = 1_000_000
COMMAND_RUNS = 3
COMMAND_SECONDS = 10.0
COMMAND_MB = 1_536

# Fills of the version's coded lines: a record's venue, fee type and first code, a day of its
# period (at most 60 days in, so a record still open is in force), a price in its band, its
# participant and penny class. (A sample of a subquery: `USING SAMPLE` on a FROM samples the
# files' rows before the WHERE.)
DRAW_FILLS = """
SELECT *
FROM (
SELECT
    exchange AS exchange_name,
    strftime(effective_start + CAST(hash(record_id) % CAST(1 + date_diff(
        'day', effective_start, coalesce(effective_end, effective_start + 60)) AS UBIGINT)
        AS INTEGER), '%Y-%m-%d')
        AS trade_date,
    100 AS quantity,
    CASE WHEN price_band = 'below_1' THEN '0.50' ELSE '25.10' END AS price,
    fee_type,
    participant AS fee_participant,
    CASE WHEN symbol_type IN ('penny', 'non_penny') THEN symbol_type END AS symbol_type,
    fee_codes[1] AS fee_code
FROM read_parquet($files, hive_partitioning = true, hive_types = {{'exchange': VARCHAR}})
WHERE fee_category = 'fees_and_rebates' AND len(fee_codes) > 0 AND amount IS NOT NULL
    AND unit IN ('per_share', 'per_contract', 'percent_of_value')
)
USING SAMPLE reservoir({count} ROWS) REPEATABLE (7)
"""
FIELDS = (
    "exchange_name", "trade_date", "quantity", "price", "fee_type", "fee_participant",
    "symbol_type", "fee_code",
)  # fmt: skip


def draw_fills(data: Path, count: int) -> list[dict[str, Any]]:
    """`count` fills drawn from the current version under `data` (fewer if it has fewer)."""
    files = [str(path) for path in (data / "current" / "fees").rglob("*.parquet")]
    # A sample's size must be a constant in the statement: a whole number, formatted in.
    statement = DRAW_FILLS.format(count=int(count))
    cursor = duckdb.connect().execute(statement, {"files": files})
    return [dict(zip(FIELDS, row, strict=True)) for row in cursor.fetchall()]


def post_times(port: int, fills: list[dict[str, Any]], calls: int) -> tuple[float, int]:
    """Median server time (ms) of `calls` sequential POSTs of `fills`, and how many it priced."""
    durations, priced = [], 0
    with httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=300) as client:
        for _ in range(calls):
            answer = client.post(PATH, json={"fills": fills}, headers=EXCHANGE_HEADERS)
            if answer.status_code != 200:
                raise SystemExit(f"{len(fills):,} fills: answered {answer.status_code}")
            durations.append(float(answer.headers["server-timing"].split("dur=")[1]))
            priced = answer.json()["meta"]["priced"]
    return statistics.median(durations), priced


@dataclass(frozen=True)
class Run:
    """One `fees price` run: wall seconds; peak resident memory (MB, from `wait4`); and the
    peaks of its anonymous and file-backed parts (MB, `RssAnon` and `RssFile` sampled every
    20 ms): the file-backed part is pages of the version's memory-mapped index and record
    summary, which the kernel reclaims as it needs."""

    seconds: float
    peak_mb: float
    anonymous_mb: float
    file_mb: float


def command_run(source: Path, out: Path, data: Path) -> Run:
    started = time.perf_counter()
    child = subprocess.Popen(
        [sys.executable, "-m", "service", "price", str(source), "--out", str(out),
         "--data", str(data)],
        stderr=subprocess.DEVNULL,
    )  # fmt: skip
    peaks = {"RssAnon": 0, "RssFile": 0}
    while True:
        ended, status, usage = os.wait4(child.pid, os.WNOHANG)  # this child's own usage
        if ended:
            break
        for name, kilobytes in _status(child.pid).items():
            peaks[name] = max(peaks[name], kilobytes)
        time.sleep(0.02)
    seconds = time.perf_counter() - started
    if os.waitstatus_to_exitcode(status) != 0:
        raise SystemExit(f"fees price exited {os.waitstatus_to_exitcode(status)}")
    peak = usage.ru_maxrss / 1024  # kilobytes on Linux
    return Run(seconds, peak, peaks["RssAnon"] / 1024, peaks["RssFile"] / 1024)


def _status(pid: int) -> dict[str, int]:
    """The process's current `RssAnon` and `RssFile` (kB); none once it has ended (an exited
    process not yet waited for still has a status, without them)."""
    try:
        memory = memory_kb(pid)
    except (FileNotFoundError, ProcessLookupError):
        return {}
    return {name: memory[name] for name in ("RssAnon", "RssFile") if name in memory}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tools.bench_pricing", description=__doc__)
    parser.add_argument("--rows", type=int, default=10_000_000)
    parser.add_argument("--port", type=int, default=8775)
    parser.add_argument("--registry", type=Path, default=Path("data/exchanges.csv"))
    parser.add_argument("--doc", type=Path, default=Path("docs/benchmarks.md"))
    args = parser.parse_args(argv)
    data = ensure_dataset(args.rows, args.registry)
    fills = draw_fills(data, COMMAND_FILLS)
    env = {**os.environ, "FEES_ACCOUNTS_FILE": "data/demo-accounts.json",
           "FEES_DATA_DIR": str(data)}  # fmt: skip
    serve = [sys.executable, "-m", "service", "serve", "--port", str(args.port)]
    probe = Case("exchanges", "/api/v1/exchanges/", EXCHANGE_HEADERS)
    ACCESS_LOG.parent.mkdir(exist_ok=True)
    lines = [
        f"Machine: {machine()}. {args.rows:,} synthetic records; fills drawn from their coded "
        "lines (`tools/bench_pricing.py`). The server is `python -m service serve` as `make run` "
        "serves (one worker, the default log level: an access line per request, to "
        "`.bench/access.log`); unlike it, over the synthetic version, with "
        "`FEES_ACCOUNTS_FILE=data/demo-accounts.json` and no `FEES_DOCS_KEY`. Server time is "
        "the `Server-Timing` header, one client calling in turn. The command is `python -m "
        "service price FILLS.csv --out FILE --data DIR`, as an analyst runs it. The machine "
        "is shared: compare figures of one run, not across runs.",
        "",
        "| case | measured | target | |",
        "|---|---:|---:|---|",
    ]
    with serving(serve, args.port, probe, env, ACCESS_LOG):
        for count, calls, target in BATCHES:
            p50, priced = post_times(args.port, fills[:count], calls)
            lines.append(
                f"| POST /fee-estimates, {count:,} fills ({priced:,} priced), server time p50 of "
                f"{calls} | {p50:,.1f} ms | {target:,.0f} ms | {met(p50 <= target)} |"
            )
    with tempfile.TemporaryDirectory() as scratch:
        source, out = Path(scratch) / "fills.csv", Path(scratch) / "priced.csv"
        with source.open("w", newline="", encoding="utf-8") as handle:
            writer = csv.DictWriter(handle, fieldnames=FIELDS)
            writer.writeheader()
            writer.writerows(fills)
        runs = [command_run(source, out, data) for _ in range(COMMAND_RUNS)]
    seconds = statistics.median(run.seconds for run in runs)
    peak = max(run.peak_mb for run in runs)
    anonymous = statistics.median(run.anonymous_mb for run in runs)
    mapped = statistics.median(run.file_mb for run in runs)
    lines += [
        f"| `fees price`, {len(fills):,} fills, wall (median of {COMMAND_RUNS}) | "
        f"{seconds:.1f} s | {COMMAND_SECONDS:.0f} s | {met(seconds <= COMMAND_SECONDS)} |",
        f"| `fees price`, peak resident memory (the largest run) | {peak:,.0f} MB | "
        f"{COMMAND_MB:,} MB | {met(peak <= COMMAND_MB)} |",
        f"| of which anonymous, peak (median of {COMMAND_RUNS}) | {anonymous:,.0f} MB | | |",
        f"| of which mapped files, peak (median of {COMMAND_RUNS}) | {mapped:,.0f} MB | | |",
    ]
    table = "\n".join(lines)
    print(table)
    write_section(args.doc, table, marker="bench-pricing", title="Pricing (`make bench`)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
