"""The fee explorer's three views as pictures for the README (`make screenshots`).

It serves the published version of the embedded data (`make run` ingests it) as `make run`
does, with the demo key, opens each view in Debian's headless Chromium at 1280x800, and
writes `docs/explore-{venue,line,compare}.png`. The views are the ones the README's two
questions need: MEMX's lines for adding displayed liquidity, the history of its base rebate
for that, and the venues ranked for adding liquidity on 2023-06-01.
"""

import argparse
import os
from pathlib import Path

import httpx
from playwright.sync_api import sync_playwright

from tools.browser import CHROMIUM_ARGS
from tools.servers import debian_program, service

DEMO_KEY = "demo-key"
VENUE = "memx"
LINE_LABEL = "Adding displayed liquidity, base"  # the line the README's first question is about
COMPARE = "as_of=2023-06-01&fee_type=equity&fee_action=make"


def line_id(url: str) -> str:
    """The id of MEMX's current line labelled `LINE_LABEL`, asked of the API."""
    answer = httpx.get(
        f"{url}/api/v1/fee-schedule-results/",
        params={"exchange_name": VENUE, "latest_only": "true", "page_size": "100"},
        headers={"x-service-api-access-key": DEMO_KEY},
        timeout=30,
    )
    answer.raise_for_status()
    found = [line for line in answer.json()["data"] if line["fee_charge_type"] == LINE_LABEL]
    if not found:
        raise SystemExit(f"no current {VENUE} line is labelled {LINE_LABEL!r}")
    return str(found[0]["line_id"])


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m tools.screenshots", description=__doc__)
    parser.add_argument("--out", type=Path, default=Path("docs"))
    args = parser.parse_args()
    env = {**os.environ, "FEES_DOCS_KEY": DEMO_KEY, "FEES_LOG_LEVEL": "warning"}
    env.setdefault("FEES_ACCOUNTS_FILE", "data/demo-accounts.json")
    with service(env) as (url, _):
        views = {
            "venue": f"view=venue&venue={VENUE}&q=adding+displayed&sort=amount",
            "line": f"view=line&line={line_id(url)}",
            "compare": f"view=compare&{COMPARE}",
        }
        with sync_playwright() as playwright:
            chromium = playwright.chromium.launch(
                executable_path=debian_program("chromium", "chromium"), args=CHROMIUM_ARGS
            )
            page = chromium.new_page(viewport={"width": 1280, "height": 800})
            for name, query in views.items():
                page.goto(f"{url}/explore?{query}")
                page.locator("#view[aria-busy='false']").wait_for(timeout=30_000)
                path = args.out / f"explore-{name}.png"
                page.screenshot(path=path, full_page=True)
                print(f"wrote {path}")
            chromium.close()


if __name__ == "__main__":
    main()
