"""The request a handler reads (`service.edge.request`): its query parsed by hand when there
is nothing in it to decode, to the same parameters Starlette's parse gives."""

from hypothesis import given, settings
from hypothesis import strategies as st
from starlette.datastructures import QueryParams

from service.edge.request import query_params

# Queries made mostly of what a parse turns on: separators, escapes, pluses and empty parts.
QUERIES = st.text(
    st.sampled_from("ab=&%+;2F0 ") | st.characters(max_codepoint=0xFF), max_size=30
).map(lambda text: text.encode("latin-1"))


@settings(max_examples=2_000, deadline=None)
@given(query=QUERIES)
def test_a_query_reads_as_starlette_reads_it(query: bytes) -> None:
    ours, starlettes = query_params(query), QueryParams(query)
    assert ours.multi_items() == starlettes.multi_items()
    assert list(ours) == list(starlettes) and len(ours) == len(starlettes)
    assert ours == starlettes and str(ours) == str(starlettes)
    for name, _ in starlettes.multi_items():
        assert name in ours
        assert ours.get(name) == starlettes.get(name) == starlettes[name] == ours[name]
        assert ours.getlist(name) == starlettes.getlist(name)
    assert "absent" not in ours or "absent" in starlettes


def test_a_plain_query_keeps_its_order_blanks_and_repeats() -> None:
    query = b"b=2&a=&a=1&&c&d=x=y"
    expected = [("b", "2"), ("a", ""), ("a", "1"), ("c", ""), ("d", "x=y")]
    assert query_params(query).multi_items() == expected
