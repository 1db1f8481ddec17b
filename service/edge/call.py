"""What the front door learned about one request, carried for the rest of it.

`service.edge.front.FrontDoor` makes one `Call` per request (`arrival`): when it arrived, its id,
which envelope its path speaks, the caller's account (the key checked once), the version it
is answered from and its response cache key. Handlers read it as `CALL.get()`, never from the
request's state; each reads `call.account` first, which is the family's 401 without a key.
"""

import itertools
import os
import re
import secrets
import time
from contextvars import ContextVar
from dataclasses import dataclass

from starlette.types import Scope

from service.accounts import Account
from service.dataset.version import Dataset
from service.edge.access import CHALLENGES
from service.edge.cache import CacheKey
from service.errors import ApiError, Family, Unauthorized, Unavailable, family_of, render
from service.responses import JSON

REQUEST_ID = b"x-request-id"
IF_NONE_MATCH = b"if-none-match"
# A caller's own request id is echoed when it is a plain token; anything else is replaced, so
# a log line or a header never carries what a caller smuggled into it.
GIVEN_REQUEST_ID = re.compile(rb"[A-Za-z0-9._:-]{1,128}")
# A made id is this process's random 20 hex digits and a 12-digit count: unique across
# processes and replicas without a system call per request (`uuid4` cost a tenth of a cached
# answer under load). An id names a request; it is not a secret.
_process_prefix = secrets.token_hex(10).encode()
_request_numbers = itertools.count()


def _new_prefix() -> None:
    global _process_prefix
    _process_prefix = secrets.token_hex(10).encode()


os.register_at_fork(after_in_child=_new_prefix)  # a forked worker makes ids of its own


def new_request_id() -> bytes:
    return b"%s%012x" % (_process_prefix, next(_request_numbers))


# Spec 7.1 and 7.2: a missing, unknown and revoked key get the same answer, worded per family.
UNAUTHORIZED = {
    Family.SUPPLIER: "invalid or missing API key",
    Family.EXCHANGE: "missing or invalid API key",
}


@dataclass(slots=True)
class Call:
    request_id: bytes
    started: float  # `time.perf_counter()` at arrival
    family: Family
    if_none_match: bytes | None
    version: Dataset | None = None  # pinned at arrival for an API path; None before any is
    caller: Account | None = None  # None: no key, an unknown or revoked one, or none needed
    key: CacheKey | None = None  # set with `caller`
    challenge: str | None = None  # a 401's `WWW-Authenticate`, when the door made one
    timed: tuple[int, int] | None = None  # where the answer's query time stands in its body

    @property
    def account(self) -> Account:
        """The caller, or the family's 401 when the request has no valid key (every API
        handler reads it first)."""
        if self.caller is None:
            raise Unauthorized(UNAUTHORIZED[self.family], self.challenge or CHALLENGES[self.family])
        return self.caller

    @property
    def dataset(self) -> Dataset:
        """The version the request is answered from, or a 503 while none is published."""
        if self.version is None:
            raise Unavailable("no dataset version is published yet")
        return self.version

    def elapsed_ms(self) -> int:
        """Milliseconds since arrival: the exchange family's `meta.query_time_ms`."""
        return elapsed_ms(self.started)

    def render(self, error: ApiError) -> JSON:
        return render(error, self.family, self.elapsed_ms())


# The current request's call, for the code Starlette calls without it (its 404, 405 and 500
# handlers). A context variable, not a key in the scope: each request runs in a task of its own.
CALL: ContextVar[Call] = ContextVar("call")


def elapsed_ms(started: float) -> int:
    """Whole milliseconds since `started` (`time.perf_counter()`)."""
    return round((time.perf_counter() - started) * 1000)


def arrival(scope: Scope) -> Call:
    """The call of a request that just arrived."""
    request_id, if_none_match = identified(scope["headers"])
    started = time.perf_counter()
    return Call(request_id, started, family_of(scope["path"]), if_none_match)


def identified(headers: list[tuple[bytes, bytes]]) -> tuple[bytes, bytes | None]:
    """A request's id (the caller's own when it is a plain token, else a new one) and its
    `If-None-Match`, in one pass over its headers."""
    given = if_none_match = None
    for name, value in headers:
        if name == REQUEST_ID and GIVEN_REQUEST_ID.fullmatch(value):
            given = bytes(value)
        elif name == IF_NONE_MATCH and if_none_match is None:
            if_none_match = bytes(value)
    return given or new_request_id(), if_none_match
