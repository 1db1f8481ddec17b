"""The response cache: a repeated request gets the same answer without a query, never another
caller's answer, never a stale version's, and the cache stays within its bound."""

import gc
import json
import time
import tracemalloc
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from starlette.datastructures import Headers
from starlette.responses import JSONResponse

from ingest.pipeline import IngestResult
from service.accounts import Account
from service.edge.cache import (
    CACHE_CONTROL,
    ENTRY_BYTES,
    ETAG,
    VERSION_HEADER,
    CacheKey,
    ResponseCache,
    Stored,
    cache_key,
    entity_tag,
    key_text,
    stored_answer,
    stored_body,
)
from service.edge.call import Call
from service.edge.front import RECENT_CHARS, FrontDoor
from service.endpoints import envelope
from service.errors import Family
from service.responses import JSON
from service.settings import Settings
from tests.conftest import KEYS, LiveServer, exchange_headers, supplier_headers

REPEATED = [
    ("/api/v1/suppliers/nyse/participants?start_date=2024-01-01", supplier_headers()),
    ("/api/v1/suppliers/nyse/date-ranges", supplier_headers()),
    ("/v1/exchanges", exchange_headers()),
    ("/api/v1/exchanges/nasdaq", exchange_headers()),
    ("/api/v1/fee-schedule-results/?exchange_name=nyse&page_size=3", exchange_headers()),
    ("/api/v1/fee-schedule-results/filters", exchange_headers()),
]


@pytest.fixture
def live(fixture_version: IngestResult, accounts_file: Path) -> Iterator[LiveServer]:
    """A server of its own, so the counts of hits start at zero."""
    settings = Settings(
        data_dir=fixture_version.version_dir.parent.parent, accounts_file=accounts_file
    )
    with LiveServer(settings) as server:
        yield server


def cache_of(live: LiveServer) -> ResponseCache:
    cache: ResponseCache = live.app.state.cache
    return cache


def without_query_time(body: dict[str, object]) -> dict[str, object]:
    meta = body.get("meta")
    if isinstance(meta, dict):
        assert isinstance(meta.pop("query_time_ms"), int)
    return body


@pytest.mark.parametrize(("path", "headers"), REPEATED)
def test_a_repeated_request_is_answered_from_the_cache_unchanged(
    live: LiveServer, path: str, headers: dict[str, str]
) -> None:
    with httpx.Client(base_url=live.url) as http:
        first = http.get(path, headers=headers)
        again = http.get(path, headers=headers)
    assert first.status_code == again.status_code == 200
    assert (cache_of(live).misses, cache_of(live).hits) == (1, 1)
    assert without_query_time(again.json()) == without_query_time(first.json())
    assert again.headers["content-type"] == first.headers["content-type"]
    assert again.headers["content-length"] == str(len(again.content))


def test_the_order_of_different_parameters_does_not_matter(live: LiveServer) -> None:
    base = "/api/v1/suppliers/nyse/actions"
    with httpx.Client(base_url=live.url, headers=supplier_headers()) as http:
        first = http.get(f"{base}?start_date=2023-01-01&end_date=2024-12-31")
        again = http.get(f"{base}?end_date=2024-12-31&start_date=2023-01-01")
    assert first.json() == again.json()
    assert cache_of(live).hits == 1


def test_escaped_parameters_are_keyed_by_what_they_decode_to(live: LiveServer) -> None:
    base = "/api/v1/suppliers/nyse/fee-types"
    with httpx.Client(base_url=live.url, headers=supplier_headers()) as http:
        plain = http.get(f"{base}?start_date=2023-01-01")
        first = http.get(f"{base}?start%5Fdate=2023-01-01&end_date=2024-12-31")
        again = http.get(f"{base}?end_date=2024-12-31&start%5Fdate=2023-01-01")
    assert first.json() == again.json() != plain.json()
    assert cache_of(live).hits == 1


