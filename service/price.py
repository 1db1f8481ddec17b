"""`fees price FILLS.csv` (`make price FILLS=...`): what each execution in a CSV of fills cost, on
the local dataset's current version, by the same engine the API answers with
(`service.endpoints.fills`, `service.dataset.pricing`; `docs/pricing.md`).

A `fees.commands` entry point (`ingest.cli`). Writes every fill back, in order, with the answer's
fields as columns (`fee`, `amount`, `unit`, `record_id`, `line_id`, `label`,
`confirmed_through`, `presumed`, `source_link`, `error`); a fill that cannot be priced has its
`error` and empty fee columns, and never stops the others.
"""

import argparse
import contextlib
import csv
import sys
from collections.abc import Iterable, Iterator
from itertools import islice
from pathlib import Path
from typing import Any

from tqdm import tqdm

from ingest.layout import current_version_dir
from service.settings import Settings

HELP = "price a CSV of fills on the local dataset (docs/pricing.md)"
READS_DATA_DIR = True  # `--data` defaults to FEES_DATA_DIR (`ingest.cli.with_data_dir`)
# Fills priced per query: the engine's join is one query per batch, and a batch's rows and
# answers are what the command holds in memory.
BATCH_FILLS = 100_000


def add_arguments(command: argparse.ArgumentParser) -> None:
    command.add_argument("fills", type=Path, help="a CSV of fills, one a row (docs/pricing.md)")
    command.add_argument("--out", type=Path, help="where to write them priced (default: stdout)")
    command.add_argument(
        "--data", type=Path, help="data directory (default: FEES_DATA_DIR, else data/warehouse)"
    )


def run(args: argparse.Namespace) -> int:
    from service.dataset.version import Dataset
    from service.endpoints import fills

    version = current_version_dir(args.data) if isinstance(args.data, Path) else None
    if version is None:
        print(f"fees price: no current version in the local directory {args.data}", file=sys.stderr)
        return 1
    dataset = Dataset(version, Settings.from_environ())
    try:
        output = (
            args.out.open("w", newline="", encoding="utf-8")
            if args.out
            else contextlib.nullcontext(sys.stdout)
        )
        with args.fills.open(newline="", encoding="utf-8") as source, output as out:
            reader = csv.DictReader(source)
            columns = [*(reader.fieldnames or []), *fills.ANSWER_FIELDS]
            writer = csv.DictWriter(out, fieldnames=columns, extrasaction="ignore")
            writer.writeheader()
            shown = tqdm(unit=" fills", disable=args.out is None or not sys.stderr.isatty())
            for batch in _batches(reader):
                checked = fills.checked(batch, dataset, lambda code: True)
                for fill, answer in zip(batch, fills.priced(checked, dataset), strict=True):
                    writer.writerow(fill | _written(answer))
                shown.update(len(batch))
            shown.close()
    finally:
        dataset.close()
    return 0


def _batches(reader: Iterable[dict[str, Any]]) -> Iterator[list[dict[str, Any]]]:
    rows = iter(reader)
    while batch := list(islice(rows, BATCH_FILLS)):
        yield batch


def _written(answer: dict[str, Any]) -> dict[str, Any]:
    """An answer as a CSV row holds it: no value is an empty cell, a flag true or false."""
    return {
        name: "" if value is None else str(value).lower() if isinstance(value, bool) else value
        for name, value in answer.items()
    }
