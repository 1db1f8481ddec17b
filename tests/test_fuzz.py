"""Schema fuzzing: requests generated from the OpenAPI document, valid and invalid, for every
operation, sent to the real app under uvicorn. Each answer must be no 5xx and must have a
documented status, a documented media type, and a body and headers that match the document.

A 4xx answer to invalid input is right; only a server error or a break with the document fails.
Schemathesis runs three phases per operation: the document's examples, its coverage cases
(boundaries, missing keys, other methods) and `FUZZ_EXAMPLES` fuzzed cases (25 under
`make test`, 1000 under `make fuzz`). The seed is fixed and generation derandomized, so a run
repeats; `make fuzz` runs with `-s` to print the summary this module keeps.
"""

import os
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import requests
import schemathesis
from hypothesis import strategies as st
from schemathesis.checks import not_a_server_error
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    response_headers_conformance,
    response_schema_conformance,
    status_code_conformance,
)

from ingest.pipeline import IngestResult
from service.api import OPENAPI_FILE
from service.settings import Settings
from tests.conftest import KEYS, LiveServer, exchange_headers

EXAMPLES = int(os.environ.get("FUZZ_EXAMPLES", "25"))
SEED = 20261124
CHECKS = [
    not_a_server_error,
    status_code_conformance,
    content_type_conformance,
    response_schema_conformance,
    response_headers_conformance,
]
CONFIG = schemathesis.Config.from_dict(
    {
        "seed": SEED,
        "generation": {
            "mode": "all",  # valid and invalid values
            "max-examples": EXAMPLES,
            "deterministic": True,
            "database": "none",  # no replay of earlier runs' failures: every run is the same
        },
        # Every scheme the document declares; the coverage phase also sends cases without them.
        "auth": {
            "openapi": {
                "bearerAuth": {"bearer": KEYS["full"]},
                "apiKeyHeader": {"api_key": KEYS["full"]},
                "rulebookKeyHeader": {"api_key": KEYS["full"]},
            }
        },
    }
)
schema = schemathesis.openapi.from_path(OPENAPI_FILE, config=CONFIG)

# Names, a version and records that exist, by path parameter: the live server's, filled in by the
# `live` fixture before the first case is drawn (random text alone would only ever find a 404).
EXISTING: dict[str, list[str]] = {}
TALLY: Counter[tuple[str, str]] = Counter()  # (operation, status or failed check) -> calls


@schema.hook
def flatmap_path_parameters(
    context: schemathesis.HookContext, path_parameters: dict[str, Any] | None
) -> st.SearchStrategy[dict[str, Any] | None]:
    """The generated path parameters, or as often the same with existing names and ids."""
    generated = path_parameters or {}
    existing = {name: st.sampled_from(EXISTING[name]) for name in generated if name in EXISTING}
    if not existing:
        return st.just(path_parameters)
    real = st.fixed_dictionaries(existing).map(lambda drawn: {**generated, **drawn})
    return st.one_of(st.just(path_parameters), real)


@schema.hook
def after_validate(
    context: schemathesis.HookContext,
    case: schemathesis.Case[Any],
    response: schemathesis.Response,
    results: list[schemathesis.CheckResult],
) -> None:
    label = case.operation.label
    TALLY[label, str(response.status_code)] += 1
    for result in results:
        if result.failure is not None:
            TALLY[label, result.name] += 1


@pytest.fixture(scope="module")
def live(fixture_version: IngestResult, accounts_file: Path) -> Iterator[LiveServer]:
    """A server of the fuzz's own (its cache and rate-limit buckets are no other test's)."""
    settings = Settings(
        data_dir=fixture_version.version_dir.parent.parent, accounts_file=accounts_file
    )
    started = time.monotonic()
    with LiveServer(settings) as server:
        EXISTING.update(existing_values(server.url, fixture_version.version_id))
        yield server
    print(summary(time.monotonic() - started))


def existing_values(url: str, version_id: str) -> dict[str, list[str]]:
    """Venue names, the version and a page of record ids, by the path parameter they fill."""
    with httpx.Client(base_url=url, headers=exchange_headers(), timeout=10) as http:
        venues = http.get("/api/v1/exchanges/").json()["data"]
        page = http.get("/api/v1/fee-schedule-results/", params={"page_size": 100}).json()
    names = [venue[key] for venue in venues for key in ("name", "display_name")]
    return {
        "supplier_name": names,
        "exchange_name": names,
        "version_id": [version_id],
        "record_id": [record["record_id"] for record in page["data"]],
    }


def summary(seconds: float) -> str:
    """Calls, statuses and failed checks per operation, as `make fuzz` prints them (a failure
    is counted once per call, and Hypothesis repeats a failing case while it shrinks it)."""
    operations = sorted({label for label, _ in TALLY})
    lines = [
        f"\nschema fuzzing: {EXAMPLES} examples per operation, seed {SEED}, {seconds:.1f} s",
    ]
    for label in operations:
        counts = {key: count for (name, key), count in TALLY.items() if name == label}
        statuses = sorted(key for key in counts if key.isdigit())
        checks = sorted(key for key in counts if not key.isdigit())
        calls = sum(counts[status] for status in statuses)
        shown = ", ".join(f"{status}: {counts[status]}" for status in statuses)
        failed = ", ".join(f"{check}: {counts[check]}" for check in checks) or "none"
        lines.append(f"  {label}: {calls} calls ({shown}); failed checks: {failed}")
    total = sum(count for (_, key), count in TALLY.items() if key.isdigit())
    failures = sum(count for (_, key), count in TALLY.items() if not key.isdigit())
    lines.append(f"  total: {total} calls, {failures} failed checks")
    return "\n".join(lines)


@pytest.fixture(scope="module")
def session(live: LiveServer) -> Iterator[requests.Session]:
    with requests.Session() as http:
        yield http


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    """Schemathesis names each operation's item, but pytest 9 builds a node id from that name
    only when the item is parametrized: without this, every operation's id is the same."""
    if "checks" in metafunc.fixturenames:
        metafunc.parametrize("checks", [CHECKS], ids=["conformance"])


@schema.parametrize()
def test_every_answer_matches_the_document(
    case: schemathesis.Case[Any],
    live: LiveServer,
    session: requests.Session,
    checks: list[schemathesis.CheckFunction],
) -> None:
    case.call_and_validate(base_url=live.url, session=session, checks=checks)