def test_raw_names_that_decode_alike_keep_their_order_in_the_key() -> None:
    # `a` twice, in two orders: the handler sees the values in a different order, so the
    # two requests must not share an answer.
    def key(query: bytes) -> object:
        scope = {"type": "http", "path": "/v1/x", "query_string": query, "headers": []}
        return cache_key(Account("a", None), scope, Headers(scope=scope))

    assert key(b"%61=2&a=1") != key(b"a=1&%61=2")
    assert key(b"b=1&a=2") == key(b"a=2&b=1")
    assert key(b"a=2&a=1") != key(b"a=1&a=2")


def test_keys_of_one_venue_scope_share_their_answers() -> None:
    """An answer depends on the venues its caller may see, not on which key asked."""

    def key(account: Account) -> object:
        scope = {"type": "http", "path": "/v1/x", "query_string": b"a=1", "headers": []}
        return cache_key(account, scope, Headers(scope=scope))

    venues = frozenset({"nyse", "box"})
    assert key(Account("a", venues, key_id="1")) == key(Account("b", venues, key_id="2"))
    assert key(Account("a", venues)) != key(Account("c", frozenset({"nyse"})))
    assert key(Account("a", venues)) != key(Account("d", None))


def test_a_requests_etag_is_what_it_was_before_keys_held_the_scope() -> None:
    """Tags a client holds from before the cache was keyed by venue scope (#40 part 7) still
    name the same answers: the same request from the same version has the same tag."""
    scope = {"type": "http", "path": "/api/v1/x", "query_string": b"b=1&a=%41",
             "headers": [(b"accept", b"application/json")]}  # fmt: skip
    account = Account("desk", frozenset({"nyse", "box", "cboe"}), key_id="k")
    key = cache_key(account, scope, Headers(scope=scope))
    assert entity_tag("v1", key) == 'W/"v1.59d6cc2f4bb362e45d3dce10"'


@pytest.mark.parametrize("query", [b"b=1&a=2", b"b=%C3%A9&a=2"], ids=["raw", "decoded"])
def test_a_kept_answer_and_its_key_are_not_walked_by_the_collector(query: bytes) -> None:
    """Plain tuples of bytes and text: once the cyclic collector has seen them it stops
    tracking them, so a full collection does not walk the cache. An answer kept as an object
    of a class, or an account in its key, was walked at every one (#40 part 7)."""
    account = Account("desk", frozenset({"nyse", "box"}), key_id="0123456789ab")
    scope = {"type": "http", "path": "/v1/x", "query_string": query,
             "headers": [(b"accept", b"application/json")]}  # fmt: skip
    key = cache_key(account, scope, Headers(scope=scope))
    answer = enveloped([{"name": "a"}], {"record_count": 1})
    cache = ResponseCache(10 * ENTRY_BYTES)
    cache.get("v1", key)
    cache.put("v1", key, answer)
    # A tuple is untracked by the collection after the one that untracked its last tracked
    # part: a decoded key is three tuples deep.
    for _ in range(3):
        gc.collect()
    assert not gc.is_tracked(key)
    assert not gc.is_tracked(answer)


def test_head_is_answered_from_the_get_it_follows(live: LiveServer) -> None:
    path, headers = REPEATED[0]
    with httpx.Client(base_url=live.url, headers=headers) as http:
        got = http.get(path)
        head = http.head(path)
    assert (head.status_code, head.content) == (200, b"")
    assert got.status_code == 200 and int(head.headers["content-length"]) > 0
    assert "server-timing" not in head.headers  # what marks an answer from the cache
    assert cache_of(live).hits == 1


def test_a_cached_answer_is_never_given_to_another_scope_or_a_bad_key(live: LiveServer) -> None:
    with httpx.Client(base_url=live.url) as http:
        everyone = http.get("/api/v1/exchanges", headers=exchange_headers()).json()["data"]
        nyse_only = http.get("/api/v1/exchanges", headers=exchange_headers(KEYS["nyse"]))
        revoked = http.get("/api/v1/exchanges", headers=exchange_headers("revoked-key"))
        missing = http.get("/api/v1/exchanges")
    assert len(everyone) > 1
    assert [venue["name"] for venue in nyse_only.json()["data"]] == ["nyse"]
    assert (revoked.status_code, missing.status_code) == (401, 401)
    assert revoked.json()["error"] == missing.json()["error"]


