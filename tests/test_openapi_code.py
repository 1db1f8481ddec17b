"""The OpenAPI document and the code agree on every closed list: each enum the document holds
is the code's own list (or, for the few the document alone states, is said to be here), and
every query parameter an endpoint declares is one its handler reads and checks."""

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from ingest.layout import CHANGE_TYPES
from ingest.schema import CLOSED_VALUES, UNITS
from service import errors
from service.api import ENDPOINTS
from service.dataset import queries
from service.endpoints import export, supplier_data
from service.vocabulary import DATA_TYPE_ORDER, DIMENSIONS
from tests.conftest import exchange_headers, supplier_headers

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


# A value each query parameter must refuse (none of these is a date, a known value, a number in
# range or a boolean), and the path values that reach each endpoint's handler.
IMPOSSIBLE = "2024-02-30x"
PATH_VALUES = {"supplier_name": "nasdaq", "exchange_name": "nasdaq", "version_id": "v",
               "record_id": "r", "line_id": "l"}  # fmt: skip
REQUIRED = {"/compare/": {"fee_type": "equity"}}  # what an endpoint needs to read the rest


def declared_cases() -> Iterator[tuple[str, str]]:
    for endpoint in ENDPOINTS:
        if endpoint.handler is not None and endpoint.prefixed:
            for name in endpoint.query:
                yield endpoint.path.format(**PATH_VALUES), name


@pytest.mark.parametrize(("path", "name"), list(declared_cases()), ids="{0[0]}?{0[1]}".format)
def test_every_declared_query_parameter_is_read_and_checked_by_its_handler(
    client: httpx.Client, path: str, name: str
) -> None:
    """Each endpoint takes exactly the query parameters `service.api` declares for it (the
    route tells its handler), so the document lists what the code reads: an impossible value
    of each is refused naming it, never ignored."""
    family = supplier_headers() if path.startswith("/suppliers/") else exchange_headers()
    params = {**REQUIRED.get(path, {}), name: IMPOSSIBLE}
    answer = client.get(f"/api/v1{path}", params=params, headers=family)
    assert answer.status_code in (400, 422), answer.text
    error = answer.json()
    fields = (
        [problem["field"] for problem in error["error"]["details"]]
        if isinstance(error.get("error"), dict)
        else [(error.get("details") or {}).get("field")]
    )
    assert name in fields, error
