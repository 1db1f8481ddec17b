"""The data commands' command line: `fees ingest`, `fees sql`, `fees synth` and `fees coverage`.

They are built here, in the program that writes versions, so that `python -m ingest`,
`python -m ingest.query` and `python -m ingest.synth` run the same commands without loading
the service; `service.cli` adds `serve` and `keys` to make the whole `fees` command. The data
commands read two settings, once, as `fees serve` reads them: `FEES_DATA_DIR` (where versions
are published; `--data` wins) and `FEES_S3_ENDPOINT_URL`. Exit status: 0 done; 1 the command
failed; 2 a bad argument or setting; a failure is one line on stderr.
"""

import argparse
import importlib
import os
import sys
from collections.abc import Callable, Sequence
from typing import NoReturn

from ingest.layout import DEFAULT_DATA_DIR
from ingest.storage import InvalidSetting, endpoint_url, location, setting


class Parser(argparse.ArgumentParser):
    """argparse, with a usage error as one line (and status 2) instead of the usage block."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: {message} (see `{self.prog} --help`)\n")


def with_data_dir(run: Callable[[argparse.Namespace], int]) -> Callable[[argparse.Namespace], int]:
    """`run` with `--data` defaulting to FEES_DATA_DIR, where `fees serve` looks, and the S3
    endpoint of FEES_S3_ENDPOINT_URL."""

    def defaulted(args: argparse.Namespace) -> int:
        if args.data is None:
            args.data = setting(os.environ, "FEES_DATA_DIR", location) or DEFAULT_DATA_DIR
        args.s3_endpoint_url = setting(os.environ, "FEES_S3_ENDPOINT_URL", endpoint_url)
        return run(args)

    return defaulted


# The data commands: their help line, and the module holding their arguments and run.
COMMANDS = {
    "ingest": ("validate raw fee CSVs and publish a version", "ingest.__main__"),
    "sql": ("run SQL against the current version", "ingest.query"),
    "synth": ("write synthetic raw fee CSVs for benchmarks", "ingest.synth"),
    "coverage": ("report what the current version covers, as Markdown", "ingest.coverage"),
}
READS_DATA_DIR = frozenset({"ingest", "sql", "coverage"})


def add_command(commands: "argparse._SubParsersAction[Parser]", name: str) -> None:
    """One data command under a `fees` parser's subcommands."""
    help_text, module_name = COMMANDS[name]
    # Imported only now: `fees serve` configures DuckDB's allocator before duckdb loads.
    module = importlib.import_module(module_name)
    command = commands.add_parser(name, help=help_text)
    module.add_arguments(command)
    command.set_defaults(run=with_data_dir(module.run) if name in READS_DATA_DIR else module.run)


def execute(args: argparse.Namespace) -> int:
    """Run a parsed `fees` command; a bad setting or an unusable file is one line."""
    try:
        status: int = args.run(args)
    except InvalidSetting as error:
        print(f"fees {args.command}: {error}", file=sys.stderr)
        return 2
    except OSError as error:  # a file or directory the command could not use
        print(f"fees {args.command}: {error}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130
    return status


def main(command: str, argv: Sequence[str] | None = None) -> int:
    """`fees COMMAND ARGS` for one data command, as its own module runs it."""
    fees = Parser(prog="fees")
    add_command(fees.add_subparsers(dest="command", required=True, metavar="COMMAND"), command)
    return execute(fees.parse_args([command, *(sys.argv[1:] if argv is None else argv)]))
