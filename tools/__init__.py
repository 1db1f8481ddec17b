"""Tools for the people who build this project: benchmarks, the soak test, the embedded data's
builder. Not part of the installed packages (`pyproject.toml` ships `ingest` and `service`);
run from the repository root, as the Make targets do (`python -m tools.bench`, ...)."""
