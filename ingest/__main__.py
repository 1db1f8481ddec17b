"""`python -m ingest`: validate raw fee CSVs and publish them as a new dataset version."""

import argparse
import sys
import time
from pathlib import Path

from ingest.errors import IngestError
from ingest.pipeline import IngestResult, describe_reject, run_ingest


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m ingest", description=__doc__)
    parser.add_argument("--raw", type=Path, default=Path("data/raw"), help="raw CSV directory")
    parser.add_argument("--data", type=Path, default=Path("data/warehouse"), help="data directory")
    parser.add_argument("--registry", type=Path, default=Path("data/exchanges.csv"))
    parser.add_argument("--strict", action="store_true", help="fail if any row is rejected")
    parser.add_argument("--keep", type=int, default=3, help="versions to keep (at least 1)")
    parser.add_argument("--memory-limit", default="1GB", help="DuckDB memory limit")
    args = parser.parse_args(argv)
    if args.keep < 1:
        parser.error("--keep must be at least 1")
    started = time.perf_counter()
    try:
        result = run_ingest(
            args.raw,
            args.data,
            registry=args.registry,
            strict=args.strict,
            keep=args.keep,
            memory_limit=args.memory_limit,
        )
    except IngestError as error:
        print(f"ingest failed: {error}", file=sys.stderr)
        return 1
    print(summary(result, time.perf_counter() - started))
    return 0


def summary(result: IngestResult, seconds: float) -> str:
    pruned = [f"  pruned           {', '.join(result.pruned)}"] if result.pruned else []
    if not result.changed:
        unchanged = f"nothing changed: version {result.version_id} is current; nothing published"
        return "\n".join([unchanged, *pruned])
    lines = [
        f"published version {result.version_id} in {seconds:.1f} s",
        f"  rows read        {result.rows_read:>12,}",
        f"  records          {result.records:>12,}",
        f"  rejected rows    {result.rejected_rows:>12,} ({result.problems:,} problems)",
        f"  duplicates       {result.duplicates:>12,} (collapsed)",
    ]
    if result.rejected_rows:
        lines.append(f"  rejects file     {result.version_dir / 'rejects.csv'}")
        lines += [f"    {describe_reject(reject)}" for reject in result.first_rejects]
    return "\n".join(lines + pruned)


if __name__ == "__main__":
    sys.exit(main())
