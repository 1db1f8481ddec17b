"""`fees serve` (`python -m service serve`): the API under uvicorn, with one or more workers.

A `fees.commands` entry point (`ingest.cli`): this module is loaded only to run or list it, and
it loads the web stack and the dataset reader only in `run`, after DuckDB's allocator options
are set (`service.memory`), which DuckDB reads once, as it loads.
"""

import argparse
from collections.abc import Callable
from dataclasses import replace
from typing import TYPE_CHECKING

from service import memory
from service.accounts import check_accounts_file
from service.settings import VARIABLES, Settings

if TYPE_CHECKING:
    from service.edge.front import FrontDoor

HELP = "serve the API (its other settings are FEES_* variables: README, Settings)"
FLAGS = ("host", "port", "workers")


def setting(field: str) -> Callable[[str], object]:
    """A flag read as its `FEES_*` variable is, with the same checks."""
    parse = VARIABLES[field][1]

    def checked(text: str) -> object:
        try:
            return parse(text)
        except ValueError as error:
            raise argparse.ArgumentTypeError(f"{error}, not {text!r}") from None

    return checked


def add_arguments(command: argparse.ArgumentParser) -> None:
    command.add_argument("--host", type=setting("host"), help="default: FEES_HOST, 127.0.0.1")
    command.add_argument("--port", type=setting("port"), help="default: FEES_PORT, 8000")
    command.add_argument(
        "--workers", type=setting("workers"), help="processes (default: FEES_WORKERS, 1)"
    )


def run(args: argparse.Namespace) -> int:
    given = {name: getattr(args, name) for name in FLAGS}
    flags = {name: value for name, value in given.items() if value is not None}
    settings = replace(Settings.from_environ(), **flags)
    settings.check_data_dir()
    check_accounts_file(settings.accounts_file)
    # Before anything loads duckdb; the workers of `--workers` are new interpreters that
    # inherit the variable it sets (uvicorn's configuration loads duckdb in them at once).
    memory.configure_duckdb_allocator()
    import uvicorn

    from service.app import server_options

    where = {"host": settings.host, "port": settings.port, **server_options(settings)}
    if settings.workers == 1:
        uvicorn.run(worker_app(settings), **where)
    else:  # each worker reads the settings from the same environment, already checked here
        uvicorn.run(f"{__name__}:worker_app", factory=True, workers=settings.workers, **where)
    return 0


def worker_app(settings: Settings | None = None) -> "FrontDoor":
    """The app in a serving process (the factory uvicorn calls in each of `--workers`)."""
    from service.app import create_app

    return create_app(settings or Settings.from_environ())
