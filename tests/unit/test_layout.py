"""The package's shape: no import cycles between modules (counting imports inside functions and
under TYPE_CHECKING), stages that only import the stages below them, and the leaderboard's rooms
that keep to their own."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[2] / "webui"

# Each stage may import itself and the stages listed after it (lower layers), never one before it.
LAYERS = [
    {"chat", "__main__"},
    {"server"},
    {"ui", "api"},
    {"arena"},
    {"services", "judge", "replay"},
    {"leaderboard", "access"},
    {"engine", "records", "db"},
    {"models"},
    {"config", "errors", "types", "handoff", "progress", "__init__"},
]


def module_name(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def imports_of(path: Path, modules: set[str]) -> set[str]:
    """Every webui module `path` imports, anywhere in the file."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    me = module_name(path)
    package = me if path.name == "__init__.py" else me.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                base = ".".join(
                    package.split(".")[: len(package.split(".")) - node.level + 1] + ([base] if base else [])
                )
            # `from pkg import mod` imports pkg.mod; `from mod import name` imports mod
            names = [f"{base}.{a.name}" if f"{base}.{a.name}" in modules else base for a in node.names]
        else:
            continue
        for name in names:
            while name and name not in modules:
                name = name.rpartition(".")[0]
            if name and name != me:
                found.add(name)
    return found


def graph() -> dict[str, set[str]]:
    files = {module_name(p): p for p in PACKAGE.rglob("*.py")}
    # A compiled module (setup.py builds it from C; its .pyi stub names it) is a module of its own,
    # importing nothing of the package, not its package's __init__.
    modules = set(files) | {module_name(p) for p in PACKAGE.rglob("*.pyi")}
    return {name: imports_of(path, modules) for name, path in files.items()}


def find_cycle(edges: dict[str, set[str]]) -> list[str] | None:
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        stack.append(node)
        for nxt in sorted(edges.get(node, ())):
            if state.get(nxt) == 1:
                return [*stack[stack.index(nxt) :], nxt]
            if nxt not in state and (cycle := visit(nxt)):
                return cycle
        stack.pop()
        state[node] = 2
        return None

    for node in sorted(edges):
        if node not in state and (cycle := visit(node)):
            return cycle
    return None


def stage(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "__init__"


def layer(module: str) -> int:
    name = stage(module)
    for i, members in enumerate(LAYERS):
        if name in members:
            return i
    raise AssertionError(f"{module}: stage {name!r} is not placed in LAYERS")


def test_the_cycle_finder_finds_a_cycle() -> None:
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": set()}) is None


def test_no_module_imports_itself_back() -> None:
    cycle = find_cycle(graph())
    assert cycle is None, "import cycle: " + " -> ".join(cycle or [])


def test_stages_import_only_the_stages_below() -> None:
    upward = sorted(
        f"{a} imports {b}" for a, deps in graph().items() for b in deps if stage(a) != stage(b) and layer(b) < layer(a)
    )
    assert not upward, "\n".join(upward)


@pytest.mark.parametrize("module", ["webui.records.storage", "webui.records.events"])
def test_records_do_not_depend_on_the_leaderboard(module: str) -> None:
    assert not [m for m in graph()[module] if m.startswith("webui.leaderboard")]


# The leaderboard's rooms (webui/leaderboard/__init__.py has the map): each may import itself and
# the rooms listed for it. `votes` and `stats` never import each other, so that building a vote's
# row loads no rating code and the statistics read features only as columns.
ROOMS = {
    "votes": {"votes"},
    "stats": {"stats"},
    "board": {"board", "votes", "stats", "snapshots"},  # the view says what changed since a snapshot
    "snapshots": {"snapshots", "board", "stats"},
}


def room(module: str) -> str | None:
    parts = module.split(".")
    return parts[2] if len(parts) > 3 and parts[1] == "leaderboard" else None


def test_every_leaderboard_module_is_in_a_room() -> None:
    """Beside the rooms, only the map (__init__), the command line and the simulators."""
    top = PACKAGE / "leaderboard"
    assert {p.name for p in top.iterdir() if p.is_dir() and p.name != "__pycache__"} == set(ROOMS)
    assert {p.name for p in top.glob("*.py")} == {"__init__.py", "__main__.py", "simulate.py", "simulate_battles.py"}


def test_leaderboard_rooms_import_only_their_neighbours() -> None:
    crossing = sorted(
        f"{a} imports {b}"
        for a, deps in graph().items()
        if (mine := room(a)) is not None
        for b in deps
        if b.startswith("webui.leaderboard") and room(b) not in ROOMS[mine]
    )
    assert not crossing, "\n".join(crossing)


def test_the_statistics_read_no_files() -> None:
    """`stats` is pure: tables in, tables out; no I/O module, database or thread (the names of the
    vote row's columns, webui.db.columns, are not I/O)."""
    io_modules = (
        "sqlite3",
        "psycopg",
        "threading",
        "multiprocessing",
        "concurrent",
        "subprocess",
        "webui.db.store",
        "webui.db.schema",
    )
    found = []
    for path in (PACKAGE / "leaderboard" / "stats").glob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else []
            if isinstance(node, ast.ImportFrom) and node.module:
                names = [node.module]
            found += [f"{path.name}: {n}" for n in names if n.startswith(io_modules)]
    assert not found, found
