"""Where a request presents its key, per family, and which venues the caller may name."""

from starlette.datastructures import Headers

from service.accounts import Account
from service.dataset.version import Dataset
from service.errors import ApiError, Family, family_of

EXCHANGE_KEY_HEADER = "x-service-api-access-key"
# The compatible service's own header, which its SDK sends (hard-coded): accepted in the same
# way, so the SDK works with only its base URL changed. The spec's header wins when both are
# sent, even when it is empty or wrong.
EXCHANGE_KEY_ALIAS = "x-rulebook-api-access-key"


# RFC 9110 (11.6.1): a 401 carries `WWW-Authenticate` naming how to authenticate. The supplier
# family reads RFC 6750's Bearer scheme; the exchange family reads a key header, which no
# registered scheme names, so its challenge is a scheme of its own naming that header. The same
# challenge answers a missing, unknown or revoked key (spec 7.1, 7.2: indistinguishable).
CHALLENGES = {
    Family.SUPPLIER: 'Bearer realm="suppliers"',
    Family.EXCHANGE: f'ApiKey realm="exchanges", header="{EXCHANGE_KEY_HEADER}"',
}
# A key sent in the other family's header is never read, so the challenge says where it goes
# (this tells nothing about the key: the same words answer any value in that header).
MISPLACED = {
    Family.SUPPLIER: (
        f'error="invalid_request", error_description="this path reads Authorization: Bearer '
        f"<key>; {EXCHANGE_KEY_HEADER} is read on the exchange family's paths\""
    ),
    Family.EXCHANGE: (
        f'error="invalid_request", error_description="this path reads {EXCHANGE_KEY_HEADER}: '
        '<key>; Authorization: Bearer is read on /api/v1/suppliers/ paths"'
    ),
}


def bearer_key(headers: Headers) -> str | None:
    """The supplier family's key, from `Authorization: Bearer <key>`."""
    scheme, _, key = headers.get("authorization", "").partition(" ")
    return key.strip() if scheme.lower() == "bearer" else None


def header_key(headers: Headers) -> str | None:
    """The exchange family's key, from `x-service-api-access-key` (or its alias)."""
    key = headers.get(EXCHANGE_KEY_HEADER)
    return headers.get(EXCHANGE_KEY_ALIAS) if key is None else key


def presented_key(path: str, headers: Headers) -> str | None:
    """The key a request presents, in the way the family its path belongs to expects."""
    return bearer_key(headers) if family_of(path) is Family.SUPPLIER else header_key(headers)


def challenge(path: str, headers: Headers) -> str:
    """The `WWW-Authenticate` of a 401 on `path`, saying which header it reads, and where the
    key went when it came in the other family's header."""
    family = family_of(path)
    misplaced = (
        header_key(headers) is not None
        if family is Family.SUPPLIER
        else bearer_key(headers) is not None
    )
    return f"{CHALLENGES[family]}, {MISPLACED[family]}" if misplaced else CHALLENGES[family]


def visible_venue(dataset: Dataset, account: Account, name: str, unknown: ApiError) -> str:
    """The venue code a name resolves to, if this account may see it; otherwise `unknown`,
    the same error either way so a key never learns that a hidden venue exists."""
    code = dataset.resolve(name)
    if code is None or not account.may_see(code):
        raise unknown
    return code
