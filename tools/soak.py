"""`make soak`: the service under sustained load over every endpoint and a mix of keys, while a
new dataset version is published every 30 s; nothing may fail and memory must not creep.

The service runs as `python -m service serve` does, over synthetic records (`--rows`, made once
and cached under `.soak/`). wrk drives it for `--seconds` (default 300) at `--connections` (64)
from a Lua script that walks a list of requests: every endpoint of both families, the OpenAPI
document and the probes, under a realistic mix of keys (an all-venue key, a key scoped to two
venues asking for venues in and out of its scope, a key at the default rate limit, unknown and
revoked keys). Each request carries its expected status in its `X-Request-ID`, which the service
echoes, so the script checks every answer against what that request should get: an error is a
socket error, a time-out or any answer whose status is not the expected one (a 5xx included).
Meanwhile the ingest publishes the records and the records plus an extra file in turn, every
`--publish-every` seconds. Reported: requests, errors, p50/p99 latency, publishes, and the
server's resident memory after the warm-up (the first publish) and at the end.
"""

import argparse
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from subprocess import Popen

import httpx

from ingest.pipeline import run_ingest
from ingest.synth import generate
from service.accounts import key_entry
from tools.bench import Case, parse_load, require_wrk, rss_mb, serving, socket_errors
from tools.bench_ingest import machine, write_section

ROOT = Path(".soak")
FULL, SCOPED, METERED = "soak-full-key-0123456789", "soak-scoped-key-0123456789", "soak-meter-key"
REVOKED, UNKNOWN = "soak-revoked-key-0123456789", "soak-unknown-key-0123456789"
SCOPE = ["nasdaq", "nyse"]  # the scoped key's venues
HIDDEN = "box"  # a venue outside its scope
UNLIMITED = {"burst": 10**9, "per_minute": 10**9}
MEMORY_GROWTH = 0.10  # the most the server's memory may grow from warm-up to the end

# wrk's script. Each thread reads the request list (path, headers, expected statuses), starts at
# its own place in it and walks it in turn; every answer is checked against the statuses its
# request id names. Counters are globals, so `done` can read them from each thread.
LUA = r"""
local threads = {}
function setup(thread)
    thread:set("id", #threads + 1)
    table.insert(threads, thread)
end

function init(args)
    requests, counter, mismatches, samples = {}, 0, 0, ""
    statuses = {}
    local number = 0
    for line in io.lines(args[1]) do
        local path, header_text, expected = line:match("^([^\t]*)\t([^\t]*)\t([^\t]*)$")
        number = number + 1
        local headers = {}
        for pair in header_text:gmatch("[^|]+") do
            local name, value = pair:match("^(.-): (.*)$")
            headers[name] = value
        end
        headers["X-Request-ID"] = "s" .. expected .. "-" .. number
        requests[number] = wrk.format("GET", path, headers)
    end
    counter = (id * 7919) % #requests
end

function request()
    counter = counter % #requests + 1
    return requests[counter]
end

function response(status, headers, body)
    local given = headers["x-request-id"] or ""
    local expected = given:match("^s([%d%.]+)%-") or ""
    local ok = false
    for code in expected:gmatch("%d+") do
        if tonumber(code) == status then ok = true end
    end
    if not ok then
        mismatches = mismatches + 1
        if #samples < 1500 then samples = samples .. status .. " " .. given .. "\n" end
    end
    local name = "status_" .. status
    _G[name] = (_G[name] or 0) + 1
end

CODES = {200, 400, 401, 403, 404, 422, 429, 500, 503}

function done(summary, latency, requests)
    local total, seen = 0, {}
    for _, thread in ipairs(threads) do
        total = total + thread:get("mismatches")
        io.write(thread:get("samples"))
        for _, code in ipairs(CODES) do
            seen[code] = (seen[code] or 0) + (thread:get("status_" .. code) or 0)
        end
    end
    io.write(string.format("mismatches: %d\n", total))
    for _, code in ipairs(CODES) do
        io.write(string.format("status %d: %d\n", code, seen[code]))
    end
end
"""


@dataclass(frozen=True)
class Call:
    path: str
    headers: dict[str, str]
    expected: tuple[int, ...]

    def line(self) -> str:
        headers = "|".join(f"{name}: {value}" for name, value in self.headers.items())
        return f"{self.path}\t{headers}\t{'.'.join(map(str, self.expected))}"


