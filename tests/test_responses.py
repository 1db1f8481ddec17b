"""The orjson-rendered answers against Starlette's own JSON rendering."""

import json

from hypothesis import given, settings
from hypothesis import strategies as st
from starlette.responses import JSONResponse

from service.responses import JSON

# What answers hold: text (any Unicode), 64-bit integers, booleans, null and finite floats.
SCALARS = (
    st.none() | st.booleans() | st.integers(min_value=-(2**63), max_value=2**63 - 1) | st.text()
)
FLOATS = st.floats(allow_nan=False, allow_infinity=False)


def documents(scalars: st.SearchStrategy[object]) -> st.SearchStrategy[object]:
    return st.recursive(
        scalars,
        lambda inner: st.lists(inner, max_size=5) | st.dictionaries(st.text(), inner, max_size=5),
        max_leaves=30,
    )


@settings(max_examples=300, derandomize=True)
@given(documents(SCALARS))
def test_without_floats_the_bytes_are_starlettes(document: object) -> None:
    assert JSON(document).body == JSONResponse(document).body


@settings(max_examples=300, derandomize=True)
@given(documents(SCALARS | FLOATS))
def test_with_floats_the_values_are_starlettes(document: object) -> None:
    ours, theirs = json.loads(JSON(document).body), json.loads(JSONResponse(document).body)
    assert ours == theirs
    assert json.dumps(ours, sort_keys=True) == json.dumps(theirs, sort_keys=True)  # -0.0 too


def test_small_amounts_are_written_in_full() -> None:
    assert JSON({"amount": 0.00003}).body == b'{"amount":0.00003}'
