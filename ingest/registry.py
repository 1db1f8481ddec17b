"""The venue registry (`data/exchanges.csv`): codes, display names, aliases, MIC, asset classes.

Part of the dataset contract, with `ingest.schema`, `ingest.layout` and `ingest.storage`: the
ingest publishes the registry with every version, and `fees keys add` checks a key's venue
codes against it. It loads no other module of the ingest.
"""

import csv
import re
from dataclasses import dataclass
from pathlib import Path

from ingest.schema import REGISTRY_COLUMNS, VOCABULARIES

CODE_PATTERN = re.compile(r"[a-z][a-z0-9_]*")


class InvalidRegistry(ValueError):
    """The venue registry itself is broken: an ingest stops, nothing published."""


@dataclass(frozen=True)
class Venue:
    code: str
    display_name: str
    aliases: tuple[str, ...]
    mic: str | None
    asset_classes: tuple[str, ...]


def load_registry(path: Path) -> list[Venue]:
    """Read and check the registry; every name a client may use must point at one venue."""
    with path.open(newline="", encoding="utf-8-sig") as handle:
        reader = csv.reader(handle, strict=True)
        header = next(reader, None)
        if header is None or tuple(header) != REGISTRY_COLUMNS:
            raise InvalidRegistry(f"{path}: header must be {','.join(REGISTRY_COLUMNS)}")
        venues = [_venue(path, reader.line_num, row) for row in reader if row]
    _check_unique_names(path, venues)
    return sorted(venues, key=lambda venue: venue.code)


def _venue(path: Path, line: int, row: list[str]) -> Venue:
    if len(row) != len(REGISTRY_COLUMNS):
        raise InvalidRegistry(f"{path}, line {line}: expected {len(REGISTRY_COLUMNS)} fields")
    code, display_name, aliases, mic, asset_classes = (value.strip() for value in row)
    classes = tuple(sorted(part for part in asset_classes.split("|") if part))
    if not CODE_PATTERN.fullmatch(code):
        raise InvalidRegistry(f"{path}, line {line}: code {code!r} is not lower_snake_case")
    if not display_name:
        raise InvalidRegistry(f"{path}, line {line}: display_name is missing")
    if not classes or not set(classes) <= set(VOCABULARIES["fee_type"]):
        raise InvalidRegistry(f"{path}, line {line}: asset_classes must be equity, option or both")
    names = tuple(part.strip() for part in aliases.split("|") if part.strip())
    return Venue(code, display_name, names, mic or None, classes)


def _check_unique_names(path: Path, venues: list[Venue]) -> None:
    owner: dict[str, str] = {}
    for venue in venues:
        for name in {venue.code, venue.display_name, *venue.aliases}:
            key = name.casefold()
            if owner.setdefault(key, venue.code) != venue.code:
                raise InvalidRegistry(
                    f"{path}: name {name!r} belongs to both {owner[key]} and {venue.code}"
                )
