"""Deterministic synthetic raw fee CSVs at benchmark scale (100k to 10M rows).

Run as::

    fees synth --rows N --out DIR [--seed 42] [--registry data/exchanges.csv]
               [--rows-per-file 1000000]

(``python -m ingest.synth`` is the same command) and it writes ``DIR/synth-0000.csv``,
``DIR/synth-0001.csv``, ... in the raw format of ``docs/raw-format.md``: the documented header
on every file, every row valid under the documented rules, no two rows identical, and the
records of each fee line one at a time (``fee_name`` carries the line's number).

All generation happens inside DuckDB: ``range()`` supplies the row numbers and every "random"
choice is an integer hash of (row number, seed, column salt), so the same arguments give
byte-identical files however many threads DuckDB uses. ``random()``/``setseed()`` are avoided
on purpose: their sequence depends on how parallel execution splits the work. Rows stream from
SQL straight into ``COPY``, one statement per output file, so no Python object per row exists.

The shape mimics real schedules, because date-filter and rollup benchmarks depend on it:

* venues come from the registry, mildly skewed (the first venues by code get several times
  the rows of the last), and ``fee_type`` is only ever one of the venue's asset classes;
* categories, actions and participants are skewed, not uniform; optional columns are
  sometimes empty; ``symbol_type``/``trade_type`` are filled almost only on option rows;
* rows come as fee lines with histories: each line holds 1 to 8 consecutive rows (3.5 on
  average), its records oldest first, a change every 2 to 4 months (the amount moves, or is
  read again unchanged), a gap before ~10 % of later records, and the last record still in
  force for 70 % of lines (~20 % of rows have no end);
* dates sit on schedule boundaries, the first of each month from 2019-01 to 2027-12: a line
  starts in one of the first 84 (weighted towards recent months) and each record ends the day
  before a boundary; ~2 % of records start after 2026-11, the announced future changes;
* amounts are printed as in real schedules (``$0.0030``, ``($0.0020)``, ``$1,500.00``) with
  ~5 % non-plain forms (``0.30% of TDV``, ``Free``, ``$0.10 - $0.25``);
* some text fields contain commas or double quotes so CSV quoting is exercised;
* every row is ``illustrative`` (``source_kind``) and names no source.
"""

import argparse
import os
import re
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import duckdb

from ingest import cli
from ingest.errors import IngestError
from ingest.registry import load_registry

DEFAULT_REGISTRY = Path("data/exchanges.csv")
DEFAULT_ROWS_PER_FILE = 1_000_000
DEFAULT_SEED = 42

# Four-digit file numbers sort correctly as text (the ingest reads files in sorted path order),
# so the number of files is capped where a fifth digit would be needed.
MAX_FILES = 10_000
# Keeps the row-number hash key (row * 2654435761 + seed * 40503) inside DuckDB's BIGINT.
MAX_ROWS = 2**31 - 1
SEED_MODULUS = 2**32

FILE_NAME_PATTERN = re.compile(r"synth-\d{4}\.csv")

# How a block of 8 rows is cut into fee lines: per pattern, the place in the block where the
# line of the row at each place begins (lines of 8; 4 and 4; 2 and 6; ... records).
SEGMENTS = (
    (0, 0, 0, 0, 0, 0, 0, 0),
    (0, 0, 0, 0, 4, 4, 4, 4),
    (0, 0, 2, 2, 2, 2, 2, 2),
    (0, 0, 0, 0, 0, 5, 5, 5),
    (0, 1, 1, 1, 1, 1, 1, 1),
    (0, 0, 0, 3, 3, 3, 6, 6),
    (0, 0, 2, 2, 4, 4, 4, 4),
    (0, 1, 2, 2, 2, 2, 2, 2),
    (0, 0, 0, 0, 0, 0, 6, 7),
    (0, 0, 0, 3, 3, 3, 3, 3),
)

# Hash helpers, created once per connection. synth_step is one round of a 32-bit
# xor-shift-multiply mixer; every product stays below 2**32 * 73244475 < 2**63, so plain BIGINT
# arithmetic never overflows and no floating point or random() is involved.
# synth_h(k, salt) gives an independent-looking 32-bit value per column salt for row key k.
MACROS_SQL = """
CREATE OR REPLACE TEMP MACRO synth_step(x) AS (xor(x >> 16, x) * 73244475) % 4294967296;
CREATE OR REPLACE TEMP MACRO synth_h(k, salt) AS
    synth_step(synth_step(synth_step((k + salt * 2246822519) % 4294967296)));
CREATE OR REPLACE TEMP MACRO synth_money(cents) AS
    '$' || format('{:,}', cents // 100) || '.' || lpad((cents % 100)::VARCHAR, 2, '0');
CREATE OR REPLACE TEMP MACRO synth_boundary(b) AS make_date(2019 + b // 12, 1 + b % 12, 1);
"""

# The row numbers of one output file, $start (inclusive) to $stop (exclusive) of the global
# numbering. They go through a table because range() is a single-threaded source: scanning a
# table lets DuckDB run the (CPU-bound) generation below on every core.
IDS_SQL = """
CREATE OR REPLACE TEMP TABLE synth_ids AS SELECT range AS i FROM range($start, $stop)
"""

# One output file: the rows numbered in synth_ids (the statement's own comments say how).
COPY_SQL = Path(__file__).with_name("synth.sql").read_text(encoding="utf-8")


