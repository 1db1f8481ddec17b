"""The browser pages: the API reference at `/docs` (`docs`, `docs.js`), the fee explorer at
`/explore` (`explore`, `explore.js`, `explore.css`), and what they share (`page`: their
policy and settings block)."""
