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


def visible_venue(dataset: Dataset, account: Account, name: str, unknown: ApiError) -> str:
    """The venue code a name resolves to, if this account may see it; otherwise `unknown`,
    the same error either way so a key never learns that a hidden venue exists."""
    code = dataset.resolve(name)
    if code is None or not account.may_see(code):
        raise unknown
    return code
