"""The compatible service's official Python SDK, `rulebook-python` 0.1.1, drives the real server.

Every client is made as a user of the SDK makes it, with nothing but its environment variables
(`RULEBOOK_BASE_URL`, `RULEBOOK_API_KEY`): so it sends its own key header,
`x-rulebook-api-access-key`, and its own defaults (`order_by=created_on`, ...). Each public
method is called sync and async, through its typed and its raw-response form, and each typed
answer is compared with the plain HTTP answer to the same request; each error status must
raise the SDK's own exception class with its code and details filled.
"""

import asyncio
import json
import re
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import rulebook
from rulebook.types import FeeScheduleResult
from rulebook.types.fee_schedule_result import Relationships

from ingest.pipeline import IngestResult
from service.settings import Settings
from tests.conftest import KEYS, LiveServer, account_key, exchange_headers

Method = Callable[[Any], Any]  # one SDK call, given a client (sync or async)
MODES = ("sync", "async")
# Keys with a bucket of one request, refilled each second: one per test that spends it.
TRICKLE_KEYS = {use: f"test-key-one-a-second-{use}-0123456789abcdef" for use in ("429", *MODES)}
RESULT_FIELDS = list(FeeScheduleResult.model_fields)


@pytest.fixture
def sdk_environment(server: LiveServer, monkeypatch: pytest.MonkeyPatch) -> str:
    """What a user of the SDK changes to use this service: its base URL, and a key of ours."""
    monkeypatch.setenv("RULEBOOK_BASE_URL", f"{server.url}/api/v1")
    monkeypatch.setenv("RULEBOOK_API_KEY", KEYS["full"])
    return f"{server.url}/api/v1"


def answer(mode: str, method: Method, **options: Any) -> Any:
    """`method` called on a client made from the environment alone, in `mode`."""
    if mode == "sync":
        with rulebook.Rulebook(**options) as client:
            return method(client)

    async def run() -> Any:
        async with rulebook.AsyncRulebook(**options) as client:
            return await method(client)

    return asyncio.run(run())


def plain(client: httpx.Client, path: str, **params: Any) -> dict[str, Any]:
    """The plain HTTP answer, with the spec's own key header."""
    response = client.get(f"/api/v1{path}", params=params, headers=exchange_headers())
    assert response.status_code == 200, response.text
    body: dict[str, Any] = response.json()
    return body


def without_time(meta: dict[str, Any]) -> dict[str, Any]:
    return {name: value for name, value in meta.items() if name != "query_time_ms"}


def sdk_fields(record: dict[str, Any]) -> dict[str, Any]:
    """A plain record, as the SDK's `FeeScheduleResult` holds it (its fields only)."""
    return {name: record[name] for name in RESULT_FIELDS}


@pytest.fixture(scope="module")
def ids(client: httpx.Client, fixture_version: IngestResult) -> dict[str, str]:
    """A record of the fixture that fills every detail field, and the fixture's version."""
    page = plain(client, "/fee-schedule-results/", exchange_name="memx", fee_action="routed")
    return {"record": page["data"][0]["record_id"], "version": fixture_version.version_id}


# ------------------------------------------------------------------------------ every method


@pytest.mark.parametrize("mode", MODES)
def test_the_venue_list_is_the_plain_answer(
    sdk_environment: str, client: httpx.Client, mode: str
) -> None:
    typed = answer(mode, lambda sdk: sdk.exchanges.list())
    expected = plain(client, "/exchanges/")
    assert [venue.model_dump() for venue in typed.data] == expected["data"]
    assert typed.meta.record_count == expected["meta"]["record_count"] == 3


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("name", ["nasdaq", "NOM", "New York Stock Exchange", "memx"])
def test_exchange_details_by_any_name_are_the_plain_answer(
    sdk_environment: str, client: httpx.Client, mode: str, name: str
) -> None:
    typed = answer(mode, lambda sdk: sdk.exchanges.retrieve(name))
    expected = plain(client, f"/exchanges/{name}")
    assert typed.data.model_dump() == expected["data"]
    assert typed.data.date_range.earliest <= typed.data.date_range.latest
    assert typed.meta.record_count == expected["meta"]["record_count"] > 0


