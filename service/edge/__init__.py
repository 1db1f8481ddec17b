"""The request edge: what every request meets before and after its handler. The front door
(`front`) and what it learns of a call (`call`), the answer on its way out (`reply`), keys and
who may see what (`access`), the rate limit (`ratelimit`), the response cache (`cache`),
the request a handler reads (`request`), CORS (`cors`), the access line (`accesslog`),
`/metrics` (`metrics`) and the bounded HTTP/1.1 protocol under uvicorn (`protocol`)."""