def test_a_download_is_not_confused_with_the_json_answer(live: LiveServer) -> None:
    path = "/api/v1/fee-schedule-results/?exchange_name=nyse"
    with httpx.Client(base_url=live.url, headers=exchange_headers()) as http:
        as_json = http.get(path)
        as_csv = http.get(path, headers={"Accept": "text/csv"})
        as_json_again = http.get(path)
    assert as_csv.headers["content-type"].startswith("text/csv")
    assert as_csv.text.startswith('"record_id"')
    assert as_json_again.json()["data"] == as_json.json()["data"]


def test_errors_are_answered_afresh(live: LiveServer) -> None:
    with httpx.Client(base_url=live.url, headers=exchange_headers()) as http:
        statuses = [
            http.get("/api/v1/fee-schedule-results/?page_size=0").status_code for _ in range(2)
        ]
    assert statuses == [422, 422]
    assert cache_of(live).hits == 0


def answer(body: dict[str, object]) -> Stored:
    return stored_answer(JSONResponse(body).body, [])


def enveloped(data: object, meta: dict[str, object]) -> Stored:
    """An exchange-family answer as the envelope builds it, kept as the front door keeps it."""
    call = Call(b"id", time.perf_counter(), Family.EXCHANGE, None)
    response = envelope.answer(call, data, meta)
    return stored_answer(bytes(response.body), [], call.timed)


ACCOUNT = Account(name="desk", exchanges=None, key_id="0123456789ab")


def key(name: str) -> CacheKey:
    """A cache key of a request with no parameters (its text: `/api/v1/` and the name)."""
    return (ACCOUNT.scope, f"/api/v1/{name}", (), None)


@pytest.mark.parametrize("meta", [{"record_count": 2}, {}], ids=["meta", "empty-meta"])
def test_the_query_time_is_filled_in_on_every_hit(meta: dict[str, object]) -> None:
    """Where the time stands is the envelope's to say: a value that looks like one (a label
    `"query_time_ms":5`) is never taken for it."""
    cache = ResponseCache(10 * ENTRY_BYTES)
    data = [{"name": "query_time_ms", "label": '"query_time_ms":5'}]
    assert cache.get("v1", key("key")) is None
    cache.put("v1", key("key"), enveloped(data, meta))
    stored = cache.get("v1", key("key"))
    assert stored is not None
    assert json.loads(stored_body(stored, 7)) == {
        "data": data, "meta": {**meta, "query_time_ms": 7},
    }  # fmt: skip
    assert json.loads(stored_body(stored, 12345)) == {
        "data": data, "meta": {**meta, "query_time_ms": 12345},
    }  # fmt: skip


def test_the_cache_keeps_within_its_bound_least_recently_used_out_first() -> None:
    each = ENTRY_BYTES + 34 + key_text(key("a"))  # an answer below, and its key's text
    cache = ResponseCache(2 * each + 10)  # room for two of them
    cache.get("v1", key("a"))  # the cache learns the version it serves
    for name in ("a", "b", "c"):
        cache.put("v1", key(name), answer({"padding": "x" * 20}))  # 34 bytes each
        cache.get("v1", key("a"))  # `a` stays the most recently used
    assert cache.size == (2, 2 * each)
    assert cache.get("v1", key("a")) is not None
    assert cache.get("v1", key("b")) is None
    assert cache.get("v1", key("c")) is not None
    cache.put("v1", key("huge"), answer({"padding": "x" * 3000}))
    assert cache.get("v1", key("huge")) is None


