"""Faults in a real ingest: SIGKILL at random moments, a full disk, an unwritable data directory.

The kill test draws its moments from a seed printed with every kill and named in every failure;
`INGEST_KILL_SEED=<seed> pytest -n 0 -s tests/test_ingest_faults.py` replays the same draw (as
fractions of the measured run, so a replay on a slower machine lands in the same phases).
"""

import hashlib
import os
import random
import re
import shutil
import signal
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import duckdb
import pytest

from ingest import layout, publish, synth
from ingest.layout import SERVING_FILE
from ingest.pipeline import run_ingest
from tests.conftest import FIXTURES, fee_row, write_raw

REPO = Path(__file__).parent.parent
REGISTRY = REPO / "data" / "exchanges.csv"  # every venue, so a version has many files to write
# Enough rows for a run of most of a second (0.7 s on 2 cores), so kills land in every phase.
ROWS = 20_000
ROWS_PER_FILE = 7_000
SPREAD_KILLS = 10  # at random moments over the whole run
TAIL_KILLS = 3  # at random moments while publishing, and as many after the switch
UNPUBLISHED = frozenset({"starting", "building", "publishing"})  # phases before the switch
KEEP = 3
SEED_VARIABLE = "INGEST_KILL_SEED"


def ingest_command(raw: Path, data: Path) -> list[str]:
    return [sys.executable, "-m", "ingest", "--raw", str(raw), "--data", str(data),
            "--registry", str(REGISTRY), "--keep", str(KEEP)]  # fmt: skip


def run_cli(
    raw: Path, data: Path, *, prefix: list[str] | None = None
) -> subprocess.CompletedProcess[str]:
    command = [*(prefix or []), *ingest_command(raw, data)]
    return subprocess.run(command, cwd=REPO, capture_output=True, text=True)


@pytest.fixture(scope="module")
def synth_raw(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """ROWS generated rows in three files, shared by the module (read-only)."""
    raw = tmp_path_factory.mktemp("synth")
    synth.generate(ROWS, raw, registry=REGISTRY, rows_per_file=ROWS_PER_FILE)
    return raw


# --- what a whole version looks like ------------------------------------------------------


def files_of(version: Path) -> list[Path]:
    return sorted(path for path in version.rglob("*") if path.is_file())


def file_hashes(version: Path) -> dict[str, str]:
    """Every file of a version by relative path, with its sha256: its contents, exactly."""
    return {
        path.relative_to(version).as_posix(): hashlib.sha256(path.read_bytes()).hexdigest()
        for path in files_of(version)
    }


@dataclass(frozen=True)
class Shape:
    """What a clean ingest of one input published: the oracle for every later version of it."""

    records: int
    venues: dict[str, int]
    layout: frozenset[str]


def shape_of(version: Path) -> Shape:
    manifest = layout.read_manifest(version)
    files = frozenset(path.relative_to(version).as_posix() for path in files_of(version))
    return Shape(manifest["records"], manifest["venues"], files)


def read_back(version: Path) -> tuple[dict[str, int], set[str], int]:
    """Records per venue and the source files, as DuckDB reads the Parquet files with hive
    partitioning; and the serving file's row count, as the service reads it."""
    con = duckdb.connect()
    pattern = str(version / "fees" / "**" / "*.parquet")
    scan = "read_parquet($pattern, hive_partitioning = true)"
    venues = con.execute(
        f"SELECT exchange, count(*) FROM {scan} GROUP BY exchange", {"pattern": pattern}
    ).fetchall()
    sources = con.execute(f"SELECT DISTINCT source_file FROM {scan}", {"pattern": pattern})
    source_files = {name for (name,) in sources.fetchall()}
    con.close()
    with duckdb.connect(str(version / SERVING_FILE), read_only=True) as serving:
        (serving_rows,) = serving.execute("SELECT count(*) FROM rows").fetchall()[0]
    return {str(code): int(count) for code, count in venues}, source_files, int(serving_rows)


def assert_whole(version: Path, shapes: dict[str, Shape], where: str) -> None:
    """The manifest's counts and files are what DuckDB reads, and match a clean ingest."""
    manifest = layout.read_manifest(version)
    venues, sources, serving_rows = read_back(version)
    assert venues == manifest["venues"], where
    assert sum(venues.values()) == manifest["records"] == serving_rows, where
    assert sources == {file["path"] for file in manifest["files"]}, where
    assert shape_of(version) == shapes[manifest["input_digest"]], where


# --- killing a real ingest --------------------------------------------------------------


@dataclass(frozen=True)
class Kill:
    after: str  # "start" (spawned), "manifest" (staged manifest seen) or "switch" (current moved)
    fraction: float  # of the span from that moment in an uninterrupted run
    delay: float  # seconds

    def __str__(self) -> str:
        return f"{self.delay:.3f} s after {self.after} ({self.fraction:.3f} of the span)"


@dataclass(frozen=True)
class Timeline:
    """Seconds of uninterrupted runs: the whole run; from the staged manifest to the switch
    (fsync, rename into place, switch); from the switch to the end (clean-up, prune, exit)."""

    end: float
    publishing: float
    after_switch: float

    def __str__(self) -> str:
        return (
            f"{self.end:.3f} s, {self.publishing:.3f} s from the staged manifest to the switch, "
            f"{self.after_switch:.3f} s from the switch to the end"
        )


def staged_manifest(data: Path) -> bool:
    return any((data / layout.VERSIONS).glob(f"{publish.STAGING_PREFIX}*/version/manifest.json"))


def switched(data: Path, previous: Path | None) -> Callable[[], bool]:
    return lambda: layout.current_version_dir(data) != previous


def wait_until(done: Callable[[], bool], process: subprocess.Popen[bytes]) -> float:
    """Poll every millisecond until `done` or the process ends (it may finish first); returns
    the time it came."""
    deadline = time.monotonic() + 60
    while not done() and process.poll() is None:
        assert time.monotonic() < deadline, "the ingest neither got there nor ended"
        time.sleep(0.001)
    return time.perf_counter()


def spawn(raw: Path, data: Path) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        ingest_command(raw, data), cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )


