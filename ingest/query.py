"""`fees sql "select ..."` (also `python -m ingest.query`): run SQL against the current version
and print a table.

The views `fees` (every record, with `exchange` from the partition path) and `exchanges` (the
venue registry of the same version) are ready, so analysts need not know the file layout.
"""

import argparse
import sys
from pathlib import Path

import duckdb

from ingest import cli
from ingest.layout import current_version_dir, sql_string


def open_version(version_dir: Path) -> duckdb.DuckDBPyConnection:
    """An in-memory DuckDB connection with the `fees` and `exchanges` views of one version."""
    con = duckdb.connect()
    fees = sql_string(str(version_dir / "fees" / "**" / "*.parquet"))
    registry = sql_string(str(version_dir / "exchanges.parquet"))
    con.execute(
        f"CREATE VIEW fees AS SELECT * FROM read_parquet({fees}, hive_partitioning = true, "
        "hive_types = {'exchange': VARCHAR})"
    )
    con.execute(f"CREATE VIEW exchanges AS SELECT * FROM read_parquet({registry})")
    return con


def add_data_argument(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--data", type=Path, help="data directory (default: FEES_DATA_DIR, else data/warehouse)"
    )


def current_local_version(data: Path | str, command: str) -> Path | None:
    """The current version of a local data directory; None, having said why on stderr, when
    none is published or `data` is an S3 URL (FEES_DATA_DIR=s3://...), which `command` does not
    read."""
    if not isinstance(data, Path):
        print(f"fees {command} reads a local data directory, not {data}", file=sys.stderr)
        return None
    version = current_version_dir(data)
    if version is None:
        print(f"no published version under {data}; run `fees ingest` first", file=sys.stderr)
    return version


# `fees sql`: its line in `fees --help` (`ingest.cli`); its `--data`
# defaults to FEES_DATA_DIR.
HELP = "run SQL against the current version"
READS_DATA_DIR = True


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("sql", help="the query to run")
    add_data_argument(parser)
    parser.add_argument("--max-rows", type=int, default=1000, help="rows shown at most")


def run(args: argparse.Namespace) -> int:
    version = current_local_version(args.data, "sql")
    if version is None:
        return 1
    try:
        open_version(version).sql(args.sql).show(max_rows=args.max_rows, max_width=200)
    except duckdb.Error as error:
        # One line: DuckDB's message up to the excerpt of the query it points into, if any.
        message = " ".join(str(error).split("\n\n")[0].split())
        print(f"query failed: {message}", file=sys.stderr)
        return 1
    return 0


def main(argv: list[str] | None = None) -> int:
    """`python -m ingest.query ARGS` is `fees sql ARGS`."""
    return cli.main("sql", argv)


if __name__ == "__main__":
    sys.exit(main())
