"""The two programs meet only at the dataset contract, and nothing imports in a circle.

`ingest/` writes versions and never imports `service/` (or `tools/`); `service/` reads them
through the contract modules alone (`ingest.layout`, `ingest.schema`, `ingest.storage`). The
one exception is the command line, which mounts the data commands and checks venue codes
against the registry. Imports inside functions count as much as those at the top.
"""

import ast
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
CONTRACT = {"ingest.layout", "ingest.schema", "ingest.storage"}
# The `fees` command line: the data commands (`ingest.cli`) and the registry its `keys add`
# checks codes against.
COMMAND_LINE = {"service.cli": CONTRACT | {"ingest.cli", "ingest.registry", "ingest.errors"}}


def modules() -> dict[str, Path]:
    found = {}
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            parts = path.relative_to(ROOT).with_suffix("").parts
            name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
            found[name] = path
    return found


def imported(path: Path, known: dict[str, Path]) -> Iterator[str]:
    """The project modules a file imports, wherever in it the import stands."""
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            # `from ingest import layout` imports the module ingest.layout.
            names = [f"{node.module}.{alias.name}" for alias in node.names]
            names = [name if name in known else node.module for name in names]
        else:
            continue
        yield from (name for name in names if name in known)


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
    allowed = {(module, target) for module, target in leaving("service")
               if target in COMMAND_LINE.get(module, CONTRACT)}  # fmt: skip
    assert leaving("service") - allowed == set()


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
        ("def f():\n    from service.cli import main", {"service.cli"}),
        ("import json", set()),
    ],
)
def test_every_form_of_import_is_seen(tmp_path: Path, source: str, expected: set[str]) -> None:
    path = tmp_path / "probe.py"
    path.write_text(source + "\n", encoding="utf-8")
    assert set(imported(path, modules())) == expected