def timed_runs(first: Path, second: Path, data: Path) -> Timeline:
    """Two uninterrupted runs, which publish `first` then `second`. The first is watched for
    its phases; the second is only timed, since watching (a poll every millisecond) slows a
    run, and so do the cold caches of a test's first run."""
    process = spawn(first, data)
    manifest = wait_until(lambda: staged_manifest(data), process)
    switch = wait_until(switched(data, None), process)
    assert process.wait() == 0
    ended = time.perf_counter()
    started = time.perf_counter()
    assert spawn(second, data).wait() == 0
    return Timeline(time.perf_counter() - started, switch - manifest, ended - switch)


def draw_kills(seed: int, timeline: Timeline) -> list[Kill]:
    """SPREAD_KILLS moments over the whole run, one in each of as many equal slices so that
    no stretch is left out; then TAIL_KILLS timed from the staged manifest and as many from
    the switch, since those phases last milliseconds and spread moments would seldom hit
    them. After the switch, moments are drawn denser near it (a cubed uniform): clean-up
    and prune take its first milliseconds, the interpreter's exit the rest."""
    draw = random.Random(seed)
    spread = [(slot + draw.random()) / SPREAD_KILLS for slot in range(SPREAD_KILLS)]
    publishing = [draw.random() for _ in range(TAIL_KILLS)]
    after_switch = [draw.random() ** 3 for _ in range(TAIL_KILLS)]
    return (
        [Kill("start", share, share * timeline.end) for share in spread]
        + [Kill("manifest", share, share * timeline.publishing) for share in publishing]
        + [Kill("switch", share, share * timeline.after_switch) for share in after_switch]
    )


def kill_ingest(raw: Path, data: Path, kill: Kill, previous: Path) -> None:
    process = spawn(raw, data)
    try:
        if kill.after == "manifest":
            wait_until(lambda: staged_manifest(data), process)
        elif kill.after == "switch":
            wait_until(switched(data, previous), process)
        time.sleep(kill.delay)
        process.send_signal(signal.SIGKILL)  # no handler, finally or atexit can run
    finally:
        process.wait()


def landed(data: Path, previous: Path) -> str:
    """Which phase the kill cut short, judged from what it left behind."""
    if layout.current_version_dir(data) != previous:
        # `current` moved; the run was clearing its staging directory or pruning, or exiting
        unfinished = leftovers(data) or len(whole_versions(data)) > KEEP
        return "cleaning up" if unfinished else "exiting"
    entries = list((data / layout.VERSIONS).iterdir())
    staging = [path for path in entries if path.name.startswith(publish.STAGING_PREFIX)]
    renamed = [path for path in entries if path.name > previous.name]  # never made current
    if renamed or any((path / "version" / layout.MANIFEST).exists() for path in staging):
        return "publishing"  # fsyncing, renaming into place or switching
    return "building" if staging else "starting"


