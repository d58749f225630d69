"""The pictures of docs/architecture.md held to the tree, so they cannot drift from it: the
layer diagram draws each folder of the package in the box of its layer in
``tests/test_layout.py``'s ``LAYERS``, the boxes chained top to bottom in that order, and no
folder the tree does not have; the request's path names only modules and folders that exist.

The diagrams are read with a small parser of the Mermaid we write (subgraphs, nodes, ``-->``
and ``-.->`` edges with an optional ``|label|``); a line it does not know fails the test, so a
new form is taught to it rather than skipped."""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass, field

from tests.test_layout import ARCHITECTURE, FRONT_DOOR, LAYERS, PACKAGE

MERMAID = re.compile(r"^```mermaid\n(.*?)^```$", re.MULTILINE | re.DOTALL)
SUBGRAPH = re.compile(r'subgraph (\w+)(?:\["([^"]*)"\])?')
# A node: its id and its label, in any of the shapes we use: ["..."] (["..."]) [("...")].
NODE = re.compile(r'(\w+)(?:\[\(|\(\[|\[)"([^"]*)"(?:\)\]|\]\)|\])')
ARROW = re.compile(r"\s*(-->|-\.->|---)(?:\|(\"[^\"]*\"|[^|]*)\|)?\s*")
# A folder as the pictures name it: "server/", "redis/"; not the "/stream" of a path.
FOLDER = re.compile(r"(?<![\w/{])(\w+)/")
MODULE = re.compile(r"(?<![\w/])((?:\w+/)*\w+\.py)\b")


@dataclass
class Diagram:
    """What a flowchart declares: its boxes in order (id -> title and the nodes in it), every
    node's label, and its edges as (source, arrow, label, target)."""

    boxes: dict[str, tuple[str, list[str]]] = field(default_factory=dict)
    labels: dict[str, str] = field(default_factory=dict)
    edges: list[tuple[str, str, str, str]] = field(default_factory=list)


def parse(source: str) -> Diagram:
    diagram = Diagram()
    open_box: str | None = None
    lines = [line.strip() for line in source.splitlines()]
    assert lines[0] == "flowchart TB", lines[0]
    for line in lines[1:]:
        if not line or line.startswith("direction "):
            continue
        if box := SUBGRAPH.fullmatch(line):
            assert open_box is None, f"a box inside a box: {line}"
            open_box = box[1]
            diagram.boxes[open_box] = (box[2] or box[1], [])
        elif line == "end":
            assert open_box is not None, "an end without its subgraph"
            open_box = None
        elif node := NODE.fullmatch(line):
            diagram.labels[node[1]] = node[2].replace("<br/>", "\n")  # a label's lines
            if open_box is not None:
                diagram.boxes[open_box][1].append(node[1])
        else:
            diagram.edges.extend(_edges(line))
    assert open_box is None, f"subgraph {open_box} is not closed"
    return diagram


def _edges(line: str) -> list[tuple[str, str, str, str]]:
    """``a --> b -->|x| c`` -> its edges; an assertion error for a line that is not one."""
    pieces = ARROW.split(line)  # [node, arrow, label, node, arrow, label, node, ...]
    assert len(pieces) >= 4 and all(re.fullmatch(r"\w+", p) for p in pieces[::3]), (
        f"not a line the diagram test reads: {line}"
    )
    return [
        (pieces[i], pieces[i + 1], (pieces[i + 2] or "").strip('"'), pieces[i + 3])
        for i in range(0, len(pieces) - 3, 3)
    ]


def diagram_of(section: str) -> str:
    """The one diagram of the page's section ``## <section>``."""
    page = ARCHITECTURE.read_text(encoding="utf-8")
    text = page.split(f"\n## {section}\n", 1)[1].split("\n## ", 1)[0]
    found: list[str] = MERMAID.findall(text)
    assert len(found) == 1, f"the section {section} draws one diagram"
    return found[0]


def the_layer_diagram() -> str:
    return diagram_of("Folders")


def the_path_diagram() -> str:
    return diagram_of("A turn")


def package_folders() -> dict[str, set[str]]:
    """Each folder of the package -> its own folders ("coordination" -> {"redis"})."""
    return {
        top.name: {sub.name for sub in top.iterdir() if (sub / "__init__.py").is_file()}
        for top in PACKAGE.iterdir()
        if (top / "__init__.py").is_file()
    }