SDK_LISTS: dict[str, dict[str, Any]] = {
    "the-sdk-defaults": {},
    "every-filter": {
        "exchange_name": ["nasdaq", "memx"],
        "fee_type": ["option", "equity"],
        "fee_category": ["fees_and_rebates", "port_fees_and_other_services"],
        "fee_action": ["take", "make", "other"],
        "fee_participant": ["customer", "market_maker", "all"],
        "fee_symbol_classification": ["equity_class", "not_applicable", "all"],
        "fee_symbol_type": ["penny", "not_applicable"],
        "fee_trade_type": ["simple_order", "not_applicable"],
    },
    "window-and-every-flag": {
        "start_date": "2020-06-01",
        "end_date": "2022-12-31",
        "include_source": True,
        "include_footnotes": True,
        "include_definitions": True,
    },
    "latest-by-scraped-time": {"latest_only": True, "order_by": "scraped_time", "order_dir": "asc"},
    "by-category": {"order_by": "fee_category", "page_size": 5, "page_number": 1},
}
# What the SDK sends for each of those: its defaults, always; booleans only when true.
SDK_DEFAULTS = {"order_by": "created_on", "order_dir": "desc", "page_size": 20, "page_number": 0}


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("arguments", list(SDK_LISTS.values()), ids=list(SDK_LISTS))
def test_a_results_page_is_the_plain_answer(
    sdk_environment: str, client: httpx.Client, mode: str, arguments: dict[str, Any]
) -> None:
    typed = answer(mode, lambda sdk: sdk.fee_schedule_results.list(**arguments))
    sent = SDK_DEFAULTS | {name: "true" if value is True else value
                           for name, value in arguments.items()}  # fmt: skip
    expected = plain(client, "/fee-schedule-results/", **sent)
    assert typed.data, "every listing here has records"
    assert [record.model_dump() for record in typed.data] == [
        sdk_fields(record) for record in expected["data"]
    ]
    assert without_time(typed.meta.model_dump()) == without_time(expected["meta"])


@pytest.mark.parametrize("mode", MODES)
def test_one_result_with_every_flag_is_the_plain_answer(
    sdk_environment: str, client: httpx.Client, ids: dict[str, str], mode: str
) -> None:
    flags = {"include_source": True, "include_footnotes": True, "include_definitions": True}
    typed = answer(mode, lambda sdk: sdk.fee_schedule_results.retrieve(ids["record"], **flags))
    path = f"/fee-schedule-results/{ids['record']}"
    expected = plain(client, path, **dict.fromkeys(flags, "true"))
    assert typed.data.model_dump() == sdk_fields(expected["data"])
    # Every detail the SDK has a field for arrives there, none empty for this record.
    assert typed.data.fee_charge_type == "Routed"
    assert (typed.data.fee_symbol, typed.data.fee_excluded_symbols) == ("SPY, QQQ", "TSLA")
    assert typed.data.fee_monthly_volume == "Tier 2"
    assert typed.data.source_document == "MEMX Fee Schedule"
    assert typed.data.relationships == Relationships(footnotes=[], definitions=[])
    assert typed.meta.record_count == 1


