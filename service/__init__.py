"""The HTTP service: a thin Starlette app answering from the current published dataset version."""
