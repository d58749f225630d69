"""The package's layout rules (docs/architecture.md): a one-way import graph and small
modules."""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parent.parent / "adk_stream_protocol"
MAX_LINES = 400


def _module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def import_graph() -> dict[str, set[str]]:
    """Module -> the package's modules it imports, anywhere in the file: at the top, inside
    functions and under ``if TYPE_CHECKING:`` alike."""
    files = {_module_name(p): p for p in PACKAGE.rglob("*.py")}
    graph: dict[str, set[str]] = {name: set() for name in files}
    for name, path in files.items():
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom):
                if node.level:
                    base = package.split(".")[: len(package.split(".")) - node.level + 1]
                    target = ".".join([*base, *([node.module] if node.module else [])])
                else:
                    target = node.module or ""
                targets = [target, *(f"{target}.{alias.name}" for alias in node.names)]
            elif isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            else:
                continue
            graph[name].update(t for t in targets if t in files and t != name)
    return graph


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One import cycle, as the modules along it, or None."""
    state: dict[str, str] = {}  # "open" while on the path, "done" after

    def visit(module: str, path: list[str]) -> list[str] | None:
        state[module] = "open"
        for target in sorted(graph[module]):
            if state.get(target) == "open":
                return [*path[path.index(target) :], target]
            if target not in state and (cycle := visit(target, [*path, target])):
                return cycle
        state[module] = "done"
        return None

    for module in sorted(graph):
        if module not in state and (cycle := visit(module, [module])):
            return cycle
    return None


def test_the_finder_sees_a_cycle() -> None:
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert find_cycle({"a": {"b"}, "b": set(), "c": {"a", "b"}}) is None


def test_no_module_imports_back() -> None:
    graph = import_graph()
    assert "adk_stream_protocol.live" in graph["adk_stream_protocol.app"]  # the graph is read
    assert find_cycle(graph) is None


def test_the_transports_and_the_core_never_import_the_app() -> None:
    graph = import_graph()
    importers = {m for m, targets in graph.items() if "adk_stream_protocol.app" in targets}
    # The package's front door, the test helpers that start the app for users' tests, and the
    # server of a folder of agents (an app per agent), which the command runs.
    front = {
        "adk_stream_protocol",
        "adk_stream_protocol.testing",
        "adk_stream_protocol.agents_folder",
    }
    assert importers <= front, importers


def test_modules_are_small_or_say_why() -> None:
    long = []
    for path in PACKAGE.rglob("*.py"):
        lines = path.read_text(encoding="utf-8").splitlines()
        if len(lines) > MAX_LINES and "longer than" not in " ".join(lines[:8]).lower():
            long.append(f"{path.relative_to(PACKAGE)}: {len(lines)} lines")
    assert not long
