"""The JSON response every endpoint answers with."""

from typing import Any

import orjson
from starlette.responses import JSONResponse


class JSON(JSONResponse):
    """Starlette's compact JSON (UTF-8, no spaces) rendered by orjson: 1.8 µs instead of 26 µs
    for a discovery answer in a quiet process, about 5% of a cold discovery call under load
    (py-spy). The values are the same; the one difference in the text is that a number below
    1e-4 is written in full (`0.00003`, not `3e-05`)."""

    def render(self, content: Any) -> bytes:
        return orjson.dumps(content)
