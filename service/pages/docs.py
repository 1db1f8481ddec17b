"""The interactive API reference at `/docs`: Swagger UI over the service's own OpenAPI document.

Everything the page loads comes from this server: Swagger UI's files from the installed
`swagger-ui-py` package, the few lines that start it from `docs.js` beside this module, and the
document from `/api/v1/openapi.json`. Nothing is fetched from elsewhere, so the page works
offline, and its `Content-Security-Policy` lets it run only this server's scripts and call only
this server. No key is needed to read it. When a docs key is configured (`FEES_DOCS_KEY`, for
local demos), the page enters it in both of the document's security schemes, so "Try it out"
works at once.
"""

import importlib.util
from pathlib import Path

from starlette.requests import Request
from starlette.responses import FileResponse, Response
from starlette.routing import BaseRoute, Mount, Route
from starlette.staticfiles import StaticFiles

from service.pages.page import config_block, page_response
from service.urls import SPEC_URL

STARTER = Path(__file__).with_name("docs.js")
PAGE = """<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<title>Exchange fees API</title>
<link rel="stylesheet" href="/docs/static/swagger-ui.css">
<link rel="icon" type="image/png" href="/docs/static/favicon-32x32.png">
</head>
<body>
<div id="swagger-ui"></div>
{config}
<script src="/docs/static/swagger-ui-bundle.js"></script>
<script src="/docs/docs.js"></script>
</body>
</html>
"""


def swagger_ui_files() -> Path:
    """The folder of Swagger UI's files in the installed `swagger-ui-py`, found without
    importing the package (its `__init__` loads Jinja2 and YAML for framework glue we do not
    use)."""
    spec = importlib.util.find_spec("swagger_ui")
    if spec is None or spec.origin is None:
        raise RuntimeError("swagger-ui-py is not installed: `pip install -e .`")
    return Path(spec.origin).with_name("static")


def page(key: str | None) -> str:
    """The page, with the spec URL and the key for its script."""
    return PAGE.format(config=config_block("docs-config", {"specUrl": SPEC_URL, "key": key}))


def routes() -> list[BaseRoute]:
    async def docs(request: Request) -> Response:
        return page_response(page(request.app.state.settings.docs_key))

    async def starter(request: Request) -> Response:
        return FileResponse(STARTER, media_type="text/javascript")

    return [
        Route("/docs", docs, methods=["GET", "HEAD"]),
        Route("/docs/", docs, methods=["GET", "HEAD"]),
        Route("/docs/docs.js", starter, methods=["GET", "HEAD"]),
        Mount("/docs/static", StaticFiles(directory=swagger_ui_files())),
    ]
