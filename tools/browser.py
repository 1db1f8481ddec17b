"""How the page tests and `make screenshots` run Debian's Chromium (`debian_program("chromium",
"chromium")` installs it when missing, as the tests' other Debian programs are)."""

# No sandbox (the tests may run as root), no GPU, and none of Chromium's own calls home: a
# page test counts every request the page makes.
CHROMIUM_ARGS = [
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
]  # fmt: skip
