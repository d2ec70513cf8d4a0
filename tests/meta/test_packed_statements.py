"""One statement does one thing: no statements packed into a tuple anywhere in edge_rl.

Two shapes are refused, both found by the AST (so a statement spread over several lines is
caught as well as a one-liner):

* a tuple of calls as an expression statement, ``a(), b()``: two calls in one statement;
* a tuple assignment to attributes from a tuple literal that reads none of its targets,
  ``self.a, self.b = a, b``: two assignments in one statement.

A swap or a rotation, ``self.a, self.b = self.b, self.a``, reads its targets on the right:
it needs the tuple (every right side is read before any target is written) and stays legal.
So does unpacking a call's result, ``self.a, self.b = f()``.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import edge_rl

PACKAGE = Path(edge_rl.__file__).resolve().parent


def _is_call_tuple(node: ast.stmt) -> bool:
    return (
        isinstance(node, ast.Expr)
        and isinstance(node.value, ast.Tuple)
        and any(isinstance(e, ast.Call) for e in node.value.elts)
    )


def _reads(value: ast.expr, targets: list[ast.expr]) -> bool:
    """Whether ``value`` reads any of ``targets`` (an attribute chain or a name)."""
    wanted = {ast.unparse(t) for t in targets}
    return any(
        isinstance(n, ast.Attribute | ast.Name | ast.Subscript) and ast.unparse(n) in wanted
        for n in ast.walk(value)
    )


def _is_packed_assignment(node: ast.stmt) -> bool:
    if not isinstance(node, ast.Assign) or not isinstance(node.value, ast.Tuple):
        return False
    for target in node.targets:
        if not isinstance(target, ast.Tuple):
            continue
        if any(isinstance(e, ast.Attribute) for e in target.elts) and not _reads(
            node.value, target.elts
        ):
            return True
    return False


def packed_statements(source: str) -> list[tuple[int, str]]:
    """``(line, statement)`` of every packed statement in ``source``."""
    return [
        (node.lineno, ast.unparse(node))
        for node in ast.walk(ast.parse(source))
        if isinstance(node, ast.stmt) and (_is_call_tuple(node) or _is_packed_assignment(node))
    ]


def test_no_packed_statements_in_the_package() -> None:
    found = [
        f"{path.relative_to(PACKAGE.parent)}:{line}: {statement}"
        for path in sorted(PACKAGE.rglob("*.py"))
        for line, statement in packed_statements(path.read_text(encoding="utf-8"))
    ]
    assert not found, "one statement per line:\n" + "\n".join(found)


@pytest.mark.parametrize(
    "source",
    [
        "a(), b()",
        "x.close(), y.join(timeout=1)",
        "(\n    first(),\n    second(),\n)",
        "def f(self):\n    self.a, self.b = a, b",
        "def f(self, a, b):\n    (\n        self.a,\n        self.b,\n    ) = (\n"
        "        a,\n        b,\n    )",
        "def f(self):\n    self.a, self.b = self.c, 0",
        "def f(self, x):\n    self.a, y = x, 1",
    ],
)
def test_the_check_finds_a_packed_statement(source: str) -> None:
    assert len(packed_statements(source)) == 1, source


@pytest.mark.parametrize(
    "source",
    [
        "a()\nb()",
        "def f(self):\n    self.a, self.b = self.b, self.a",
        "def f(self):\n    self.a, self.b, self.c = self.b, self.c, self.a",
        "def f(self):\n    self.lo, self.hi = self.lo, self.lo + self.step",
        "def f(self):\n    self.a, self.b = make_pair()",
        "a, b = f(), g()",
        "x = (a(), b())",
        "return_value = a(), b()",
    ],
)
def test_the_check_allows_a_swap_and_ordinary_statements(source: str) -> None:
    assert packed_statements(source) == [], source
