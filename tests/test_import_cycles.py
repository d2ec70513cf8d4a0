"""No import cycles between edge_rl's modules, counting every import a module makes: at the
top, under TYPE_CHECKING, and inside functions (a lazy import only hides a cycle)."""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "edge_rl"


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
    assert graph["edge_rl.transport.codec"] >= {"edge_rl.transport.envelope"}
    assert find_cycle(graph) is None, " -> ".join(find_cycle(graph) or [])


def test_no_module_is_over_300_lines():
    long = {module_name(f): n for f in PACKAGE.rglob("*.py")
            if (n := len(f.read_text().splitlines())) > 300}  # fmt: skip
    assert not long, long