# Per entry: its answer's data and its key's parameters, as the cache key holds them (raw
# `name=value` pairs, or decoded pairs for a query with escapes).
SHAPES = {
    "discovery": (
        [{"name": "add_liquidity", "count": 12345}] * 25,
        lambda number: (b"end_date=2023-06-30", b"start_date=%d-01-01" % number),
    ),
    "a small answer to a long raw query": (
        [],
        lambda number: (b"end_date=2023-06-30", b"fee_code=" + b"x" * 4_000 + b"%d" % number),
    ),
    "a small answer to a long decoded query": (
        [],
        lambda number: (("end_date", "2023-06-30"), ("fee_code", "é" * 2_000 + str(number))),
    ),
}


@pytest.mark.parametrize("shape", SHAPES)
def test_the_bound_counts_what_an_entry_costs_not_only_its_body(shape: str) -> None:
    """Entries shaped as the service keeps them (an answer rendered as the service renders
    it, its key and headers): the bytes the bound counts are within a fifth of the memory they
    take, with a long query too (orjson's output keeps a buffer larger than itself)."""
    data, parameters = SHAPES[shape]
    answer_data = {"data": data, "meta": {}}
    cache = ResponseCache(2**40)
    cache.get("v1", None)
    gc.collect()
    tracemalloc.start()
    try:
        for number in range(5_000):
            path = f"/api/v1/suppliers/v{number % 40}/actions"
            request = (ACCOUNT.scope, path, parameters(number), None)
            headers = [(b"content-type", b"application/json"), (VERSION_HEADER, b"v1"),
                       (ETAG, b'W/"v1.%024x"' % number), (CACHE_CONTROL, b"private")]  # fmt: skip
            cache.put("v1", request, stored_answer(JSON(answer_data).body, headers))
        gc.collect()
        taken, _ = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    answers, counted = cache.size
    assert answers == 5_000
    assert 0.8 < counted / taken < 1.2, (counted, taken)


def test_a_new_version_empties_the_cache_and_the_old_one_cannot_refill_it() -> None:
    cache = ResponseCache(10 * ENTRY_BYTES)
    cache.get("v1", key("key"))
    cache.put("v1", key("key"), answer({"version": 1}))
    assert cache.get("v2", key("key")) is None
    cache.put("v1", key("key"), answer({"version": 1}))  # a request still finishing on v1
    assert cache.get("v2", key("key")) is None
    cache.put("v2", key("key"), answer({"version": 2}))
    stored = cache.get("v2", key("key"))
    assert stored is not None and json.loads(stored_body(stored, 0)) == {"version": 2}


def test_a_zero_bound_turns_the_cache_off() -> None:
    cache = ResponseCache(0)
    cache.get("v1", key("key"))
    cache.put("v1", key("key"), answer({"kept": False}))
    assert cache.get("v1", key("key")) is None


def test_every_answer_names_its_dataset_version(
    live: LiveServer, fixture_version: IngestResult
) -> None:
    path, headers = REPEATED[0]
    with httpx.Client(base_url=live.url, headers=headers) as http:
        answers = [http.get(path), http.get(path), http.get("/api/v1/suppliers/nowhere/actions")]
    assert [answer.status_code for answer in answers] == [200, 200, 404]
    assert cache_of(live).hits == 1
    versions = {answer.headers["x-dataset-version"] for answer in answers}
    assert versions == {fixture_version.version_id}


def test_only_a_short_raw_request_is_remembered(live: LiveServer) -> None:
    """The door remembers the account and cache key of a raw request (path, query, the key
    and `Accept`) only when it is short: a key's holder could send thousands of 8 KB queries.
    A long one is answered as ever."""
    door: FrontDoor = live.app
    path = "/api/v1/suppliers/nyse/participants?start_date=2024-01-01"
    with httpx.Client(base_url=live.url, headers=supplier_headers()) as http:
        short = http.get(path)
        long = http.get(f"{path}&end_date=2024-12-31&{'x' * RECENT_CHARS}=1")
    assert (short.status_code, long.status_code) == (200, 400)
    remembered = {(raw[0], raw[1]) for raw in door._recent}
    assert ("/api/v1/suppliers/nyse/participants", b"start_date=2024-01-01") in remembered
    assert not any(len(query) > RECENT_CHARS for _, query in remembered)
