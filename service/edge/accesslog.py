"""The access log: one line per request, every request, written in batches.

A line holds what the logging module's JSON formatter wrote for it before: `time`, `level`,
`logger`, `message`, then the request's fields (method, route, raw path, status, duration,
request id, the key's fingerprint). Through the logging module (a `LogRecord`, the handler's
lock, the formatter, then a write and a flush per line) it cost about half of a cached
answer's throughput. Here a request only keeps its fields, as a tuple on a queue (0.2 µs in
process); the lines are rendered when they are written, a batch at a time, by one bytes
format with only the raw path escaped (the other fields are tokens, hex, numbers or our own
route templates), which makes the bytes `orjson.dumps` made of the same dict. What a line's
shape (method, route, path, status, key) makes of it is rendered once, as a template with a
slot for each of the rest, and so is what a duration makes of it; both are kept for the lines
after. In process a line costs 0.8 µs, kept, rendered and written to `/dev/null`, against 0.95
with its shape kept in four parts (#40 part 5), 1.7 rendering each line whole and 5.6 through
`orjson.dumps` (`docs/benchmarks.md`, #40 parts 5 and 6).

Lines are kept in memory and written when `BUFFER_LINES` are held, every `FLUSH_SECONDS` (a
thread), and when the server stops. So a clean stop (SIGTERM, SIGINT, the end of the app's
lifespan) loses nothing, and a crash (SIGKILL, a power cut) loses at most the lines of the
last `FLUSH_SECONDS`. On a pipe, a write is cut at whole lines into at most `PIPE_BUF` bytes,
which the kernel writes whole, so the lines of several workers sharing the pipe never mix; a
file is opened for appending, where each write lands whole too. A full batch is written by the
request that filled it: handed to a thread of its own, whose write would release the GIL, it
cost as much in GIL handoffs as the write took (no gain under load, 8 rounds; #40 part 6).

To a terminal, each line is written at once, as the human-readable message alone.
"""

import atexit
import os
import select
import stat
import threading
import time
from collections import deque
from pathlib import Path
from typing import Final

import orjson

from service import remembered

BUFFER_LINES: Final = 256  # about 100 KB of discovery requests' lines
FLUSH_SECONDS: Final = 1.0
LOGGER: Final = "service.access"  # the access lines' `logger` field, as documented (README)
LOGGER_BYTES: Final = LOGGER.encode()
REMEMBERED: Final = 4096  # line shapes and durations rendered, kept for the lines after
STDERR: Final = 2  # the descriptor, not `sys.stderr`: the process's own, whoever wraps it

# What a request keeps: the wall-clock time (ns), method, route template, raw path, status,
# duration (s), request id and the key's fingerprint (None without a valid key). The path, the
# duration and the id are turned into text when the line is rendered, a batch at a time, so a
# request does no more than keep them (`docs/benchmarks.md`, #40 parts 4 and 5).
Fields = tuple[int, str, str, bytes, int, float, bytes, str | None]


