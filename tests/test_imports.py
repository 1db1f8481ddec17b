"""The two programs meet only at the dataset contract, and nothing imports in a circle.

`ingest/` writes versions and never imports `service/` (or `tools/`); `service/` reads them
through the contract modules alone (`ingest.layout`, `ingest.schema`, `ingest.storage`, and
`ingest.registry`, the venue registry `fees keys add` checks codes against), and those load no
other module of the ingest. Imports inside functions and `importlib.import_module("...")` count
as much as those at the top; what a module loads in the end, through others, is checked by
importing it in a fresh interpreter. The `fees` command line (`ingest.cli`) mounts its commands
from the `fees.commands` entry points and loads only the one that runs.
"""

import ast
import json
import subprocess
import sys
import tomllib
from collections.abc import Iterator
from importlib import metadata
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

ROOT = Path(__file__).parent.parent
PACKAGES = ("ingest", "service", "tools")
CONTRACT = {"ingest", "ingest.layout", "ingest.schema", "ingest.storage", "ingest.registry"}
WEB_STACK = {"uvicorn", "starlette", "redis"}


def modules() -> dict[str, Path]:
    found = {}
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            parts = path.relative_to(ROOT).with_suffix("").parts
            name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
            found[name] = path
    return found


def imported(path: Path, known: dict[str, Path]) -> Iterator[str]:
    """The project modules a file imports, wherever in it the import stands, and those it
    loads by name (`importlib.import_module("...")`, `__import__("...")`)."""
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            # `from ingest import layout` imports the module ingest.layout.
            names = [f"{node.module}.{alias.name}" for alias in node.names]
            names = [name if name in known else node.module for name in names]
        elif is_load_by_name(node):
            assert isinstance(node, ast.Call)
            names = [str(node.args[0].value)]  # type: ignore[attr-defined]
        else:
            continue
        yield from (name for name in names if name in known)


def is_load_by_name(node: ast.AST) -> bool:
    """`importlib.import_module("name")`, `import_module("name")` or `__import__("name")` with
    the name written out."""
    if not isinstance(node, ast.Call) or not node.args:
        return False
    function = node.func
    called = function.attr if isinstance(function, ast.Attribute) else getattr(function, "id", "")
    first = node.args[0]
    return called in ("import_module", "__import__") and (
        isinstance(first, ast.Constant) and isinstance(first.value, str)
    )


def graph() -> dict[str, set[str]]:
    known = modules()
    return {name: set(imported(path, known)) - {name} for name, path in known.items()}


def leaving(package: str) -> set[tuple[str, str]]:
    """(module, what it imports) for every import from `package` into another package."""
    return {
        (module, target)
        for module, targets in graph().items()
        if module.startswith(package)
        for target in targets
        if not target.startswith(package)
    }


def test_the_ingest_never_imports_the_service_or_the_tools() -> None:
    assert leaving("ingest") == set()


def test_the_service_imports_from_the_ingest_only_the_dataset_contract() -> None:
    assert {(module, target) for module, target in leaving("service")
            if target not in CONTRACT} == set()  # fmt: skip


def loaded_by(code: str) -> set[str]:
    """The modules a fresh interpreter holds after running `code` (from the project's root)."""
    report = "import atexit, json, sys\natexit.register(lambda: print(json.dumps([*sys.modules])))"
    done = subprocess.run(
        [sys.executable, "-c", f"{report}\n{code}"], cwd=ROOT, capture_output=True, text=True
    )
    return set(json.loads(done.stdout.strip().splitlines()[-1]))


@pytest.mark.parametrize("module", sorted(CONTRACT - {"ingest"}))
def test_a_contract_module_loads_no_other_module_of_the_ingest(module: str) -> None:
    loaded = loaded_by(f"import {module}")
    assert {name for name in loaded if name.split(".")[0] == "ingest"} <= CONTRACT
    assert {name.split(".")[0] for name in loaded} & ({"service"} | WEB_STACK) == set()


@pytest.mark.parametrize("command", ["ingest", "sql", "synth", "coverage"])
def test_a_data_command_runs_without_the_web_stack(command: str) -> None:
    """`fees ingest --help` once loaded uvicorn, Starlette and Redis (the `fees` entry point
    built every command's parser); now only the command that runs is loaded."""
    loaded = loaded_by(f"from ingest.cli import fees\nfees([{command!r}, '--help'])")
    assert "ingest.cli" in loaded
    assert {name.split(".")[0] for name in loaded} & ({"service"} | WEB_STACK) == set()