@pytest.mark.parametrize("mode", MODES)
def test_results_by_version_are_the_plain_answer(
    sdk_environment: str, client: httpx.Client, ids: dict[str, str], mode: str
) -> None:
    version = ids["version"]
    typed = answer(
        mode,
        lambda sdk: sdk.fee_schedule_results.get_results_by_version(
            version, page_size=4, page_number=1, include_source=True
        ),
    )
    expected = plain(client, f"/fee-schedule-results/versions/{version}",
                     page_size=4, page_number=1, include_source="true")  # fmt: skip
    assert [record.model_dump() for record in typed.data] == [
        sdk_fields(record) for record in expected["data"]
    ]
    assert {record.version_id for record in typed.data} == {version}
    assert without_time(typed.meta.model_dump()) == without_time(expected["meta"])


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("venues", [None, ["memx"], ["NOM", "nyse"]], ids=["all", "one", "two"])
def test_filter_values_are_the_plain_answer(
    sdk_environment: str, client: httpx.Client, mode: str, venues: list[str] | None
) -> None:
    typed = answer(mode, lambda sdk: sdk.fee_schedule_results.get_filters(exchange_name=venues))
    expected = plain(client, "/fee-schedule-results/filters", exchange_name=venues or [])
    assert typed.data.model_dump() == expected["data"]
    assert typed.meta.record_count == expected["meta"]["record_count"]


@pytest.mark.parametrize("mode", MODES)
def test_walking_every_page_of_a_filtered_query(
    sdk_environment: str, client: httpx.Client, mode: str
) -> None:
    """Page by page, as a user of the SDK walks a query: each typed record is the plain one,
    and every matching record comes exactly once."""
    filters = {"exchange_name": ["nasdaq"], "fee_action": ["make", "take"], "page_size": 2}

    async def walk_async(sdk: rulebook.AsyncRulebook) -> list[Any]:
        pages, number = [], 0
        while not pages or number < pages[-1].meta.total_pages:
            pages.append(await sdk.fee_schedule_results.list(**filters, page_number=number))
            number += 1
        return pages

    def walk(sdk: rulebook.Rulebook) -> list[Any]:
        pages, number = [], 0
        while not pages or number < pages[-1].meta.total_pages:
            pages.append(sdk.fee_schedule_results.list(**filters, page_number=number))
            number += 1
        return pages

    pages = answer(mode, walk if mode == "sync" else walk_async)
    walked = [record for page in pages for record in page.data]
    for number, page in enumerate(pages):
        expected = plain(
            client, "/fee-schedule-results/", **SDK_DEFAULTS | filters | {"page_number": number}
        )
        assert [record.model_dump() for record in page.data] == [
            sdk_fields(record) for record in expected["data"]
        ]
    everything = plain(client, "/fee-schedule-results/", exchange_name="nasdaq",
                       fee_action=["make", "take"], page_size=100)  # fmt: skip
    assert sorted(record.record_id for record in walked) == sorted(
        record["record_id"] for record in everything["data"]
    )
    assert len(walked) == everything["meta"]["record_count"] == 5


# ------------------------------------------------------------------------------ raw responses


RAW_CALLS: dict[str, Callable[[Any, dict[str, str]], Any]] = {
    "exchanges.list": lambda raw, ids: raw.exchanges.list(),
    "exchanges.retrieve": lambda raw, ids: raw.exchanges.retrieve("NASDAQ"),
    "results.list": lambda raw, ids: raw.fee_schedule_results.list(fee_type=["option"]),
    "results.retrieve": lambda raw, ids: raw.fee_schedule_results.retrieve(ids["record"]),
    "results.get_filters": lambda raw, ids: raw.fee_schedule_results.get_filters(),
    "results.get_results_by_version": lambda raw, ids: (
        raw.fee_schedule_results.get_results_by_version(ids["version"])
    ),
}


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("call", list(RAW_CALLS.values()), ids=list(RAW_CALLS))
def test_the_raw_response_forms_give_status_headers_and_the_typed_answer(
    sdk_environment: str,
    ids: dict[str, str],
    fixture_version: IngestResult,
    mode: str,
    call: Callable[[Any, dict[str, str]], Any],
) -> None:
    async def through_async(sdk: rulebook.AsyncRulebook) -> Any:
        return await call(sdk.with_raw_response, ids)

    def through_sync(sdk: rulebook.Rulebook) -> Any:
        return call(sdk.with_raw_response, ids)

    raw = answer(mode, through_sync if mode == "sync" else through_async)
    assert raw.status_code == 200
    assert raw.headers["content-type"] == "application/json"
    assert raw.headers["x-dataset-version"] == fixture_version.version_id
    assert raw.headers["etag"].startswith('W/"')
    parsed = raw.parse()
    body = raw.http_response.json()
    data = parsed.data
    if isinstance(data, list):
        assert [item.model_dump() for item in data] == [
            sdk_fields(item) if "record_id" in item else item for item in body["data"]
        ]
    else:
        plain_data = sdk_fields(body["data"]) if "record_id" in body["data"] else body["data"]
        assert data.model_dump() == plain_data


