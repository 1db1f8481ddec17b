"""The interactive reference at `/docs` (`service.pages.docs`): what the page and its files
answer, and the page itself in a real headless Chromium, driven by Playwright, against a real
server."""

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from playwright.sync_api import Request, expect

from ingest.pipeline import IngestResult
from service.api import OPENAPI_FILE
from service.pages.docs import page as docs_page
from tests.browser import RENDER_MS, browser_page, page_server
from tests.conftest import KEYS, LiveServer

DOCUMENT: dict[str, Any] = json.loads(OPENAPI_FILE.read_text(encoding="utf-8"))
OPERATIONS = sorted(
    (method.upper(), path)
    for path, item in DOCUMENT["paths"].items()
    for method, operation in item.items()
    if isinstance(operation, dict) and "responses" in operation
)
KEYED_OPERATIONS = sum(
    bool(operation.get("security", DOCUMENT.get("security")))
    for item in DOCUMENT["paths"].values()
    for operation in item.values()
    if isinstance(operation, dict) and "responses" in operation
)
DOCS_KEY = KEYS["full"]
CONFIG_BLOCK = re.compile(r'<script type="application/json" id="docs-config">(.*?)</script>', re.S)


@pytest.fixture(scope="module", params=[DOCS_KEY, None], ids=["docs-key", "no-docs-key"])
def served(
    request: pytest.FixtureRequest, fixture_version: IngestResult, accounts_file: Path
) -> Iterator[tuple[LiveServer, str | None]]:
    data_dir = fixture_version.version_dir.parent.parent
    with page_server(data_dir, accounts_file, request.param) as live:
        yield live, request.param


def config_of(html: str) -> Any:
    found = CONFIG_BLOCK.search(html)
    assert found is not None, "the page has no config block"
    return json.loads(found.group(1))


# ------------------------------------------------------------------------------ plain HTTP


@pytest.mark.parametrize("path", ["/docs", "/docs/"])
def test_page_answers_without_a_key_under_a_strict_policy(
    served: tuple[LiveServer, str | None], path: str
) -> None:
    live, key = served
    response = httpx.get(live.url + path, timeout=10)
    assert response.status_code == 200
    assert response.headers["content-type"] == "text/html; charset=utf-8"
    assert response.headers["content-security-policy"] == (
        "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
        "font-src 'self'; connect-src 'self'; base-uri 'none'; form-action 'none'; "
        "frame-ancestors 'none'"
    )
    assert response.headers["cache-control"] == "no-store"
    assert config_of(response.text) == {"specUrl": "/api/v1/openapi.json", "key": key}


def test_the_page_holds_the_docs_key_only_when_one_is_set(
    served: tuple[LiveServer, str | None],
) -> None:
    live, key = served
    html = httpx.get(live.url + "/docs", timeout=10).text
    assert (DOCS_KEY in html) == (key is not None)


def test_every_file_the_page_loads_is_served_here(
    served: tuple[LiveServer, str | None],
) -> None:
    live, _ = served
    html = httpx.get(live.url + "/docs", timeout=10).text
    files = re.findall(r'(?:src|href)="([^"]+)"', html)
    assert files == [
        "/docs/static/swagger-ui.css",
        "/docs/static/favicon-32x32.png",
        "/docs/static/swagger-ui-bundle.js",
        "/docs/docs.js",
    ]
    types = {".css": "text/css", ".png": "image/png", ".js": "text/javascript"}
    for file in files:
        response = httpx.get(live.url + file, timeout=10)
        assert response.status_code == 200, file
        media_type = response.headers["content-type"].split(";")[0]
        assert media_type == types[Path(file).suffix], file
        assert len(response.content) > 100, file


@pytest.mark.parametrize(
    "key",
    ["</script><script>alert(1)</script>", "a&b<!--", 'quote"and\\backslash'],
    ids=["closing-tag", "markup", "json-escapes"],
)
def test_a_key_cannot_break_out_of_the_config_block(key: str) -> None:
    html = docs_page(key)
    assert config_of(html) == {"specUrl": "/api/v1/openapi.json", "key": key}
    assert html.count("<script") == 3  # the config block, Swagger UI and the starter


# ------------------------------------------------------------------------------ the browser


@pytest.mark.slow
def test_the_page_lists_every_operation_and_tries_one_with_the_docs_key_if_set(
    served: tuple[LiveServer, str | None], chromium: str
) -> None:
    live, key = served
    with browser_page(chromium, live.url) as (page, requested, refused):
        errors: list[str] = []
        page.on("pageerror", lambda error: errors.append(str(error)))
        calls: list[dict[str, str]] = []  # the headers of each call Execute made

        def note_call(request: Request) -> None:
            if request.url == live.url + "/api/v1/exchanges/":
                calls.append(request.headers)

        page.on("request", note_call)
        page.goto(live.url + "/docs")
        operations = page.locator(".opblock")
        expect(operations).to_have_count(len(OPERATIONS), timeout=RENDER_MS)
        listed = operations.evaluate_all(
            "blocks => blocks.map(block => ["
            " block.querySelector('.opblock-summary-method').textContent,"
            " block.querySelector('.opblock-summary-path').dataset.path])"
        )
        assert sorted(map(tuple, listed)) == OPERATIONS
        # Each keyed operation shows its scheme as authorized (locked) when the key was
        # entered, for the Bearer scheme and the header scheme alike.
        state = "locked" if key else "unlocked"
        locks = page.locator(f".opblock .authorization__btn[aria-label$=' {state}']")
        expect(locks).to_have_count(KEYED_OPERATIONS, timeout=RENDER_MS)

        block = page.locator("#operations-exchanges-listExchanges")
        block.locator(".opblock-summary-control").click()
        block.get_by_role("button", name="Try it out").click()
        block.get_by_role("button", name="Execute").click()
        status = block.locator(".live-responses-table .response .response-col_status")
        expect(status).to_have_text("200" if key else "401", timeout=RENDER_MS)

        assert [call.get("x-service-api-access-key") for call in calls] == [key]
        assert page.evaluate("window.violations") == []
        assert errors == []
    assert refused == []
    assert live.url + "/api/v1/openapi.json" in requested


@pytest.mark.slow
def test_the_page_opens_on_the_operations_with_no_warning_box(
    served: tuple[LiveServer, str | None], chromium: str
) -> None:
    """Issue 37: a `jsonSchemaDialect` Swagger UI does not support put a red box atop the page,
    and about 1,700 px of prose came before the first operation. The prose now folds away
    under a summary line, and the first operation shows on the first screen."""
    live, _ = served
    with browser_page(chromium, live.url, viewport={"width": 1280, "height": 900}) as (
        page,
        _requested,
        _refused,
    ):
        page.goto(live.url + "/docs")
        expect(page.locator(".opblock").first).to_be_visible(timeout=RENDER_MS)
        expect(page.locator(".errors-wrapper")).to_have_count(0)
        box = page.locator(".opblock").first.bounding_box()
        assert box is not None and box["y"] + box["height"] < 900
        guide = page.locator(".information-container details")
        expect(guide.locator("h2").first).not_to_be_visible()
        guide.locator("summary").click()
        expect(guide.locator("h2")).to_have_text(
            [
                "Two endpoint families", "Path forms", "Date window", "Paging", "Errors",
                "Rate limits", "Response headers", "HTTP caching", "The compatible service's SDK",
            ]
        )  # fmt: skip