def imports_adk(folder: str) -> bool:
    for path in (PACKAGE / folder).rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            names = (
                [node.module or ""]
                if isinstance(node, ast.ImportFrom)
                else [a.name for a in node.names]
                if isinstance(node, ast.Import)
                else []
            )
            if any(name.startswith("google.adk") for name in names):
                return True
    return False


def layer_problems(source: str) -> list[str]:
    """What of the layer diagram disagrees with the tree and with ``LAYERS``; [] when all do."""
    diagram = parse(source)
    tree = package_folders()
    problems: list[str] = []
    # box -> the folders drawn in it ({""}: the front door)
    drawn = {
        box: box_folders(diagram, nodes, tree, problems)
        for box, (_, nodes) in diagram.boxes.items()
    }
    everything = set().union(*drawn.values()) - {""}
    if missing := set(tree) - everything:
        problems.append(f"folders of the package not drawn: {sorted(missing)}")
    if extra := everything - set(tree):
        problems.append(f"folders drawn that the package does not have: {sorted(extra)}")
    # The boxes' order is the chain of solid arrows between them: one path, top first.
    if (order := chain_of(diagram, set(drawn))) is None:
        problems.append("the layers are not one chain of arrows")
    elif sorted(order) != sorted(drawn):
        problems.append(f"boxes outside the chain of layers: {sorted(set(drawn) - set(order))}")
    elif [drawn[box] for box in order] != LAYERS:
        problems.append(
            f"the layers drawn, top first, are {[sorted(drawn[b]) for b in order]}, "
            f"not LAYERS: {[sorted(layer) for layer in LAYERS]}"
        )
    # An edge into ADK is drawn only from a folder that imports it.
    adk = {node for node, label in diagram.labels.items() if label.startswith("Google ADK")}
    for source_node, _, _, target in diagram.edges:
        if target in adk:
            # A node named only in an edge is drawn with its id as its label, as Mermaid does.
            label = diagram.labels.get(source_node, source_node)
            head = label.partition("\n")[0].rstrip("/")
            if head not in tree or not imports_adk(head):
                problems.append(f"{head} is drawn against ADK but does not import it")
    return problems


def box_folders(
    diagram: Diagram, nodes: list[str], tree: dict[str, set[str]], problems: list[str]
) -> set[str]:
    """The folders a box draws, each a node whose label's first line is it and whose other
    lines name its own folders; "" for the front door's node, which names its modules."""
    folders = set()
    for node in nodes:
        label = diagram.labels[node]
        head, _, rest = label.partition("\n")
        if folder := re.fullmatch(r"(\w+)/", head):
            folders.add(folder[1])
            subs, own = set(FOLDER.findall(rest)), tree.get(folder[1], set())
            if missing := own - subs:
                problems.append(f"{head} does not name its folders {sorted(missing)}")
            if extra := subs - own:
                problems.append(f"{head} names folders it does not have: {sorted(extra)}")
        elif elsewhere := FOLDER.findall(label):
            problems.append(f"{node}: a folder drawn other than as a node's head: {elsewhere}")
        else:
            if missing_modules := {m for m in FRONT_DOOR if f"{m}.py" not in label}:
                problems.append(f"the front door does not name {sorted(missing_modules)}")
            folders.add("")
    return folders


def chain_of(diagram: Diagram, boxes: set[str]) -> list[str] | None:
    """The boxes joined by solid arrows, first to last; None unless they form one path."""
    after: dict[str, str] = {}
    before: dict[str, str] = {}
    for a, arrow, _, b in diagram.edges:
        if arrow == "-->" and a in boxes and b in boxes:
            if a in after or b in before:
                return None  # a fork or a join
            after[a], before[b] = b, a
    starts = [box for box in after if box not in before]
    if len(starts) != 1:
        return None  # no arrows, two paths, or a ring
    order = [starts[0]]
    while order[-1] in after:
        order.append(after[order[-1]])
    return order if len(order) == len(after) + 1 else None


