"""docs/config.md against the code: the run config (edge_rl/config.py) and the board file
(edge_rl/boards.py). Every key is documented, nothing documented is not a key, and every
documented default is the code's, of the same type: a field added, renamed or given another
default fails here until the page says so.
"""

from __future__ import annotations

import dataclasses
import json
import re
import typing

import dacite
import pytest
import yaml

from edge_rl.boards import BoardConfig
from edge_rl.config import RunConfig
from tests.harness.paths import REPO

DOC = (REPO / "docs" / "config.md").read_text()
_REQUIRED = object()


def _keys(cls: type, prefix: str = "") -> dict[str, object]:
    """Every leaf key under ``cls`` as a dotted name -> its default (``_REQUIRED`` if none);
    a field whose type is a dataclass (or an optional one) is a section, not a key."""
    hints = typing.get_type_hints(cls)
    out: dict[str, object] = {}
    for f in dataclasses.fields(cls):
        t = hints[f.name]
        section = t if dataclasses.is_dataclass(t) else None
        section = section or next(
            (a for a in typing.get_args(t) if dataclasses.is_dataclass(a)), None
        )
        if section is not None:
            out |= _keys(section, f"{prefix}{f.name}.")
        elif f.default is not dataclasses.MISSING:
            out[prefix + f.name] = f.default
        elif f.default_factory is not dataclasses.MISSING:
            out[prefix + f.name] = f.default_factory()
        else:
            out[prefix + f.name] = _REQUIRED
    return out


def _part(heading: str) -> str:
    m = re.search(rf"^## {re.escape(heading)}\n(.*?)(?=^## |\Z)", DOC, re.M | re.S)
    assert m, f"docs/config.md has no section '## {heading}'"
    return m.group(1)


def _rows(text: str) -> dict[str, str]:
    """key -> default cell of every table row whose first cell is a `key`."""
    rows: dict[str, str] = {}
    for line in text.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        m = re.fullmatch(r"`([a-z_][a-z_0-9.]*)`", cells[0]) if line.startswith("|") else None
        if m:
            assert m.group(1) not in rows, f"{m.group(1)} is documented twice"
            rows[m.group(1)] = cells[1]
    return rows


def _value(cell: str) -> object:
    """`1e6`, `4,000,000`, `"x"`, `null`, `[256, 256]`, `true`, required: as JSON reads them."""
    if cell == "required":
        return _REQUIRED
    m = re.fullmatch(r"`(.*)`", cell)
    assert m, f"default {cell!r} is not in backticks"
    text = m.group(1)
    return json.loads(text.replace(",", "") if re.fullmatch(r"[\d,]+", text) else text)


def _same(documented: object, actual: object) -> bool:
    """Equal and of the same type (`1` for a float 1.0 is wrong); tuples are JSON lists."""
    if isinstance(actual, tuple):
        actual = list(actual)
    return documented is actual or (type(documented) is type(actual) and documented == actual)


PARTS = {"Run config": RunConfig, "Board file": BoardConfig}


@pytest.mark.parametrize("heading", PARTS)
def test_every_key_is_documented_and_every_documented_key_exists(heading):
    documented, actual = set(_rows(_part(heading))), set(_keys(PARTS[heading]))
    assert not actual - documented, f"{heading}: keys missing from docs/config.md"
    assert not documented - actual, f"{heading}: docs/config.md lists keys the code lacks"


@pytest.mark.parametrize(
    ("heading", "key"), [(h, k) for h in PARTS for k in _rows(_part(h))], ids=lambda x: x
)
def test_each_documented_default_is_the_code_s(heading, key):
    cell, actual = _rows(_part(heading))[key], _keys(PARTS[heading]).get(key, _REQUIRED)
    assert _same(_value(cell), actual), f"{key}: doc says {cell}, code has {actual!r}"


def test_the_flashed_board_file_example_loads():
    example = re.search(r"```yaml\n(.*?)```", _part("Board file"), re.S)
    assert example, "no board file example"
    board = dacite.from_dict(
        BoardConfig, yaml.safe_load(example.group(1)), config=dacite.Config(strict=True)
    )
    assert board.actor is not None and board.auth.username == board.actor.id
