"""The access log (`service.edge.accesslog`): a complete JSON line for every request, written in
batches; nothing lost on a clean stop, at most the last second on a crash; the lines of several
writers sharing a pipe or a file never mix. Then the real server, as `fees serve` runs it."""

import json
import os
import signal
import threading
import time
from pathlib import Path
from typing import Any

import httpx
import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ingest.pipeline import IngestResult
from service.edge import accesslog
from service.edge.accesslog import AccessLog
from tests.conftest import exchange_headers
from tests.servers import service_process

FIELDS = ("method", "route", "path", "status", "duration_ms", "request_id", "key")


def fields(number: int, key: str | None = "c48a01f49fd0") -> dict[str, Any]:
    """What a request hands the log."""
    return {
        "method": "GET",
        "route": "/exchanges",
        "raw_path": f"/api/v1/exchanges/?n={number}".encode(),
        "status": 200,
        "seconds": 0.000123,
        "request_id": f"{number:032x}".encode(),
        "key": key,
    }


def logged(request: dict[str, Any]) -> dict[str, Any]:
    """The fields its line carries."""
    return {
        "method": request["method"],
        "route": request["route"],
        "path": request["raw_path"].decode("latin-1"),
        "status": request["status"],
        "duration_ms": round(request["seconds"] * 1_000_000) / 1000,  # to the microsecond
        "request_id": request["request_id"].decode(),
        "key": request["key"],
    }


def lines_of(path: Path) -> list[dict[str, Any]]:
    """Every line of an access log file, each parsed (a torn line fails the test)."""
    return [json.loads(line) for line in path.read_text().splitlines()]


def test_a_line_is_one_json_object_with_every_field(tmp_path: Path) -> None:
    log = AccessLog.open(str(tmp_path / "access.log"))
    log.write(**fields(7, key=None))
    log.stop()
    [line] = lines_of(tmp_path / "access.log")
    assert line["level"] == "INFO" and line["logger"] == "service.access"
    assert {name: line[name] for name in FIELDS} == logged(fields(7, key=None))
    assert line["message"] == f"GET /api/v1/exchanges/?n=7 200 0.12ms request_id={7:032x} key=-"
    assert time.strptime(line["time"].split(",")[0], "%Y-%m-%d %H:%M:%S")


@settings(max_examples=300, deadline=None)
@given(
    path=st.text(st.characters(max_codepoint=0xFF), max_size=40),  # latin-1, as decoded
    seconds=st.floats(min_value=0, max_value=1e3),
    key=st.sampled_from([None, "c48a01f49fd0"]),
    status=st.sampled_from([200, 304, 404, 429, 500]),
    method=st.sampled_from(["GET", "HEAD", "%s%d"]),  # "%" is a token's character too
)
def test_a_line_is_the_bytes_orjson_makes_of_its_dict(
    path: str, seconds: float, key: str | None, status: int, method: str
) -> None:
    """The line is rendered by hand, for speed: any raw path (quotes, backslashes, control
    characters, latin-1, a `%` the line's template must not take for a slot) and any duration
    give exactly what `orjson.dumps` gives, the first time and when its parts are rendered
    already (the second request of the same shape, the third of the same duration)."""
    read_end, write_end = os.pipe()
    log = AccessLog(write_end)
    given = {"raw_path": path.encode("latin-1"), "seconds": seconds, "key": key, "status": status}
    given |= {"method": method}
    request = fields(5) | given
    requests = [request, request | {"seconds": seconds / 2}, fields(6) | {"seconds": seconds}]
    for each in requests:
        log.write(**each)
    log.flush()
    os.close(write_end)
    written = os.read(read_end, 65_536).splitlines(keepends=True)
    os.close(read_end)
    assert len(written) == len(requests)
    for line, each in zip(written, requests, strict=True):
        expected = {"time": json.loads(line)["time"], "level": "INFO", "logger": "service.access"}
        expected |= {"message": message(each)} | logged(each)
        assert line == orjson.dumps(expected, option=orjson.OPT_APPEND_NEWLINE)


def message(request: dict[str, Any]) -> str:
    """The message a request's line carries."""
    path, duration_ms = request["raw_path"].decode("latin-1"), logged(request)["duration_ms"]
    request_id, key = request["request_id"].decode(), request["key"] or "-"
    summary = f"{request['method']} {path} {request['status']} {duration_ms:.2f}ms"
    return f"{summary} request_id={request_id} key={key}"


def test_lines_are_held_until_the_buffer_fills_or_a_second_passes(tmp_path: Path) -> None:
    path = tmp_path / "access.log"
    log = AccessLog.open(str(path))
    log.write(**fields(0))
    assert path.read_text() == ""  # held
    written = 1
    while not path.read_text():  # the buffer fills: written at once, no thread involved
        log.write(**fields(written))
        written += 1
    assert len(lines_of(path)) == written == accesslog.BUFFER_LINES
    log.write(**fields(written))
    log.start()
    deadline = time.monotonic() + 3 * accesslog.FLUSH_SECONDS
    while len(lines_of(path)) == written and time.monotonic() < deadline:
        time.sleep(0.05)
    assert len(lines_of(path)) == written + 1  # the timed write
    log.stop()