def path_problems(source: str) -> list[str]:
    """The modules and folders the request's path names that the package does not have."""
    diagram = parse(source)
    modules = {p.relative_to(PACKAGE).as_posix() for p in PACKAGE.rglob("*.py")}
    names = {path.rpartition("/")[2] for path in modules}
    folders = {p.relative_to(PACKAGE).as_posix() for p in PACKAGE.rglob("*") if p.is_dir()}
    problems = []
    nodes = " ".join(diagram.labels.values())
    text = " ".join([nodes, *(label for *_, label in diagram.edges)])
    for named in MODULE.findall(text):
        if "/" in named:
            found = any(m == named or m.endswith(f"/{named}") for m in modules)
        else:
            found = named in names
        if not found:
            problems.append(f"no module {named}")
    # The nodes' folders; an edge's label speaks of the wire ("client/" is the repository's).
    for folder in FOLDER.findall(nodes):
        if not any(f == folder or f.endswith(f"/{folder}") for f in folders):
            problems.append(f"no folder {folder}/")
    return problems


def test_the_layer_diagram_matches_the_tree_and_the_layers() -> None:
    assert layer_problems(the_layer_diagram()) == []


def test_the_path_names_real_modules() -> None:
    source = the_path_diagram()
    assert "converter.py" in source and "sse_response.py" in source  # the path is read
    assert path_problems(source) == []


def test_the_layer_check_sees_a_folder_missing() -> None:
    source = the_layer_diagram()
    without = "\n".join(line for line in source.splitlines() if 'store["store/' not in line)
    assert without != source
    problems = layer_problems(without)
    assert problems[0] == "folders of the package not drawn: ['store']"
    assert problems[1].startswith("the layers drawn, top first,")  # its box lacks it too
    assert len(problems) == 2


def test_the_layer_check_sees_a_folder_that_is_not_there() -> None:
    source = the_layer_diagram().replace(
        '    demo["demo/', '    extra["gateway/<br/>not a folder"]\n    demo["demo/'
    )
    problems = layer_problems(source)
    assert "folders drawn that the package does not have: ['gateway']" in problems
    assert any("not LAYERS" in problem for problem in problems)


def test_the_layer_check_sees_a_subfolder_missing() -> None:
    source = the_layer_diagram().replace("local.py or redis/", "local.py or Redis")
    assert layer_problems(source) == ["coordination/ does not name its folders ['redis']"]


def test_the_layer_check_sees_the_order_changed() -> None:
    source = the_layer_diagram()
    swapped = source.replace("L5 --> L6 --> L7 --> L8", "L5 --> L7 --> L6 --> L8")
    assert swapped != source
    assert [p for p in layer_problems(swapped) if "not LAYERS" in p]
    renamed = (
        source.replace('subgraph L6["', 'subgraph LX["')
        .replace('subgraph L7["', 'subgraph L6["')
        .replace('subgraph LX["', 'subgraph L7["')
    )
    assert [p for p in layer_problems(renamed) if "not LAYERS" in p]


def test_the_layer_check_sees_a_broken_chain() -> None:
    source = the_layer_diagram()
    skipped = source.replace("L2 --> L3 --> L4", "L2 --> L4")
    assert layer_problems(skipped) == ["boxes outside the chain of layers: ['L3']"]
    forked = source.replace("  L0 --> L1", "  L0 --> L2\n  L0 --> L1")
    assert layer_problems(forked) == ["the layers are not one chain of arrows"]
    assert chain_of(parse("flowchart TB\n  a --> b\n  b --> c\n"), {"a", "b", "c"}) == [
        "a",
        "b",
        "c",
    ]
    assert chain_of(parse("flowchart TB\n  b --> c\n  a --> b\n"), {"a", "b", "c"}) == [
        "a",
        "b",
        "c",
    ]
    assert chain_of(parse("flowchart TB\n  a --> b\n  b --> a\n"), {"a", "b"}) is None


def test_the_adk_edges_come_from_folders_that_import_it() -> None:
    source = the_layer_diagram().replace(
        "turns -.->|Runner| adk", "turns -.->|Runner| adk\n  foundation -.-> adk"
    )
    assert layer_problems(source) == ["foundation is drawn against ADK but does not import it"]


def test_the_path_check_sees_a_module_that_is_not_there() -> None:
    source = the_path_diagram().replace("planning.py", "planner.py")
    assert path_problems(source) == ["no module planner.py"]
    source = the_path_diagram().replace("turns/runners.py", "store/runners.py")
    assert path_problems(source) == ["no module store/runners.py"]


def test_the_parser_refuses_a_line_it_does_not_read() -> None:
    for line in ("a ==> b", "click a href", "a --> "):
        try:
            parse(f"flowchart TB\n  {line}\n")
        except AssertionError:
            continue
        raise AssertionError(f"read without complaint: {line}")
