"""Answers kept per dataset version, so a repeated request costs a lookup, not a query.

A published version never changes, so a successful JSON answer to the same caller scope, path,
parameters and Accept header stays right until the next version; the cache is keyed by
version and emptied when a request first sees a newer one. The one part of a body that
changes per call, the exchange family's `meta.query_time_ms`, is stored cut out (where it stands
is known from the envelope that built the answer, `service.endpoints.envelope`) and filled in
with the current figure on every hit, so a cached answer is the answer, byte for byte.

Bounded by the bytes of the bodies it holds (least recently used out first); 0 turns it off.

The same reasoning makes HTTP caching exact: every successful answer carries a weak `ETag` made
of the version and the request (`entity_tag`: the caller's venue scope, path, parameters and
Accept header, hashed; the same in every process and replica) and `Cache-Control: private,
max-age`; a request whose `If-None-Match` names that tag is answered 304 with no body (from the
cache when the answer is there). The tag is weak because `meta.query_time_ms` differs between
two equal answers.
"""

import hashlib
from collections import OrderedDict
from operator import itemgetter
from typing import Any

from starlette.datastructures import Headers, QueryParams
from starlette.types import Scope

from service.accounts import Account
from service.edge import wire
from service.edge.access import EXCHANGE_KEY_ALIAS, EXCHANGE_KEY_HEADER

VERSION_HEADER = b"x-dataset-version"
ETAG = b"etag"
CACHE_CONTROL = b"cache-control"
# What an entry costs beside its body and its key's text (`key_text`): the key's tuples, its
# kept headers (the ETag its own; as pairs, and as written for an answer made at once), the
# `Stored` tuple and the cache's bookkeeping. Traced: 1,945 bytes an entry whose body is 995 and
# whose key holds 69 characters (5,000 entries shaped as discovery answers; 1,978 when the
# answer was an object of a class, 2,069 through cachetools' `LRUCache`, which kept three
# dicts), so counting bodies alone let the cache take about twice its bound
# (`tests/test_cache.py` checks the bound within a fifth, for long keys too).
ENTRY_BYTES = 882

# What a cached answer gives again (its content-length is set per answer).
KEPT_HEADERS = frozenset(
    {b"content-type", b"content-disposition", VERSION_HEADER, ETAG, CACHE_CONTROL}
)
# Of those, what a 304 carries (RFC 9110 15.4.5: no content headers).
NOT_MODIFIED_HEADERS = frozenset({VERSION_HEADER, ETAG, CACHE_CONTROL})
# The request headers a cache key is made of: the key, as either family presents it, and Accept.
KEYED_HEADERS = frozenset(
    {b"authorization", EXCHANGE_KEY_HEADER.encode(), EXCHANGE_KEY_ALIAS.encode(), b"accept"}
)


# An answer kept: (head, tail, headers, lines). The body up to its query time (all of it when
# there is none), the body after it (None when there is none), the headers it gives again, and
# those headers as written (`service.edge.wire`) for an answer made at once. A plain tuple of
# bytes, like its key: once the cyclic collector has seen that such a tuple's parts hold no
# container it stops tracking it, so a full collection does not walk the cache. With 30,000
# answers kept (in process, 10M records, cold discovery), a full collection took 41-72 ms when
# each answer was an object of a class and its key held the account, 17-24 ms with the answer
# a named tuple, 9-16 ms as this: a pause for every request in flight (#40 part 7).
Stored = tuple[bytes, bytes | None, tuple[tuple[bytes, bytes], ...], bytes]


def stored_answer(
    body: bytes, headers: list[tuple[bytes, bytes]], timed: tuple[int, int] | None = None
) -> Stored:
    """An answer to keep; `timed` is where its query time stands in `body`, as the envelope
    that built it says (`service.endpoints.envelope`), or None for an answer without one."""
    kept = tuple((k, v) for k, v in headers if k in KEPT_HEADERS)
    if timed is None:  # kept as a copy of its own length (`exact`)
        return exact(body), None, kept, wire.lines(kept)
    start, end = timed
    return body[:start], body[end:], kept, wire.lines(kept)


def stored_body(answer: Stored, query_time_ms: int) -> bytes:
    """A kept answer's body, with the query time filled in."""
    head, tail, _, _ = answer
    return head if tail is None else b"%s%d%s" % (head, query_time_ms, tail)


def stored_etag(answer: Stored) -> bytes:
    _, _, headers, _ = answer
    return next(value for name, value in headers if name == ETAG)


def stored_size(answer: Stored) -> int:
    """What a kept answer costs, as the cache's bound counts it: its body and `ENTRY_BYTES`
    (the cache adds its key's text, `key_text`)."""
    head, tail, _, _ = answer
    return len(head) + len(tail or b"") + ENTRY_BYTES


