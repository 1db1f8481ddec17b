"""`fees`: the one command line for the data and the service.

    fees ingest [--raw DIR] [--data DIR] [--strict] ...    validate raw CSVs, publish a version
    fees serve [--host ADDR] [--port N] [--workers N]      serve the API
    fees keys add --account NAME [--exchange CODE ...]     issue a key (printed once)
    fees keys list                                         list keys by fingerprint
    fees keys revoke KEY_ID                                revoke a key
    fees sql "select ..." [--data DIR]                     query the current version
    fees synth --rows N --out DIR                          synthetic raw CSVs for benchmarks
    fees coverage [--data DIR] [--out FILE]                what the current version covers

Settings come from `FEES_*` environment variables (README, "Settings"); flags given on the
command line win. Exit status: 0 done; 1 the command failed (a refused ingest, a failed
query, an unknown key id); 2 bad arguments or settings. A failure is one line on stderr.
`python -m service` is `fees`; `python -m ingest`, `python -m ingest.query`,
`python -m ingest.synth` and `python -m ingest.coverage` are its data commands alone
(`ingest.cli`), without the service.
"""

import argparse
import json
import sys
from collections.abc import Callable, Sequence
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING

import uvicorn

from ingest.cli import Parser, add_command, execute
from ingest.errors import InvalidRegistry
from ingest.registry import load_registry
from service import accounts, memory
from service.settings import VARIABLES, Settings

if TYPE_CHECKING:
    from service.front import FrontDoor

# A new version opens in a background thread while the event loop answers. Each time that
# thread comes back from C code (DuckDB, Arrow, numpy) it waits for the loop to let go of the
# GIL, up to the switch interval (5 ms by default). Under load a 10M-record version took
# 1.7-2.1 s from publish to served with 5 ms, 1.0-1.4 s with 0.5-1 ms (make bench's switch).
SWITCH_INTERVAL_SECONDS = 0.0005


def main(argv: Sequence[str] | None = None) -> int:
    arguments = list(sys.argv[1:] if argv is None else argv)
    if arguments[:1] == ["serve"]:
        # DuckDB's allocator reads its options once, as duckdb loads, and building the parser
        # loads it (the ingest commands' modules): so this comes first. The worker processes
        # of `--workers` inherit it: they are new interpreters in which uvicorn's configuration
        # (its protocol class) loads duckdb before any app factory could set it.
        memory.configure_duckdb_allocator()
    return execute(parser().parse_args(arguments))


def parser() -> Parser:
    fees = Parser(
        prog="fees", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    commands = fees.add_subparsers(dest="command", required=True, metavar="COMMAND")
    add_command(commands, "ingest")  # the data commands are `ingest.cli`'s
    add_serve(
        commands.add_parser(
            "serve",
            help="serve the API",
            description="Serve the API. Its other settings are FEES_* variables (README).",
        )
    )
    add_keys(commands.add_parser("keys", help="issue, list and revoke API keys"))
    add_command(commands, "sql")
    add_command(commands, "synth")
    add_command(commands, "coverage")
    return fees


def setting(field: str) -> Callable[[str], object]:
    """A flag read as its `FEES_*` variable is, with the same checks."""
    parse = VARIABLES[field][1]

    def checked(text: str) -> object:
        try:
            return parse(text)
        except ValueError as error:
            raise argparse.ArgumentTypeError(f"{error}, not {text!r}") from None

    return checked


def add_serve(command: argparse.ArgumentParser) -> None:
    command.add_argument("--host", type=setting("host"), help="default: FEES_HOST, 127.0.0.1")
    command.add_argument("--port", type=setting("port"), help="default: FEES_PORT, 8000")
    command.add_argument(
        "--workers", type=setting("workers"), help="processes (default: FEES_WORKERS, 1)"
    )
    command.set_defaults(run=serve)


def serve(args: argparse.Namespace) -> int:
    given = {name: getattr(args, name) for name in ("host", "port", "workers")}
    flags = {name: value for name, value in given.items() if value is not None}
    settings = replace(Settings.from_environ(), **flags)
    settings.check_data_dir()
    settings.check_accounts_file()
    from service.app import server_options  # after `main` configured DuckDB's allocator

    where = {"host": settings.host, "port": settings.port, **server_options(settings)}
    if settings.workers == 1:
        uvicorn.run(worker_app(settings), **where)
    else:  # each worker reads the settings from the same environment, already checked here
        uvicorn.run("service.cli:worker_app", factory=True, workers=settings.workers, **where)
    return 0


def worker_app(settings: Settings | None = None) -> "FrontDoor":
    """The app in a serving process (the factory uvicorn calls in each of `--workers`)."""
    from service.app import create_app

    sys.setswitchinterval(SWITCH_INTERVAL_SECONDS)  # per interpreter: set in every worker
    return create_app(settings or Settings.from_environ())


def add_keys(command: argparse.ArgumentParser) -> None:
    key_commands = command.add_subparsers(dest="keys_command", required=True, metavar="ACTION")
    add = key_commands.add_parser("add", help="issue a new key (printed once)")
    add.add_argument("--account", required=True)
    add.add_argument("--exchange", action="append", help="a venue code the key may see (repeat)")
    add.add_argument("--registry", type=Path, default=Path("data/exchanges.csv"))
    add.set_defaults(run=add_key)
    listing = key_commands.add_parser("list", help="list keys by fingerprint (never the keys)")
    listing.set_defaults(run=list_keys)
    revoke = key_commands.add_parser("revoke", help="revoke a key by its fingerprint")
    revoke.add_argument("key_id")
    revoke.set_defaults(run=revoke_key)


def accounts_file() -> Path:
    settings = Settings.from_environ()
    settings.check_accounts_file()
    return settings.accounts_file


def add_key(args: argparse.Namespace) -> int:
    path = accounts_file()
    if args.exchange:
        try:
            known = {venue.code for venue in load_registry(args.registry)}
        except (OSError, InvalidRegistry) as error:
            print(f"cannot check venue codes: {error}", file=sys.stderr)
            return 1
        unknown = sorted(set(args.exchange) - known)
        if unknown:
            print(f"unknown venue code(s): {', '.join(unknown)}", file=sys.stderr)
            return 1
    key = accounts.add_key(path, args.account, args.exchange)
    print(key)
    print(
        f"(shown once; id {accounts.fingerprint(key)}; stored as a hash in {path})",
        file=sys.stderr,
    )
    return 0


def list_keys(args: argparse.Namespace) -> int:
    print(json.dumps(accounts.list_keys(accounts_file()), indent=2))
    return 0


def revoke_key(args: argparse.Namespace) -> int:
    if accounts.revoke_key(accounts_file(), args.key_id):
        print(f"revoked {args.key_id}")
        return 0
    print(f"no active key with id {args.key_id}", file=sys.stderr)
    return 1
