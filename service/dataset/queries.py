"""Every SQL statement the service runs, as named constants with bound parameters, and what a
request selects (`Selection`) and an answer prints (`RESULT_FIELDS`, `SUPPLIER_FIELDS`).

Identifiers never come from a request: every column that varies (a results filter, a sort key)
is looked up in a fixed allow-list here (`RESULT_FILTERS`, `ORDER_COLUMNS`), and an unknown
name fails the lookup. Only the venue registry and downloads run SQL: discovery counts come
from the version's rollups (`service.dataset.rollups`), and which records a selection matches,
and in which order, from the index (`service.dataset.index`); the plain SQL those answers are
held to is the tests' (`tests/reference_sql.py`).
"""

from dataclasses import dataclass, field
from datetime import date, timedelta
from typing import Any, Final

from ingest.layout import LINE_TEXT, TEXT_ID
from ingest.schema import LIST_COLUMNS

CREATE_REGISTRY_VIEW: Final = "CREATE VIEW registry AS SELECT * FROM read_parquet({registry})"

COUNT_SERVING: Final = "SELECT count(*) FROM serving.rows"

REGISTRY: Final = """
SELECT code, display_name, aliases
FROM registry
ORDER BY code
"""

# The dimensions of the results filters: query parameter -> dataset column.
RESULT_FILTERS: Final = {
    "exchange_name": "exchange",
    "fee_type": "fee_type",
    "fee_category": "fee_category",
    "fee_action": "action",
    "fee_participant": "participant",
    "fee_symbol_classification": "symbol_classification",
    "fee_symbol_type": "symbol_type",
    "fee_trade_type": "trade_type",
    "source_kind": "source_kind",
    "date_basis": "date_basis",
    "uncertain": "uncertain",
    "standard": "standard",
    "display": "display",
    "price_band": "price_band",
    "tier": "tier",
    "tape": "tapes",
    "fee_code": "fee_codes",
}
# Sort keys clients may choose, mapped to columns (never taken from the request as text).
# `created_on` and `scraped_time` are the compatible service's keys (its SDK sends `created_on`
# by default): both mean when a record was first published here, `ingested_at`.
ORDER_COLUMNS: Final = {
    "created_on": "ingested_at",
    "scraped_time": "ingested_at",
    "effective_start": "effective_start",
    "exchange_name": "exchange",
    "fee_type": "fee_type",
    "fee_category": "fee_category",
    "amount": "amount",
}
ORDER_DIRECTIONS: Final = ("asc", "desc")


@dataclass(frozen=True, kw_only=True)
class Selection:
    """Which records a request means (`service.dataset.index` finds them): the venues, the
    values of each filter, a window or a day, a version."""

    venues: list[str] | None = None  # None: every venue
    values: dict[str, list[str]] = field(default_factory=dict)  # filter parameter -> values
    start_date: date | None = None
    end_date: date | None = None
    in_force_on: date | None = None
    # With `in_force_on`: leave out the records last confirmed more than this many days before
    # it (`docs/raw-format.md`, "Confirmed through, or presumed").
    max_age_days: int | None = None
    version_id: str | None = None

    def oldest_confirmation(self) -> date | None:
        """The earliest `confirmed_through` a record may have (`max_age_days` before the day);
        None when the selection keeps every record."""
        if self.in_force_on is None or self.max_age_days is None:
            return None
        return self.in_force_on - timedelta(days=self.max_age_days)


# A record's footnotes and definitions, in the compatible service's shape. The dataset holds
# none yet (the raw format has no column for them: `docs/raw-format.md`), so both lists are
# empty when asked for; the type is spelled out so a Parquet export has it even then.
RELATIONSHIPS: Final = """CAST({'footnotes': [], 'definitions': []} AS STRUCT(
    footnotes STRUCT("text" VARCHAR)[],
    definitions STRUCT(term VARCHAR, "text" VARCHAR)[]
))"""

# Whether no source shows a record's figure on the answer's day (`$as_of`: null when the answer
# is not for a day). `docs/raw-format.md`, "Confirmed through, or presumed".
PRESUMED: Final = "CASE WHEN $as_of IS NOT NULL THEN confirmed_through < $as_of END"

