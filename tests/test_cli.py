"""The `fees` command line, run as an operator runs it (the console script installed in the
venv, as a subprocess), and the settings it checks before anything starts."""

import json
import os
import re
import subprocess
import sys
import time
from collections.abc import Mapping
from concurrent.futures import ThreadPoolExecutor
from contextlib import AbstractContextManager
from pathlib import Path

import httpx
import pytest

from ingest.layout import current_version_dir
from service.accounts import fingerprint
from service.settings import VARIABLES, Settings, SettingsError
from tests.conftest import FIXTURES, KEYS, REGISTRY, account_key, supplier_headers
from tests.servers import ROOT, service_process

FEES = str(Path(sys.executable).with_name("fees"))
COMMANDS = ["coverage", "ingest", "keys", "price", "serve", "sql", "synth"]  # as listed: by name


def fees(*args: str, env: Mapping[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """`fees ARGS` with these `FEES_*` settings and no others from the caller's environment."""
    clean = {name: value for name, value in os.environ.items() if not name.startswith("FEES_")}
    return subprocess.run(
        [FEES, *args], cwd=ROOT, env={**clean, **(env or {})}, capture_output=True, text=True
    )


def test_help_lists_every_command() -> None:
    done = fees("--help")
    listed = re.findall(r"^    (\w+) {2,}\S", done.stdout, flags=re.MULTILINE)
    assert (done.returncode, listed) == (0, COMMANDS)


@pytest.mark.parametrize(
    "command",
    [[name] for name in COMMANDS] + [["keys", "add"], ["keys", "list"], ["keys", "revoke"]],
    ids=" ".join,
)
def test_every_command_has_help(command: list[str]) -> None:
    done = fees(*command, "--help")
    assert (done.returncode, done.stderr) == (0, "")
    assert done.stdout.startswith(f"usage: fees {' '.join(command)} [-h]")


@pytest.fixture(scope="module")
def published(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The fixture CSVs published by `fees ingest` into FEES_DATA_DIR (no `--data`)."""
    data = tmp_path_factory.mktemp("cli") / "warehouse"
    done = fees("ingest", "--raw", str(FIXTURES / "raw"), "--registry", str(REGISTRY),
                env={"FEES_DATA_DIR": str(data)})  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("published version ")
    assert "  records                    13\n" in done.stdout
    return data


def test_ingest_publishes_into_the_data_dir_setting(published: Path) -> None:
    version = current_version_dir(published)
    assert version is not None
    assert (version / "manifest.json").exists()


def test_sql_prints_a_table(published: Path) -> None:
    done = fees("sql", "select count(*) from fees", env={"FEES_DATA_DIR": str(published)})
    assert (done.returncode, done.stderr) == (0, "")
    assert done.stdout == (
        "┌──────────────┐\n"
        "│ count_star() │\n"
        "│    int64     │\n"
        "├──────────────┤\n"
        "│           13 │\n"
        "└──────────────┘\n"
        "\n"
    )


def test_make_sql_takes_a_query_over_several_lines_with_quotes(published: Path) -> None:
    """`docs/dataset.md`'s examples span lines and quote strings: `make sql` passes Q to the
    shell as one word (issue 37: it split it at the first newline)."""
    query = "select exchange, count(*) as \"it's\"\n from fees\n where exchange = 'memx' group by 1"
    done = subprocess.run(
        ["make", "--no-print-directory", "sql", f"Q={query}", f"DATA={published}"],
        cwd=ROOT, capture_output=True, text=True,
    )  # fmt: skip
    assert (done.returncode, done.stderr) == (0, "")
    assert "│ it's  │" in done.stdout and "│ memx     │     3 │" in done.stdout


def test_coverage_rewrites_the_readmes_paragraph_between_its_markers(
    published: Path, tmp_path: Path
) -> None:
    readme = tmp_path / "README.md"
    readme.write_text(
        "# Title\n\n<!-- the embedded data today: made by `make coverage`, do not edit -->\n"
        "13,000 records\n<!-- end of what `make coverage` makes -->\n\n## More\n",
        encoding="utf-8",
    )
    env = {"FEES_DATA_DIR": str(published)}
    done = fees("coverage", "--out", str(tmp_path / "c.md"), "--readme", str(readme), env=env)
    assert (done.returncode, done.stderr) == (0, "")
    text = readme.read_text(encoding="utf-8")
    assert text.startswith("# Title\n\n<!-- the embedded data today")
    assert text.endswith("<!-- end of what `make coverage` makes -->\n\n## More\n")
    assert "**13 records on 3 of the " in text and "13,000" not in text
    readme.write_text("# No markers\n", encoding="utf-8")
    done = fees("coverage", "--out", str(tmp_path / "c.md"), "--readme", str(readme), env=env)
    assert done.returncode == 2 and "has no lines" in done.stderr
    assert readme.read_text(encoding="utf-8") == "# No markers\n"


def test_coverage_writes_the_report_of_the_current_version(published: Path, tmp_path: Path) -> None:
    out = tmp_path / "coverage.md"
    done = fees("coverage", "--out", str(out), env={"FEES_DATA_DIR": str(published)})
    assert (done.returncode, done.stdout, done.stderr) == (0, f"wrote {out}\n", "")
    report = out.read_text(encoding="utf-8")
    assert report.startswith("# Data coverage\n")
    # The fixture's 13 records: 3 on memx with provenance, 10 from older raw files without.
    assert "- **13 records** on **3 venues**" in report
    assert "| **memx** | **all** | 3 | 67% | 67% | 67% | 33% | 3 |" in report
    # Its 9 open-ended records by the year of their start, the oldest first.
    assert "9 records are open-ended" in report
    years = re.findall(r"^\| (\d{4}) \| (\d+) \| \d+ \| \d+ \|$", report, re.MULTILINE)
    assert years == [("2019", "2"), ("2020", "3"), ("2021", "2"), ("2023", "1"), ("2024", "1")]
    assert report.endswith("## Venues with no records\n\n- `cboe` (Cboe Options)\n")


# Runs a data command as its own module does, then names any service module it loaded.
WITHOUT_THE_SERVICE = """
import sys
from ingest import cli
status = cli.main(sys.argv[1], sys.argv[2:])
loaded = sorted(name for name in sys.modules if name.split(".")[0] == "service")
print(status, loaded)
"""


@pytest.mark.parametrize(
    "args",
    [
        ["sql", "select count(*) from fees"],
        ["ingest", "--raw", str(FIXTURES / "raw"), "--registry", str(REGISTRY)],
    ],
    ids=["sql", "ingest"],
)
def test_the_data_commands_run_without_loading_the_service(
    published: Path, args: list[str]
) -> None:
    """`python -m ingest` and `python -m ingest.query` are the data commands alone: the program
    that writes versions never imports the one that serves them."""
    clean = {name: value for name, value in os.environ.items() if not name.startswith("FEES_")}
    done = subprocess.run(
        [sys.executable, "-c", WITHOUT_THE_SERVICE, *args], cwd=ROOT,
        env={**clean, "FEES_DATA_DIR": str(published)}, capture_output=True, text=True,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[-1] == "0 []"


def test_a_data_command_refuses_a_bad_setting_in_one_line(tmp_path: Path) -> None:
    clean = {name: value for name, value in os.environ.items() if not name.startswith("FEES_")}
    done = subprocess.run(
        [sys.executable, "-m", "ingest.query", "select 1"], cwd=ROOT,
        env={**clean, "FEES_DATA_DIR": "s3://"}, capture_output=True, text=True,
    )  # fmt: skip
    assert (done.returncode, done.stdout) == (2, "")
    assert done.stderr == "fees sql: FEES_DATA_DIR='s3://': must be s3://bucket[/prefix]\n"


def test_keys_are_added_listed_and_revoked(tmp_path: Path) -> None:
    env = {"FEES_ACCOUNTS_FILE": str(tmp_path / "accounts.json")}
    added = fees("keys", "add", "--account", "desk", "--exchange", "nyse",
                 "--registry", str(REGISTRY), env=env)  # fmt: skip
    key = added.stdout.strip()
    assert (added.returncode, len(key)) == (0, 43)
    key_id = fingerprint(key)
    [listed] = json.loads(fees("keys", "list", env=env).stdout)
    assert (listed["id"], listed["account"], listed["exchanges"], listed["revoked_at"]) == (
        key_id,
        "desk",
        ["nyse"],
        None,
    )
    revoked = fees("keys", "revoke", key_id, env=env)
    assert (revoked.returncode, revoked.stdout) == (0, f"revoked {key_id}\n")
    [listed] = json.loads(fees("keys", "list", env=env).stdout)
    assert listed["revoked_at"] is not None
    again = fees("keys", "revoke", key_id, env=env)
    assert (again.returncode, again.stderr) == (1, f"no active key with id {key_id}\n")


def test_a_refused_ingest_is_one_line_and_publishes_nothing(tmp_path: Path) -> None:
    done = fees("ingest", "--raw", str(FIXTURES / "raw"), "--data", str(tmp_path / "data"),
                "--registry", str(REGISTRY), "--strict")  # fmt: skip
    assert (done.returncode, done.stdout) == (1, "")
    assert done.stderr == (
        "ingest failed: --strict: 5 row(s) rejected with 9 problem(s); nothing published. "
        "First: bad_rows.csv, line 3, fee_type = 'stock': not one of: equity, option\n"
    )
    assert current_version_dir(tmp_path / "data") is None


@pytest.mark.parametrize(
    ("args", "status", "message"),
    [
        (["ingest", "--raw", "/no/such/raw"], 1,
         "ingest failed: malformed file /no/such/raw: raw directory does not exist"),
        (["ingest", "--raw", str(FIXTURES / "raw"), "--registry", "/no/such.csv"], 1,
         "fees ingest: [Errno 2] No such file or directory: '/no/such.csv'"),
        (["ingest", "--keep", "0"], 2,
         "fees ingest: argument --keep: must be an integer >= 1, not '0' "
         "(see `fees ingest --help`)"),
        (["sql", "select 1", "--data", "/no/such/dir"], 1,
         "no published version under /no/such/dir; run `fees ingest` first"),
        (["coverage", "--data", "/no/such/dir"], 1,
         "no published version under /no/such/dir; run `fees ingest` first"),
        (["serve", "--port", "70000"], 2,
         "fees serve: argument --port: must be an integer from 1 to 65535, not '70000' "
         "(see `fees serve --help`)"),
        (["serve", "--workers", "0"], 2,
         "fees serve: argument --workers: must be an integer >= 1, not '0' "
         "(see `fees serve --help`)"),
        (["sever"], 2,
         "fees: argument COMMAND: invalid choice: 'sever' (choose from 'coverage', 'ingest', "
         "'keys', 'price', 'serve', 'sql', 'synth') (see `fees --help`)"),
    ],
    ids=["missing raw dir", "missing registry", "bad keep", "no version", "no version to report",
         "bad port flag", "no workers", "unknown command"],
)  # fmt: skip
def test_a_users_mistake_is_one_line(
    tmp_path: Path, args: list[str], status: int, message: str
) -> None:
    done = fees(*args, env={"FEES_DATA_DIR": str(tmp_path)})
    assert (done.returncode, done.stderr, done.stdout) == (status, message + "\n", "")


@pytest.mark.parametrize(
    ("env", "message"),
    [
        ({"FEES_PORT": "http"},
         "FEES_PORT='http': must be an integer from 1 to 65535"),
        ({"FEES_DATA_DIR": "{tmp}/missing"},
         "FEES_DATA_DIR='{tmp}/missing': must be an existing directory (`fees ingest --data "
         "DIR` makes one and publishes a version into it)"),
        ({"FEES_ACCOUNTS_FILE": "{tmp}/accounts.json"},
         "FEES_ACCOUNTS_FILE='{tmp}/accounts.json': must be a readable accounts file as "
         "described in service/accounts.py (Expecting ':' delimiter: line 1 column 19 (char 18))"),
        ({"FEES_CACHE_MB": "lots"},
         "FEES_CACHE_MB='lots': must be an integer >= 0"),
        ({"FEES_CORS_ORIGINS": "https://app.example/"},
         "FEES_CORS_ORIGINS='https://app.example/': 'https://app.example/' is not an origin: "
         "each comma-separated entry must be http(s)://host[:port] (no path, no trailing "
         "slash) or *"),
    ],
    ids=["port", "data dir", "accounts file", "number", "cors origin"],
)  # fmt: skip
def test_serve_refuses_a_bad_setting_in_one_line(
    tmp_path: Path, env: dict[str, str], message: str
) -> None:
    (tmp_path / "accounts.json").write_text('{"accounts": {"x" []}}', encoding="utf-8")
    given = {"FEES_DATA_DIR": str(tmp_path)} | {
        name: value.format(tmp=tmp_path) for name, value in env.items()
    }
    done = fees("serve", env=given)
    assert (done.returncode, done.stderr) == (2, f"fees serve: {message.format(tmp=tmp_path)}\n")


def test_keys_refuse_a_malformed_accounts_file(tmp_path: Path) -> None:
    accounts = tmp_path / "accounts.json"
    accounts.write_text('{"accounts": []}', encoding="utf-8")
    done = fees("keys", "add", "--account", "x", env={"FEES_ACCOUNTS_FILE": str(accounts)})
    assert (done.returncode, done.stdout) == (2, "")
    assert done.stderr == (
        f"fees keys: FEES_ACCOUNTS_FILE={str(accounts)!r}: must be a readable accounts file as "
        "described in service/accounts.py ('list' object has no attribute 'items')\n"
    )
    assert accounts.read_text(encoding="utf-8") == '{"accounts": []}'


# Settings, read in the process (no subprocess needed to check each rule).


def test_settings_read_every_variable() -> None:
    environ = {
        "FEES_HOST": "0.0.0.0",
        "FEES_PORT": "8123",
        "FEES_WORKERS": "4",
        "FEES_DATA_DIR": "/srv/fees",
        "FEES_ACCOUNTS_FILE": "/etc/fees/accounts.json",
        "FEES_DUCKDB_MEMORY": "512MiB",
        "FEES_DUCKDB_THREADS": "1",
        "FEES_VERSION_POLL_SECONDS": "0.5",
        "FEES_CACHE_MB": "0",
        "FEES_LOG_LEVEL": "WARNING",
        "FEES_QUERY_TIMEOUT_SECONDS": "2.5",
        "FEES_REDIS_URL": "rediss://:secret@cache.internal:6380/2",
        "FEES_MAX_AGE_SECONDS": "0",
        "FEES_CORS_ORIGINS": "https://app.example, http://localhost:3000",
        "FEES_DOCS_KEY": "demo-key",
        "FEES_S3_ENDPOINT_URL": "http://minio.internal:9000",
        "FEES_CACHE_DIR": "/var/cache/fees",
    }
    assert Settings.from_environ(environ) == Settings(
        host="0.0.0.0",
        port=8123,
        workers=4,
        data_dir=Path("/srv/fees"),
        accounts_file=Path("/etc/fees/accounts.json"),
        duckdb_memory="512MiB",
        duckdb_threads=1,
        version_poll_seconds=0.5,
        cache_mb=0,
        log_level="warning",
        query_timeout_seconds=2.5,
        redis_url="rediss://:secret@cache.internal:6380/2",
        max_age_seconds=0,
        cors_origins=("https://app.example", "http://localhost:3000"),
        docs_key="demo-key",
        s3_endpoint_url="http://minio.internal:9000",
        cache_dir=Path("/var/cache/fees"),
    )


def test_unset_and_empty_variables_leave_the_defaults() -> None:
    empty = {variable: "" for variable, _ in VARIABLES.values()}
    assert Settings.from_environ({}) == Settings.from_environ(empty) == Settings()
    assert (Settings().redis_url, Settings().cors_origins, Settings().docs_key) == (None, (), None)


@pytest.mark.parametrize(
    ("variable", "value", "allowed"),
    [
        ("FEES_PORT", "0", "must be an integer from 1 to 65535"),
        ("FEES_PORT", "8000.0", "must be an integer from 1 to 65535"),
        ("FEES_WORKERS", "0", "must be an integer >= 1"),
        ("FEES_DUCKDB_THREADS", "two", "must be an integer >= 1"),
        ("FEES_CACHE_MB", "-1", "must be an integer >= 0"),
        ("FEES_MAX_AGE_SECONDS", "-5", "must be an integer >= 0"),
        ("FEES_QUERY_TIMEOUT_SECONDS", "0", "must be a number of seconds > 0 (such as 0.5 or 5)"),
        ("FEES_VERSION_POLL_SECONDS", "nan", "must be a number of seconds > 0 (such as 0.5 or 5)"),
        ("FEES_VERSION_POLL_SECONDS", "soon", "must be a number of seconds > 0 (such as 0.5 or 5)"),
        ("FEES_DUCKDB_MEMORY", "1024", "must be a size above 0 with a unit, KB MB GB TB (powers "
         "of 1000) or KiB MiB GiB TiB (of 1024), such as 512MB or 1GB, or a share of memory such "
         "as 50%"),
        ("FEES_LOG_LEVEL", "loud", "must be one of critical, error, warning, info, debug"),
        ("FEES_REDIS_URL", "localhost:6379", "must be redis://[:password@]host[:port][/db], "
         "rediss://... (TLS) or unix:///path/to/redis.sock"),
        ("FEES_REDIS_URL", "redis://cache:port/0", "must be redis://[:password@]host[:port][/db], "
         "rediss://... (TLS) or unix:///path/to/redis.sock"),
        ("FEES_CORS_ORIGINS", "https://a.example,app.example", "'app.example' is not an origin: "
         "each comma-separated entry must be http(s)://host[:port] (no path, no trailing slash) "
         "or *"),
        ("FEES_DATA_DIR", "s3:///no-bucket", "must be s3://bucket[/prefix]"),
        ("FEES_S3_ENDPOINT_URL", "minio:9000", "must be http(s)://host[:port] (an S3-compatible "
         "endpoint)"),
        ("FEES_CACHE_DIR", "/dev/null", "must be a directory (made if missing), not a file"),
    ],
    ids=lambda value: str(value)[:24],
)  # fmt: skip
def test_a_bad_value_names_the_variable_the_value_and_what_is_allowed(
    variable: str, value: str, allowed: str
) -> None:
    with pytest.raises(SettingsError) as raised:
        Settings.from_environ({variable: value})
    assert str(raised.value) == f"{variable}={value!r}: {allowed}"


@pytest.mark.parametrize(
    ("variable", "value"),
    [
        ("FEES_REDIS_URL", "redis://localhost"),
        ("FEES_REDIS_URL", "unix:///run/redis/redis.sock"),
        ("FEES_CORS_ORIGINS", "*"),
        ("FEES_CORS_ORIGINS", "http://[::1]:8080"),
        ("FEES_DUCKDB_MEMORY", "1.5 GB"),
        ("FEES_DUCKDB_MEMORY", "50%"),
        ("FEES_DATA_DIR", "s3://fees/warehouse"),
        ("FEES_S3_ENDPOINT_URL", "https://s3.eu-west-1.amazonaws.com"),
    ],
)
def test_accepted_forms(variable: str, value: str) -> None:
    field = next(field for field, (name, _) in VARIABLES.items() if name == variable)
    expected = (value,) if field == "cors_origins" else value
    assert getattr(Settings.from_environ({variable: value}), field) == expected


def test_the_readme_lists_every_setting_the_code_reads() -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    table = readme.split("\n## Settings\n", 1)[1].split("\n## ", 1)[0]
    documented = re.findall(r"^\| `(FEES_[A-Z0-9_]+)` \|", table, flags=re.MULTILINE)
    sources = [*ROOT.glob("service/*.py"), *ROOT.glob("ingest/*.py"), ROOT / "Makefile"]
    used = {
        name
        for path in sources
        for name in re.findall(r"(?<![A-Z_])FEES_[A-Z0-9_]+", path.read_text(encoding="utf-8"))
    }
    assert sorted(documented) == sorted({variable for variable, _ in VARIABLES.values()})
    assert used <= set(documented)


# Serving: the real console script on a free port.


def serving(data: Path, accounts: Path, *args: str) -> AbstractContextManager[tuple[str, int]]:
    """`fees serve ARGS` over `data`; yields its URL and process id once it answers."""
    environment = {"FEES_DATA_DIR": str(data), "FEES_ACCOUNTS_FILE": str(accounts)}
    return service_process(environment, *args)


@pytest.mark.slow
def test_serve_answers_503_until_a_version_is_published(
    tmp_path: Path, accounts_file: Path
) -> None:
    data = tmp_path / "empty"
    data.mkdir()
    with serving(data, accounts_file) as (url, _):
        assert httpx.get(f"{url}/readyz").status_code == 503
        actions = f"{url}/api/v1/suppliers/nasdaq/actions"
        assert httpx.get(actions, headers=supplier_headers()).status_code == 503
        ingested = fees("ingest", "--raw", str(FIXTURES / "raw"), "--data", str(data),
                        "--registry", str(REGISTRY))  # fmt: skip
        assert ingested.returncode == 0, ingested.stderr
        deadline = time.monotonic() + 10
        while httpx.get(f"{url}/readyz").status_code != 200 and time.monotonic() < deadline:
            time.sleep(0.05)
        assert httpx.get(actions, headers=supplier_headers()).status_code == 200


def workers_of(pid: int) -> list[int]:
    """The worker processes uvicorn started for a server (its other child is multiprocessing's
    resource tracker)."""
    children = Path(f"/proc/{pid}/task/{pid}/children").read_text().split()
    return [
        int(child)
        for child in children
        if b"spawn_main" in Path(f"/proc/{child}/cmdline").read_bytes()
    ]


def process_of(response: httpx.Response) -> str:
    """Which process answered: request ids are a per-process random prefix and a 12-digit
    counter (service.edge.front)."""
    return response.headers["x-request-id"][:-12]


BURST = 3


@pytest.mark.slow
def test_two_workers_serve_with_a_rate_limit_per_process(tmp_path: Path, published: Path) -> None:
    accounts = tmp_path / "accounts.json"
    limited = {"burst": BURST, "per_minute": 1}  # no refill within the test
    desk = {"exchanges": None, "rate_limit": limited, "keys": [account_key(KEYS["full"])]}
    accounts.write_text(json.dumps({"accounts": {"desk": desk}}), encoding="utf-8")
    with serving(published, accounts, "--workers", "2") as (url, pid):
        workers = workers_of(pid)
        assert len(workers) == 2
        for worker in workers:  # set by the parent before they started (service.serve)
            environ = Path(f"/proc/{worker}/environ").read_bytes().split(b"\0")
            assert b"DUCKDB_JE_MALLOC_CONF=dirty_decay_ms:1000,muzzy_decay_ms:0" in environ

        def call(_: int) -> httpx.Response:
            # A new connection each time, so the kernel hands it to either worker.
            return httpx.get(f"{url}/api/v1/suppliers/nasdaq/actions", headers=supplier_headers())

        answers: list[httpx.Response] = []
        with ThreadPoolExecutor(max_workers=8) as pool:
            for _ in range(20):  # until both workers have spent their bucket
                answers += pool.map(call, range(16))
                limited_by = {process_of(answer) for answer in answers if answer.status_code == 429}
                if len(limited_by) == 2:
                    break
    served = {process_of(answer) for answer in answers}
    passed = [process_of(answer) for answer in answers if answer.status_code == 200]
    assert len(served) == 2
    assert {process: passed.count(process) for process in served} == dict.fromkeys(served, BURST)
    assert {answer.status_code for answer in answers} == {200, 429}