def versions(data: Path) -> list[Path]:
    return sorted(path for path in (data / layout.VERSIONS).iterdir())


def whole_versions(data: Path) -> list[Path]:
    return [path for path in versions(data) if not path.name.startswith(".")]


def leftovers(data: Path) -> list[str]:
    """Dot-named entries but the lock: staging, pruning or pointer remnants of a killed run."""
    names = [path.name for path in data.iterdir()] + [path.name for path in versions(data)]
    return [name for name in names if name.startswith(".") and name != ".ingest.lock"]


def two_inputs(synth_raw: Path, root: Path) -> tuple[Path, Path]:
    """The synthetic rows, and the same with one row more: alternating them makes every run
    publish, over a previous version that shares almost all its records."""
    more = Path(shutil.copytree(synth_raw, root / "more"))
    write_raw(more / "extra.csv", [fee_row(fee_name="One more row")])
    return synth_raw, more


def kill_seed() -> int:
    # An environment variable, not a pytest option: the shared conftest is not this test's.
    chosen = os.environ.get(SEED_VARIABLE)
    return int(chosen) if chosen else random.SystemRandom().randrange(2**32)


def check_kill(
    data: Path, previous: Path, before: dict[str, str], shapes: dict[str, Shape], where: str
) -> None:
    """After a kill: `current` is a whole version (the previous one or the new one), the
    previous version is byte for byte what it was, and every version on disk is whole."""
    assert layout.current_version_dir(data) in whole_versions(data), where
    assert file_hashes(previous) == before, where
    for version in whole_versions(data):
        assert_whole(version, shapes, where)


def kill_and_rerun(data: Path, raw: Path, kill: Kill, shapes: dict[str, Shape], where: str) -> str:
    """Kill an ingest of `raw`, check what it left, rerun it; returns the phase it cut short."""
    previous = layout.current_version_dir(data)
    assert previous is not None, where
    before = file_hashes(previous)
    kill_ingest(raw, data, kill, previous)
    phase = landed(data, previous)
    print(f"{where}: {phase}")
    check_kill(data, previous, before, shapes, where)
    again = run_ingest(raw, data, registry=REGISTRY, keep=KEEP)
    assert again.changed == (phase in UNPUBLISHED), where  # published unless the kill had
    assert layout.current_version_dir(data) == again.version_dir, where
    assert_whole(again.version_dir, shapes, where)
    assert leftovers(data) == [], where
    assert len(versions(data)) <= KEEP, where
    return phase


@pytest.mark.slow
def test_sigkill_at_random_moments_leaves_a_whole_current_and_a_working_rerun(
    synth_raw: Path, tmp_path: Path
) -> None:
    seed = kill_seed()
    data = tmp_path / "data"
    inputs = two_inputs(synth_raw, tmp_path)
    timeline = timed_runs(inputs[1], inputs[0], data)
    shapes = {
        layout.read_manifest(version)["input_digest"]: shape_of(version)
        for version in versions(data)
    }
    assert sorted(shape.records for shape in shapes.values()) == [ROWS, ROWS + 1]
    print(f"\n{SEED_VARIABLE}={seed}; an uninterrupted run: {timeline}")
    phases: Counter[str] = Counter()
    for number, kill in enumerate(draw_kills(seed, timeline)):
        where = f"{SEED_VARIABLE}={seed}, kill {number}: {kill}"
        raw = inputs[(number + 1) % 2]  # the input that is not current: every run publishes
        phases[kill_and_rerun(data, raw, kill, shapes, where)] += 1
    print(f"{SEED_VARIABLE}={seed}: kills by phase {dict(phases)}")
    # By construction (spread moments, and moments timed from the switch), whatever the seed.
    assert "building" in phases and set(phases) - UNPUBLISHED, f"{SEED_VARIABLE}={seed}: {phases}"


# --- a full disk, an unwritable data directory ------------------------------------------


@pytest.fixture
def small_fs(tmp_path: Path) -> Iterator[Path]:
    """A 4 MB filesystem of its own (a tmpfs): a disk that really fills, a mount that can
    really be read-only. Needs root, which is also when file modes stop nothing."""
    if os.geteuid() != 0:
        pytest.skip("mounting a tmpfs needs root")
    point = tmp_path / "fs"
    point.mkdir()
    mounted = mount("-t", "tmpfs", "-o", "size=4m", "tmpfs", str(point))
    if mounted:
        pytest.skip(f"cannot mount a tmpfs here: {mounted}")
    yield point
    subprocess.run(["umount", str(point)], check=True)


