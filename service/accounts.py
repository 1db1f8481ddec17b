"""Accounts and their API keys, kept in one JSON file that stores only key hashes.

    {"accounts": {"<name>": {"exchanges": null | ["<code>", ...],
                             "rate_limit"?: {"burst": <int>, "per_minute": <int>},
                             "keys": [{"id": "<fingerprint>", "sha256": "<hex>",
                                       "created_at": "<iso>", "revoked_at": null | "<iso>"}]}}}

`exchanges: null` means every venue; `rate_limit` overrides the defaults of
`Limit` for each of the account's keys (each key has its own bucket).
A key is shown once, when it is made; afterwards only its fingerprint (the first 12 hex digits
of its sha256) names it, in listings and in logs. The service re-reads the file when it
changes, so a revoked key stops working within `RECHECK_SECONDS`; a change that cannot be read
(half-edited JSON, a bad limit) is logged and the keys read last stay in force until the file
is mended.

A presented key is hashed and the hash looked up: the comparison is between hashes, so its
time tells a caller nothing about any stored key (to learn a stored hash's prefix from timing
one would need preimages of chosen prefixes), and the file never holds a key.
"""

import hashlib
import json
import logging
import os
import secrets
import threading
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from service import remembered
from service.settings import SettingsError

log = logging.getLogger(__name__)
KEY_BYTES = 32  # token_urlsafe(32) is 43 characters
# How often the accounts file is looked at for changes. A `stat` on every request cost 20-30%
# of a cached answer's throughput under load (make bench, 2026-11-23); this costs nothing
# measurable and still refuses a revoked key a twentieth of a second later.
RECHECK_SECONDS = 0.05
RECENT_KEYS = 1024  # valid keys remembered with their accounts (`Keystore.authenticate`)


# What each key of an account may spend: `burst` requests at once, refilled at `per_minute`
# (`service.edge.ratelimit` takes the tokens).
@dataclass(frozen=True)
class Limit:
    burst: int = 300
    per_minute: int = 60
    # Made once per limit, not per request: the refill rate and the capacity's header.
    per_second: float = field(init=False, compare=False, repr=False)
    header: tuple[bytes, bytes] = field(init=False, compare=False, repr=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "per_second", self.per_minute / 60)
        object.__setattr__(self, "header", (b"x-ratelimit-limit", b"%d" % self.burst))


DEFAULT_LIMIT = Limit()  # the anchor service's: burst 300, 60 a minute


@dataclass(frozen=True)
class Account:
    """An account as one of its keys presents it."""

    name: str
    exchanges: frozenset[str] | None  # None: every venue
    key_id: str = ""  # the key's fingerprint: its rate-limit bucket, its name in logs
    limit: Limit = DEFAULT_LIMIT
    # The venues it may see, sorted (None: every venue), made once: what its answers depend
    # on, so what leads its requests' response cache keys (`service.edge.cache.cache_key`).
    scope: tuple[str, ...] | None = field(init=False, compare=False, repr=False)

    def __post_init__(self) -> None:
        scope = None if self.exchanges is None else tuple(sorted(self.exchanges))
        object.__setattr__(self, "scope", scope)

    def may_see(self, code: str) -> bool:
        return self.exchanges is None or code in self.exchanges


def key_hash(key: str) -> str:
    return hashlib.sha256(key.encode("utf-8")).hexdigest()


def fingerprint(key: str) -> str:
    return key_hash(key)[:12]


class Keystore:
    """Looks keys up by hash; reloads the accounts file when its inode, size or mtime change
    (looked at no more than once per `RECHECK_SECONDS`)."""

    def __init__(self, path: Path) -> None:
        self._path = path
        self._lock = threading.Lock()
        self._signature: tuple[int, int, int] | None = None
        # The active keys by hash, and those recently presented with their accounts (a hash
        # a request cost 2% of a cold discovery answer): replaced together when the file is
        # read again, so a key is never remembered past the reading it was valid in.
        self._keys: tuple[dict[str, Account], dict[str, Account]] = ({}, {})
        self._next_check = 0.0
        self.generation = 0  # raised whenever the keys are read again

    def authenticate(self, key: str | None) -> Account | None:
        if not key:
            return None
        self.refresh()
        by_hash, recent = self._keys
        account = recent.get(key)
        if account is None:
            account = by_hash.get(key_hash(key))
            if account is not None:  # only valid keys are remembered
                remembered.keep(recent, key, account, RECENT_KEYS)
        return account

    def refresh(self) -> int:
        """Read the file again if it changed (looked at once per `RECHECK_SECONDS`); returns
        the generation of the keys now in force, so a caller that remembered what a key
        authenticated as knows when to forget it."""
        now = time.monotonic()
        if now < self._next_check:
            return self.generation
        try:
            stat = os.stat(self._path)
            signature = (stat.st_ino, stat.st_size, stat.st_mtime_ns)
        except FileNotFoundError:
            signature = None
        if signature != self._signature:
            with self._lock:
                try:
                    self._keys = (_active_keys(read_accounts(self._path)), {})
                except (OSError, ValueError, KeyError, TypeError) as error:
                    if self.generation == 0:
                        raise  # no keys were ever read: nothing to keep serving with
                    log.error(
                        "accounts file %s unreadable, keeping the keys read last: %s",
                        self._path,
                        error,
                    )
                self._signature = signature
                self.generation += 1
        self._next_check = now + RECHECK_SECONDS
        return self.generation


