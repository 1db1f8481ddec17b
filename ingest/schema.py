"""The dataset's contract: raw CSV columns, vocabularies and the published Parquet schema.

Both the ingest (which enforces it) and the service (which answers from it) import these
names, so a vocabulary is written once. `docs/raw-format.md` and `docs/dataset.md` describe
the same facts for people; `tests/test_schema_docs.py` keeps them in step.
"""

from typing import Final

# 2: the seven detail columns (`DETAIL_COLUMNS`), in the raw format and the Parquet.
# 3: the three provenance columns (`PROVENANCE_COLUMNS`), likewise.
# 4: the fee line (`LINE_COLUMNS`): the optional raw `line_name`, and `line_id` in the Parquet.
# 5: a line's life (`LIFE_COLUMNS`): `standard` and the complete-schedule declaration in the raw
#    format; `confirmed_through` and `ended_by` in the Parquet; a named line is its venue, fee
#    type and name.
# 6: what a fill must match to pay a line (`DIMENSION_COLUMNS`): the fee codes, display, price
#    band, tapes and tier, in the raw format and the Parquet.
SCHEMA_VERSION: Final = 6

# The raw columns of schema 1, which a raw file may still use as its header: its rows are read
# with the detail columns empty, and keep the record ids they had (`ingest.stage.RECORD_ID`).
V1_RAW_COLUMNS: Final = (
    "exchange",
    "fee_type",
    "fee_category",
    "action",
    "participant",
    "symbol_classification",
    "symbol_type",
    "trade_type",
    "fee_name",
    "fee_amount",
    "fee_basis",
    "volume_tier",
    "conditions",
    "notes",
    "effective_start",
    "effective_end",
    "source_document",
    "source_url",
    "page_number",
)

# What a line applies to beyond the vocabularies, as the schedule words it (the details of the
# compatible service's record, `docs/raw-format.md`). Optional free text, appended after the
# schema 1 columns so that a row without them has the content id it had before.
DETAIL_COLUMNS: Final = (
    "action_details",
    "participant_details",
    "volume_criteria",
    "symbols",
    "excluded_symbols",
    "exclusions",
    "extra_info",
)

V2_RAW_COLUMNS: Final = (*V1_RAW_COLUMNS, *DETAIL_COLUMNS)

# How a line is known (`docs/raw-format.md`, "Provenance"): the kind of its source, how its
# dates are known, and whether the source or its reading is in doubt. Required in a file of the
# current layout; a file of an older layout has none, and its records say so with nulls.
PROVENANCE_COLUMNS: Final = ("source_kind", "date_basis", "uncertain")

V3_RAW_COLUMNS: Final = (*V2_RAW_COLUMNS, *PROVENANCE_COLUMNS)

# A fee line is one schedule item followed through time (`docs/raw-format.md`, "Fee lines"):
# the records with the same values of these columns, where `label` is the row's `line_name`
# when it gives one (to keep a line whose printed label changed) and its `fee_name` otherwise.
# Its `line_id` is made from them (`ingest.stage.LINE_ID`); its records never overlap in time.
LINE_NAME: Final = "line_name"
# The classifying columns (`exchange` to `trade_type`: every raw column before the label),
# the label, and the tier.
CLASSIFYING: Final = V1_RAW_COLUMNS[: V1_RAW_COLUMNS.index("fee_name")]
LINE_COLUMNS: Final = (*CLASSIFYING, "label", "volume_tier")

V4_RAW_COLUMNS: Final = (*V3_RAW_COLUMNS, LINE_NAME)

# What a reading says of its line's life (`docs/raw-format.md`, "Standard rates" and "Complete
# schedules"): whether it is the venue's standard rate, and whether it was read in a schedule
# that lists every line of a scope (`COMPLETE_SCOPES`) in force on a day. Optional. In a file of
# the current layout a row with a `line_name` belongs to the line of that name (its venue, fee
# type and name), whatever its label, tier or classification; in a schema 4 file the name only
# stands in for the label (`ingest.stage.LINE_ID`).
LIFE_COLUMNS: Final = ("standard", "complete_scope", "complete_as_of")

