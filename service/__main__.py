"""`python -m service`: serve the API, or manage API keys.

python -m service serve [--host 127.0.0.1] [--port 8000] [--workers 1]
python -m service keys add --account NAME [--exchange CODE ...]
python -m service keys list
python -m service keys revoke KEY_ID
"""

import argparse
import json
import sys
from pathlib import Path

import uvicorn

from ingest.errors import InvalidRegistry
from ingest.registry import load_registry
from service import accounts, memory
from service.settings import Settings


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m service",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    commands = parser.add_subparsers(dest="command", required=True)
    serve = commands.add_parser("serve", help="serve the API")
    serve.add_argument("--host", default="127.0.0.1")
    serve.add_argument("--port", type=int, default=8000)
    keys = commands.add_parser("keys", help="issue, list and revoke API keys")
    key_commands = keys.add_subparsers(dest="keys_command", required=True)
    add = key_commands.add_parser("add", help="issue a new key (printed once)")
    add.add_argument("--account", required=True)
    add.add_argument("--exchange", action="append", help="a venue code the key may see (repeat)")
    add.add_argument("--registry", type=Path, default=Path("data/exchanges.csv"))
    key_commands.add_parser("list", help="list keys by fingerprint (never the keys)")
    revoke = key_commands.add_parser("revoke", help="revoke a key by its fingerprint")
    revoke.add_argument("key_id")
    args = parser.parse_args(argv)
    settings = Settings.from_environ()
    if args.command == "serve":
        return _serve(settings, args.host, args.port)
    return _keys(settings.accounts_file, args)


# A new version opens in a background thread while the event loop answers. Each time that
# thread comes back from C code (DuckDB, Arrow, numpy) it waits for the loop to let go of the
# GIL, up to the switch interval (5 ms by default). Under load a 10M-record version took
# 1.7-2.1 s from publish to served with 5 ms, 1.0-1.4 s with 0.5-1 ms (make bench's switch).
SWITCH_INTERVAL_SECONDS = 0.0005


def _serve(settings: Settings, host: str, port: int) -> int:
    memory.configure_duckdb_allocator()  # before the app's modules load duckdb
    from service.app import create_app, server_options

    sys.setswitchinterval(SWITCH_INTERVAL_SECONDS)
    uvicorn.run(create_app(settings), host=host, port=port, **server_options(settings))
    return 0


def _keys(path: Path, args: argparse.Namespace) -> int:
    if args.keys_command == "add":
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
    if args.keys_command == "list":
        print(json.dumps(accounts.list_keys(path), indent=2))
        return 0
    if accounts.revoke_key(path, args.key_id):
        print(f"revoked {args.key_id}")
        return 0
    print(f"no active key with id {args.key_id}", file=sys.stderr)
    return 1


if __name__ == "__main__":
    sys.exit(main())
