"""Keys: stored only as hashes, checked before anything else about a request, and a missing,
unknown or revoked key answered identically (nothing tells a caller which it was)."""

from collections.abc import Callable
from pathlib import Path

import httpx
import pytest

from ingest.pipeline import IngestResult
from service.accounts import add_key, fingerprint, list_keys, revoke_key
from tests.conftest import KEYS, exchange_headers, supplier_headers

# Every operation that needs a key, with parameters and names that would each be refused
# (bad date, unknown parameter, unknown venue) if the key were looked at after them.
REFUSED_ANYWAY: list[tuple[str, Callable[[str], dict[str, str]]]] = [
    ("/api/v1/suppliers/nowhere/participants?start_date=bad&zz=1", supplier_headers),
    ("/api/v1/suppliers/nowhere/date-ranges?zz=1", supplier_headers),
    ("/api/v1/suppliers/nowhere/data?limit=0", supplier_headers),
    ("/api/v1/suppliers/nowhere/data/count?offset=1", supplier_headers),
    ("/api/v1/exchanges/?page=2", exchange_headers),
    ("/api/v1/exchanges/nowhere", exchange_headers),
    ("/api/v1/fee-schedule-results/?page_size=0&exchange_name=nowhere", exchange_headers),
    ("/api/v1/fee-schedule-results/filters?zz=1", exchange_headers),
    ("/api/v1/fee-schedule-results/versions/nowhere?page_number=-1", exchange_headers),
    ("/api/v1/fee-schedule-results/nowhere?include_source=maybe", exchange_headers),
]


def alias_headers(key: str) -> dict[str, str]:
    """The exchange family's key in the compatible service's header, as its SDK sends it."""
    return {"x-rulebook-api-access-key": key}


REFUSED_ANYWAY += [(target, alias_headers) for target, given in REFUSED_ANYWAY
                   if given is exchange_headers]  # fmt: skip
# Headers that differ between any two answers: when and which request, and how long it took
# (the length too: the body holds `query_time_ms`, and 9 ms and 10 ms differ by a digit).
PER_ANSWER = {"date", "x-request-id", "server-timing", "content-length"}


def comparable(response: httpx.Response) -> tuple[int, object, list[str]]:
    body = response.json()
    if isinstance(body.get("meta"), dict):
        body["meta"].pop("query_time_ms")
    headers = sorted(
        f"{name}: {value}" for name, value in response.headers.items() if name not in PER_ANSWER
    )
    return response.status_code, body, headers


@pytest.mark.parametrize(
    ("target", "key_headers"),
    REFUSED_ANYWAY,
    ids=[f"{target} ({given.__name__})" for target, given in REFUSED_ANYWAY],
)
def test_missing_unknown_and_revoked_keys_get_the_same_401_before_any_parameter_is_read(
    client: httpx.Client, target: str, key_headers: Callable[[str], dict[str, str]]
) -> None:
    answers = [
        comparable(client.get(target, headers=given))
        for given in ({}, key_headers("unknown-key-0123456789abcdef"), key_headers("revoked-key"))
    ]
    assert answers[0][0] == 401
    assert answers[0] == answers[1] == answers[2]


@pytest.mark.parametrize(
    "target",
    [
        "/api/v1/exchanges/",
        "/api/v1/exchanges/NOM",
        "/api/v1/fee-schedule-results/?fee_type=option&page_size=3",
        "/v1/fee-schedule-results/filters/?exchange_name=memx",
        "/api/v1/fee-schedule-results/versions/{version}",
        "/api/v1/fee-schedule-results/{record}?include_source=true",
    ],
)
def test_the_compatible_services_header_carries_the_same_key_on_every_exchange_endpoint(
    client: httpx.Client, fixture_version: IngestResult, target: str
) -> None:
    page = client.get("/api/v1/fee-schedule-results/", headers=exchange_headers()).json()
    url = target.format(version=fixture_version.version_id, record=page["data"][0]["record_id"])
    answers = [
        client.get(url, headers=given)
        for given in (exchange_headers(KEYS["full"]), alias_headers(KEYS["full"]))
    ]
    ours, theirs = (comparable(answer)[:2] for answer in answers)
    assert ours == theirs and ours[0] == 200
    assert answers[0].headers["etag"] == answers[1].headers["etag"]
    scoped = client.get("/api/v1/exchanges/", headers=alias_headers(KEYS["nyse"])).json()
    assert [venue["name"] for venue in scoped["data"]] == ["nyse"]


