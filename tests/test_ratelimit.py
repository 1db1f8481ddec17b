"""Rate limits per key: a token bucket each, shared through a real Redis by separate processes,
and failing open (logged, counted) when Redis goes away."""

import json
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import httpx
import pytest

from ingest.pipeline import IngestResult
from service.accounts import DEFAULT_LIMIT, Keystore, Limit
from service.edge import wire
from service.edge.ratelimit import LocalBuckets
from service.settings import Settings
from tests.conftest import LiveServer, account_key, exchange_headers, supplier_headers
from tests.servers import debian_program, redis_server, service_process
from tools.servers import start_redis, stop

EXCHANGES = "/api/v1/exchanges/"
ACTIONS = "/api/v1/suppliers/nasdaq/actions"
TRICKLE = "test-key-trickle-0123456789abcdef"  # burst 3, then one a minute
SIBLING = "test-key-trickle-sibling-0123456789"  # the same account's second key
PLAIN = "test-key-default-limit-0123456789abcdef"  # the defaults: burst 300, 60 a minute
SHARED = "test-key-shared-bucket-0123456789abcdef"  # burst 4, for the Redis tests
CROWD = "test-key-crowd-0123456789abcdef"  # burst 10, for the concurrent Redis test


def write_accounts(path: Path) -> Path:
    document = {
        "accounts": {
            "trickle": {
                "exchanges": None,
                "rate_limit": {"burst": 3, "per_minute": 1},
                "keys": [account_key(TRICKLE), account_key(SIBLING)],
            },
            "plain": {"exchanges": None, "keys": [account_key(PLAIN)]},
            "shared": {
                "exchanges": None,
                "rate_limit": {"burst": 4, "per_minute": 1},
                "keys": [account_key(SHARED)],
            },
            "crowd": {
                "exchanges": None,
                "rate_limit": {"burst": 10, "per_minute": 1},
                "keys": [account_key(CROWD)],
            },
        }
    }
    path.write_text(json.dumps(document), encoding="utf-8")
    return path


def settings_for(tmp_path: Path, version: IngestResult, **more: Any) -> Settings:
    return Settings(
        data_dir=version.version_dir.parent.parent,
        accounts_file=write_accounts(tmp_path / "accounts.json"),
        **more,
    )


@contextmanager
def served(settings: Settings) -> Iterator[tuple[LiveServer, httpx.Client]]:
    with LiveServer(settings) as live, httpx.Client(base_url=live.url) as http:
        yield live, http


def limits(response: httpx.Response) -> tuple[int, int]:
    return (
        int(response.headers["x-ratelimit-limit"]),
        int(response.headers["x-ratelimit-remaining"]),
    )


# ------------------------------------------------------------------------------ in one process


def test_a_key_spends_its_burst_then_gets_429_in_each_familys_envelope(
    tmp_path: Path, fixture_version: IngestResult
) -> None:
    with served(settings_for(tmp_path, fixture_version)) as (_, http):
        allowed = [http.get(EXCHANGES, headers=exchange_headers(TRICKLE)) for _ in range(3)]
        exchange = http.get(EXCHANGES, headers=exchange_headers(TRICKLE))
        supplier = http.get(ACTIONS, headers=supplier_headers(TRICKLE))
    assert [(r.status_code, *limits(r)) for r in allowed] == [(200, 3, 2), (200, 3, 1), (200, 3, 0)]
    assert all(int(r.headers["x-ratelimit-reset"]) >= time.time() for r in allowed)
    assert "retry-after" not in allowed[0].headers
    # One token a minute: the next one is about 60 s away.
    retry = int(exchange.headers["retry-after"])
    assert 55 <= retry <= 60
    assert (exchange.status_code, exchange.json()["error"]) == (
        429,
        {
            "code": "RATE_LIMITED",
            "message": f"rate limit exceeded; retry after {retry} s",
            "details": [{"retry_after_seconds": retry}],  # a list in this family
        },
    )
    assert (supplier.status_code, supplier.json()["error"]) == (429, "Too Many Requests")
    retry = int(supplier.headers["retry-after"])
    assert supplier.json()["details"] == {"retry_after_seconds": retry}
    assert limits(supplier) == (3, 0)


def test_each_key_has_its_own_bucket_and_a_bad_key_takes_nothing(
    tmp_path: Path, fixture_version: IngestResult
) -> None:
    with served(settings_for(tmp_path, fixture_version)) as (_, http):
        for _ in range(4):
            http.get(EXCHANGES, headers=exchange_headers(TRICKLE))
        refused = http.get(EXCHANGES, headers=exchange_headers("no-such-key"))
        sibling = http.get(EXCHANGES, headers=exchange_headers(SIBLING))
        plain = http.get(EXCHANGES, headers=exchange_headers(PLAIN))
    assert refused.status_code == 401
    assert not any(name.startswith("x-ratelimit") for name in refused.headers)
    assert (sibling.status_code, *limits(sibling)) == (200, 3, 2)
    assert (plain.status_code, *limits(plain)) == (200, DEFAULT_LIMIT.burst, 299)


