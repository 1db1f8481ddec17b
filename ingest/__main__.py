"""`fees ingest` (also `python -m ingest`): validate raw fee CSVs and publish them as a new
dataset version. The arguments and the run; `ingest.cli` is the command line around them."""

import argparse
import sys
import time
from pathlib import Path

import duckdb

from ingest import cli
from ingest.build import describe_reject
from ingest.errors import IngestError
from ingest.pipeline import IngestResult, run_ingest
from ingest.registry import InvalidRegistry
from ingest.serving import INDEX_MEMORY_LIMIT
from ingest.storage import location

# `fees ingest`: its line in `fees --help` (`ingest.cli`); its `--data`
# defaults to FEES_DATA_DIR.
HELP = "validate raw fee CSVs and publish a version"
READS_DATA_DIR = True


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--raw", type=Path, default=Path("data/raw"), help="raw CSV directory")
    parser.add_argument(
        "--data",
        type=location,
        help="data directory or s3://bucket/prefix (default: FEES_DATA_DIR, else data/warehouse)",
    )
    parser.add_argument("--registry", type=Path, default=Path("data/exchanges.csv"))
    parser.add_argument("--strict", action="store_true", help="fail if any row is rejected")
    parser.add_argument(
        "--if-stale",
        action="store_true",
        help="publish only if no version is current, or the current one is of another schema",
    )
    parser.add_argument("--keep", type=at_least_one, default=3, help="versions to keep (>= 1)")
    parser.add_argument(
        "--memory-limit",
        type=memory_limit,
        default="1GB",
        help=f"DuckDB's (at most {INDEX_MEMORY_LIMIT} while the results index is written)",
    )


def run(args: argparse.Namespace) -> int:
    started = time.perf_counter()
    try:
        result = run_ingest(
            args.raw,
            args.data,
            registry=args.registry,
            strict=args.strict,
            keep=args.keep,
            memory_limit=args.memory_limit,
            s3_endpoint_url=args.s3_endpoint_url,
            if_stale=args.if_stale,
        )
    except (IngestError, InvalidRegistry) as error:
        print(f"ingest failed: {error}", file=sys.stderr)
        return 1
    print(summary(result, time.perf_counter() - started))
    return 0


def at_least_one(text: str) -> int:
    if not text.isdigit() or int(text) < 1:
        raise argparse.ArgumentTypeError(f"must be an integer >= 1, not {text!r}")
    return int(text)


def memory_limit(text: str) -> str:
    """A limit DuckDB takes (`1GB`, `512MiB`, `50%`), asked of DuckDB itself before any work."""
    try:
        duckdb.connect(config={"memory_limit": text}).close()
    except duckdb.Error as error:
        raise argparse.ArgumentTypeError(f"{text!r}: {error}") from None
    return text


def summary(result: IngestResult, seconds: float) -> str:
    pruned = [f"  pruned           {', '.join(result.pruned)}"] if result.pruned else []
    if not result.changed:
        unchanged = (
            f"{result.unchanged_because}: version {result.version_id} is current; nothing published"
        )
        return "\n".join([unchanged, *pruned])
    lines = [
        f"published version {result.version_id} in {seconds:.1f} s",
        f"  rows read        {result.rows_read:>12,}",
        f"  records          {result.records:>12,}",
        f"  rejected rows    {result.rejected_rows:>12,} ({result.problems:,} problems)",
        f"  duplicates       {result.duplicates:>12,} (collapsed)",
    ]
    if result.rejected_rows:
        lines.append(f"  rejects file     {result.version_dir}/rejects.csv")
        lines += [f"    {describe_reject(reject)}" for reject in result.first_rejects]
    return "\n".join(lines + pruned)


def main(argv: list[str] | None = None) -> int:
    """`python -m ingest ARGS` is `fees ingest ARGS`."""
    return cli.main("ingest", argv)


if __name__ == "__main__":
    sys.exit(main())