class AccessLog:
    def __init__(self, fd: int, *, owned: bool = False) -> None:
        self._fd, self._owned = fd, owned  # an owned descriptor is closed by `stop`
        self._terminal = os.isatty(fd)
        mode = os.fstat(fd).st_mode
        self._chunk = select.PIPE_BUF if stat.S_ISFIFO(mode) or stat.S_ISSOCK(mode) else None
        # A deque: its `append` and `popleft` are atomic, so a request appends without the lock
        # while a flush, in another thread, takes what is there.
        self._pending: deque[Fields] = deque()
        self._lock = threading.Lock()  # one flush at a time, so the batches keep their order
        self._second, self._seconds = -1, ""  # a second, and its time to the second
        self._millisecond, self._stamp = -1, b""  # a millisecond, and its time to it
        self._templates: dict[tuple[str, str, bytes, int, str | None], bytes] = {}
        self._durations: dict[int, tuple[bytes, bytes]] = {}
        self._stopped = threading.Event()
        self._flusher: threading.Thread | None = None

    @classmethod
    def open(cls, target: str) -> "AccessLog":
        """The log writing to `target`: "-" for standard error, else a file, appended to."""
        if target == "-":
            return cls(STDERR)
        flags = os.O_WRONLY | os.O_APPEND | os.O_CREAT
        return cls(os.open(Path(target), flags, 0o644), owned=True)

    def start(self) -> None:
        """Write what is held every `FLUSH_SECONDS`, and at the process's exit, until `stop`."""
        self._stopped.clear()
        self._flusher = threading.Thread(target=self._flush_often, name="access-log", daemon=True)
        self._flusher.start()
        atexit.register(self.flush)

    def stop(self) -> None:
        """Stop the timed writes, and write what is held (then close an owned file)."""
        self._stopped.set()
        if self._flusher is not None:
            self._flusher.join()
            self._flusher = None
        atexit.unregister(self.flush)
        self.flush()
        if self._owned:
            os.close(self._fd)

    def write(
        self,
        method: str,
        route: str,
        raw_path: bytes,
        status: int,
        seconds: float,
        request_id: bytes,
        key: str | None,
    ) -> None:
        """Keep one request's line (the raw path as the request line carried it: a decoded
        `%0A` could forge lines), to be rendered when it is written."""
        if self._terminal:
            path, duration_ms = raw_path.decode("latin-1"), _microseconds(seconds) / 1000
            message = _message(method, path, status, duration_ms, request_id.decode(), key)
            os.write(self._fd, f"INFO:     {message}\n".encode())
            return
        self._pending.append(
            (time.time_ns(), method, route, raw_path, status, seconds, request_id, key)
        )
        if len(self._pending) >= BUFFER_LINES:
            self.flush()

    def flush(self) -> None:
        with self._lock:
            pending = self._pending
            self._write(self._lines([pending.popleft() for _ in range(len(pending))]))

    def _lines(self, batch: list[Fields]) -> list[bytes]:
        """Each request's JSON line, the bytes `orjson.dumps` makes of the line's dict: what a
        request's shape makes of a line is rendered once, as a template (`_template`), and so
        is what its duration makes of it (`_duration`), since under load most lines repeat a
        few shapes and a few hundred durations. One loop for the batch: a call per line cost
        a tenth of a line."""
        templates, durations, lines = self._templates, self._durations, []
        for ns, method, route, raw_path, status, seconds, request_id, key in batch:
            template = templates.get((method, route, raw_path, status, key))
            if template is None:
                template = self._template(method, route, raw_path, status, key)
            microseconds = _microseconds(seconds)
            duration = durations.get(microseconds)
            if duration is None:
                duration = self._duration(microseconds)
            two_places, exact = duration
            lines.append(template % (self._time(ns), two_places, request_id, exact, request_id))
        return lines

    def _template(
        self, method: str, route: str, raw_path: bytes, status: int, key: str | None
    ) -> bytes:
        """The line a request's method, route, path, status and key make, as a bytes format
        with five slots: the time, the duration as the message writes it (two places), the
        request id, the duration as the field writes it (`repr`), the request id again: a
        line's format of five values rendered in 0.55 µs, where one of ten took 0.67."""
        path = orjson.dumps(raw_path.decode("latin-1"))  # quoted, escaped: a caller shapes it
        method_text, route_text, path, key_text, key_json = (
            part.replace(b"%", b"%%")  # a method token, say, may hold one: not a slot
            for part in (
                method.encode(),
                route.encode(),
                path,
                (key or "-").encode(),
                b"null" if key is None else b'"%s"' % key.encode(),
            )
        )
        template = (
            b'{"time":"%%s","level":"INFO","logger":"%s","message":"%s %s %d %%sms '
            b'request_id=%%s key=%s","method":"%s","route":"%s","path":%s,"status":%d,'
            b'"duration_ms":%%s,"request_id":"%%s","key":%s}\n'
        ) % (
            LOGGER_BYTES, method_text, path[1:-1], status, key_text,
            method_text, route_text, path, status, key_json,
        )  # fmt: skip
        # Only a short path's (`remembered.PATH_CHARS`): a template holds its path twice, and
        # 4,096 of 8 KB paths (a caller needs no key to send them) would have held 70 MB.
        if len(raw_path) <= remembered.PATH_CHARS:
            shape = (method, route, raw_path, status, key)
            remembered.keep(self._templates, shape, template, REMEMBERED)
        return template

    def _duration(self, microseconds: int) -> tuple[bytes, bytes]:
        """A duration as the message writes it (two places) and as the field does (`repr`)."""
        milliseconds = microseconds / 1000
        duration = (b"%.2f" % milliseconds, repr(milliseconds).encode())
        remembered.keep(self._durations, microseconds, duration, REMEMBERED)
        return duration

    def _write(self, lines: list[bytes]) -> None:
        """Write whole lines (the lock held, so the batches keep their order)."""
        if not lines:
            return
        if self._chunk is None:
            _write_all(self._fd, b"".join(lines))
            return
        batch: list[bytes] = []
        size = 0
        for line in lines:  # a line longer than PIPE_BUF goes alone
            if batch and size + len(line) > self._chunk:
                _write_all(self._fd, b"".join(batch))
                batch, size = [], 0
            batch.append(line)
            size += len(line)
        _write_all(self._fd, b"".join(batch))

    def _flush_often(self) -> None:
        while not self._stopped.wait(FLUSH_SECONDS):
            self.flush()

    def _time(self, ns: int) -> bytes:
        """The time as the logging module's `asctime` writes it (local time, milliseconds),
        made once a millisecond: under load several lines share one."""
        millisecond = ns // 1_000_000
        if millisecond != self._millisecond:
            second, rest = divmod(millisecond, 1000)
            if second != self._second:
                self._second = second
                self._seconds = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(second))
            self._millisecond, self._stamp = millisecond, f"{self._seconds},{rest:03d}".encode()
        return self._stamp


def _microseconds(seconds: float) -> int:
    """A duration to the microsecond: lines write it in milliseconds (`duration_ms`)."""
    return round(seconds * 1_000_000)


def _message(
    method: str, path: str, status: int, duration_ms: float, request_id: str, key: str | None
) -> str:
    """The human-readable summary, with `path` as the caller gives it (escaped for JSON)."""
    return f"{method} {path} {status} {duration_ms:.2f}ms request_id={request_id} key={key or '-'}"


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]