# A result's fields: (name in the API, dataset column), in the order of the compatible
# service's record (`anchor-api.md` section 4), then ours. Where a dataset column means what one
# of its fields means, the answer uses its name (`fee_name` is its `fee_charge_type`,
# `ingested_at` its `scraped_time`, ...), so no value is sent twice. Two are derived, not
# stored: `relationships` and `presumed` (`DERIVED`). The source's fields (document, link,
# page, raw file and line) are null unless `include_source` is true, as in the compatible
# service; how the record is known (`source_kind`, `date_basis`, `uncertain`) is always sent,
# since clients filter on it. `relationships` is null unless `include_footnotes` or
# `include_definitions` is true. JSON answers are printed from the printed records and the
# index (`service.dataset.printed`); downloads are shaped here, in SQL (`result_item`).
RESULT_FIELDS: Final = (
    ("record_id", "record_id"),
    ("exchange_name", "exchange"),
    ("scraped_time", "ingested_at"),
    ("version_id", "version_id"),
    ("fee_type", "fee_type"),
    ("source_document", "source_document"),
    ("source_link", "source_url"),
    ("page_number", "page_number"),
    ("fee_category", "fee_category"),
    ("fee_charge_type", "fee_name"),
    ("fee_amount", "fee_amount"),
    ("fee_action", "action"),
    ("fee_action_details", "action_details"),
    ("fee_basis", "fee_basis"),
    ("fee_participant", "participant"),
    ("fee_participant_details", "participant_details"),
    ("fee_monthly_volume", "volume_tier"),
    ("fee_monthly_volume_criteria", "volume_criteria"),
    ("fee_symbol_classification", "symbol_classification"),
    ("fee_symbol_type", "symbol_type"),
    ("fee_trade_type", "trade_type"),
    ("fee_symbol", "symbols"),
    ("fee_excluded_symbols", "excluded_symbols"),
    ("fee_conditions", "conditions"),
    ("fee_exclusions", "exclusions"),
    ("fee_notes", "notes"),
    ("fee_extra_info", "extra_info"),
    ("relationships", "relationships"),
    ("line_id", "line_id"),
    ("amount", "amount"),
    ("currency", "currency"),
    ("unit", "unit"),
    ("effective_start", "effective_start"),
    ("effective_end", "effective_end"),
    ("confirmed_through", "confirmed_through"),
    ("presumed", "presumed"),
    ("ended_by", "ended_by"),
    ("standard", "standard"),
    ("fee_codes", "fee_codes"),
    ("display", "display"),
    ("price_band", "price_band"),
    ("tapes", "tapes"),
    ("tier", "tier"),
    ("source_kind", "source_kind"),
    ("date_basis", "date_basis"),
    ("uncertain", "uncertain"),
    ("complete_scope", "complete_scope"),
    ("complete_as_of", "complete_as_of"),
    ("source_file", "source_file"),
    ("source_line", "source_line"),
)
SOURCE_FIELDS: Final = frozenset(
    {"source_document", "source_link", "page_number", "source_file", "source_line"}
)
# The fields an answer derives rather than reads: a record's footnotes and definitions, and
# whether no source shows its figure on the answer's day.
DERIVED: Final = ("relationships", "presumed")
# What a column is in SQL when it is not its stored value: the ids as text (the serving copy
# holds UUIDs, the Parquet files text: `ingest.write`) and the derived fields.
SQL_VALUES: Final = {
    "record_id": TEXT_ID,
    "line_id": LINE_TEXT,
    "relationships": RELATIONSHIPS,
    "presumed": PRESUMED,
}
ISO_TIMESTAMP: Final = "strftime(ingested_at, '%Y-%m-%dT%H:%M:%S.%fZ')"

# How a download renders a field per format; fields not listed keep their stored types. CSV
# takes the timestamp as text from DuckDB: Arrow's CSV writer spent twice as long formatting the
# zoned timestamp as on all the other fields together (2 s of a 942k-row export's 3 s). A CSV
# cell cannot hold a nested value, so `relationships` is its JSON text there.
SHAPES: Final[dict[str, dict[str, str]]] = {
    "csv": {
        "scraped_time": ISO_TIMESTAMP,
        "relationships": f"CAST(to_json({RELATIONSHIPS}) AS VARCHAR)",
        # a list as the raw format writes it: its values separated by spaces
        **{column: f"array_to_string({column}, ' ')" for column in LIST_COLUMNS},
    },
    "parquet": {},
}
# The flag each optional field waits for (a bound parameter of every result query).
INCLUDED_WHEN: Final = dict.fromkeys(SOURCE_FIELDS, "$include_source") | {
    "relationships": "$include_relationships"
}


@dataclass(frozen=True)
class Included:
    """The optional parts of a result an answer carries (its `include_*` parameters), and the
    day it is for, when it is for one (its records then say whether they are `presumed`)."""

    source: bool = False
    relationships: bool = False  # `include_footnotes` or `include_definitions`
    day: date | None = None

    def parameters(self) -> dict[str, Any]:
        return {
            "include_source": self.source,
            "include_relationships": self.relationships,
            "as_of": self.day,
        }


def result_item(shapes: dict[str, str]) -> str:
    """The select list of a result, with the fields `shapes` names shaped (`SHAPES[format]`)."""
    expressions = []
    for name, column in RESULT_FIELDS:
        value = shapes.get(name, SQL_VALUES.get(column, column))
        if name in INCLUDED_WHEN:
            value = f"CASE WHEN {INCLUDED_WHEN[name]} THEN {value} END"
        expressions.append(f"{value} AS {name}")
    return ",\n    ".join(expressions)


# The supplier family's record (`/suppliers/{name}/data`): its own names, in its own order.
SUPPLIER_FIELDS: Final = (
    ("record_id", "record_id"),
    ("line_id", "line_id"),
    ("effective_start", "effective_start"),
    ("effective_end", "effective_end"),
    ("fee_type", "fee_type"),
    ("fee_category", "fee_category"),
    ("action", "action"),
    ("participant", "participant"),
    ("description", "fee_name"),
    ("fee_amount", "fee_amount"),
    ("amount", "amount"),
    ("currency", "currency"),
    ("unit", "unit"),
    ("fee_basis", "fee_basis"),
    ("source_kind", "source_kind"),
    ("date_basis", "date_basis"),
    ("uncertain", "uncertain"),
    ("standard", "standard"),
    ("confirmed_through", "confirmed_through"),
    ("presumed", "presumed"),
    ("source_document", "source_document"),
    ("source_link", "source_url"),
)


# Records at a chunk of positions (the registered table `wanted`): an export found by the
# index. The range lets the scan skip the row groups outside the chunk. Each row comes with its
# place in the chunk (`ORDINAL`) and in DuckDB's own order, to be put in order by Arrow
# (`Dataset.batches_at`): ordering them here sorted every field with them, which took longer
# than reading them.
ORDINAL: Final = "ordinal"
ROWS_IN_ORDER: Final = f"""
SELECT wanted.ordinal AS {ORDINAL}, {{projection}}
FROM serving.rows JOIN wanted ON serving.rows.rowid = wanted.position
WHERE serving.rows.rowid BETWEEN $first AND $last
"""


def rows_in_order(shape: str) -> str:
    return ROWS_IN_ORDER.format(projection=result_item(SHAPES[shape]))