def test_every_command_is_declared_once_as_an_entry_point_of_its_own_program() -> None:
    declared = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    commands = declared["entry-points"]["fees.commands"]
    assert declared["scripts"]["fees"] == "ingest.cli:fees"
    assert {name: module.split(".")[0] for name, module in commands.items()} == {
        "ingest": "ingest", "sql": "ingest", "synth": "ingest", "coverage": "ingest",
        "serve": "service", "keys": "service", "price": "service",
    }  # fmt: skip
    # As installed: what `fees` mounts.
    installed = metadata.entry_points(group="fees.commands")
    assert {point.name: point.value for point in installed} == commands


def test_no_module_imports_itself_through_others() -> None:
    edges = graph()
    circles: list[list[str]] = []

    def visit(module: str, path: list[str], done: set[str]) -> None:
        for target in sorted(edges[module]):
            if target in path:
                circles.append([*path[path.index(target) :], target])
            elif target not in done:
                visit(target, [*path, target], done)
        done.add(module)

    done: set[str] = set()
    for module in sorted(edges):
        if module not in done:
            visit(module, [module], done)
    assert circles == []


def installed_with(requirements: list[str]) -> set[str]:
    """The top-level import names the distributions `requirements` install, with everything they
    in turn require on this interpreter (as installed here)."""
    wanted = [Requirement(text) for text in requirements]
    names: set[str] = set()
    while wanted:
        requirement = wanted.pop()
        if requirement.marker and not requirement.marker.evaluate({"extra": ""}):
            continue
        if canonicalize_name(requirement.name) not in names:
            names.add(canonicalize_name(requirement.name))
            wanted += [Requirement(text) for text in metadata.requires(requirement.name) or []]
    return {
        module
        for module, distributions in metadata.packages_distributions().items()
        if any(canonicalize_name(distribution) in names for distribution in distributions)
    }


def test_the_shipped_packages_need_no_development_dependency() -> None:
    """`pip install .` without the dev extras must import and serve: no module of `ingest` or
    `service` may import what only the dev extras install (as `httpx`, which a benchmark once
    imported from `service`)."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    allowed = installed_with(project["dependencies"]) | set(sys.stdlib_module_names) | {*PACKAGES}
    needed = set()
    for package in ("ingest", "service"):
        for path in (ROOT / package).rglob("*.py"):
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
                if isinstance(node, ast.Import):
                    needed |= {(path.name, alias.name.split(".")[0]) for alias in node.names}
                elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                    needed.add((path.name, node.module.split(".")[0]))
    assert {(file, module) for file, module in needed if module not in allowed} == set()


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        ("from ingest import layout, publish", {"ingest.layout", "ingest.publish"}),
        ("from ingest.layout import TEXT_ID", {"ingest.layout"}),
        ("import ingest.schema", {"ingest.schema"}),
        ("def f():\n    from service.keys import run", {"service.keys"}),
        ("import importlib\nimportlib.import_module('ingest.query')", {"ingest.query"}),
        ("__import__('service.serve')", {"service.serve"}),
        ("import json", set()),
    ],
)
def test_every_form_of_import_is_seen(tmp_path: Path, source: str, expected: set[str]) -> None:
    path = tmp_path / "probe.py"
    path.write_text(source + "\n", encoding="utf-8")
    assert set(imported(path, modules())) == expected


# `service/` in wings (docs/architecture.md): each may import the shared modules at the top of
# `service/` and the wings listed, never the others. The shared modules import no wing.
WINGS = {
    "dataset": set(),
    "edge": {"dataset"},
    "endpoints": {"dataset", "edge"},
    "pages": set(),
}
SHARED = {"accounts", "errors", "memory", "numbers", "responses", "settings", "urls", "vocabulary"}


def wing_of(module: str) -> str | None:
    parts = module.split(".")
    return parts[1] if parts[0] == "service" and len(parts) > 2 else None


def reached(module: str, edges: dict[str, set[str]]) -> set[str]:
    """Every project module `module` imports, directly or through others."""
    seen: set[str] = set()
    todo = [module]
    while todo:
        for target in edges[todo.pop()] - seen:
            seen.add(target)
            todo.append(target)
    return seen


def test_each_wing_of_the_service_imports_only_the_wings_below_it() -> None:
    edges = graph()
    crossing = {
        (module, target)
        for module in edges
        if (wing := wing_of(module)) is not None
        for target in reached(module, edges)
        if wing_of(target) not in (None, wing, *WINGS[wing])
    }
    assert crossing == set()


def test_the_shared_modules_and_settings_import_no_wing() -> None:
    edges = graph()
    assert {f"service.{name}" for name in SHARED} <= set(edges)
    assert {
        (name, target)
        for name in SHARED
        for target in reached(f"service.{name}", edges)
        if wing_of(target) is not None
    } == set()
    assert reached("service.settings", edges) - CONTRACT == {"service.numbers"}