V5_RAW_COLUMNS: Final = (*V4_RAW_COLUMNS, *LIFE_COLUMNS)

# What an execution must match to pay the line (`docs/raw-format.md`, "Fee codes, display,
# price bands, tapes and tiers"), as the schedule states it. Optional: the venue's fee codes
# (`fee_codes`, separated by spaces), whether the order is displayed (`display`), the price
# band (`price_band`), the tapes (`tapes`, separated by spaces; empty for every tape), and the
# schedule's name of the tier the line is (`tier`; its criteria stay in `volume_tier` and
# `volume_criteria`). They describe a line; they do not name it (`LINE_COLUMNS`).
DIMENSION_COLUMNS: Final = ("fee_codes", "display", "price_band", "tapes", "tier")
# The dimensions that are lists: space-separated in the raw format, lists when published.
LIST_COLUMNS: Final = ("fee_codes", "tapes")

RAW_COLUMNS: Final = (*V5_RAW_COLUMNS, *DIMENSION_COLUMNS)

# The headers a raw file may have: the current columns, or those of schema 5, 4, 3, 2 or 1. A
# `line_name` names a line of its own in a file of schema 5 or later (`names_lines`).
RAW_LAYOUTS: Final = (
    RAW_COLUMNS,
    V5_RAW_COLUMNS,
    V4_RAW_COLUMNS,
    V3_RAW_COLUMNS,
    V2_RAW_COLUMNS,
    V1_RAW_COLUMNS,
)

REQUIRED: Final = frozenset(
    {
        "exchange",
        "fee_type",
        "fee_category",
        "action",
        "participant",
        "fee_name",
        "fee_amount",
        "effective_start",
    }
)

# Allowed values of every vocabulary column, in their documented (and sorted) order.
VOCABULARIES: Final[dict[str, tuple[str, ...]]] = {
    "fee_type": ("equity", "option"),
    "fee_category": (
        "fees_and_rebates",
        "general_provisions",
        "legal_regulatory_fee",
        "market_data_fees",
        "participant_fee",
        "port_fees_and_other_services",
    ),
    "action": ("make", "open", "other", "routed", "take"),
    "participant": (
        "all",
        "away_market_maker",
        "broker_dealer",
        "customer",
        "firm",
        "market_maker",
        "other",
        "professional",
    ),
    "symbol_classification": ("all", "equity_class", "etf", "etn", "index", "not_applicable"),
    "symbol_type": ("both", "non_penny", "not_applicable", "penny"),
    "trade_type": (
        "complex_order",
        "index_options",
        "multiply_traded_options",
        "not_applicable",
        "simple_order",
    ),
    # `primary`: the venue's own schedule, notice or filing, or a regulator's; `secondary`: a
    # broker's table, the trade press, an aggregator, a third-party copy; `illustrative`: a
    # made-up figure with no source (test and benchmark data only).
    "source_kind": ("illustrative", "primary", "secondary"),
    # `stated`: the source gives the date; `derived`: computed from another dated fact (an end
    # the day before the next start); `observed`: the source shows the line in force on that day,
    # and it may have started earlier.
    "date_basis": ("derived", "observed", "stated"),
    # What a complete schedule lists whole: every line of the row's `fee_category`, or every
    # standard rate of the row's fee type (`docs/raw-format.md`, "Complete schedules").
    "complete_scope": ("fee_category", "standard_rates"),
    # Whether the line is for displayed orders, non-displayed ones, midpoint orders (pegged to
    # the midpoint, non-displayed), or any order (the schedule states it applies to all).
    "display": ("any", "displayed", "midpoint", "non_displayed"),
    # The price band of the execution: at or above $1.00 a share, below $1.00 (the sub-dollar
    # rates), or any price (the schedule states it applies to both).
    "price_band": ("any", "at_or_above_1", "below_1"),
}
# The tapes a line may name (`tapes`).
TAPES: Final = ("A", "B", "C")

