"""`fees`: the one command line, and the data commands' own (`python -m ingest`, ...).

Its commands are declared once, in `pyproject.toml`'s `fees.commands` entry points: a name and
the module that holds it. Each such module has `HELP` (its line in `fees --help`),
`add_arguments(parser)` and `run(args) -> int`, and `READS_DATA_DIR = True` when it reads a
published version. A command's module is loaded only when that command runs (every module,
for `fees --help` alone): `fees ingest` never loads the web stack, and `fees serve` loads
no data command. This module names no command module itself, so the ingest, which owns the
command line, never imports the service (`tests/test_imports.py`).

The data commands read two settings, once, as `fees serve` reads them: `FEES_DATA_DIR` (where
versions are published; `--data` wins) and `FEES_S3_ENDPOINT_URL`. Exit status: 0 done; 1 the
command failed; 2 a bad argument or setting; a failure is one line on stderr.
"""

import argparse
import importlib
import os
import sys
from collections.abc import Callable, Sequence
from importlib.metadata import entry_points
from types import ModuleType
from typing import NoReturn

from ingest.layout import DEFAULT_DATA_DIR
from ingest.storage import InvalidSetting, endpoint_url, location, setting

COMMANDS_GROUP = "fees.commands"
DESCRIPTION = """The exchange fee data service's command line: the data commands (ingest, sql,
synth, coverage) and the service's (serve, keys, price). Settings come from FEES_* environment
variables (README, "Settings"); flags given on the command line win. `fees COMMAND --help`
says what each takes. Exit status: 0 done; 1 the command failed; 2 a bad argument or
setting."""


class Parser(argparse.ArgumentParser):
    """argparse, with a usage error as one line (and status 2) instead of the usage block."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: {message} (see `{self.prog} --help`)\n")


def commands() -> dict[str, str]:
    """Each command's name and the module that holds it, as installed, by name."""
    return {point.name: point.value for point in entry_points(group=COMMANDS_GROUP)}


def with_data_dir(run: Callable[[argparse.Namespace], int]) -> Callable[[argparse.Namespace], int]:
    """`run` with `--data` defaulting to FEES_DATA_DIR, where `fees serve` looks, and the S3
    endpoint of FEES_S3_ENDPOINT_URL."""

    def defaulted(args: argparse.Namespace) -> int:
        if args.data is None:
            args.data = setting(os.environ, "FEES_DATA_DIR", location) or DEFAULT_DATA_DIR
        args.s3_endpoint_url = setting(os.environ, "FEES_S3_ENDPOINT_URL", endpoint_url)
        return run(args)

    return defaulted


def mount(subcommands: "argparse._SubParsersAction[Parser]", name: str, module_name: str) -> None:
    """One command under `fees`, from its module (loaded now)."""
    module: ModuleType = importlib.import_module(module_name)
    command = subcommands.add_parser(name, help=module.HELP, description=module.HELP)
    module.add_arguments(command)
    reads_data = getattr(module, "READS_DATA_DIR", False)
    command.set_defaults(run=with_data_dir(module.run) if reads_data else module.run)


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


def fees(argv: Sequence[str] | None = None) -> int:
    """The `fees` program: the command named first is the only one loaded."""
    arguments = list(sys.argv[1:] if argv is None else argv)
    declared = commands()
    named = [arguments[0]] if arguments[:1] and arguments[0] in declared else sorted(declared)
    parser = Parser(prog="fees", description=DESCRIPTION)
    subcommands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for name in named:
        mount(subcommands, name, declared[name])
    return execute(parser.parse_args(arguments))


def main(command: str, argv: Sequence[str] | None = None) -> int:
    """`fees COMMAND ARGS` for one command, as its own module runs it (`python -m ingest`)."""
    return fees([command, *(sys.argv[1:] if argv is None else argv)])
