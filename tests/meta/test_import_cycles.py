"""No import cycles between edge_rl's modules, counting every import a module makes: at the
top, under TYPE_CHECKING, and inside functions (a lazy import only hides a cycle)."""

from __future__ import annotations

import ast
from pathlib import Path

from tests.harness.paths import REPO

PACKAGE = REPO / "edge_rl"


def module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imports_of(path: Path, modules: set[str]) -> set[str]:
    """edge_rl modules that ``path`` imports (``from pkg import mod`` counts as ``pkg.mod``)."""
    me = module_name(path)
    package = me if path.name == "__init__.py" else me.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                up = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*up, base] if base else up)
            subs = {f"{base}.{a.name}" for a in node.names} & modules
            found.update(subs or {base})  # `from pkg import mod` imports mod, not pkg's names
    # Not an edge: a module's own packages (their __init__ ran before it, whatever it does).
    ancestors = {me.rsplit(".", k)[0] for k in range(1, me.count(".") + 1)}
    return {m for m in found if m in modules and m != me and m not in ancestors}


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    path: list[str] = []

    def visit(m: str) -> list[str] | None:
        state[m] = 1
        path.append(m)
        for n in sorted(graph[m]):
            if state.get(n) == 1:
                return path[path.index(n) :] + [n]
            if n not in state and (cycle := visit(n)):
                return cycle
        path.pop()
        state[m] = 2
        return None

    for m in sorted(graph):
        if m not in state and (cycle := visit(m)):
            return cycle
    return None


def test_find_cycle_finds_one():
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert find_cycle({"a": {"b"}, "b": set()}) is None


def test_edge_rl_has_no_import_cycles():
    files = sorted(PACKAGE.rglob("*.py"))
    modules = {module_name(f) for f in files}
    graph = {module_name(f): imports_of(f, modules) for f in files}
    assert len(graph) > 50  # the walk found the package
    assert graph["edge_rl.wire.transitions"] >= {"edge_rl.wire.envelope"}
    assert find_cycle(graph) is None, " -> ".join(find_cycle(graph) or [])


# The layers of edge_rl, bottom first: a module imports from its own layer or one below,
# never from one above (docs/architecture.md draws them). The two sides of the wire share
# a layer and never import each other: they meet through wire/ and transport/ only.
LAYERS = [
    {"edge_rl", "specs", "types"},  # typed records (numpy only)
    {"wire"},  # bytes <-> records, no I/O
    {"transport"},  # the bus seam, MQTT adapter, in-memory twin, credentials
    {"broker", "envs", "boards", "runtime"},  # broker processes, envs, board files, LiteRT
    {"telemetry", "sim"},  # run logs and live view; the simulated fleet's processes
    {"compress", "export", "agents", "config"},  # TensorFlow: networks, updates, int8 export
    {"actor", "learner"},  # the two sides
    {"deploy", "report"},  # flash, credentials, doctor; plots of finished runs
    {"cli"},  # edge-rl
]
SIDES = {"actor", "learner"}


def part(module: str) -> str:
    """``edge_rl.learner.ingest.dedup`` -> ``learner``; ``edge_rl.types`` -> ``types``."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else parts[0]


def layer_violations(graph: dict[str, set[str]]) -> list[str]:
    level = {p: i for i, layer in enumerate(LAYERS) for p in layer}
    found = []
    for module, imported in sorted(graph.items()):
        for other in sorted(imported):
            a, b = part(module), part(other)
            if a not in level or b not in level:
                found.append(f"{module} -> {other}: a package of no layer")
            elif level[b] > level[a]:
                found.append(f"{module} -> {other}: runs up from {a} to {b}")
            elif a != b and {a, b} <= SIDES:
                found.append(f"{module} -> {other}: one side imports the other")
    return found


def test_layer_check_catches_an_upward_import_and_a_side_crossing():
    graph = {
        "edge_rl.wire.transitions": {"edge_rl.learner.replay"},
        "edge_rl.actor.node": {"edge_rl.learner.node", "edge_rl.wire.topics"},
        "edge_rl.learner.node": {"edge_rl.wire.topics", "edge_rl.transport.base"},
        "edge_rl.somewhere.new": set(),
        "edge_rl.cli.main": {"edge_rl.somewhere.new"},
    }
    assert layer_violations(graph) == [
        "edge_rl.actor.node -> edge_rl.learner.node: one side imports the other",
        "edge_rl.cli.main -> edge_rl.somewhere.new: a package of no layer",
        "edge_rl.wire.transitions -> edge_rl.learner.replay: runs up from wire to learner",
    ]


def test_no_import_runs_up_the_layers():
    files = sorted(PACKAGE.rglob("*.py"))
    modules = {module_name(f) for f in files}
    graph = {module_name(f): imports_of(f, modules) for f in files}
    assert {part(m) for m in modules} == set().union(*LAYERS)  # every package has a layer
    assert layer_violations(graph) == []
