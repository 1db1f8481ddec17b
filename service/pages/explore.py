"""The fee explorer at `/explore`: a venue's fees, a fee line's history, and the venues
compared on a day, drawn in the browser from the public API.

The page is a shell; `explore.js` beside this module fetches and draws everything, and
`explore.css` lays it out. The script calls only `/api/v1`, with the key the user enters (or
the one `make run` configures, `FEES_DOCS_KEY`), so it sees exactly what that key's scope
allows. Its charts are SVG it draws itself: no library, nothing fetched from elsewhere
(`service.pages.page`). Each view is a URL (`?view=venue&venue=memx`, `?view=line&line=...`,
`?view=compare&as_of=...`), so a view can be shared; the key never goes in it.
"""

from pathlib import Path

from starlette.requests import Request
from starlette.responses import FileResponse, Response
from starlette.routing import BaseRoute, Route

from service.pages.page import config_block, page_response

HERE = Path(__file__).parent
FILES = {"explore.js": "text/javascript", "explore.css": "text/css"}
PAGE = """<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>Fee explorer</title>
<link rel="stylesheet" href="/explore/explore.css">
<link rel="icon" href="data:,">
</head>
<body>
<header>
<h1><a href="/explore">Fee explorer</a></h1>
<nav aria-label="Views">
<a href="/explore?view=venue" data-view="venue">Venue</a>
<a href="/explore?view=compare" data-view="compare">Compare venues</a>
<a href="/docs">API reference</a>
</nav>
<form id="key-form" class="key">
<label for="key">API key</label>
<input id="key" name="key" type="password" autocomplete="off" spellcheck="false">
<button type="submit">Use key</button>
</form>
</header>
<main id="view" tabindex="-1"></main>
<p id="status" class="status" role="status" aria-live="polite"></p>
{config}
<script src="/explore/explore.js"></script>
</body>
</html>
"""


def page(key: str | None) -> str:
    """The page, with the key it starts with (None: the user enters one)."""
    return PAGE.format(config=config_block("explore-config", {"key": key}))


def routes() -> list[BaseRoute]:
    async def explore(request: Request) -> Response:
        return page_response(page(request.app.state.settings.docs_key))

    def serve(name: str, media_type: str) -> Route:
        async def file(request: Request) -> Response:
            return FileResponse(HERE / name, media_type=media_type)

        return Route(f"/explore/{name}", file, methods=["GET", "HEAD"])

    return [
        Route("/explore", explore, methods=["GET", "HEAD"]),
        Route("/explore/", explore, methods=["GET", "HEAD"]),
        *(serve(name, media_type) for name, media_type in FILES.items()),
    ]