def mount(*args: str) -> str:
    """Run mount(8); returns why it failed, or '' when it did not."""
    try:
        done = subprocess.run(["mount", *args], capture_output=True, text=True)
    except FileNotFoundError:
        return "no mount command"
    if done.returncode == 0:
        return ""
    return done.stderr.strip() or f"exit status {done.returncode}"


# Root passes every permission check; without these capabilities it is held to file modes.
DROP_OVERRIDES = ["setpriv", "--bounding-set=-dac_override,-dac_read_search", "--"]


def held_to_modes() -> list[str]:
    """A command prefix under which the ingest obeys file modes: none for an ordinary user,
    setpriv without the overriding capabilities for root."""
    if os.geteuid() != 0:
        return []
    try:
        probe = subprocess.run([*DROP_OVERRIDES, "true"], capture_output=True, text=True)
    except FileNotFoundError:
        pytest.skip("root ignores file modes, and there is no setpriv to drop that")
    if probe.returncode != 0:
        pytest.skip(f"root ignores file modes, and setpriv cannot drop that: {probe.stderr}")
    return DROP_OVERRIDES


@contextmanager
def without_write_permission(path: Path) -> Iterator[None]:
    mode = path.stat().st_mode
    path.chmod(mode & ~0o222)
    try:
        yield
    finally:
        path.chmod(mode)


def state(data: Path) -> tuple[str, list[str], dict[str, str]]:
    """What a failed ingest must leave as it was: `current`, the versions, the current files."""
    current = layout.current_version_dir(data)
    assert current is not None
    names = [path.name for path in versions(data)]
    return os.readlink(data / layout.CURRENT), names, file_hashes(current)


def publish_small(data: Path) -> None:
    """A first version that fits the small filesystem (about 2 MB: the class index's table of
    every group is most of it)."""
    assert run_cli(FIXTURES / "raw", data).returncode == 0


def test_read_only_data_directory_fails_in_one_line_and_leaves_current(
    small_fs: Path, synth_raw: Path
) -> None:
    data = small_fs / "data"
    publish_small(data)
    before = state(data)
    remounted = mount("-o", "remount,ro", str(small_fs))
    if remounted:
        pytest.skip(f"cannot remount a tmpfs read-only here: {remounted}")
    failed = run_cli(synth_raw, data)
    assert failed.returncode == 1
    lock = re.escape(str(data / ".ingest.lock"))
    expected = f"ingest failed: {lock}: Read-only file system; nothing published\n"
    assert re.fullmatch(expected, failed.stderr), failed.stderr
    assert state(data) == before


def test_data_directory_without_write_permission_fails_at_the_switch_and_leaves_current(
    synth_raw: Path, tmp_path: Path
) -> None:
    """Only the top directory is unwritable (chmod), so the version is built in `versions/`
    and the run fails at the very end, creating the pointer that would replace `current`."""
    data = tmp_path / "data"
    publish_small(data)
    before = state(data)
    prefix = held_to_modes()
    with without_write_permission(data):
        failed = run_cli(synth_raw, data, prefix=prefix)
    assert failed.returncode == 1
    pointer = re.escape(str(data / publish.POINTER_PREFIX))
    expected = f"ingest failed: {pointer}[^/]+: Permission denied; nothing published\n"
    assert re.fullmatch(expected, failed.stderr), failed.stderr
    assert state(data) == before  # the version renamed into place was taken back out
    assert leftovers(data) == []


def test_full_disk_fails_in_one_line_and_leaves_current(small_fs: Path, synth_raw: Path) -> None:
    data = small_fs / "data"
    publish_small(data)
    before = state(data)
    failed = run_cli(synth_raw, data)  # over 10 MB at its peak: far more than is left
    assert failed.returncode == 1
    staged = re.escape(str(data / layout.VERSIONS / publish.STAGING_PREFIX))
    assert re.fullmatch(
        rf"ingest failed: {staged}[^/]+/version/\S+: No space left on device; nothing published\n",
        failed.stderr,
    ), failed.stderr
    assert state(data) == before
    assert leftovers(data) == []  # the failed run removed its own staging directory