def test_the_defaults_are_the_anchor_services() -> None:
    assert (DEFAULT_LIMIT.burst, DEFAULT_LIMIT.per_minute) == (300, 60)


def test_a_bucket_refills_at_its_rate() -> None:
    buckets, limit = LocalBuckets(), Limit(burst=1, per_minute=600)  # a token every 0.1 s
    first, second = buckets.take("key", limit), buckets.take("key", limit)
    time.sleep(0.15)
    third = buckets.take("key", limit)
    assert (first.allowed, second.allowed, third.allowed) == (True, False, True)
    assert second.retry_after == 1  # whole seconds, at least one


def test_an_allowed_decisions_lines_are_its_headers_as_written() -> None:
    decision = LocalBuckets().take("key", Limit(burst=5, per_minute=60))
    assert decision.allowed
    assert decision.lines() == wire.lines(decision.headers())


@pytest.mark.parametrize(
    "given", [{"burst": 0}, {"burst": "300"}, {"per_minute": 1.5}, {"rate": 5}, [300, 60]]
)
def test_a_bad_rate_limit_in_the_accounts_file_names_the_account(
    tmp_path: Path, given: object
) -> None:
    path = tmp_path / "accounts.json"
    document = {"accounts": {"desk": {"exchanges": None, "rate_limit": given, "keys": []}}}
    path.write_text(json.dumps(document), encoding="utf-8")
    with pytest.raises(ValueError, match="account 'desk': rate_limit must be"):
        Keystore(path).refresh()


def test_an_unreachable_redis_fails_open_logged_and_counted(
    tmp_path: Path, fixture_version: IngestResult, caplog: pytest.LogCaptureFixture
) -> None:
    with redis_server() as (url, redis):
        settings = settings_for(tmp_path, fixture_version, redis_url=url)
        with served(settings) as (live, http):
            before = http.get(EXCHANGES, headers=exchange_headers(TRICKLE))
            redis.terminate()
            redis.wait(timeout=10)
            during = [http.get(EXCHANGES, headers=exchange_headers(TRICKLE)) for _ in range(3)]
            fallbacks = live.app.state.limiter.fallbacks
    assert [r.status_code for r in [before, *during]] == [200, 200, 200, 429]
    # This process's own bucket takes over from what Redis last said it held (2 left).
    assert [limits(r)[1] for r in during[:2]] == [1, 0]
    assert fallbacks == 3
    assert any("Redis unreachable" in record.message for record in caplog.records)


def test_after_redis_restarts_a_request_is_limited_in_redis_again_at_once(
    tmp_path: Path, fixture_version: IngestResult
) -> None:
    program = debian_program("redis-server", "redis-server")
    with redis_server() as (url, redis):
        settings = settings_for(tmp_path, fixture_version, redis_url=url)
        with served(settings) as (live, http):
            before = [http.get(EXCHANGES, headers=exchange_headers(TRICKLE)) for _ in range(2)]
            stop(redis)
            restarted = start_redis(program, int(urlsplit(url).port or 0))
            try:
                after = http.get(EXCHANGES, headers=exchange_headers(TRICKLE))
                fallbacks = live.app.state.limiter.fallbacks
            finally:
                stop(restarted)
    assert [limits(r)[1] for r in before] == [2, 1]
    # The pooled connection died with the old Redis; the request was tried again on a new one,
    # not limited in this process. The new Redis holds no buckets: the key's starts full.
    assert limits(after)[1] == 2
    assert fallbacks == 0


# ------------------------------------------------------------------------------ across processes


@pytest.mark.slow
def test_two_service_processes_share_one_bucket_in_redis(
    tmp_path: Path, fixture_version: IngestResult
) -> None:
    settings = settings_for(tmp_path, fixture_version)
    with redis_server() as (url, _):
        environment = {
            "FEES_DATA_DIR": str(settings.data_dir),
            "FEES_ACCOUNTS_FILE": str(settings.accounts_file),
            "FEES_REDIS_URL": url,
        }
        with service_process(environment) as (one, _), service_process(environment) as (two, _):
            answers = [
                httpx.get(base + EXCHANGES, headers=exchange_headers(SHARED))
                for base in [one, two] * 3
            ]
            crowd = _at_once(one, two, requests=20)
    assert [(r.status_code, r.headers["x-ratelimit-remaining"]) for r in answers] == [
        (200, "3"), (200, "2"), (200, "1"), (200, "0"), (429, "0"), (429, "0"),
    ]  # fmt: skip
    # Twenty at once on both processes: exactly the burst of ten gets through.
    assert sorted(crowd) == [200] * 10 + [429] * 10


def _at_once(one: str, two: str, *, requests: int) -> list[int]:
    def call(number: int) -> int:
        base = (one, two)[number % 2]
        return httpx.get(base + EXCHANGES, headers=exchange_headers(CROWD)).status_code

    with ThreadPoolExecutor(requests) as pool:
        return list(pool.map(call, range(requests)))