# ------------------------------------------------------------------------------ errors


ERRORS = {
    "401-unknown-key": (
        lambda sdk: sdk.exchanges.list(), {"api_key": "not-a-key"},
        rulebook.AuthenticationError, "UNAUTHORIZED", None,
    ),
    "401-revoked-key": (
        lambda sdk: sdk.fee_schedule_results.get_filters(), {"api_key": "revoked-key"},
        rulebook.AuthenticationError, "UNAUTHORIZED", None,
    ),
    "403-exchange": (
        lambda sdk: sdk.exchanges.retrieve("nasdaq"), {"api_key": KEYS["nyse"]},
        rulebook.PermissionDeniedError, "FORBIDDEN", None,
    ),
    "403-results-filter": (
        lambda sdk: sdk.fee_schedule_results.list(exchange_name=["memx"]),
        {"api_key": KEYS["nyse"]}, rulebook.PermissionDeniedError, "FORBIDDEN", None,
    ),
    "404-exchange": (
        lambda sdk: sdk.exchanges.retrieve("UNKNOWN"), {},
        rulebook.NotFoundError, "NOT_FOUND", None,
    ),
    "404-exchange-without-records": (
        lambda sdk: sdk.exchanges.retrieve("CBOE"), {},
        rulebook.NotFoundError, "NOT_FOUND", None,
    ),
    "404-result": (
        lambda sdk: sdk.fee_schedule_results.retrieve("00000000-0000-0000-0000-000000000000"),
        {}, rulebook.NotFoundError, "NOT_FOUND", None,
    ),
    "404-version": (
        lambda sdk: sdk.fee_schedule_results.get_results_by_version("no-such-version"), {},
        rulebook.NotFoundError, "NOT_FOUND", None,
    ),
    "422-title-case-value": (
        lambda sdk: sdk.fee_schedule_results.list(fee_type=["Option"], page_size=500), {},
        rulebook.UnprocessableEntityError, "VALIDATION_ERROR",
        [
            {"field": "fee_type", "message": "unknown value(s): Option",
             "allowed": ["equity", "option"]},
            {"field": "page_size", "message": "must be a whole number from 1 to 100"},
        ],
    ),
}  # fmt: skip


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize(
    ("method", "options", "error", "code", "details"), list(ERRORS.values()), ids=list(ERRORS)
)
def test_each_error_raises_the_sdks_own_class(
    sdk_environment: str,
    mode: str,
    method: Method,
    options: dict[str, Any],
    error: type[rulebook.APIStatusError],
    code: str,
    details: list[dict[str, Any]] | None,
) -> None:
    with pytest.raises(error) as raised:
        answer(mode, method, **options)
    assert raised.value.error_code == code
    assert raised.value.details == details
    assert raised.value.message == raised.value.body["error"]["message"]  # type: ignore[index]