@dataclass(frozen=True)
class VenueClass:
    """One (venue, asset class) pair the registry allows rows for."""

    code: str
    fee_type: str
    display_name: str


def venue_classes(registry: Path) -> list[VenueClass]:
    """The registry's (venue, asset class) pairs, by code then asset class.

    The ingest's own loader checks the registry, so synth accepts exactly the registries the
    ingest does; its sorted order makes the output independent of the file's row order.
    """
    return [
        VenueClass(venue.code, fee_type, venue.display_name)
        for venue in load_registry(registry)
        for fee_type in venue.asset_classes
    ]


def file_name(index: int) -> str:
    """Name of the index-th output file."""
    return f"synth-{index:04d}.csv"


def plan_files(rows: int, rows_per_file: int) -> list[tuple[int, int]]:
    """Split row numbers 0..rows-1 into [start, stop) ranges of at most rows_per_file."""
    return [(start, min(start + rows_per_file, rows)) for start in range(0, rows, rows_per_file)]


def remove_stale_files(out: Path, keep: int) -> None:
    """Delete synth-NNNN.csv files numbered keep or above, left by an earlier, larger run.

    Without this a smaller run into the same directory would leave old rows for the ingest.
    """
    for path in out.glob("synth-*.csv"):
        if FILE_NAME_PATTERN.fullmatch(path.name) and int(path.name[6:10]) >= keep:
            path.unlink()


def write_file(
    con: duckdb.DuckDBPyConnection,
    target: Path,
    rows: tuple[int, int],
    seed: int,
    venues: Sequence[VenueClass],
) -> None:
    """Write one CSV file holding global rows [start, stop).

    COPY goes to a temporary name first and is then renamed, so an interrupted run never
    leaves a truncated *.csv that the ingest would reject as malformed.
    """
    partial = target.with_name(target.name + ".part")
    con.execute(IDS_SQL, {"start": rows[0], "stop": rows[1]})
    con.execute(
        COPY_SQL,
        {
            "seed": seed % SEED_MODULUS,
            "codes": [venue.code for venue in venues],
            "fee_types": [venue.fee_type for venue in venues],
            "names": [venue.display_name for venue in venues],
            "segments": [list(pattern) for pattern in SEGMENTS],
            "path": str(partial),
        },
    )
    os.replace(partial, target)


def generate(
    rows: int,
    out: Path,
    *,
    seed: int = DEFAULT_SEED,
    registry: Path = DEFAULT_REGISTRY,
    rows_per_file: int = DEFAULT_ROWS_PER_FILE,
    threads: int | None = None,
) -> list[Path]:
    """Write rows synthetic rows into out/synth-NNNN.csv and return the files written."""
    _check_sizes(rows, rows_per_file)
    venues = venue_classes(registry)
    if not venues:
        raise ValueError(f"{registry}: no venues to write rows for")
    out.mkdir(parents=True, exist_ok=True)
    ranges = plan_files(rows, rows_per_file)
    remove_stale_files(out, keep=len(ranges))
    written: list[Path] = []
    # threads only matters to tests (the output is the same for any value) and to benchmarks.
    config: dict[str, str | bool | int | float | list[str]] = {}
    if threads is not None:
        config["threads"] = threads
    with duckdb.connect(config=config) as con:
        con.execute(MACROS_SQL)
        for index, span in enumerate(ranges):
            target = out / file_name(index)
            write_file(con, target, span, seed, venues)
            written.append(target)
    return written


def _check_sizes(rows: int, rows_per_file: int) -> None:
    if not 1 <= rows <= MAX_ROWS:
        raise ValueError(f"--rows must be between 1 and {MAX_ROWS}")
    if rows_per_file < 1:
        raise ValueError("--rows-per-file must be at least 1")
    if (rows + rows_per_file - 1) // rows_per_file > MAX_FILES:
        raise ValueError(f"more than {MAX_FILES} files: raise --rows-per-file")


# `fees synth`: its line in `fees --help` (`ingest.cli`).
HELP = "write synthetic raw fee CSVs for benchmarks"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--rows", type=int, required=True, help="total rows to write")
    parser.add_argument("--out", type=Path, required=True, help="output directory")
    parser.add_argument(
        "--seed", type=int, default=DEFAULT_SEED, help="used modulo 2**32; default: %(default)s"
    )
    parser.add_argument(
        "--registry", type=Path, default=DEFAULT_REGISTRY, help="default: %(default)s"
    )
    parser.add_argument(
        "--rows-per-file", type=int, default=DEFAULT_ROWS_PER_FILE, help="default: %(default)s"
    )


def run(args: argparse.Namespace) -> int:
    """Generate, then print one summary line."""
    started = time.perf_counter()
    try:
        files = generate(
            args.rows,
            args.out,
            seed=args.seed,
            registry=args.registry,
            rows_per_file=args.rows_per_file,
        )
    except (ValueError, OSError, IngestError, duckdb.Error) as error:
        print(f"synth: error: {error}", file=sys.stderr)
        return 1
    seconds = time.perf_counter() - started
    print(f"wrote {args.rows} rows in {len(files)} files to {args.out} in {seconds:.1f} s")
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    """`python -m ingest.synth ARGS` is `fees synth ARGS`."""
    return cli.main("synth", argv)


if __name__ == "__main__":
    sys.exit(main())
