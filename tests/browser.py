"""A page in a real headless Chromium, driven by Playwright, that can reach only the server
under test (`tests/test_docs_page.py`, `tests/test_explore.py`). Chromium itself, installed
when missing, is the session fixture `chromium` (`tests/conftest.py`)."""

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from playwright.sync_api import Page, Route, sync_playwright

from service.settings import Settings
from tests.conftest import LiveServer
from tools.browser import CHROMIUM_ARGS

# A page takes a second or two to render here; more on a busy machine.
RENDER_MS = 20_000


@contextmanager
def page_server(data_dir: Path, accounts_file: Path, key: str | None) -> Iterator[LiveServer]:
    """The real app over `data_dir` with this page key (`FEES_DOCS_KEY`; None: none), read
    from the environment as the service reads it."""
    environ = {
        "FEES_DATA_DIR": str(data_dir),
        "FEES_ACCOUNTS_FILE": str(accounts_file),
        **({"FEES_DOCS_KEY": key} if key is not None else {}),
    }
    with LiveServer(Settings.from_environ(environ)) as live:
        yield live


@contextmanager
def browser_page(
    chromium: str, origin: str, **context: object
) -> Iterator[tuple[Page, list[str], list[str]]]:
    """A page in a fresh headless Chromium that can reach only `origin`: yields it, every URL
    it requested, and every URL it tried elsewhere (refused). `context` goes to Playwright's
    `new_context` (a viewport, downloads)."""
    requested: list[str] = []
    refused: list[str] = []

    def only_the_server(route: Route) -> None:
        url = route.request.url
        requested.append(url)
        if url.startswith(origin + "/"):
            route.continue_()
        else:
            refused.append(url)
            route.abort()

    with sync_playwright() as playwright:
        launched = playwright.chromium.launch(executable_path=chromium, args=CHROMIUM_ARGS)
        try:
            page_context = launched.new_context(**context)  # type: ignore[arg-type]
            page_context.route("**/*", only_the_server)
            page = page_context.new_page()
            page.set_default_timeout(RENDER_MS)
            # Reports what the page's policy blocked: a script needing `eval` or inline style
            # would work in a lax page and silently break under this one.
            page.add_init_script(
                "window.violations = [];"
                "document.addEventListener('securitypolicyviolation', (event) =>"
                " window.violations.push(event.violatedDirective + ' ' + event.blockedURI));"
            )
            yield page, requested, refused
        finally:
            launched.close()
