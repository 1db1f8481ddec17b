"""What the exchange family's endpoints share in reading a request: the venues a key sees and
names (`exchange_name`, any name or alias), and the dimension filters, each value checked
against its vocabulary; a named venue outside the key's scope is 403."""

from service.accounts import Account
from service.dataset import queries
from service.dataset.version import Dataset
from service.endpoints.params import Query
from service.errors import Forbidden

HIDDEN_DATA = "You do not have access to this exchange's data."


def scope(dataset: Dataset, account: Account) -> list[str] | None:
    """The venues a key is limited to; None when it sees every venue (no condition needed)."""
    return None if account.exchanges is None else dataset.visible(account)


def vocabulary_filters(query: Query, names: tuple[str, ...]) -> dict[str, list[str]]:
    """The given dimension filters of `names` (results filters; venues aside), each value
    checked against its vocabulary."""
    chosen = {}
    for name in names:
        column = queries.RESULT_FILTERS[name]
        values = None if column == "exchange" else query.get(name)
        if values is not None:
            chosen[name] = values
    return chosen


def venue_codes(query: Query, dataset: Dataset, account: Account) -> list[str] | None:
    """The venues named by `exchange_name` (any name or alias), as codes; None when not given."""
    names = query.values("exchange_name")
    if names is None:
        return None
    codes = [dataset.resolve(name) for name in names]
    unknown = [name for name, code in zip(names, codes, strict=True) if code is None]
    if unknown:
        # The 422 offers only visible venues. (Naming a hidden venue is a 403, as in the
        # compatible service, so this family does admit that a hidden venue exists.)
        query.fail("exchange_name", f"unknown exchange(s): {', '.join(unknown)}",
                   dataset.visible(account))  # fmt: skip
    return [code for code in codes if code is not None]


def refuse_hidden(codes: list[str] | None, account: Account) -> None:
    if any(not account.may_see(code) for code in codes or []):
        raise Forbidden(HIDDEN_DATA)