def bearer(key: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {key}"}


def header(key: str) -> dict[str, str]:
    return {"x-service-api-access-key": key}


RESULTS = "/api/v1/fee-schedule-results/"


def calls(record_id: str, version_id: str) -> list[Call]:
    """The request mix: about three in four with the all-venue key, the rest spread over the
    scoped, metered, unknown and revoked keys."""
    discovery = ["participants", "fee-categories", "actions", "fee-types", "date-ranges"]
    window = "start_date=2021-01-01&end_date=2023-06-30"
    full: list[Call] = []
    for venue in ("nasdaq", "box", "cboe_edgx", "iex"):
        full += [
            Call(f"/api/v1/suppliers/{venue}/{name}", bearer(FULL), (200,)) for name in discovery
        ]
        full += [
            Call(f"/api/v1/suppliers/{venue}/actions?{window}", bearer(FULL), (200,)),
            Call(f"/api/v1/suppliers/{venue}/data?limit=50&{window}", bearer(FULL), (200,)),
            Call(f"/api/v1/suppliers/{venue}/data/count?fee_type=option", bearer(FULL), (200,)),
            Call(f"/api/v1/exchanges/{venue}", header(FULL), (200,)),
            Call(f"{RESULTS}?exchange_name={venue}&fee_category=market_data_fees", header(FULL),
                 (200,)),
        ]  # fmt: skip
    full += [
        Call("/api/v1/exchanges/", header(FULL), (200,)),
        Call(f"{RESULTS}?page_size=20", header(FULL), (200,)),
        Call(f"{RESULTS}?page_size=50&page_number=400&order_by=amount", header(FULL), (200,)),
        Call(f"{RESULTS}?fee_action=take&latest_only=true&include_source=true", header(FULL),
             (200,)),
        Call(f"{RESULTS}filters", header(FULL), (200,)),
        Call(f"{RESULTS}versions/{version_id}?page_size=10", header(FULL), (200,)),
        Call(f"{RESULTS}{record_id}", header(FULL), (200,)),
        Call(f"{RESULTS}?exchange_name=iex&fee_category=participant_fee&format=csv",
             header(FULL), (200,)),
        Call("/api/v1/suppliers/nasdaq/data?start_date=2024-13-01", bearer(FULL), (400,)),
        Call(f"{RESULTS}?page_size=500", header(FULL), (422,)),
        Call("/api/v1/suppliers/nowhere/actions", bearer(FULL), (404,)),
        Call("/api/v1/openapi.json", {}, (200,)),
        Call("/readyz", {}, (200,)),
        Call("/healthz", {}, (200,)),
    ]  # fmt: skip
    others = [
        Call(f"/api/v1/suppliers/{SCOPE[0]}/actions", bearer(SCOPED), (200,)),
        Call(f"/api/v1/suppliers/{SCOPE[1]}/data?limit=20", bearer(SCOPED), (200,)),
        Call(f"/api/v1/suppliers/{HIDDEN}/actions", bearer(SCOPED), (404,)),
        Call("/api/v1/exchanges/", header(SCOPED), (200,)),
        Call(f"/api/v1/exchanges/{HIDDEN}", header(SCOPED), (403,)),
        Call(f"{RESULTS}?exchange_name={HIDDEN}", header(SCOPED), (403,)),
        Call(f"{RESULTS}?page_size=20", header(SCOPED), (200,)),
        # The default limit (burst 300, 60 a minute): answered until the bucket runs dry.
        Call("/api/v1/suppliers/nasdaq/fee-types", bearer(METERED), (200, 429)),
        Call(f"{RESULTS}filters", header(METERED), (200, 429)),
        Call("/api/v1/suppliers/nasdaq/actions", bearer(UNKNOWN), (401,)),
        Call("/api/v1/exchanges/", header(REVOKED), (401,)),
    ]
    return full + others


def accounts_document() -> dict[str, object]:
    def key(value: str, *, revoked: bool = False) -> dict[str, object]:
        when = "2026-11-24T00:00:00+00:00"
        return key_entry(value, when, when if revoked else None)

    return {
        "accounts": {
            "desk": {"exchanges": None, "rate_limit": UNLIMITED, "keys": [key(FULL)]},
            "scoped": {"exchanges": SCOPE, "rate_limit": UNLIMITED, "keys": [key(SCOPED)]},
            "metered": {"exchanges": None, "keys": [key(METERED)]},
            "former": {"exchanges": None, "keys": [key(REVOKED, revoked=True)]},
        }
    }


def inputs(rows: int, registry: Path, root: Path = ROOT) -> tuple[Path, Path]:
    """Two raw directories, made once under `root`: the synthetic records, and the same plus an
    extra file, so that publishing them in turn makes a new version every time."""
    base, more = root / f"raw-{rows}", root / f"raw-{rows}-more"
    if not (more / ".complete").exists():
        shutil.rmtree(base, ignore_errors=True)
        shutil.rmtree(more, ignore_errors=True)
        generate(rows, base, registry=registry)
        shutil.copytree(base, more)
        generate(max(1, rows // 100), more / "extra", registry=registry, seed=7)
        (more / ".complete").touch()
    return base, more


@dataclass(frozen=True)
class Traffic:
    """What wrk saw: an error is a wrong status, a socket error or a time-out."""

    requests: int
    errors: int
    statuses: dict[int, int]
    p50_ms: float
    p99_ms: float
    wrong: tuple[str, ...]  # the first wrong answers, each "status request-id"
    sockets: str  # wrk's line on socket errors and time-outs, when it printed one


def traffic(output: str) -> Traffic:
    load = parse_load(output)
    sockets = re.search(r"Socket errors: (.*)", output)
    return Traffic(
        requests=_count(r"(\d+) requests in", output),
        errors=_count(r"mismatches: (\d+)", output) + socket_errors(output),
        statuses=_statuses(output),
        p50_ms=load.p50_ms,
        p99_ms=load.p99_ms,
        wrong=tuple(re.findall(r"^\d{3} s[\d.]+-\d+$", output, re.MULTILINE)),
        sockets=sockets.group(1) if sockets else "",
    )


@dataclass(frozen=True)
class Result:
    seconds: int
    connections: int
    rows: int
    publish_every: float
    traffic: Traffic
    publishes: int
    publish_seconds: list[float]
    rss_ready_mb: int
    rss_start_mb: int
    rss_end_mb: int

    @property
    def growth(self) -> float:
        return self.rss_end_mb / self.rss_start_mb - 1


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tools.soak", description=__doc__)
    parser.add_argument("--seconds", type=int, default=300)
    parser.add_argument("--connections", type=int, default=64)
    parser.add_argument("--rows", type=int, default=100_000)
    parser.add_argument("--publish-every", type=float, default=30.0)
    parser.add_argument("--port", type=int, default=8788)
    parser.add_argument("--registry", type=Path, default=Path("data/exchanges.csv"))
    parser.add_argument("--doc", type=Path, default=Path("docs/benchmarks.md"))
    args = parser.parse_args(argv)
    require_wrk("make soak")
    base, more = inputs(args.rows, args.registry)
    data = ROOT / "data"
    shutil.rmtree(data, ignore_errors=True)
    run_ingest(base, data, registry=args.registry)
    accounts = ROOT / "accounts.json"
    accounts.write_text(json.dumps(accounts_document()), encoding="utf-8")
    env = {
        **os.environ,
        "FEES_DATA_DIR": str(data),
        "FEES_ACCOUNTS_FILE": str(accounts),
        "FEES_LOG_LEVEL": "warning",
    }
    command = [sys.executable, "-m", "service", "serve", "--port", str(args.port)]
    probe = Case("ready", "/readyz", {})
    with serving(command, args.port, probe, env) as (server, _):
        result = soak(args, server, base, more, data)
    table = report(result)
    print(table)
    write_section(args.doc, f"Machine: {machine()}\n\n{table}", marker="soak",
                  title="Soak (`make soak`)")  # fmt: skip
    ok = result.traffic.errors == 0 and result.growth <= MEMORY_GROWTH
    return 0 if ok else 1


def soak(
    args: argparse.Namespace, server: subprocess.Popen[bytes], base: Path, more: Path, data: Path
) -> Result:
    url = f"http://127.0.0.1:{args.port}"
    rss_ready, _ = rss_mb(server)
    with driving(url, mix(url), args.seconds, args.connections) as wrk:
        publishes, rss_start = publish_while(wrk, args, server, base, more, data)
        output, _ = wrk.communicate()
    rss_end, _ = rss_mb(server)
    return Result(
        seconds=args.seconds,
        connections=args.connections,
        rows=args.rows,
        publish_every=args.publish_every,
        traffic=traffic(output),
        publishes=len(publishes),
        publish_seconds=publishes,
        rss_ready_mb=rss_ready,
        rss_start_mb=rss_start,
        rss_end_mb=rss_end,
    )


def mix(url: str) -> list[Call]:
    """The request mix over the version `url` serves (its first record and version id)."""
    page = httpx.get(f"{url}{RESULTS}?page_size=1", headers=header(FULL)).json()["data"][0]
    return calls(page["record_id"], page["version_id"])


@contextmanager
def driving(url: str, mix: list[Call], seconds: int, connections: int) -> Iterator[Popen[str]]:
    """wrk walking the mix against `url` for `seconds` (its output on stdout, read with
    `communicate` and `traffic`)."""
    with tempfile.TemporaryDirectory() as scratch:
        listing, script = Path(scratch) / "calls.tsv", Path(scratch) / "soak.lua"
        listing.write_text("".join(call.line() + "\n" for call in mix), encoding="utf-8")
        script.write_text(LUA, encoding="utf-8")
        wrk = subprocess.Popen(
            ["wrk", "-t2", f"-c{connections}", f"-d{seconds}s", "--latency",
             "--timeout", "10s", "-s", str(script), url, "--", str(listing)],
            stdout=subprocess.PIPE, text=True,
        )  # fmt: skip
        try:
            yield wrk
        finally:
            if wrk.poll() is None:
                wrk.kill()
                wrk.wait()


def publish_while(
    wrk: subprocess.Popen[str],
    args: argparse.Namespace,
    server: subprocess.Popen[bytes],
    base: Path,
    more: Path,
    data: Path,
) -> tuple[list[float], int]:
    """Publish the two inputs in turn every `publish_every` seconds while wrk runs; returns each
    publish's duration and the server's memory just before the second (after a full cycle of
    warm-up: every endpoint answered, one version switch done)."""
    durations: list[float] = []
    rss_start = 0
    started = time.monotonic()
    while True:
        due = started + args.publish_every * (len(durations) + 1)
        while time.monotonic() < due:
            if wrk.poll() is not None:
                return durations, rss_start or rss_mb(server)[0]
            time.sleep(0.2)
        if len(durations) == 1:
            rss_start, _ = rss_mb(server)
        begun = time.monotonic()
        raw = more if len(durations) % 2 == 0 else base
        subprocess.run(
            [sys.executable, "-m", "ingest", "--raw", str(raw), "--data", str(data),
             "--registry", str(args.registry)],
            check=True, stdout=subprocess.DEVNULL,
        )  # fmt: skip
        durations.append(time.monotonic() - begun)


def _count(pattern: str, output: str) -> int:
    found = re.search(pattern, output)
    if found is None:
        raise SystemExit(f"wrk printed nothing like {pattern!r}:\n{output}")
    return int(found.group(1))


def _statuses(output: str) -> dict[int, int]:
    found = {}
    for line in output.splitlines():
        if line.startswith("status "):
            code, count = line.removeprefix("status ").split(":")
            if int(count):
                found[int(code)] = int(count)
    return found


def report(result: Result) -> str:
    grown = "met" if result.growth <= MEMORY_GROWTH else "not met"
    publishes = (
        f"{result.publishes} (each {statistics.median(result.publish_seconds):.1f} s, median)"
        if result.publish_seconds
        else "0"
    )
    return "\n".join(
        [
            f"{result.seconds} s at {result.connections} connections over {result.rows:,} "
            f"synthetic records, a version published every {result.publish_every:g} s.",
            "",
            "| measure | result | target | met |",
            "|---|---|---|---|",
            *traffic_rows(result.traffic, result.seconds),
            f"| versions published during the run | {publishes} | | |",
            f"| server RSS: ready / after warm-up / end | {result.rss_ready_mb} / "
            f"{result.rss_start_mb} / {result.rss_end_mb} MB | end ≤ warm-up + 10% "
            f"({result.growth:+.1%}) | {grown} |",
        ]
    )


def traffic_rows(seen: Traffic, seconds: int) -> list[str]:
    """The report's rows on what wrk saw (a table of measure, result, target, met)."""
    met = "met" if seen.errors == 0 else "not met"
    found = "; ".join(filter(None, [seen.sockets, ", ".join(seen.wrong[:5])]))
    statuses = ", ".join(f"{code}: {count:,}" for code, count in sorted(seen.statuses.items()))
    return [
        f"| requests | {seen.requests:,} ({seen.requests / seconds:,.0f}/s) | | |",
        f"| answers by status | {statuses} | each as its request expects | |",
        f"| errors (wrong status, socket errors, time-outs) | {seen.errors}"
        f"{f' ({found})' if found else ''} | 0 | {met} |",
        f"| latency p50 / p99 | {seen.p50_ms:.2f} / {seen.p99_ms:.2f} ms | | |",
    ]


if __name__ == "__main__":
    sys.exit(main())
