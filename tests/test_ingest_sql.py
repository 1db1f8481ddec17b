"""The SQL the ingest generates, pinned: every statement the ingest modules build from their
constants (the row rules, the derived columns, the sort, the index and rollups) is written out
in `tests/snapshots/ingest-sql.txt`, so a change to any piece shows in review as a change to
the statements it makes. After a deliberate change, rewrite the snapshot with
`FEES_UPDATE_SNAPSHOTS=1 pytest tests/test_ingest_sql.py` and read its diff."""

import os
import re
from pathlib import Path
from types import ModuleType

from ingest import changes, conflicts, lives, price_keys, rollups, rules, serving, stage, write

SNAPSHOT = Path(__file__).parent / "snapshots" / "ingest-sql.txt"
SQL = re.compile(r"\b(SELECT|CREATE|INSERT|COPY|ATTACH|DELETE|CASE|UPDATE)\b")


def label(key: object) -> str:
    """A constant's entry: a place in a tuple, a dict's key (a raw layout by its width)."""
    if isinstance(key, int):
        return f"[{key:02d}]"
    if isinstance(key, tuple):
        return f"[{len(key)} columns]"
    return f"[{key!r}]"


def statements(module: ModuleType) -> dict[str, str]:
    """The module's constants that hold SQL: strings, and the strings in tuples and dicts."""
    found = {}
    for name, value in vars(module).items():
        if not name.isupper():
            continue
        if isinstance(value, str):
            found[name] = value
        elif isinstance(value, (dict, tuple)):
            items = value.items() if isinstance(value, dict) else enumerate(value)
            found |= {f"{name}{label(key)}": text for key, text in items if isinstance(text, str)}
    return {name: text.strip() for name, text in found.items() if SQL.search(text)}


def rendered() -> str:
    """Each statement once, under its first holder: its module by the order of the pipeline,
    then a constant of its own before an entry of a table."""
    parts, seen = [], set()
    for module in (rules, stage, write, lives, conflicts, serving, price_keys, changes, rollups):
        for name, text in sorted(
            statements(module).items(), key=lambda item: ("[" in item[0], item[0])
        ):
            if text not in seen:
                seen.add(text)
                parts.append(f"-- {module.__name__}.{name}\n{text}\n")
    return "\n".join(parts)


def test_the_generated_sql_is_the_snapshot() -> None:
    if os.environ.get("FEES_UPDATE_SNAPSHOTS"):
        SNAPSHOT.write_text(rendered(), encoding="utf-8")
    assert rendered() == SNAPSHOT.read_text(encoding="utf-8")


def test_the_snapshot_holds_the_central_statements() -> None:
    names = set(re.findall(r"^-- (\S+)$", SNAPSHOT.read_text(encoding="utf-8"), re.MULTILINE))
    assert {"ingest.write.SORT_RECORDS", "ingest.stage.TRIMMED_ROWS"} <= names
    assert any(name.startswith("ingest.stage.CHECKS[") for name in names)
