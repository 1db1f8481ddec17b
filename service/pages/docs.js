// Starts Swagger UI for the page `service/pages/docs.py` serves. A separate file, not an inline
// script, so the page's Content-Security-Policy can allow only this server's scripts.
"use strict";

(function () {
  const config = JSON.parse(document.getElementById("docs-config").textContent);
  const root = document.getElementById("swagger-ui");

  function start(spec) {
    // The document names the `make run` server; the page calls the server it came from,
    // whatever its address (its policy lets it call no other).
    spec.servers = [{ url: window.location.origin, description: "This server" }];
    const ui = SwaggerUIBundle({
      spec: spec,
      domNode: root,
      deepLinking: true,
      layout: "BaseLayout",
      presets: [SwaggerUIBundle.presets.apis],
      validatorUrl: null, // the default sends the document to a public validator
      onComplete: function () {
        if (config.key) {
          // Both families' schemes take the same keys (`service.access`).
          ui.preauthorizeApiKey("bearerAuth", config.key);
          ui.preauthorizeApiKey("apiKeyHeader", config.key);
        }
      },
    });
  }

  fetch(config.specUrl, { headers: { Accept: "application/json" } })
    .then(function (response) {
      if (!response.ok) {
        throw new Error(config.specUrl + " answered " + response.status);
      }
      return response.json();
    })
    .then(start)
    .catch(function (error) {
      root.textContent = "The API document could not be loaded: " + error.message;
    });
})();