def exact(body: bytes) -> bytes:
    """The body in an object of its own length. orjson renders into a buffer it does not
    shrink: a discovery answer of 785 bytes held 8 KB, so cached as rendered, answers took 2.7
    times what the bound counts (`docs/benchmarks.md`, issue 40). A slice of the body is such
    a copy already."""
    return memoryview(body).tobytes()


# (caller's venue scope, path, parameters, Accept header): see `cache_key`.
CacheKey = tuple[tuple[str, ...] | None, str, tuple[Any, ...], str | None]


def cache_key(account: Account, scope: Scope, headers: Headers) -> CacheKey:
    """What makes two requests the same: the venues the caller may see (`Account.scope`: what
    an answer depends on, so two keys of the same scope share their answers), path, parameters
    and Accept header.

    Parameters are sorted by name; a name's repeated values keep their order (echoes show it).
    A query with nothing to decode is sorted as raw `name=value` pairs, which mean exactly what
    the decoded ones do at a tenth of the cost; one with escapes is decoded as the handler
    decodes it (two raw names can decode to one, so their raw order would not be enough).
    """
    query: bytes = scope["query_string"]
    parameters: list[Any]
    if b"%" in query or b"+" in query:
        parameters = sorted(QueryParams(query).multi_items(), key=itemgetter(0))
    else:
        parameters = sorted(query.split(b"&"), key=lambda pair: pair.partition(b"=")[0])
    return (account.scope, scope["path"], tuple(parameters), headers.get("accept"))


def key_text(key: CacheKey) -> int:
    """The characters a key holds (path, parameters, Accept), counted against the bound with
    its answer: a caller's query can be 8 KB, and a small answer under such a key took several
    times what `ENTRY_BYTES` allows."""
    _, path, parameters, accept = key
    held = len(path) + len(accept or "")
    for parameter in parameters:  # raw `name=value` bytes, or decoded (name, value) pairs
        held += len(parameter) if isinstance(parameter, bytes) else sum(map(len, parameter))
    return held


def entity_tag(version_id: str, key: CacheKey) -> str:
    """The weak ETag of the answer to a request (its cache key) from a version: what the
    answer depends on, hashed, so two processes, or two keys of the same scope, agree."""
    venues, path, parameters, accept = key
    scope = None if venues is None else list(venues)  # a list, so a tag is what it was
    request = repr((scope, path, parameters, accept)).encode()
    return f'W/"{version_id}.{hashlib.blake2b(request, digest_size=12).hexdigest()}"'


def not_modified(if_none_match: bytes | None, etag: bytes) -> bool:
    """Whether `If-None-Match` names `etag` (weak comparison: `W/` is ignored, RFC 9110 8.8.3.2)."""
    if not if_none_match:
        return False
    wanted = etag.removeprefix(b"W/")
    tags = (tag.strip().removeprefix(b"W/") for tag in if_none_match.split(b","))
    return if_none_match.strip() == b"*" or wanted in tags


class ResponseCache:
    """The answers kept, the least recently used out first, within `max_bytes` as
    `stored_size` and `key_text` count them. Used by the front door alone, on the event loop:
    no lock. An ordered dict of our own rather than cachetools' `LRUCache`: a miss and the
    answer kept after it cost 0.35 µs in process, against 0.9 through that class's layers (#40
    part 6)."""

    def __init__(self, max_bytes: int) -> None:
        self._max_bytes = max_bytes
        self._entries: OrderedDict[CacheKey, Stored] = OrderedDict()
        self._held = 0  # the bytes kept, as `stored_size` and `key_text` count them
        self._version: str | None = None
        self.hits = 0
        self.misses = 0

    @property
    def enabled(self) -> bool:
        return self._max_bytes > 0

    @property
    def size(self) -> tuple[int, int]:
        """The answers kept, and their bytes as the bound counts them (`stored_size` and
        `key_text`)."""
        return len(self._entries), self._held

    def get(self, version: str, key: CacheKey) -> Stored | None:
        if version != self._version:  # a new version: what the old one answered is dropped
            self._entries, self._held, self._version = OrderedDict(), 0, version
        stored = self._entries.get(key)
        if stored is None:
            self.misses += 1
        else:
            self._entries.move_to_end(key)
            self.hits += 1
        return stored

    def put(self, version: str, key: CacheKey, stored: Stored) -> None:
        """Keep a successful answer of `version` (ignored once a newer version is seen), and
        drop the least recently used until the cache is within its bound."""
        size = _cost(key, stored)
        if version != self._version or size > self._max_bytes:
            return
        entries = self._entries
        replaced = entries.pop(key, None)
        if replaced is not None:
            self._held -= _cost(key, replaced)
        entries[key] = stored
        self._held += size
        while self._held > self._max_bytes:
            self._held -= _cost(*entries.popitem(last=False))


def _cost(key: CacheKey, stored: Stored) -> int:
    """What an entry costs against the bound: its answer (`stored_size`) and its key's text."""
    return stored_size(stored) + key_text(key)
