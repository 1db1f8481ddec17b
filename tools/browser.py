"""Debian's Chromium, headless, for the page tests and `make screenshots`: installed when
missing, as the tests' other Debian programs are (`tools.servers`)."""

from tools.servers import debian_program

# No sandbox (the tests may run as root), no GPU, and none of Chromium's own calls home: a
# page test counts every request the page makes.
CHROMIUM_ARGS = [
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
]  # fmt: skip


def chromium() -> str:
    """The path of Chromium; raises `tools.servers.Unavailable` where it cannot be installed."""
    return debian_program("chromium", "chromium")
