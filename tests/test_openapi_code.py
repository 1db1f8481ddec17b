"""The OpenAPI document and the code agree on every closed list: each enum the document holds
is the code's own list (or, for the few the document alone states, is said to be here), and
the results listing documents exactly the parameters it reads."""

import json
from pathlib import Path
from typing import Any

import pytest

from ingest.layout import CHANGE_TYPES
from ingest.schema import CLOSED_VALUES, UNITS
from service import errors
from service.dataset import queries
from service.endpoints import export, results, supplier_data
from service.vocabulary import DATA_TYPE_ORDER, DIMENSIONS

DOCUMENT = json.loads(
    (Path(__file__).parent.parent / "service" / "openapi.json").read_text(encoding="utf-8")
)


def identifiers(dimension: str) -> list[str]:
    return [term.identifier for term in DIMENSIONS[dimension][1]]


def extras(dimension: str) -> list[str]:
    """A dimension's `extra` values (liquidity type, typical fee structure), first seen first."""
    return list(dict.fromkeys(term.extra for term in DIMENSIONS[dimension][1]))


ERROR_CLASSES = [errors.ApiError, *errors.ApiError.__subclasses__()]

# Where in the document each enum stands -> the code's list it must equal (in order where the
# order is the answer's order; as a set where the document only lists what may appear).
FROM_CODE: dict[str, tuple[list[Any], bool]] = {
    "/components/schemas/FeeTypeId": (identifiers("fee_types"), True),
    "/components/schemas/CategoryId": (identifiers("fee_categories"), True),
    "/components/schemas/ActionId": (identifiers("actions"), True),
    "/components/schemas/ParticipantId": (identifiers("participants"), True),
    "/components/schemas/TypicalFeeStructure": (extras("participants"), False),
    "/components/schemas/LiquidityType": (extras("actions"), False),
    "/components/schemas/DataType": (list(DATA_TYPE_ORDER), True),
    "/components/schemas/UnitValue": (list(UNITS), True),
    **{
        f"/components/schemas/{schema}": (list(CLOSED_VALUES[column]), True)
        for schema, column in {
            "FeeCategoryValue": "fee_category",
            "FeeActionValue": "action",
            "FeeParticipantValue": "participant",
            "SymbolClassificationValue": "symbol_classification",
            "SymbolTypeValue": "symbol_type",
            "TradeTypeValue": "trade_type",
            "SourceKindValue": "source_kind",
            "DateBasisValue": "date_basis",
        }.items()
    },
    "/components/parameters/UncertainFilter/schema/items": (list(CLOSED_VALUES["uncertain"]), True),
    "/components/parameters/StandardFilter/schema/items": (list(CLOSED_VALUES["standard"]), True),
    "/components/schemas/FeeScheduleResult/properties/complete_scope/anyOf/0": (
        list(CLOSED_VALUES["complete_scope"]),
        True,
    ),
    "/components/parameters/OrderBy/schema": (list(queries.ORDER_COLUMNS), True),
    "/components/parameters/OrderDir/schema": (list(queries.ORDER_DIRECTIONS), True),
    "/components/parameters/ChangeOrderDir/schema": (list(queries.ORDER_DIRECTIONS), True),
    "/components/schemas/ChangeTypeValue": (list(CHANGE_TYPES), True),
    "/components/parameters/Format/schema": (list(export.FORMATS), True),
    "/components/schemas/ExchangeError/properties/error/properties/code": (
        [error.code for error in ERROR_CLASSES],
        False,
    ),
    "/components/schemas/ConflictingParametersDetails/properties/conflicts_with/items": (
        list(supplier_data.WINDOW_PARAMS),
        True,
    ),
    "/components/schemas/InvalidParameterValueDetails/properties/field": (
        [*supplier_data.TERM_PARAMS, "offset", "limit", "max_age_days"],
        True,
    ),
}
# Enums only the document states, and why that is enough.
DOCUMENT_ONLY = {
    # The supplier family's error labels: every class's but 403's and 422's, which that family
    # never answers (checked below).
    "/components/schemas/SupplierError/properties/error",
    # Literal texts of one answer each, written where they are answered.
    "/components/schemas/InvalidParameterValueDetails/properties/allowed/oneOf/1",
    "/components/schemas/InvalidDateDetails/properties/field",
    "/components/schemas/FeeScheduleResult/properties/currency",
    "/components/schemas/LineRecord/properties/currency",
    "/components/schemas/SupplierRecord/properties/currency",
    "/components/schemas/Readiness/properties/status",
}


def enums(node: Any, path: str = "") -> dict[str, list[Any]]:
    found = {}
    if isinstance(node, dict):
        if "enum" in node:
            found[path] = node["enum"]
        for key, child in node.items():
            found |= enums(child, f"{path}/{key}")
    elif isinstance(node, list):
        for number, child in enumerate(node):
            found |= enums(child, f"{path}/{number}")
    return found


def test_every_enum_of_the_document_is_accounted_for() -> None:
    assert set(enums(DOCUMENT)) == set(FROM_CODE) | DOCUMENT_ONLY


@pytest.mark.parametrize("location", list(FROM_CODE))
def test_each_enum_is_the_codes_own_list(location: str) -> None:
    documented = enums(DOCUMENT)[location]
    expected, ordered = FROM_CODE[location]
    if ordered:
        assert documented == expected
    else:
        assert sorted(documented) == sorted(expected)


def test_the_supplier_error_labels_are_the_error_classes_labels() -> None:
    labels = {error.label for error in ERROR_CLASSES} - {"Forbidden", "Unprocessable Entity"}
    documented = enums(DOCUMENT)["/components/schemas/SupplierError/properties/error"]
    assert sorted(documented) == sorted(labels)


def parameter_names(path: str) -> list[str]:
    """The query parameters the document lists for GET `path`, `$ref`s followed."""
    names = []
    for parameter in DOCUMENT["paths"][path]["get"]["parameters"]:
        if "$ref" in parameter:
            parameter = DOCUMENT["components"]["parameters"][parameter["$ref"].rsplit("/", 1)[1]]
        if parameter["in"] == "query":
            names.append(parameter["name"])
    return names


def test_the_results_listing_documents_exactly_the_parameters_it_reads() -> None:
    assert sorted(parameter_names("/api/v1/fee-schedule-results/")) == sorted(results.LIST_PARAMS)
