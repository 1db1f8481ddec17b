"""The fixed parts of the URL space, in one place: the API's version prefixes (every endpoint
answers under each, `service.api`) and the path of the OpenAPI document under them."""

from typing import Final

PREFIXES: Final = ("/api/v1", "/v1")
API_PREFIX: Final = PREFIXES[0]  # the one the OpenAPI document's paths are written under
OPENAPI_PATH: Final = "/openapi.json"
# Where the interactive reference (`service.pages.docs`) fetches the document from.
SPEC_URL: Final = API_PREFIX + OPENAPI_PATH