def _active_keys(document: dict[str, Any]) -> dict[str, Account]:
    active = {}
    for name, entry in document["accounts"].items():
        scope = entry.get("exchanges")
        venues = None if scope is None else frozenset(scope)
        limit = _limit(name, entry.get("rate_limit"))
        for key in entry.get("keys", []):
            if not key.get("revoked_at"):
                active[key["sha256"]] = Account(name, venues, key["id"], limit)
    return active


def _limit(account: str, given: Any) -> Limit:
    if given is None:
        return DEFAULT_LIMIT
    defaults = {"burst": DEFAULT_LIMIT.burst, "per_minute": DEFAULT_LIMIT.per_minute}
    values = {**defaults, **given} if isinstance(given, dict) else None
    if (
        values is None
        or set(values) != {"burst", "per_minute"}
        or not all(type(value) is int and value > 0 for value in values.values())
    ):
        raise ValueError(
            f"account {account!r}: rate_limit must be {{'burst': int > 0, 'per_minute': int > 0}},"
            f" not {given!r}"
        )
    return Limit(**values)


def read_accounts(path: Path) -> dict[str, Any]:
    if not path.exists():
        return {"accounts": {}}
    document: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
    return document


def write_accounts(path: Path, document: dict[str, Any]) -> None:
    """Replace the file atomically, so the service never reads half of it."""
    path.parent.mkdir(parents=True, exist_ok=True)
    temporary = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    temporary.write_text(json.dumps(document, indent=2, sort_keys=True) + "\n", encoding="utf-8")
    os.replace(temporary, path)


def add_key(path: Path, account: str, exchanges: list[str] | None) -> str:
    """Create a key for `account` (creating the account, or updating its venues); returns it."""
    document = read_accounts(path)
    entry = document["accounts"].setdefault(account, {"exchanges": None, "keys": []})
    if exchanges is not None:
        entry["exchanges"] = sorted(set(exchanges))
    key = secrets.token_urlsafe(KEY_BYTES)
    entry["keys"].append(key_entry(key, datetime.now(UTC).isoformat(timespec="seconds")))
    write_accounts(path, document)
    return key


def key_entry(key: str, created_at: str, revoked_at: str | None = None) -> dict[str, Any]:
    """How the accounts file holds a key: its fingerprint and hash, never the key."""
    return {
        "id": fingerprint(key),
        "sha256": key_hash(key),
        "created_at": created_at,
        "revoked_at": revoked_at,
    }


def revoke_key(path: Path, key_id: str) -> bool:
    """Revoke the key with this fingerprint; False when there is none (or it was revoked)."""
    document = read_accounts(path)
    for entry in document["accounts"].values():
        for key in entry["keys"]:
            if key["id"] == key_id and not key["revoked_at"]:
                key["revoked_at"] = datetime.now(UTC).isoformat(timespec="seconds")
                write_accounts(path, document)
                return True
    return False


def list_keys(path: Path) -> list[dict[str, Any]]:
    return [
        {
            "account": name,
            "exchanges": entry.get("exchanges"),
            "id": key["id"],
            "created_at": key["created_at"],
            "revoked_at": key["revoked_at"],
        }
        for name, entry in sorted(read_accounts(path)["accounts"].items())
        for key in entry["keys"]
    ]


def check_accounts_file(path: Path) -> None:
    """The accounts file (`FEES_ACCOUNTS_FILE`) must be readable and well-formed if it exists
    (`fees keys add` creates it); the service refuses to start on a file it could not take keys
    from."""
    try:
        Keystore(path).refresh()
    except (OSError, ValueError, KeyError, TypeError, AttributeError) as error:
        raise SettingsError(
            f"FEES_ACCOUNTS_FILE={str(path)!r}: must be a readable accounts file as described "
            f"in service/accounts.py ({_reason(error)})"
        ) from None


def _reason(error: Exception) -> str:
    if isinstance(error, OSError):
        return error.strerror or str(error)
    if isinstance(error, KeyError):
        return f"no {error} field"
    return str(error)
