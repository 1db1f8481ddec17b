"""What a version holds per venue, built in memory from its rollups when it is opened: the
venue list, exchange details, the filters endpoint, date ranges and the by-version listing
read these, never a file or a query."""

from collections import defaultdict
from dataclasses import dataclass, field, replace
from datetime import date
from typing import Any

import pyarrow as pa

from service.vocabulary import DATA_TYPE_OF_CATEGORY, DATA_TYPE_ORDER

# The filter dimensions of exchange details and the filters endpoint, in response order.
DETAIL_DIMENSIONS = (
    "fee_types",
    "fee_categories",
    "actions",
    "participants",
    "symbol_classifications",
    "symbol_types",
    "trade_types",
)
# Each of those dimensions' column in the records (and in the results index).
DETAIL_COLUMNS = dict(zip(DETAIL_DIMENSIONS, (
    "fee_type", "fee_category", "action", "participant",
    "symbol_classification", "symbol_type", "trade_type",
), strict=True))  # fmt: skip


@dataclass(frozen=True)
class Venue:
    code: str
    display_name: str
    fee_types: tuple[str, ...]  # present in its records, sorted
    records: int
    categories: dict[str, tuple[str, ...]]  # fee_category -> fee types that have it
    earliest: date | None = None  # first day any record is in force
    latest: date | None = None  # last day (a record still in force runs to the as-of date)
    values: dict[str, tuple[str, ...]] = field(default_factory=dict)  # per DETAIL_DIMENSIONS


@dataclass(frozen=True)
class CoverageRun:
    starts: date
    ends: date
    data_types: tuple[str, ...]


def venues_of(
    registry: list[tuple[Any, ...]], summary: pa.Table, details: pa.Table
) -> tuple[dict[str, Venue], dict[str, str]]:
    """Every venue of the registry (code, display name, aliases) with what its records hold,
    and the code of each of its names, case-folded."""
    names: dict[str, str] = {}
    by_category = _records_by_category(summary)
    venues = {}
    for code, display_name, aliases in registry:
        for name in (code, display_name, *aliases):
            names[name.casefold()] = code
        categories = by_category.get(code, {})
        venues[code] = Venue(
            code=code,
            display_name=display_name,
            fee_types=tuple(sorted({t for types in categories.values() for t in types})),
            records=sum(n for types in categories.values() for n in types.values()),
            categories={c: tuple(sorted(types)) for c, types in categories.items()},
        )
    for row in details.to_pylist():
        values = {
            name: tuple(sorted(value for value in row[name] if value is not None))
            for name in DETAIL_DIMENSIONS
        }
        venue = venues[row["exchange"]]
        venues[venue.code] = replace(
            venue, earliest=row["earliest"], latest=row["latest"], values=values
        )
    return venues, names


def _records_by_category(summary: pa.Table) -> dict[str, dict[str, dict[str, int]]]:
    """Records per venue, fee category and fee type."""
    counts: dict[str, dict[str, dict[str, int]]] = defaultdict(lambda: defaultdict(dict))
    for row in summary.to_pylist():
        counts[row["exchange"]][row["fee_category"]][row["fee_type"]] = row["records"]
    return counts


def coverage_of(coverage: pa.Table) -> dict[str, list[CoverageRun]]:
    """Each venue's maximal contiguous periods, with the data types in force in each."""
    runs: dict[str, list[CoverageRun]] = defaultdict(list)
    for row in coverage.to_pylist():
        present = {DATA_TYPE_OF_CATEGORY[category] for category in row["categories"]}
        data_types = tuple(kind for kind in DATA_TYPE_ORDER if kind in present)
        runs[row["exchange"]].append(CoverageRun(row["starts"], row["ends"], data_types))
    return dict(runs)


def versions_of(versions: pa.Table) -> dict[str, dict[str, int]]:
    """Each version id that first published records still present: records per venue."""
    counts: dict[str, dict[str, int]] = defaultdict(dict)
    for row in versions.to_pylist():
        counts[row["version_id"]][row["exchange"]] = row["records"]
    return dict(counts)
