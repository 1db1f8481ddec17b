"""What the service's browser pages share (`/docs`, `service.pages.docs`; `/explore`,
`service.pages.explore`): the policy that lets a page run only this server's scripts and call
only this server, and how a page hands its script its settings.

Nothing a page loads comes from elsewhere, so the pages work offline. A page may carry the
demo key (`FEES_DOCS_KEY`), so no shared cache keeps it and a browser refetches it.
"""

import json
from typing import Any, Final

from starlette.responses import Response

# `data:` images: the icons in Swagger UI's style sheet. Nothing from another origin.
POLICY: Final = "; ".join(
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


def config_block(element_id: str, config: dict[str, Any]) -> str:
    """`config` as JSON in a data block the page's script reads. `<`, `>` and `&` are escaped,
    so nothing in a value (the key) can close the block or start markup."""
    text = json.dumps(config)
    for character in "<>&":
        text = text.replace(character, f"\\u{ord(character):04x}")
    return f'<script type="application/json" id="{element_id}">{text}</script>'


def page_response(html: str) -> Response:
    headers = {"Content-Security-Policy": POLICY, "Cache-Control": "no-store"}
    return Response(html, media_type="text/html", headers=headers)
