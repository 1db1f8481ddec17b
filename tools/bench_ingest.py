"""`make bench-ingest`: validated ingest throughput against a plain DuckDB COPY, and peak memory.

Both contenders read the same synthetic CSVs (made once by `make synth`, cached under
`data/synth/`) in the same run, each in a fresh process, alternating, and the medians are
compared. A third contender, the same COPY given the block reuse the ingest configures, is
reported beside the ratio so that it can be read both ways. Peak memory is the ingest
process's maximum resident set size at 10M rows. Results are printed and written between the
markers of `docs/benchmarks.md`.
"""

import argparse
import hashlib
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import duckdb

from ingest import synth

# argv: the CSV files (comma-separated), the target, and "reuse" to give the COPY the ingest's
# block reuse (`ingest.build._configure`) as well: that variant is reported beside the
# ratio, not in it, as the yardstick is the plain COPY.
PLAIN_COPY = """
import sys, duckdb
con = duckdb.connect()
con.execute("SET memory_limit = '1GB'")
if sys.argv[3:] == ["reuse"]:
    con.execute("SET block_allocator_memory = '100%'")
con.execute("SET temp_directory = '" + sys.argv[2].replace("'", "''") + ".spill'")
con.execute(
    "COPY (SELECT * FROM read_csv($files, header = true, all_varchar = true)) "
    "TO '" + sys.argv[2].replace("'", "''") + "' (FORMAT parquet, PARTITION_BY (exchange))",
    {"files": sys.argv[1].split(",")},
)
"""


def synth_digest() -> str:
    """What made the synthetic files (the generator and its statement): a changed generator
    makes them again."""
    generator = Path(synth.__file__)
    parts = (generator.read_bytes(), generator.with_name("synth.sql").read_bytes())
    return hashlib.sha256(b"".join(parts)).hexdigest()


def ensure_synth(rows: int, registry: Path) -> Path:
    out = Path("data/synth") / str(rows)
    stamp = out / ".complete"  # the generator's digest, once every file is written
    if not stamp.exists() or stamp.read_text() != synth_digest():
        shutil.rmtree(out, ignore_errors=True)
        subprocess.run(
            [sys.executable, "-m", "ingest.synth", "--rows", str(rows), "--out", str(out),
             "--registry", str(registry)],
            check=True,
        )  # fmt: skip
        stamp.write_text(synth_digest())
    return out


def run_child(command: list[str]) -> tuple[float, int]:
    """Wall seconds and peak RSS (MB) of one child process."""
    started = time.perf_counter()
    process = subprocess.Popen(command, stdout=subprocess.DEVNULL)
    _, status, usage = os.wait4(process.pid, 0)
    seconds = time.perf_counter() - started
    if status != 0:
        raise SystemExit(f"benchmark step failed ({status}): {' '.join(command)}")
    return seconds, usage.ru_maxrss // 1024  # ru_maxrss is in KiB on Linux


def one_round(raw: Path, registry: Path, scratch: Path) -> tuple[float, float, float]:
    """Seconds of the plain COPY, of the COPY with block reuse, and of the ingest."""
    files = ",".join(str(path) for path in sorted(raw.glob("*.csv")))
    shutil.rmtree(scratch, ignore_errors=True)
    scratch.mkdir(parents=True)
    copy_s, _ = run_child([sys.executable, "-c", PLAIN_COPY, files, str(scratch / "copy")])
    reuse_s, _ = run_child(
        [sys.executable, "-c", PLAIN_COPY, files, str(scratch / "reuse"), "reuse"]
    )
    ingest_s, _ = ingest_once(raw, registry, scratch)
    return copy_s, reuse_s, ingest_s


def ingest_once(raw: Path, registry: Path, scratch: Path) -> tuple[float, int]:
    """Seconds and peak RSS (MB) of one `python -m ingest` into a fresh data directory."""
    scratch.mkdir(parents=True, exist_ok=True)
    try:
        return run_child(
            [sys.executable, "-m", "ingest", "--raw", str(raw), "--data", str(scratch / "data"),
             "--registry", str(registry)]
        )  # fmt: skip
    finally:
        shutil.rmtree(scratch)


