"""`fees price FILLS.csv` (`make price FILLS=...`): what each execution in a CSV of fills cost, on
the local dataset's current version, by the same engine the API answers with
(`service.endpoints.fills`, `service.dataset.pricing`; `docs/pricing.md`).

A `fees.commands` entry point (`ingest.cli`). Writes every fill back, in order, with the answer's
fields as columns (`fee`, `amount`, `unit`, `record_id`, `line_id`, `label`, `line_tier`,
`confirmed_through`, `presumed`, `source_link`, `error`); a fill that cannot be priced has its
`error` and empty fee columns, and never stops the others.
"""

import argparse
import contextlib
import csv
import sys
from pathlib import Path
from typing import TYPE_CHECKING, BinaryIO

import pyarrow as pa
import pyarrow.csv as pacsv
from tqdm import tqdm

from ingest.layout import current_version_dir
from service.settings import Settings

if TYPE_CHECKING:
    from service.dataset.version import Dataset

HELP = "price a CSV of fills on the local dataset (docs/pricing.md)"
READS_DATA_DIR = True  # `--data` defaults to FEES_DATA_DIR (`ingest.cli.with_data_dir`)
# The CSV is read a block at a time (about 200,000 fills of 40 bytes), and `fills.PRICERS`
# blocks are checked and priced at once, a thread each (`fills.in_order`). A block's fills and
# answers are what the command holds in memory, so two blocks of 8 MiB hold what one of 16 MiB
# did. (1M fills at 10M synthetic records, 5 alternating runs, medians: 9.58 s one 16 MiB block
# at a time, 6.64 s two of 8 MiB at once; peak RSS 1,111 and 1,115 MiB; the same bytes out.)
BLOCK_BYTES = 8 * 2**20


def add_arguments(command: argparse.ArgumentParser) -> None:
    command.add_argument("fills", type=Path, help="a CSV of fills, one a row (docs/pricing.md)")
    command.add_argument("--out", type=Path, help="where to write them priced (default: stdout)")
    command.add_argument(
        "--data", type=Path, help="data directory (default: FEES_DATA_DIR, else data/warehouse)"
    )
    command.add_argument(
        "--tiers",
        nargs="+",
        default=[],
        metavar="VENUE=TIER",
        help="the tier a venue's fills without one of their own are in (`memx=Tier 1`)",
    )


def run(args: argparse.Namespace) -> int:
    from service.dataset.version import Dataset
    from service.endpoints import fills

    version = current_version_dir(args.data) if isinstance(args.data, Path) else None
    if version is None:
        print(f"fees price: no current version in the local directory {args.data}", file=sys.stderr)
        return 1
    named = dict(pair.partition("=")[::2] for pair in args.tiers)
    if any(not name or not tier for name, tier in named.items()):
        print("fees price: --tiers takes VENUE=TIER pairs", file=sys.stderr)
        return 2
    dataset = Dataset(version, Settings.from_environ())
    try:
        tiers, unknown = fills.tiers_of(named, dataset, lambda code: True)
        if unknown:
            names = ", ".join(unknown)
            print(f"fees price: --tiers names unknown venues: {names}", file=sys.stderr)
            return 2
        output = args.out.open("wb") if args.out else contextlib.nullcontext(sys.stdout.buffer)
        with output as out:
            show = args.out is not None and sys.stderr.isatty()
            _price_file(args.fills, out, dataset, tiers, show=show)
    finally:
        dataset.close()
    return 0


def _price_file(
    source: Path, out: BinaryIO, dataset: "Dataset", tiers: dict[str, str], *, show: bool
) -> None:
    """Every fill of `source`, read as text a block at a time, written to `out` with its answer."""
    from service.endpoints import fills

    with source.open(newline="", encoding="utf-8") as handle:
        header = next(csv.reader(handle), [])
    text = dict.fromkeys(header, pa.string())  # every column as written, carried through
    reader = pacsv.open_csv(
        source,
        read_options=pacsv.ReadOptions(block_size=BLOCK_BYTES),
        convert_options=pacsv.ConvertOptions(column_types=text, strings_can_be_null=False),
    )
    written = pa.schema([*text.items(), *fills.ANSWERS])

    def priced(batch: pa.RecordBatch) -> pa.Table:
        given = pa.Table.from_batches([batch])
        checked = fills.checked(fills.text_of(given), dataset, lambda code: True, tiers)
        answers = fills.priced(checked, dataset)
        return pa.Table.from_arrays([*given.columns, *answers.columns], schema=written)

    progress = tqdm(unit=" fills", disable=not show)
    with pacsv.CSVWriter(out, written) as writer:  # the header even for a file of no fills
        for table in fills.in_order(priced, reader):
            writer.write_table(table)
            progress.update(table.num_rows)
    progress.close()
