"""The OpenAPI document and the code agree on every closed list: each enum the document holds
is written in from the code's own list (or, for the few the document alone states, is said to
be here and checked), and
every query parameter an endpoint declares is one its handler reads and checks."""

import copy
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from service import api, closed_lists, errors
from service.api import ENDPOINTS
from service.endpoints import supplier_data
from tests.conftest import exchange_headers, supplier_headers

DOCUMENT = json.loads(
    (Path(__file__).parent.parent / "service" / "openapi.json").read_text(encoding="utf-8")
)


ERROR_CLASSES = [errors.ApiError, *errors.ApiError.__subclasses__()]
ERROR_CODES = "/components/schemas/ExchangeError/properties/error/properties/code"
SUPPLIER_LABELS = "/components/schemas/SupplierError/properties/error"
# Enums only the document states, and why that is enough.
DOCUMENT_ONLY = {
    # The exchange family's error codes, in the document's own order, and the supplier family's
    # error labels: every class's but 403's and 422's, which that family never answers (both
    # checked below).
    ERROR_CODES,
    SUPPLIER_LABELS,
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
    """Each is written in from the code's list (`service.closed_lists`), or said here."""
    assert set(enums(DOCUMENT)) == set(closed_lists.LISTS) | DOCUMENT_ONLY


@pytest.mark.parametrize("location", list(closed_lists.LISTS))
def test_operations_json_leaves_each_code_list_to_the_code(location: str) -> None:
    """A list the code holds is never also written by hand (`closed_lists.filled` refuses it)."""
    source = json.loads(api.OPERATIONS_FILE.read_text(encoding="utf-8"))
    schema = source
    for step in location.strip("/").split("/"):
        schema = schema[int(step)] if isinstance(schema, list) else schema[step]
    assert "enum" not in schema


def test_a_code_list_written_by_hand_too_is_refused() -> None:
    with pytest.raises(ValueError, match="enum, which the code holds"):
        closed_lists.filled(copy.deepcopy(api.SOURCE))


def test_the_error_codes_are_the_error_classes_codes() -> None:
    codes = [error.code for error in ERROR_CLASSES]
    assert sorted(enums(DOCUMENT)[ERROR_CODES]) == sorted(codes)


def test_the_supplier_error_labels_are_the_error_classes_labels() -> None:
    # 403 and 422, and the 413 and 415 of a body: the supplier family answers none of them.
    never = {"Forbidden", "Unprocessable Entity", "Content Too Large", "Unsupported Media Type"}
    labels = {error.label for error in ERROR_CLASSES} - never
    assert sorted(enums(DOCUMENT)[SUPPLIER_LABELS]) == sorted(labels)


# A value each query parameter must refuse (none of these is a date, a known value, a number in
# range or a boolean), and the path values that reach each endpoint's handler.
IMPOSSIBLE = "2024-02-30x"
PATH_VALUES = {"supplier_name": "nasdaq", "exchange_name": "nasdaq", "version_id": "v",
               "record_id": "r", "line_id": "l"}  # fmt: skip
REQUIRED = {"/compare/": {"fee_type": "equity"}}  # what an endpoint needs to read the rest


# Parameters every value of which is a question with an answer: a tier's name or a fee code
# that no record holds finds none (`tests/test_estimates.py` holds each filter to the records
# it keeps).
OPEN = frozenset({"tier", "fee_code"})


def declared_cases() -> Iterator[tuple[str, str, str]]:
    for endpoint in ENDPOINTS:
        if endpoint.handler is not None and endpoint.prefixed:
            for name in endpoint.query:
                if name not in OPEN:
                    yield endpoint.method, endpoint.path.format(**PATH_VALUES), name


@pytest.mark.parametrize(
    ("method", "path", "name"), list(declared_cases()), ids="{0[1]}?{0[2]}".format
)
def test_every_declared_query_parameter_is_read_and_checked_by_its_handler(
    client: httpx.Client, method: str, path: str, name: str
) -> None:
    """Each endpoint takes exactly the query parameters `service.api` declares for it (the
    route tells its handler), so the document lists what the code reads: an impossible value
    of each is refused naming it, never ignored."""
    family = supplier_headers() if path.startswith("/suppliers/") else exchange_headers()
    params = {**REQUIRED.get(path, {}), name: IMPOSSIBLE}
    body = {"json": {"fills": []}} if method == "POST" else {}  # a POST's question is its body
    answer = client.request(method, f"/api/v1{path}", params=params, headers=family, **body)
    assert answer.status_code in (400, 422), answer.text
    error = answer.json()
    fields = (
        [problem["field"] for problem in error["error"]["details"]]
        if isinstance(error.get("error"), dict)
        else [(error.get("details") or {}).get("field")]
    )
    assert name in fields, error


def test_the_supplier_count_states_the_limit_declared() -> None:
    """`/data/count`'s `max_records_per_request` is the most `limit` takes on `/data`."""
    assert api.PARAMETERS["Limit"]["schema"]["maximum"] == supplier_data.MAX_LIMIT
