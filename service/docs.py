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
import json
from pathlib import Path

from starlette.requests import Request
from starlette.responses import FileResponse, Response
from starlette.routing import BaseRoute, Mount, Route
from starlette.staticfiles import StaticFiles

from service.urls import SPEC_URL

STARTER = Path(__file__).with_name("docs.js")
# Swagger UI needs `data:` images (the icons in its style sheet) and nothing from another origin.
POLICY = "; ".join(
    [
        "default-src 'none'",
        "script-src 'self'",
        "style-src 'self'",
        "img-src 'self' data:",
        "font-src 'self'",
        "connect-src 'self'",
        "base-uri 'none'",
        "form-action 'none'",
        "frame-ancestors 'none'",
    ]
)
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
<script type="application/json" id="docs-config">{config}</script>
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
    """The page, with the spec URL and the key as JSON in a data block. `<`, `>` and `&` are
    escaped so nothing in the key can close the block or start markup."""
    config = json.dumps({"specUrl": SPEC_URL, "key": key})
    for character in "<>&":
        config = config.replace(character, f"\\u{ord(character):04x}")
    return PAGE.format(config=config)


def routes() -> list[BaseRoute]:
    async def docs(request: Request) -> Response:
        key: str | None = request.app.state.settings.docs_key
        headers = {
            "Content-Security-Policy": POLICY,
            # The page may carry a key: no shared cache keeps it, and a browser refetches it.
            "Cache-Control": "no-store",
        }
        return Response(page(key), media_type="text/html", headers=headers)

    async def starter(request: Request) -> Response:
        return FileResponse(STARTER, media_type="text/javascript")

    return [
        Route("/docs", docs, methods=["GET", "HEAD"]),
        Route("/docs/", docs, methods=["GET", "HEAD"]),
        Route("/docs/docs.js", starter, methods=["GET", "HEAD"]),
        Mount("/docs/static", StaticFiles(directory=swagger_ui_files())),
    ]
