"""Each closed list the OpenAPI document states that the code holds: where it stands in the
document, and the code's list it is.

`service/operations.json` leaves these `enum`s out; `service.api` writes each in from here, so an
allowed value is declared once, where the code that answers it keeps it, and the parameters read
from the declarations (`service.endpoints.params.Parameter`) allow exactly these. The few lists
only the document states (an error code list in the document's own order, literal texts of one
answer each) stay in `operations.json`; `tests/test_openapi_code.py` accounts for every one.
"""

from collections.abc import Sequence
from typing import Any, Final

from ingest.layout import CHANGE_TYPES
from ingest.schema import CLOSED_VALUES, TAPES, UNITS
from service.dataset import queries
from service.endpoints import estimates, export, supplier_data
from service.vocabulary import DATA_TYPE_ORDER, DIMENSIONS


def _identifiers(dimension: str) -> list[str]:
    return [term.identifier for term in DIMENSIONS[dimension][1]]


def _extras(dimension: str) -> list[str]:
    """A dimension's `extra` values (liquidity type, typical fee structure), first seen first."""
    return list(dict.fromkeys(term.extra for term in DIMENSIONS[dimension][1]))


SCHEMAS: Final = "/components/schemas/"
PARAMETERS: Final = "/components/parameters/"
# The schemas of the results' vocabulary filters -> the column whose values they list.
VALUE_SCHEMAS: Final = {
    "FeeCategoryValue": "fee_category",
    "FeeActionValue": "action",
    "FeeParticipantValue": "participant",
    "SymbolClassificationValue": "symbol_classification",
    "SymbolTypeValue": "symbol_type",
    "TradeTypeValue": "trade_type",
    "SourceKindValue": "source_kind",
    "DateBasisValue": "date_basis",
    "DisplayValue": "display",
    "PriceBandValue": "price_band",
}

# Where in the document (a JSON pointer to the schema holding the `enum`) -> the list.
LISTS: Final[dict[str, Sequence[Any]]] = {
    SCHEMAS + "FeeTypeId": _identifiers("fee_types"),
    SCHEMAS + "CategoryId": _identifiers("fee_categories"),
    SCHEMAS + "ActionId": _identifiers("actions"),
    SCHEMAS + "ParticipantId": _identifiers("participants"),
    SCHEMAS + "TypicalFeeStructure": _extras("participants"),
    SCHEMAS + "LiquidityType": _extras("actions"),
    SCHEMAS + "DataType": DATA_TYPE_ORDER,
    SCHEMAS + "UnitValue": UNITS,
    **{SCHEMAS + schema: CLOSED_VALUES[column] for schema, column in VALUE_SCHEMAS.items()},
    PARAMETERS + "UncertainFilter/schema/items": CLOSED_VALUES["uncertain"],
    PARAMETERS + "StandardFilter/schema/items": CLOSED_VALUES["standard"],
    SCHEMAS + "FeeScheduleResult/properties/complete_scope/anyOf/0": (
        CLOSED_VALUES["complete_scope"]
    ),
    SCHEMAS + "FeeScheduleResult/properties/tapes/items": TAPES,
    PARAMETERS + "TapeFilter/schema/items": TAPES,
    PARAMETERS + "OrderBy/schema": tuple(queries.ORDER_COLUMNS),
    PARAMETERS + "OrderDir/schema": queries.ORDER_DIRECTIONS,
    PARAMETERS + "ChangeOrderDir/schema": queries.ORDER_DIRECTIONS,
    SCHEMAS + "ChangeTypeValue": CHANGE_TYPES,
    PARAMETERS + "Format/schema": export.FORMATS,
    PARAMETERS + "EstimateFormat/schema": estimates.FORMATS,
    SCHEMAS + "ConflictingParametersDetails/properties/conflicts_with/items": (
        supplier_data.WINDOW_PARAMS
    ),
    SCHEMAS + "InvalidParameterValueDetails/properties/field": (
        *supplier_data.TERM_PARAMS, "offset", "limit", "max_age_days",
    ),
}  # fmt: skip
# An `enum` stands after these keys of its schema, before the rest (a `default`, say).
BEFORE_ENUM: Final = ("type", "description")


def filled(source: dict[str, Any]) -> dict[str, Any]:
    """`source` (operations.json, as read) with every list of `LISTS` written in its place."""
    for pointer, values in LISTS.items():
        *parents, last = pointer.strip("/").split("/")
        holder: Any = source
        for step in parents:
            holder = holder[int(step)] if isinstance(holder, list) else holder[step]
        key: Any = int(last) if isinstance(holder, list) else last
        schema = holder[key]
        if "enum" in schema:
            raise ValueError(f"operations.json states {pointer}'s enum, which the code holds")
        head = {name: schema[name] for name in BEFORE_ENUM if name in schema}
        holder[key] = (
            head
            | {"enum": list(values)}
            | {name: value for name, value in schema.items() if name not in head}
        )
    return source
