"""Who is calling, and which venue they mean: the checks every handler makes first."""

from starlette.datastructures import Headers
from starlette.requests import Request

from service.accounts import Account, Keystore
from service.dataset import Dataset, DatasetHolder
from service.errors import ApiError, Family, Unauthorized, Unavailable, family_of

EXCHANGE_KEY_HEADER = "x-service-api-access-key"
# The compatible service's own header, which its SDK sends (hard-coded): accepted in the same
# way, so the SDK works with only its base URL changed. The spec's header wins when both are
# sent, even when it is empty or wrong.
EXCHANGE_KEY_ALIAS = "x-rulebook-api-access-key"
# Where a request's state holds its account once the outermost layer has checked its key (by
# the family its path belongs to, as `presented_key` finds it), so it is checked once.
AUTHENTICATED = "account"


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


def bearer_account(request: Request) -> Account:
    """The supplier family's caller."""
    return _account(request, bearer_key(request.headers), "invalid or missing API key")  # 7.1


def key_header_account(request: Request) -> Account:
    """The exchange family's caller."""
    return _account(request, header_key(request.headers), "missing or invalid API key")  # 7.2


def caller(request: Request) -> Account:
    """The caller, by the key of the family the path belongs to."""
    if family_of(request.scope["path"]) is Family.SUPPLIER:
        return bearer_account(request)
    return key_header_account(request)


def _account(request: Request, key: str | None, message: str) -> Account:
    checked: Account | None = request.scope.get("state", {}).get(AUTHENTICATED)
    if checked is not None:
        return checked  # `FrontDoor` checked the key this request presents
    keystore: Keystore = request.app.state.keystore
    account = keystore.authenticate(key)
    if account is None:
        # Missing, unknown and revoked keys get the same answer.
        raise Unauthorized(message)
    return account


def current_dataset(request: Request) -> Dataset:
    """The version this request is answered from: the one it was pinned to, else the current."""
    pinned: Dataset | None = getattr(request.state, "dataset", None)
    if pinned is not None:
        return pinned
    holder: DatasetHolder = request.app.state.holder
    dataset = holder.current
    if dataset is None:
        raise Unavailable("no dataset version is published yet")
    return dataset


def visible_venue(dataset: Dataset, account: Account, name: str, unknown: ApiError) -> str:
    """The venue code a name resolves to, if this account may see it; otherwise `unknown`,
    the same error either way so a key never learns that a hidden venue exists."""
    code = dataset.resolve(name)
    if code is None or not account.may_see(code):
        raise unknown
    return code