# The values of the raw format's yes-or-no columns (BOOLEANs when published).
FLAG_VALUES: Final = ("false", "true")
FLAGS: Final = ("uncertain", "standard")

# Every column whose values form a closed set: the vocabularies and the flags.
CLOSED_VALUES: Final[dict[str, tuple[str, ...]]] = VOCABULARIES | dict.fromkeys(FLAGS, FLAG_VALUES)

# The kinds of source that name one (`source_document` and `source_url` required).
SOURCED_KINDS: Final = ("primary", "secondary")

DATE_COLUMNS: Final = ("effective_start", "effective_end", "complete_as_of")

# The published `fees` table: every column, its DuckDB type, in file order. `exchange` is the
# hive partition key, so it lives in the directory name rather than in the files.
FEE_COLUMNS: Final[tuple[tuple[str, str], ...]] = (
    ("record_id", "VARCHAR"),
    ("line_id", "VARCHAR"),
    ("exchange", "VARCHAR"),
    ("fee_type", "VARCHAR"),
    ("fee_category", "VARCHAR"),
    ("action", "VARCHAR"),
    ("participant", "VARCHAR"),
    ("symbol_classification", "VARCHAR"),
    ("symbol_type", "VARCHAR"),
    ("trade_type", "VARCHAR"),
    ("fee_codes", "VARCHAR[]"),
    ("display", "VARCHAR"),
    ("price_band", "VARCHAR"),
    ("tapes", "VARCHAR[]"),
    ("fee_name", "VARCHAR"),
    ("line_name", "VARCHAR"),
    ("fee_amount", "VARCHAR"),
    ("amount", "DECIMAL(20,8)"),
    ("currency", "VARCHAR"),
    ("unit", "VARCHAR"),
    ("fee_basis", "VARCHAR"),
    ("volume_tier", "VARCHAR"),
    ("tier", "VARCHAR"),
    ("volume_criteria", "VARCHAR"),
    ("action_details", "VARCHAR"),
    ("participant_details", "VARCHAR"),
    ("symbols", "VARCHAR"),
    ("excluded_symbols", "VARCHAR"),
    ("conditions", "VARCHAR"),
    ("exclusions", "VARCHAR"),
    ("notes", "VARCHAR"),
    ("extra_info", "VARCHAR"),
    ("effective_start", "DATE"),
    ("effective_end", "DATE"),
    ("confirmed_through", "DATE"),
    ("ended_by", "VARCHAR"),
    ("source_document", "VARCHAR"),
    ("source_url", "VARCHAR"),
    ("page_number", "INTEGER"),
    ("source_kind", "VARCHAR"),
    ("date_basis", "VARCHAR"),
    ("uncertain", "BOOLEAN"),
    ("standard", "BOOLEAN"),
    ("complete_scope", "VARCHAR"),
    ("complete_as_of", "DATE"),
    ("source_file", "VARCHAR"),
    ("source_line", "BIGINT"),
    ("version_id", "VARCHAR"),
    ("ingested_at", "TIMESTAMP WITH TIME ZONE"),
)

# The published columns that hold a value in every record, whatever the raw file's schema:
# each `fees` file declares them required and every other column optional (docs/dataset.md,
# the "required" column), so a file's schema is the same in every version, whatever its rows.
PUBLISHED_REQUIRED: Final = frozenset(
    {
        *REQUIRED,
        "record_id",
        "line_id",
        "confirmed_through",
        "standard",
        *LIST_COLUMNS,
        "source_file",
        "source_line",
        "version_id",
        "ingested_at",
    }
)

# The canonical units of a record's `amount` (`ingest.units` derives them; docs/raw-format.md,
# "Amounts and units"). `other`: a figure whose basis no rule maps (its printed `fee_basis` says
# what it is counted in).
UNITS: Final = (
    "per_share",
    "per_contract",
    "per_order",
    "per_port",
    "per_month",
    "per_year",
    "one_time",
    "per_million_dollars_of_value",
    "percent_of_value",
    "other",
)

REGISTRY_COLUMNS: Final = ("code", "display_name", "aliases", "mic", "asset_classes")
