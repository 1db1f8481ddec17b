"""The fixed parts of the URL space, in one place: the API's version prefixes (every endpoint
answers under each, `service.app`) and the path of the OpenAPI document under them."""

from typing import Final

PREFIXES: Final = ("/api/v1", "/v1")
OPENAPI_PATH: Final = "/openapi.json"
# Where the interactive reference (`service.pages.docs`) fetches the document from.
SPEC_URL: Final = PREFIXES[0] + OPENAPI_PATH
