"""The endpoints: one module per family of handlers (`suppliers`, `supplier_data`,
`exchanges`, `results`, `history`, `compare`, the probes in `health`), and what they share:
`params` reads query parameters, `envelope` builds answers, `exchange_family` reads the
exchange family's venues and filters, `export` streams downloads."""
