"""`python -m service ARGS` is `fees ARGS`: `python -m service serve`, `python -m service keys
add|list|revoke`, and the other commands. The `fees` program is found as the installed console
script is, so the service names no module of the ingest here."""

import sys
from collections.abc import Callable, Sequence
from importlib.metadata import entry_points


def main(argv: Sequence[str] | None = None) -> int:
    [point] = entry_points(group="console_scripts", name="fees")
    fees: Callable[[Sequence[str] | None], int] = point.load()
    return fees(argv)


if __name__ == "__main__":
    sys.exit(main())