def machine() -> str:
    memory = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30
    cpu = "unknown CPU"
    cpuinfo = Path("/proc/cpuinfo")
    if cpuinfo.exists():
        for line in cpuinfo.read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    return (
        f"{os.cpu_count()} cores, {memory:.0f} GiB, {cpu}; Python {platform.python_version()}, "
        f"DuckDB {duckdb.__version__}"
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tools.bench_ingest", description=__doc__)
    parser.add_argument("--rows", type=int, default=5_000_000)
    parser.add_argument("--memory-rows", type=int, default=10_000_000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--registry", type=Path, default=Path("data/exchanges.csv"))
    parser.add_argument("--doc", type=Path, default=Path("docs/benchmarks.md"))
    args = parser.parse_args(argv)
    raw = ensure_synth(args.rows, args.registry)
    scratch = Path(tempfile.mkdtemp(prefix="bench-ingest-"))
    rounds = [one_round(raw, args.registry, scratch) for _ in range(args.rounds)]
    copy_s, reuse_s, ingest_s = (statistics.median(r[n] for r in rounds) for n in range(3))
    big = ensure_synth(args.memory_rows, args.registry)
    _, big_ingest_rss = ingest_once(big, args.registry, scratch)
    result = {
        "machine": machine(),
        "rows": args.rows,
        "copy_seconds": [round(r[0], 2) for r in rounds],
        "reuse_copy_seconds": [round(r[1], 2) for r in rounds],
        "ingest_seconds": [round(r[2], 2) for r in rounds],
        "ratio": copy_s / ingest_s,
        "reuse_ratio": reuse_s / ingest_s,
        "memory_rows": args.memory_rows,
        "peak_rss_mb": big_ingest_rss,
    }
    table = report(result)
    print(table)
    write_section(args.doc, table, marker="bench-ingest", title="Ingest (`make bench-ingest`)")
    print(json.dumps(result))
    return 0


def report(result: dict[str, object]) -> str:
    ratio = float(result["ratio"])  # type: ignore[arg-type]
    reuse_ratio = float(result["reuse_ratio"])  # type: ignore[arg-type]
    rss = int(result["peak_rss_mb"])  # type: ignore[call-overload]
    return "\n".join(
        [
            f"Machine: {result['machine']}",
            "",
            "| measure | result | target | met |",
            "|---|---|---|---|",
            f"| plain partitioned COPY, {result['rows']:,} rows (s, per round) | "
            f"{result['copy_seconds']} | | |",
            f"| validated ingest, same rows (s, per round) | {result['ingest_seconds']} | | |",
            f"| ingest throughput / COPY throughput (medians) | {ratio:.0%} | ≥ 50% | "
            f"{'met' if ratio >= 0.5 else 'not met'} |",
            "| the COPY given the ingest's block reuse too (s, per round) | "
            f"{result['reuse_copy_seconds']} | | |",
            f"| ingest throughput / that COPY's throughput (medians) | "
            f"{reuse_ratio:.0%} | (not the target's yardstick) | |",
            f"| peak RSS of the ingest at {result['memory_rows']:,} rows | {rss:,} MB | "
            f"< 2,048 MB | {'met' if rss < 2048 else 'not met'} |",
        ]
    )


def write_section(doc: Path, table: str, *, marker: str, title: str) -> None:
    """Replace the results between `<!-- marker:start -->` and `<!-- marker:end -->`."""
    start, end = f"<!-- {marker}:start -->", f"<!-- {marker}:end -->"
    text = doc.read_text(encoding="utf-8") if doc.exists() else "# Benchmarks\n"
    section = f"{start}\n{table}\n{end}"
    if start in text:
        before, rest = text.split(start, 1)
        text = before + section + rest.split(end, 1)[1]
    else:
        text += f"\n## {title}\n\n{section}\n"
    doc.write_text(text, encoding="utf-8")


if __name__ == "__main__":
    sys.exit(main())
