"""The fee explorer at `/explore` (`service.pages.explore`): the page and its files over HTTP,
then each view in a real headless Chromium over the embedded data, checked against the API's own
answers: the charts draw as many months, steps and bars as the API gives, filters and shared
URLs restore a view, a bad key gets the key prompt, a spent rate limit says when it retries,
and no request leaves the server."""

import csv
import io
import itertools
import json
import re
from collections.abc import Iterator
from datetime import UTC, date, datetime
from pathlib import Path
from typing import Any

import httpx
import pytest
from playwright.sync_api import Page, Route, expect

from ingest.pipeline import IngestResult, run_ingest
from service.pages.explore import page as explore_page
from tests.browser import browser_page, page_server
from tests.conftest import (
    KEYS,
    REGISTRY,
    LiveServer,
    account_key,
    exchange_headers,
    fee_row,
    write_raw,
)

KEY = KEYS["full"]
VENUE = "memx"
TODAY = datetime.now(UTC).date().isoformat()  # the page's "today" (UTC), as the API's


@pytest.fixture(scope="module")
def live(embedded_version: IngestResult, accounts_file: Path) -> Iterator[LiveServer]:
    """The real app over the embedded data, with the full key as its page key."""
    with page_server(embedded_version.version_dir.parent.parent, accounts_file, KEY) as server:
        yield server


@pytest.fixture(scope="module")
def api(live: LiveServer) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=live.url + "/api/v1", headers=exchange_headers(), timeout=30) as c:
        yield c


def every(api: httpx.Client, path: str, **params: str) -> list[dict[str, Any]]:
    """Every item of a paged listing."""
    items: list[dict[str, Any]] = []
    page = 0
    while True:
        body = api.get(path, params={**params, "page_size": "100", "page_number": str(page)})
        body.raise_for_status()
        items += body.json()["data"]
        page += 1
        if page >= body.json()["meta"]["total_pages"]:
            return items


