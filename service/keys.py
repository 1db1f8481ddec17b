"""`fees keys add|list|revoke`: issue, list and revoke API keys in the accounts file
(`service.accounts`; `FEES_ACCOUNTS_FILE`). A `fees.commands` entry point (`ingest.cli`)."""

import argparse
import json
import sys
from collections.abc import Callable
from pathlib import Path

from ingest.registry import InvalidRegistry, load_registry
from service import accounts
from service.settings import Settings

HELP = "issue, list and revoke API keys"


def add_arguments(command: argparse.ArgumentParser) -> None:
    actions = command.add_subparsers(dest="keys_command", required=True, metavar="ACTION")
    add = actions.add_parser("add", help="issue a new key (printed once)")
    add.add_argument("--account", required=True)
    add.add_argument("--exchange", action="append", help="a venue code the key may see (repeat)")
    add.add_argument("--registry", type=Path, default=Path("data/exchanges.csv"))
    actions.add_parser("list", help="list keys by fingerprint (never the keys)")
    revoke = actions.add_parser("revoke", help="revoke a key by its fingerprint")
    revoke.add_argument("key_id")


def run(args: argparse.Namespace) -> int:
    action: Callable[[argparse.Namespace], int] = ACTIONS[args.keys_command]
    return action(args)


def accounts_file() -> Path:
    path = Settings.from_environ().accounts_file
    accounts.check_accounts_file(path)
    return path


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


ACTIONS = {"add": add_key, "list": list_keys, "revoke": revoke_key}
