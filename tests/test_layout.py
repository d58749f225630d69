"""The package's layout rules (docs/architecture.md, docs/adr/0029): each folder is one layer
or one seam, imports go down the layers and never back, functions stay simple, and the
architecture page names every folder and module of the tree."""

from __future__ import annotations

import ast
import re
import tomllib
from pathlib import Path

PACKAGE = Path(__file__).resolve().parent.parent / "adk_stream_protocol"
ARCHITECTURE = PACKAGE.parent / "docs" / "architecture.md"
PYPROJECT = PACKAGE.parent / "pyproject.toml"
COMPLEXITY_CEILING = 15
CHECKED = ("adk_stream_protocol", "bench", "tests", "scripts")
EXEMPT_DEF = re.compile(r"def (\w+)\(.*#\s*noqa:[^#]*\bC901")
# The functions allowed over the ceiling, each with its reason beside it in the code.
COMPLEX_BY_DESIGN = {
    "adk_stream_protocol/protocol/partial_json.py:step",  # fixJson's state machine, as written
}

# The layers, top first: a folder's modules import their own folder's and those of lower
# layers only. Folders that share a layer are siblings and never import each other. ""
# is the package's own top level: its front door (the public API, the command, users' test
# helpers).
LAYERS: list[set[str]] = [
    {""},
    {"server", "replay"},
    {"demo"},  # an agent like any other (send_data is its only import); the server loads it
    {"transports"},
    {"turns"},
    {"plugins", "observability"},
    {"coordination", "store"},
    {"protocol"},
    {"foundation"},
]
FRONT_DOOR = {"__init__", "__main__", "cli", "testing", "testing_client"}


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


def folder_of(module: str) -> str:
    """``adk_stream_protocol.coordination.redis.leases`` -> ``coordination``; "" at the top."""
    parts = module.split(".")[1:]
    return parts[0] if len(parts) > 1 or (parts and (PACKAGE / parts[0]).is_dir()) else ""


def layer_of(folder: str) -> int:
    return next(rank for rank, folders in enumerate(LAYERS) if folder in folders)


def test_every_module_is_in_a_layer() -> None:
    folders = {path.name for path in PACKAGE.iterdir() if (path / "__init__.py").is_file()}
    assert folders == set().union(*LAYERS) - {""}
    top = {path.stem for path in PACKAGE.glob("*.py")}
    assert top == FRONT_DOOR, "a module at the top level that is not the front door"


def test_imports_go_down_the_layers() -> None:
    graph = import_graph()
    assert "adk_stream_protocol.transports.live" in graph["adk_stream_protocol.server.app"]
    upwards = []
    for module, targets in graph.items():
        source = folder_of(module)
        for target in targets:
            folder = folder_of(target)
            if folder != source and layer_of(folder) <= layer_of(source):
                upwards.append(f"{module} -> {target}")
    assert not upwards


def test_the_layer_check_sees_a_wrong_import() -> None:
    assert folder_of("adk_stream_protocol.coordination.redis.leases") == "coordination"
    assert folder_of("adk_stream_protocol.testing") == ""
    assert folder_of("adk_stream_protocol.protocol") == "protocol"
    assert layer_of("protocol") > layer_of("turns")  # turns -> protocol is down; not back
    assert layer_of("server") == layer_of("replay")  # siblings: neither imports the other


def test_the_architecture_page_names_every_folder_and_module() -> None:
    page = ARCHITECTURE.read_text(encoding="utf-8")
    missing = [
        str(path.relative_to(PACKAGE))
        for path in PACKAGE.rglob("*.py")
        if path.name != "__init__.py"
        and path.parent.name != "demo"
        and f"`{path.name}`" not in page
    ]
    missing += [
        f"{folder}/"
        for folders in LAYERS
        for folder in folders
        if folder and f"`{folder}/`" not in page
    ]
    assert not missing, f"docs/architecture.md does not name: {missing}"


def test_the_finder_sees_a_cycle() -> None:
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert find_cycle({"a": {"b"}, "b": set(), "c": {"a", "b"}}) is None


def test_no_module_imports_back() -> None:
    graph = import_graph()
    assert (
        "adk_stream_protocol.transports.live" in graph["adk_stream_protocol.server.app"]
    )  # the graph is read
    assert find_cycle(graph) is None


def test_the_transports_and_the_core_never_import_the_app() -> None:
    graph = import_graph()
    importers = {m for m, targets in graph.items() if "adk_stream_protocol.server.app" in targets}
    # The package's front door, the test helpers that start the app for users' tests, and the
    # server of a folder of agents (an app per agent), which the command runs.
    front = {
        "adk_stream_protocol",
        "adk_stream_protocol.testing",
        "adk_stream_protocol.server.agents_folder",
    }
    assert importers <= front, importers


def test_functions_stay_simple() -> None:
    """Modules end where their concept ends; what is capped is a function's tangle: ruff's
    C901 at 15 (pyproject.toml), over which only the functions named here may go."""
    config = tomllib.loads(PYPROJECT.read_text(encoding="utf-8"))["tool"]["ruff"]["lint"]
    assert "C90" in config["select"]
    assert config["mccabe"]["max-complexity"] == COMPLEXITY_CEILING
    exempt = set()
    root = PACKAGE.parent
    for path in [root / "server.py", *(p for d in CHECKED for p in (root / d).rglob("*.py"))]:
        for line in path.read_text(encoding="utf-8").splitlines():
            if found := EXEMPT_DEF.search(line):
                exempt.add(f"{path.relative_to(root)}:{found[1]}")
    assert exempt == COMPLEX_BY_DESIGN, "a new exception to the complexity ceiling: name it here"