@pytest.fixture(scope="module")
def trickle_server(
    fixture_version: IngestResult, accounts_file: Path, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[LiveServer]:
    """The shared data under a server whose accounts add keys with a bucket of one request,
    refilled once a second."""
    document = json.loads(accounts_file.read_text(encoding="utf-8"))
    document["accounts"]["trickle"] = {
        "exchanges": None,
        "rate_limit": {"burst": 1, "per_minute": 60},
        "keys": [account_key(key) for key in TRICKLE_KEYS.values()],
    }
    accounts = tmp_path_factory.mktemp("trickle") / "accounts.json"
    accounts.write_text(json.dumps(document), encoding="utf-8")
    settings = Settings(data_dir=fixture_version.version_dir.parent.parent, accounts_file=accounts)
    with LiveServer(settings) as live:
        yield live


def test_429_is_a_rate_limit_error_with_a_list_of_details(trickle_server: LiveServer) -> None:
    with rulebook.Rulebook(
        api_key=TRICKLE_KEYS["429"], base_url=f"{trickle_server.url}/api/v1", max_retries=0
    ) as sdk:
        sdk.exchanges.list()  # the bucket's one request
        with pytest.raises(rulebook.RateLimitError) as raised:
            sdk.exchanges.list()
    retry = int(raised.value.response.headers["retry-after"])
    assert raised.value.error_code == "RATE_LIMITED"
    assert raised.value.details == [{"retry_after_seconds": retry}]
    assert 1 <= retry <= 2


@pytest.mark.parametrize("mode", MODES)
def test_the_sdks_own_retry_honours_retry_after(trickle_server: LiveServer, mode: str) -> None:
    """The SDK waits `Retry-After` seconds and tries again: the caller sees only the answer."""
    statuses: list[int] = []

    def spend_then_list(sdk: Any) -> Any:
        sdk.exchanges.list()  # spends the bucket; the next call finds it empty
        return sdk.exchanges.list()

    async def spend_then_list_async(sdk: Any) -> Any:
        await sdk.exchanges.list()
        return await sdk.exchanges.list()

    def note(response: httpx.Response) -> None:
        statuses.append(response.status_code)

    async def note_async(response: httpx.Response) -> None:
        note(response)

    options: dict[str, Any] = {
        "api_key": TRICKLE_KEYS[mode],
        "base_url": f"{trickle_server.url}/api/v1",
    }
    started = time.monotonic()
    if mode == "sync":
        hooked = httpx.Client(event_hooks={"response": [note]})
        with rulebook.Rulebook(**options, http_client=hooked) as sdk:
            listed = spend_then_list(sdk)
    else:

        async def run() -> Any:
            hooked = httpx.AsyncClient(event_hooks={"response": [note_async]})
            async with rulebook.AsyncRulebook(**options, http_client=hooked) as sdk:
                return await spend_then_list_async(sdk)

        listed = asyncio.run(run())
    waited = time.monotonic() - started
    assert statuses == [200, 429, 200]
    assert [venue.name for venue in listed.data] == ["memx", "nasdaq", "nyse"]
    assert waited >= 0.9  # Retry-After: 1, slept by the SDK before its retry


# ------------------------------------------------------------------------------ headers


@pytest.mark.parametrize(
    ("service_key", "allowed"),
    [(KEYS["full"], True), ("not-a-key", False), ("", False)],
    ids=["valid", "wrong", "empty"],
)
def test_the_specs_header_wins_over_the_sdks_when_both_are_sent(
    sdk_environment: str, service_key: str, allowed: bool
) -> None:
    """The SDK's header carries a valid key here; ours, sent as well, decides."""
    sent: list[httpx.Headers] = []
    hooked = httpx.Client(event_hooks={"request": [lambda request: sent.append(request.headers)]})
    headers = {"x-service-api-access-key": service_key}
    with rulebook.Rulebook(default_headers=headers, max_retries=0, http_client=hooked) as sdk:
        if allowed:
            assert sdk.exchanges.list().data
        else:
            with pytest.raises(rulebook.AuthenticationError):
                sdk.exchanges.list()
    [request_headers] = sent
    assert request_headers["x-rulebook-api-access-key"] == KEYS["full"]
    assert request_headers["x-service-api-access-key"] == service_key


def test_a_scoped_key_in_the_sdks_header_sees_only_its_venues(
    sdk_environment: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("RULEBOOK_API_KEY", KEYS["nyse"])
    with rulebook.Rulebook() as sdk:
        assert [venue.name for venue in sdk.exchanges.list().data] == ["nyse"]
        assert sdk.fee_schedule_results.get_filters().data.exchange_names == ["nyse"]


# ------------------------------------------------------------------------------ its README


def test_what_the_sdks_readme_shows_but_its_code_does_not_do(sdk_environment: str) -> None:
    """`docs/sdk.md` lists these: the README reads fields off the response wrappers and
    iterates the list response; the code returns `{data, meta}` wrappers."""
    with rulebook.Rulebook() as sdk:
        listed = sdk.exchanges.list()
        assert [type(item) for item in listed] == [tuple, tuple]  # pydantic's (name, value) pairs
        detail = sdk.exchanges.retrieve("NYSE")
        assert not hasattr(detail, "date_range") and detail.data.date_range.earliest
        assert not hasattr(detail.data, "record_count") and detail.meta.record_count
        filters = sdk.fee_schedule_results.get_filters()
        assert not hasattr(filters, "exchange_names") and filters.data.exchange_names
        with pytest.raises(rulebook.UnprocessableEntityError):  # the README's Title Case
            sdk.fee_schedule_results.list(fee_type=["Option"])


# ------------------------------------------------------------------------------ beyond G3

SDK_DOC = Path(__file__).parent.parent / "docs" / "sdk.md"


def documented_blocks(heading: str) -> list[str]:
    """The Python blocks of one section of docs/sdk.md."""
    text = SDK_DOC.read_text(encoding="utf-8")
    section = text.split(f"\n## {heading}\n", 1)[1].split("\n## ", 1)[0]
    return re.findall(r"```python\n(.*?)```", section, flags=re.DOTALL)


@pytest.fixture(scope="module")
def embedded_server(embedded_version: IngestResult, accounts_file: Path) -> Iterator[LiveServer]:
    """The server over the embedded data, which `make run` serves and the docs speak of."""
    data_dir = embedded_version.version_dir.parent.parent
    with LiveServer(Settings(data_dir=data_dir, accounts_file=accounts_file)) as live:
        yield live


@pytest.mark.parametrize("block", range(3))
def test_the_documented_ways_past_the_sdks_parameters_run(
    embedded_server: LiveServer,
    monkeypatch: pytest.MonkeyPatch,
    block: int,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.setenv("RULEBOOK_BASE_URL", f"{embedded_server.url}/api/v1")
    monkeypatch.setenv("RULEBOOK_API_KEY", KEYS["full"])
    blocks = documented_blocks("What the SDK has no parameter for")
    assert len(blocks) == 3
    exec(compile(blocks[block], f"docs/sdk.md block {block}", "exec"), {})
    assert capsys.readouterr().out  # each prints what it found


def test_extra_query_raw_records_and_get_reach_what_the_sdk_has_no_parameter_for(
    sdk_environment: str, client: httpx.Client
) -> None:
    """Issue 37: `docs/sdk.md` shows `extra_query`, the raw form and `get`; each gives the
    plain answer to the same request."""
    day = {"as_of": "2022-06-01", "max_age_days": "36500"}
    with rulebook.Rulebook() as sdk:
        page = sdk.fee_schedule_results.list(exchange_name=["memx"], extra_query=day)
        raw = sdk.fee_schedule_results.with_raw_response.list(
            exchange_name=["memx"], extra_query=day
        )
        ranking = sdk.get(
            "/compare/", cast_to=object, options={"params": {"fee_type": "equity", **day}}
        )
        records = plain(client, "/fee-schedule-results/", exchange_name="memx", **day)["data"]
        line = sdk.get(f"/fee-lines/{records[0]['line_id']}", cast_to=object)
    expected = plain(
        client, "/fee-schedule-results/", exchange_name="memx", order_by="created_on", **day
    )
    assert records and [record.record_id for record in page.data] == [
        record["record_id"] for record in expected["data"]
    ]
    assert raw.http_response.json()["data"] == expected["data"]
    assert {"confirmed_through", "presumed", "line_id"} <= set(expected["data"][0])
    assert ranking == plain(client, "/compare/", fee_type="equity", **day)["data"]
    assert line["line_id"] == records[0]["line_id"] and line["records"]