@pytest.mark.parametrize(
    ("ours", "theirs", "status"),
    [(KEYS["full"], "wrong", 200), ("wrong", KEYS["full"], 401), ("", KEYS["full"], 401)],
    ids=["ours-valid", "ours-wrong", "ours-empty"],
)
def test_the_specs_header_wins_when_both_are_sent(
    client: httpx.Client, ours: str, theirs: str, status: int
) -> None:
    headers = exchange_headers(ours) | alias_headers(theirs)
    assert client.get("/api/v1/exchanges/", headers=headers).status_code == status


def test_the_supplier_family_takes_only_its_bearer_key(client: httpx.Client) -> None:
    target = "/api/v1/suppliers/nasdaq/participants"
    for given in (alias_headers(KEYS["full"]), exchange_headers(KEYS["full"])):
        assert client.get(target, headers=given).status_code == 401


def test_the_accounts_file_holds_hashes_and_fingerprints_never_keys(tmp_path: Path) -> None:
    accounts = tmp_path / "accounts.json"
    key = add_key(accounts, "desk", ["nyse"])
    other = add_key(accounts, "desk", None)
    stored = accounts.read_text(encoding="utf-8")
    assert key not in stored and other not in stored
    assert len(key) == 43 and fingerprint(key) in stored
    assert revoke_key(accounts, fingerprint(key))
    listed = {entry["id"]: entry for entry in list_keys(accounts)}
    assert listed[fingerprint(key)]["revoked_at"] is not None
    assert listed[fingerprint(other)]["revoked_at"] is None
    assert key not in repr(list_keys(accounts))


CHALLENGE = {
    supplier_headers: 'Bearer realm="suppliers"',
    exchange_headers: 'ApiKey realm="exchanges", header="x-service-api-access-key"',
    alias_headers: 'ApiKey realm="exchanges", header="x-service-api-access-key"',
}


@pytest.mark.parametrize(
    ("target", "key_headers"),
    REFUSED_ANYWAY,
    ids=[f"{target} ({given.__name__})" for target, given in REFUSED_ANYWAY],
)
@pytest.mark.parametrize("method", ["GET", "HEAD"])
def test_every_401_names_the_header_its_path_reads(
    client: httpx.Client, target: str, key_headers: Callable[[str], dict[str, str]], method: str
) -> None:
    """RFC 9110 (11.6.1): a 401 carries `WWW-Authenticate`. Issue 37: a valid key in the other
    family's header read as a bad key, and nothing said which header the path reads."""
    for given in ({}, key_headers("unknown-key-0123456789abcdef"), key_headers("revoked-key")):
        response = client.request(method, target, headers=given)
        assert response.status_code == 401
        assert response.headers["www-authenticate"] == CHALLENGE[key_headers]


@pytest.mark.parametrize(
    ("target", "wrong", "reads"),
    [
        ("/api/v1/suppliers/nasdaq/participants", exchange_headers, "Authorization: Bearer <key>"),
        ("/v1/suppliers/nasdaq/data/count", alias_headers, "Authorization: Bearer <key>"),
        ("/api/v1/exchanges/", supplier_headers, "x-service-api-access-key: <key>"),
        ("/v1/fee-schedule-results/filters", supplier_headers, "x-service-api-access-key: <key>"),
    ],
)
@pytest.mark.parametrize("key", [KEYS["full"], "not-a-key"], ids=["valid-key", "bad-key"])
def test_a_key_in_the_other_familys_header_is_told_where_it_goes(
    client: httpx.Client,
    target: str,
    wrong: Callable[[str], dict[str, str]],
    reads: str,
    key: str,
) -> None:
    """The same words for a valid and a bad key: the hint says nothing about the key."""
    response = client.get(target, headers=wrong(key))
    family = supplier_headers if "suppliers" in target else exchange_headers
    assert response.status_code == 401
    assert response.headers["www-authenticate"] == (
        f'{CHALLENGE[family]}, error="invalid_request", '
        f'error_description="this path reads {reads}; '
        + (
            "x-service-api-access-key is read on the exchange family's paths\""
            if family is supplier_headers
            else 'Authorization: Bearer is read on /api/v1/suppliers/ paths"'
        )
    )