def test_writers_sharing_a_pipe_never_mix_their_lines() -> None:
    """Two writers (as two workers would) on one pipe, each line longer than a few hundred
    bytes: every line read back is whole."""
    read_end, write_end = os.pipe()
    logs = [AccessLog(write_end), AccessLog(write_end)]
    long_path = "/api/v1/exchanges/?" + "x" * 300
    received = bytearray()
    reader = threading.Thread(target=lambda: _drain(read_end, received))
    reader.start()

    def write(log: AccessLog, tag: int) -> None:
        for number in range(3_000):
            log.write(**fields(number) | {"raw_path": f"{long_path}&w={tag}".encode()})
        log.flush()

    writers = [threading.Thread(target=write, args=(log, tag)) for tag, log in enumerate(logs)]
    for thread in writers:
        thread.start()
    for thread in writers:
        thread.join()
    os.close(write_end)
    reader.join()
    lines = [json.loads(line) for line in received.decode().splitlines()]
    assert len(lines) == 6_000
    assert sorted(line["path"][-1] for line in lines) == ["0"] * 3_000 + ["1"] * 3_000


def _drain(fd: int, into: bytearray) -> None:
    while chunk := os.read(fd, 65_536):
        into.extend(chunk)
    os.close(fd)


def test_to_a_terminal_each_line_is_written_at_once_as_its_message() -> None:
    leader, follower = os.openpty()
    log = AccessLog(follower)
    log.write(**fields(3))
    assert os.read(leader, 4096).decode().strip() == (
        f"INFO:     GET /api/v1/exchanges/?n=3 200 0.12ms request_id={3:032x} key=c48a01f49fd0"
    )
    os.close(leader)
    os.close(follower)


@pytest.mark.parametrize("workers", [1, 2])
def test_the_server_loses_no_line_on_a_clean_stop(
    fixture_version: IngestResult, accounts_file: Path, tmp_path: Path, workers: int
) -> None:
    path = tmp_path / "access.log"
    with _server(fixture_version, accounts_file, path, "--workers", str(workers)) as (url, _):
        ids = _requests(url, 300)
    # The context sent SIGTERM and waited: every line is there, once, whole.
    assert sorted(line["request_id"] for line in lines_of(path) if line["request_id"] in ids) == (
        sorted(ids)
    )


def test_a_crashed_server_loses_at_most_its_last_second(
    fixture_version: IngestResult, accounts_file: Path, tmp_path: Path
) -> None:
    path = tmp_path / "access.log"
    with _server(fixture_version, accounts_file, path) as (url, pid):
        before = _requests(url, 200)
        time.sleep(2 * accesslog.FLUSH_SECONDS)
        last = _requests(url, 50)
        os.kill(pid, signal.SIGKILL)
        time.sleep(0.5)
        lines = lines_of(path)  # every line whole
    found = {line["request_id"] for line in lines if line["route"] != "/healthz"}
    assert before <= found  # older than a second: written
    assert found - before <= last


def _server(fixture_version: IngestResult, accounts_file: Path, path: Path, *args: str) -> Any:
    return service_process(
        {
            "FEES_DATA_DIR": str(fixture_version.version_dir.parent.parent),
            "FEES_ACCOUNTS_FILE": str(accounts_file),
            "FEES_LOG_LEVEL": "info",
            "FEES_ACCESS_LOG": str(path),
        },
        *args,
    )


def _requests(url: str, count: int) -> set[str]:
    """`count` requests (no two alike, so none is the cache's); their request ids."""
    with httpx.Client(base_url=url, timeout=10) as http:
        return {
            http.get(f"/api/v1/exchanges/?n={number}", headers=exchange_headers()).headers[
                "x-request-id"
            ]
            for number in range(count)
        }


def test_a_long_path_is_logged_whole_and_its_line_not_kept() -> None:
    """The template of a line is kept for the lines after only for a short path: a caller can
    send thousands of 8 KB paths, and each is still logged whole."""
    read_end, write_end = os.pipe()
    log = AccessLog(write_end)
    long_path = "/api/v1/exchanges/" + "x" * 8_000
    for number in range(3):
        log.write(**fields(number) | {"raw_path": f"{long_path}{number}".encode()})
    log.write(**fields(3))
    log.flush()
    os.close(write_end)
    received = bytearray()
    _drain(read_end, received)
    lines = [json.loads(line) for line in received.decode().splitlines()]
    assert [line["path"] for line in lines[:3]] == [f"{long_path}{n}" for n in range(3)]
    assert len(log._templates) == 1  # only the short path's