def month_ends(first: str, last: str) -> list[str]:
    """The last day of every month from `first`'s month to `last`'s (YYYY-MM-DD)."""
    year, month = int(first[:4]), int(first[5:7])
    ends = []
    while f"{year:04d}-{month:02d}" <= last[:7]:
        following = date(year + month // 12, month % 12 + 1, 1)
        ends.append(date.fromordinal(following.toordinal() - 1).isoformat())
        year, month = following.year, following.month
    return ends


def text_of(line: dict[str, Any]) -> str:
    """The text the page's filter looks in (label, action, participant, category, unit)."""
    fields = ("fee_charge_type", "fee_action", "fee_participant", "fee_category", "unit")
    return " ".join(str(line[f] or "").replace("_", " ") for f in fields).lower()


def matches(line: dict[str, Any], typed: str) -> bool:
    """The page's filter: each typed word begins a word of the line's text, a hyphenated word
    being one word (so "displayed" finds "displayed", never "non-displayed")."""
    said = [word for word in re.split(r"[^\w$.%-]+", text_of(line)) if word]
    return all(any(word.startswith(term) for word in said) for term in typed.lower().split())


def settle(page: Page) -> None:
    expect(page.locator("#view")).to_have_attribute("aria-busy", "false")


# ------------------------------------------------------------------------------ plain HTTP


@pytest.mark.parametrize("path", ["/explore", "/explore/"])
def test_the_page_answers_without_a_key_with_the_page_key(live: LiveServer, path: str) -> None:
    response = httpx.get(live.url + path, timeout=10)
    assert response.status_code == 200
    assert response.headers["content-type"] == "text/html; charset=utf-8"
    assert response.headers["cache-control"] == "no-store"
    assert "default-src 'none'" in response.headers["content-security-policy"]
    config = re.search(r'id="explore-config">(.*?)</script>', response.text)
    assert config is not None and json.loads(config.group(1)) == {"key": KEY}


def test_every_file_the_page_loads_is_served_here(live: LiveServer) -> None:
    html = httpx.get(live.url + "/explore", timeout=10).text
    files = re.findall(r'(?:src|href)="(/[^"]+)"', html)
    assert sorted(set(files)) == [
        "/docs", "/explore", "/explore/explore.css", "/explore/explore.js",
        "/explore?view=compare", "/explore?view=venue",
    ]  # fmt: skip
    for file, media_type in [("explore.js", "text/javascript"), ("explore.css", "text/css")]:
        response = httpx.get(f"{live.url}/explore/{file}", timeout=10)
        assert response.status_code == 200
        assert response.headers["content-type"].split(";")[0] == media_type
        assert len(response.content) > 1000


def test_a_key_cannot_break_out_of_the_config_block() -> None:
    key = "</script><script>alert(1)</script>"
    html = explore_page(key)
    config = re.search(r'id="explore-config">(.*?)</script>', html)
    assert config is not None and json.loads(config.group(1)) == {"key": key}
    assert html.count("<script") == 2  # the config block and the explorer's script


# ------------------------------------------------------------------------------ the browser


@pytest.mark.slow
def test_the_venue_view_draws_every_month_and_lists_the_current_lines(
    live: LiveServer, api: httpx.Client, chromium: str
) -> None:
    changes = every(api, "/fee-changes/", exchange_name=VENUE)
    current = every(api, "/fee-schedule-results/", exchange_name=VENUE, latest_only="true")
    last = max(changes[-1]["effective_date"], TODAY)
    ends = month_ends(changes[0]["effective_date"], last)
    with browser_page(chromium, live.url) as (page, _, refused):
        errors: list[str] = []  # the script's
        page.on("pageerror", lambda error: errors.append(str(error)))
        failed: list[str] = []  # every request answered 400 or more
        page.on("response", lambda answer: failed.append(answer.url) if answer.status >= 400 else 0)
        # A name nobody uses keeps the picker, to try another.
        page.goto(live.url + "/explore?view=venue&venue=nowhere")
        settle(page)
        expect(page.locator("#no-venue")).to_contain_text("nowhere")
        page.get_by_label("Venue", exact=True).fill("Members Exchange")
        page.get_by_role("button", name="Show").click()
        # By an alias: the view shows the venue under its code, and says so in the URL.
        settle(page)
        assert "venue=memx" in page.url
        months = page.locator(".coverage .month")
        expect(months).to_have_count(len(ends))
        assert months.evaluate_all("ms => ms.map(m => m.dataset.end)") == ends
        # A month's bar is what the API says was in force at its end (spot checks).
        totals = months.evaluate_all("ms => ms.map(m => Number(m.dataset.total))")
        for index in (0, len(ends) // 3, 2 * len(ends) // 3, len(ends) - 1):
            answer = api.get(
                "/fee-schedule-results/",
                params={"exchange_name": VENUE, "as_of": ends[index], "page_size": "1"},
            )
            assert totals[index] == answer.json()["meta"]["record_count"], ends[index]
        rows = page.locator("table.lines tbody tr")
        expect(rows).to_have_count(len(current))

        # Filter and sort; the URL keeps both, and a fresh load restores them.
        page.get_by_label("Filter", exact=True).fill("adding displayed")
        page.get_by_role("button", name="Amount").click()
        wanted = [line for line in current if matches(line, "adding displayed")]
        expect(rows).to_have_count(len(wanted))
        assert wanted, "the embedded data has MEMX lines for adding displayed liquidity"
        # Issue 37: matched as text, "adding displayed" also found "Adding non-displayed".
        hyphenated = [line for line in current if "adding non-displayed" in text_of(line)]
        assert hyphenated and not any(matches(line, "adding displayed") for line in hyphenated)
        order = rows.evaluate_all("rs => rs.map(r => r.dataset.lineId)")
        amount = {line["line_id"]: line["amount"] for line in wanted}
        figures = [amount[line_id] for line_id in order]
        known = [figure for figure in figures if figure is not None]
        assert figures == sorted(known) + [None] * (len(figures) - len(known))
        assert "q=adding+displayed" in page.url and "sort=amount" in page.url
        page.goto(page.url)
        settle(page)
        expect(page.get_by_label("Filter", exact=True)).to_have_value("adding displayed")
        expect(rows).to_have_count(len(wanted))
        assert rows.evaluate_all("rs => rs.map(r => r.dataset.lineId)") == order
        assert page.evaluate("window.violations") == []
        assert errors == []
        assert failed == [f"{live.url}/api/v1/exchanges/nowhere"]  # the one asked for
    assert refused == []


@pytest.mark.slow
def test_the_line_view_steps_through_the_history_and_downloads_it(
    live: LiveServer, api: httpx.Client, chromium: str
) -> None:
    current = every(api, "/fee-schedule-results/", exchange_name=VENUE, latest_only="true")
    histories = [api.get(f"/fee-lines/{line['line_id']}").json()["data"] for line in current]
    line = max(histories, key=lambda history: len(history["records"]))
    records = line["records"]
    drawn = [record for record in records if record["amount"] is not None]
    figures = [(record["amount"], record["unit"]) for record in drawn]
    new_figures = 1 + sum(before != after for before, after in itertools.pairwise(figures))
    with browser_page(chromium, live.url, accept_downloads=True) as (page, _, refused):
        # From the venue's table, as a user gets there.
        page.goto(f"{live.url}/explore?view=venue&venue={VENUE}")
        settle(page)
        page.locator(f"tr[data-line-id='{line['line_id']}'] a").first.click()
        settle(page)
        assert f"line={line['line_id']}" in page.url
        expect(page.locator("h2")).to_have_text(line["label"])
        steps = page.locator(".history .step")
        expect(steps).to_have_count(len(drawn))
        assert steps.evaluate_all("ss => ss.map(s => s.dataset.recordId)") == [
            record["record_id"] for record in drawn
        ]
        expect(page.locator(".history .marker")).to_have_count(new_figures)
        future = [record for record in drawn if record["effective_start"] > TODAY]
        expect(page.locator(".history .step.future")).to_have_count(len(future))
        # After the last day a source shows a figure, its step is faded, and says so.
        presumed = [
            record for record in drawn
            if record["confirmed_through"] < (record["effective_end"] or TODAY)
        ]  # fmt: skip
        expect(page.locator(".history .level.presumed")).to_have_count(len(presumed))
        for record in presumed:
            step = page.locator(f".history .step[data-record-id='{record['record_id']}']")
            assert f"last confirmed {record['confirmed_through']}" in (
                step.get_attribute("aria-label") or ""
            )
        # Each step names its source and dates (the hover text, also its accessible name),
        # and the keyboard reaches it.
        first = steps.first.get_attribute("aria-label") or ""
        assert drawn[0]["effective_start"] in first and drawn[0]["source_document"] in first
        for _ in range(30):
            page.keyboard.press("Tab")
            if page.evaluate("document.activeElement.classList.contains('step')"):
                break
        assert page.evaluate("document.activeElement.getAttribute('aria-label')") == first
        with page.expect_download() as download:
            page.get_by_role("button", name="Download the history (CSV)").click()
        rows = list(csv.DictReader(io.StringIO(Path(download.value.path()).read_text())))
        assert [row["record_id"] for row in rows] == [record["record_id"] for record in records]
        assert [row["fee_amount"] for row in rows] == [record["fee_amount"] for record in records]
        page.go_back()  # the venue view again, from the browser's history
        settle(page)
        expect(page.locator("table.lines")).to_be_visible()
        assert page.evaluate("window.violations") == []
    assert refused == []


@pytest.mark.slow
def test_the_compare_view_ranks_the_venues_as_the_api_does(
    live: LiveServer, api: httpx.Client, chromium: str
) -> None:
    asked = {"as_of": "2023-06-01", "fee_type": "equity", "fee_action": "make"}
    answer = api.get("/compare/", params=asked).json()["data"]
    ranked = [item["exchange_name"] for item in answer if item["lowest"] is not None]
    apart = [item["exchange_name"] for item in answer if item["lowest"] is None]
    with browser_page(chromium, live.url) as (page, _, refused):
        page.goto(live.url + "/explore?view=compare")
        settle(page)
        # Filled in with the keyboard, as a user without a mouse would.
        page.get_by_label("On", exact=True).fill(asked["as_of"])
        page.get_by_label("Action", exact=True).select_option("make")
        page.get_by_role("button", name="Compare", exact=True).press("Enter")
        settle(page)
        bars = page.locator(".ranking .bar")
        expect(bars).to_have_count(len(ranked))
        assert bars.evaluate_all("bs => bs.map(b => b.dataset.exchange)") == ranked
        amounts = bars.evaluate_all("bs => bs.map(b => Number(b.dataset.amount))")
        assert amounts == sorted(amounts)  # best for the member first
        table = page.locator("table.ranked tbody tr")  # the same ranking in words
        assert table.evaluate_all("rs => rs.map(r => r.dataset.exchange)") == ranked
        best = answer[0]["lowest"]
        expect(table.first).to_contain_text(best["label"])
        expect(table.first).to_contain_text(provenance(best))
        assert page.locator("#apart li").evaluate_all("ls => ls.map(l => l.dataset.exchange)") == (
            apart
        )
        # The shared URL restores the same view in a fresh load.
        for name, value in asked.items():
            assert f"{name}={value}" in page.url
        page.goto(page.url)
        settle(page)
        assert bars.evaluate_all("bs => bs.map(b => b.dataset.exchange)") == ranked
        expect(page.get_by_label("On", exact=True)).to_have_value(asked["as_of"])
        # Only the figures not in doubt: the API's own ranking with `uncertain=false`.
        certain = api.get("/compare/", params={**asked, "uncertain": "false"}).json()["data"]
        page.get_by_label("Figures", exact=True).select_option("false")
        page.get_by_role("button", name="Compare", exact=True).press("Enter")
        settle(page)
        assert "uncertain=false" in page.url
        kept = [item["exchange_name"] for item in certain if item["lowest"] is not None]
        assert bars.evaluate_all("bs => bs.map(b => b.dataset.exchange)") == kept != ranked
        expect(table.first).to_contain_text(provenance(certain[0]["lowest"]))
        # Standard rates only: the API's own ranking with `standard=true` (and uncertain=false).
        standard = api.get(
            "/compare/", params={**asked, "uncertain": "false", "standard": "true"}
        ).json()["data"]
        page.get_by_label("Rates", exact=True).select_option("true")
        page.get_by_role("button", name="Compare", exact=True).press("Enter")
        settle(page)
        assert "standard=true" in page.url
        chosen = [item["exchange_name"] for item in standard if item["lowest"] is not None]
        assert chosen and bars.evaluate_all("bs => bs.map(b => b.dataset.exchange)") == chosen
        # Provenance as the API filters it: primary sources, stated dates.
        page.get_by_label("Rates", exact=True).select_option("")
        page.get_by_label("Sources", exact=True).select_option("primary")
        page.get_by_label("Dates", exact=True).select_option("stated")
        page.get_by_role("button", name="Compare", exact=True).press("Enter")
        settle(page)
        assert "source_kind=primary" in page.url and "date_basis=stated" in page.url
        filters = {"uncertain": "false", "source_kind": "primary", "date_basis": "stated"}
        sourced = api.get("/compare/", params={**asked, **filters}).json()["data"]
        primary = [item["exchange_name"] for item in sourced if item["lowest"] is not None]
        assert primary and bars.evaluate_all("bs => bs.map(b => b.dataset.exchange)") == primary
        assert primary != kept
        assert page.evaluate("window.violations") == []
    assert refused == []


@pytest.mark.slow
def test_a_shared_link_the_api_refuses_keeps_the_form_and_names_the_field(
    live: LiveServer, chromium: str
) -> None:
    """Issue 37: `as_of=2025-02-30` showed only "The service answered 422" and lost the form."""
    with browser_page(chromium, live.url) as (page, _, refused):
        page.goto(live.url + "/explore?view=compare&as_of=2025-02-30&fee_type=equity&unit=yard")
        settle(page)
        problems = page.locator("#refused li")
        expect(problems).to_have_count(2)
        expect(page.locator('#refused li[data-field="as_of"]')).to_have_text(
            'On: "2025-02-30" must be a real date in the form YYYY-MM-DD'
        )
        expect(page.locator('#refused li[data-field="unit"]')).to_contain_text('Unit: "yard"')
        expect(page.get_by_label("On", exact=True)).to_have_attribute("aria-invalid", "true")
        action = page.get_by_label("Action", exact=True)
        expect(action).not_to_have_attribute("aria-invalid", "true")
        # The form is there to put it right.
        page.get_by_label("On", exact=True).fill("2025-02-28")
        page.get_by_label("Unit", exact=True).select_option("per_share")
        page.get_by_role("button", name="Compare", exact=True).press("Enter")
        settle(page)
        expect(page.locator("#refused")).to_have_count(0)
        expect(page.locator(".ranking .bar").first).to_be_visible()
        assert "as_of=2025-02-28" in page.url
        assert page.evaluate("window.violations") == []
    assert refused == []


def provenance(record: dict[str, Any]) -> str:
    """A record's provenance as the page words it."""
    words = f"{record['source_kind']} source, date {record['date_basis']}"
    words += ", uncertain" if record["uncertain"] else ""
    return words + (", standard rate" if record["standard"] else "")


@pytest.mark.slow
@pytest.mark.parametrize("width, height", [(1280, 800), (390, 844)], ids=["desktop", "phone"])
def test_every_view_fits_the_screen(
    live: LiveServer, api: httpx.Client, chromium: str, width: int, height: int
) -> None:
    """Nothing is wider than the screen: the charts are drawn at its width, wide tables scroll
    in their box."""
    line = api.get("/fee-schedule-results/", params={"exchange_name": VENUE}).json()["data"][0]
    views = [f"view=venue&venue={VENUE}", f"view=line&line={line['line_id']}", "view=compare"]
    size = {"width": width, "height": height}
    with browser_page(chromium, live.url, viewport=size) as (page, _, refused):
        for view in views:
            page.goto(f"{live.url}/explore?{view}")
            settle(page)
            expect(page.locator(".chart")).to_be_visible()
            assert page.evaluate("document.documentElement.scrollWidth") <= width, view
            # Drawn at the width shown (not shrunk from a wider drawing), so its text is legible.
            drawn = page.evaluate("document.querySelector('.chart').viewBox.baseVal.width")
            assert drawn <= width, view
    assert refused == []


@pytest.mark.slow
def test_an_announced_figure_is_dashed_and_a_script_source_never_a_link(
    tmp_path: Path, accounts_file: Path, chromium: str
) -> None:
    """Synthetic test data (the embedded data has no announced change today): a line whose
    second figure starts next year. Its answer is then given a script as the announced
    record's source address, as a version published before the ingest required a web address
    could hold: the page shows the source, never links it."""
    next_year = datetime.now(UTC).year + 1
    rows = [
        fee_row(effective_start="2024-01-02", effective_end=f"{next_year}-01-01"),
        fee_row(fee_amount="($0.0015)", effective_start=f"{next_year}-01-02"),
    ]
    write_raw(tmp_path / "raw" / "nyse.csv", rows)
    run_ingest(tmp_path / "raw", tmp_path / "data", registry=REGISTRY)
    with (
        page_server(tmp_path / "data", accounts_file, KEY) as server,
        browser_page(chromium, server.url) as (page, _, refused),
    ):
        listed = httpx.get(
            f"{server.url}/api/v1/fee-schedule-results/", headers=exchange_headers(), timeout=10
        ).json()["data"]
        assert len({record["line_id"] for record in listed}) == 1

        def with_a_script_source(route: Route) -> None:
            answer = route.fetch()
            body = answer.json()
            body["data"]["records"][-1]["source_link"] = "javascript:alert(document.domain)"
            route.fulfill(response=answer, json=body)

        page.route("**/api/v1/fee-lines/*", with_a_script_source)
        page.goto(f"{server.url}/explore?view=line&line={listed[0]['line_id']}")
        settle(page)
        expect(page.locator(".history .step")).to_have_count(2)
        expect(page.locator(".history .marker")).to_have_count(2)
        future = page.locator(".history .step.future")
        expect(future).to_have_count(1)
        assert "announced" in (future.get_attribute("aria-label") or "")
        announced = page.locator("table.records tr.future")
        expect(announced).to_have_count(1)
        expect(announced).to_contain_text("NYSE Price List")
        expect(announced.locator("a")).to_have_count(0)
        expect(page.locator("table.records a[href^='https://example.test/']")).to_have_count(1)
    assert refused == []


@pytest.mark.slow
def test_a_bad_key_gets_the_key_prompt_and_a_good_one_the_view(
    live: LiveServer, chromium: str
) -> None:
    with browser_page(chromium, live.url) as (page, _, refused):
        page.goto(f"{live.url}/explore?view=venue&venue={VENUE}")
        settle(page)
        header = page.locator("header").get_by_label("API key", exact=True)
        header.fill("not-a-key")
        header.press("Enter")
        settle(page)
        prompt = page.locator("#key-prompt")
        expect(prompt).to_contain_text("did not accept this key")
        prompt.get_by_label("API key", exact=True).fill(KEY)
        prompt.get_by_role("button", name="Use key").click()
        settle(page)
        expect(page.locator(".coverage")).to_be_visible()
    assert refused == []


@pytest.mark.slow
def test_a_spent_rate_limit_says_when_it_retries(
    embedded_version: IngestResult, tmp_path: Path, chromium: str
) -> None:
    key = "test-key-slow-0123456789abcdef"
    accounts = {"accounts": {"slow": {
        "exchanges": None,
        "rate_limit": {"burst": 2, "per_minute": 6},
        "keys": [account_key(key)],
    }}}  # fmt: skip
    (tmp_path / "accounts.json").write_text(json.dumps(accounts))
    data_dir = embedded_version.version_dir.parent.parent
    with (
        page_server(data_dir, tmp_path / "accounts.json", key) as server,
        browser_page(chromium, server.url) as (page, _, refused),
    ):
        page.goto(f"{server.url}/explore?view=venue&venue={VENUE}")  # more calls than 2
        settle(page)
        notice = page.locator("#rate-limited")
        expect(notice).to_contain_text(re.compile(r"Retrying in \d+ s"))
    assert refused == []
