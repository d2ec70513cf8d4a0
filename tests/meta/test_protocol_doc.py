"""docs/protocol.md against the code: its board-file table (§6.1) and its status tables (§5).

A third party builds an actor from the document alone, so a default or a field that
changes in the code must change in the document too: these tests fail until it does.
"""

from __future__ import annotations

import ast
import dataclasses
import json
import math
import re
import struct
import typing

import pytest

from edge_rl.boards import BoardConfig
from edge_rl.types import (
    SAFE_REASONS,
    SAFETY_KEYS,
    SHIELD_REASONS,
    ActorState,
    ActorStatus,
    RunState,
)
from edge_rl.wire.envelope import (
    MAGIC_CONTROL,
    MAGIC_STATUS,
    MAGIC_TRANSITIONS,
    SCHEMA_VERSION,
    CodecError,
)
from edge_rl.wire.messages import decode_control, decode_status
from tests.harness.paths import REPO

DOC = (REPO / "docs" / "protocol.md").read_text()
# Board-file keys that do not touch the wire: named in the text, not in the table.
NOT_ON_THE_WIRE = {"emulation", "power", "auth", "actor", "safety", "control_hz", "episode"}


def _section(heading: str) -> str:
    """The text from ``heading`` (a whole line) to the next heading of any level."""
    m = re.search(rf"^{re.escape(heading)}\n(.*?)(?=^#)", DOC, re.M | re.S)
    assert m, f"docs/protocol.md has no section {heading!r}"
    return m.group(1)


def _table(text: str, first_column: str) -> list[dict[str, str]]:
    """The rows of the first Markdown table in ``text`` whose header starts with
    ``first_column``, as {column: cell} with the cells stripped."""
    lines = text.splitlines()
    for i, line in enumerate(lines):
        if line.startswith("|") and _cells(line)[0] == first_column:
            header, rows = _cells(line), []
            for row in lines[i + 2 :]:
                if not row.startswith("|"):
                    break
                rows.append(dict(zip(header, _cells(row), strict=True)))
            return rows
    raise AssertionError(f"no table with first column {first_column!r}")


def _cells(line: str) -> list[str]:
    return [c.strip() for c in line.strip().strip("|").split("|")]


def _name(cell: str) -> str:
    m = re.fullmatch(r"`([a-z_0-9]+)`", cell)
    assert m, f"not a single `key` cell: {cell!r}"
    return m.group(1)


_MISSING = object()


def _value(cell: str) -> object:
    """A default as the document writes it: `64`, `4,000,000`, `0.5`, `"x"`, `""`, `null`,
    `{}`, none, required."""
    if cell == "required" or cell == "—":
        return _MISSING
    if cell == "none":
        return None
    m = re.fullmatch(r"`(.*)`", cell)
    assert m, f"default {cell!r} is not in backticks"
    text = m.group(1)
    if text == "null":
        return None
    if text == "{}":
        return {}
    if text.startswith('"') and text.endswith('"'):
        return text[1:-1]
    number = text.replace(",", "")
    return float(number) if "." in number else int(number)


def _default(f: dataclasses.Field) -> object:
    if f.default is not dataclasses.MISSING:
        return f.default
    if f.default_factory is not dataclasses.MISSING:
        return f.default_factory()
    return _MISSING


def _same(documented: object, actual: object) -> bool:
    """Equal and of the same type: a doc that says `1` for a float 1.0 is wrong."""
    return documented is actual or (type(documented) is type(actual) and documented == actual)


# --- §6.1 board file ----------------------------------------------------------------------

BOARD_ROWS = _table(_section("### 6.1 Board-file parameters"), "key")


def test_the_board_table_lists_every_key_that_touches_the_wire():
    documented = [_name(r["key"]) for r in BOARD_ROWS]
    assert len(documented) == len(set(documented)), "a key is listed twice"
    fields = {f.name for f in dataclasses.fields(BoardConfig)}
    assert set(documented) == fields - NOT_ON_THE_WIRE
    section = _section("### 6.1 Board-file parameters")
    for key in NOT_ON_THE_WIRE:
        assert f"`{key}`" in section, f"{key} is neither in the table nor named below it"


@pytest.mark.parametrize("row", BOARD_ROWS, ids=lambda r: r["key"].strip("`"))
def test_each_board_default_is_the_code_s(row):
    f = {f.name: f for f in dataclasses.fields(BoardConfig)}[_name(row["key"])]
    documented, actual = _value(row["default"]), _default(f)
    assert _same(documented, actual), f"{f.name}: doc says {row['default']}, code has {actual!r}"


@pytest.mark.parametrize(
    "row", [r for r in BOARD_ROWS if "in [" in r["meaning"]], ids=lambda r: r["key"].strip("`")
)
def test_each_documented_interval_range_is_the_one_the_board_file_accepts(row):
    key = _name(row["key"])
    m = re.search(r"in \[([\d.]+), ([\d.]+)\] s", row["meaning"])
    assert m, f"{key}: no range 'in [lo, hi] s' in {row['meaning']!r}"
    lo, hi = float(m.group(1)), float(m.group(2))
    BoardConfig(board="x", **{key: lo})
    BoardConfig(board="x", **{key: hi})
    for outside in (lo * 0.99, hi * 1.01):
        with pytest.raises(ValueError):
            BoardConfig(board="x", **{key: outside})


# --- §5 status ----------------------------------------------------------------------------

STATUS_SECTION = _section("## 5. Status (`ERLS`), control (`ERLC`) and credit (`ERLG`)")
STATUS_ROWS = _table(STATUS_SECTION, "field")  # the first such table: the status's
REQUIRED_HEADER = {"actor_id": "a", "state": "running"}


def _decode(header: dict) -> ActorStatus:
    """Decode a status whose header is ``header`` as JSON, inf written as ``Infinity``
    (which a sender must not send, and the decoder must refuse)."""
    h = json.dumps(header).encode()
    return decode_status(struct.pack("<4sHI", MAGIC_STATUS, SCHEMA_VERSION, len(h)) + h)


def test_the_status_table_lists_every_field_once():
    documented = [_name(r["field"]) for r in STATUS_ROWS]
    assert len(documented) == len(set(documented))
    assert documented == [f.name for f in dataclasses.fields(ActorStatus)]


@pytest.mark.parametrize("row", STATUS_ROWS, ids=lambda r: r["field"].strip("`"))
def test_each_status_field_is_required_or_has_the_documented_default(row):
    name = _name(row["field"])
    f = {f.name: f for f in dataclasses.fields(ActorStatus)}[name]
    actual = _default(f)
    assert row["required"] in ("yes", "no")
    assert (row["required"] == "yes") == (actual is _MISSING)
    assert _same(_value(row["default"]), actual), f"{name}: doc {row['default']}, code {actual!r}"
    if actual is _MISSING:  # the decoder refuses a status without it
        with pytest.raises(CodecError):
            _decode({k: v for k, v in REQUIRED_HEADER.items() if k != name})
    else:  # and fills in the default when it is left out
        assert _same(getattr(_decode(REQUIRED_HEADER), name), actual)


# Fields whose type is their own: values the decoder takes, and values it refuses.
_OBJECT_FIELDS = {
    "breakdown": ([{}, {"wall": 1.5}], [{"wall": -1}, {"nope": 1.0}, [], 1]),
    "safety": ([{}, {"clipped": 3, "estop": 0}], [{"clipped": -1}, {"nope": 1}, {"x": 1.0}, []]),
    "safe_reason": (["", *SAFE_REASONS], ["clipped", "unknown", 1, None]),
}


@pytest.mark.parametrize("row", STATUS_ROWS, ids=lambda r: r["field"].strip("`"))
def test_each_status_field_s_type_column_is_what_the_decoder_enforces(row):
    """Values just inside and just outside what the 'type and range' column says."""
    name, kind = _name(row["field"]), row["type and range"]
    if kind == "count":
        good, bad = [0, 2**53 - 1], [-1, 2**53, 1.0, True, "1", None]
    elif kind == "number ≥ 0":
        good, bad = [0, 0.5, 1e9], [-0.5, True, "1", None, 1e999]
    elif kind == "number (any sign) or `null`":
        good, bad = [None, -3.5, 7], [True, "1", 1e999, -1e999]
    elif kind == "string, ≤ 128 characters":
        good, bad = ["", "x" * 128], ["x" * 129, 1, None]
    elif kind == "string: 64 lowercase hex digits, or empty":
        good, bad = ["", "0a" * 32], ["0A" * 32, "0a" * 31, "g" * 64, 1, None]
    elif kind == "string, ≤ 64 characters":
        good, bad = ["", "x" * 64], ["x" * 65, 1, None]
    elif name == "state":
        good = re.findall(r"`([a-z]+)`", kind)
        assert set(good) == set(typing.get_args(ActorState))
        bad = ["waiting", "", None]
    elif name in _OBJECT_FIELDS:
        good, bad = _OBJECT_FIELDS[name]
    else:
        raise AssertionError(f"{name}: no check for type {kind!r}")
    for v in good:
        _decode({**REQUIRED_HEADER, name: v})
    for v in bad:
        with pytest.raises(CodecError):
            _decode({**REQUIRED_HEADER, name: v})


SAFETY_SECTION = _section("### 5.6 Safety: the shield, the watchdogs and the safe state")


def test_the_safety_table_lists_every_reason_the_status_may_count():
    rows = _table(SAFETY_SECTION, "key")
    assert [_name(r["key"]) for r in rows] == [*SHIELD_REASONS, *SAFE_REASONS]
    assert set(SAFETY_KEYS) == {*SHIELD_REASONS, *SAFE_REASONS}


def test_the_which_state_table_covers_every_state():
    rows = _table(STATUS_SECTION[STATUS_SECTION.index("**Which state.**") :], "state")
    assert [_name(r["state"]) for r in rows] == list(typing.get_args(ActorState))


def test_no_documented_default_is_nan():
    for row in STATUS_ROWS + BOARD_ROWS:
        v = _value(row["default"])
        assert not (isinstance(v, float) and math.isnan(v))


# --- §3.1 worked example --------------------------------------------------------------------


def test_the_worked_example_s_prefix_is_what_the_encoder_writes():
    """Its first hexdump line: magic, this schema version and H, byte for byte."""
    m = re.search(r"^00000000  ((?:[0-9a-f]{2} ){10})", DOC, re.M)
    assert m, "no worked-example hexdump in docs/protocol.md"
    magic, version, h = struct.unpack("<4sHI", bytes.fromhex(m.group(1)))
    assert (magic, version) == (MAGIC_TRANSITIONS, SCHEMA_VERSION)
    assert f"ver={version}  H={h}" in DOC


# --- the schema version and the control states ------------------------------------------------


def test_every_place_that_names_the_schema_version_names_this_one():
    """The title, §3's prefix table, §7's bad_version row and §8."""
    assert DOC.startswith(f"# edge-rl wire protocol, v{SCHEMA_VERSION}\n")
    prefix = {r["field"]: r for r in _table(_section("## 3. Envelope (every payload)"), "offset")}
    assert prefix["schema version"]["encoding"].endswith(f"**{SCHEMA_VERSION}**")
    reasons = {r["reason"]: r for r in _table(_section("## 7. Reject reasons"), "reason")}
    assert reasons["`bad_version`"]["meaning"] == f"schema version ≠ {SCHEMA_VERSION}"
    assert f"is **{SCHEMA_VERSION}**. A payload with any other version" in DOC
    assert f"**v{SCHEMA_VERSION - 1} → v{SCHEMA_VERSION}**" in DOC


def test_the_control_tables_list_every_run_state():
    rows = _table(STATUS_SECTION[STATUS_SECTION.index("**Control**") :], "field")
    states = {r["field"]: r for r in rows}["`state`"]["meaning"]
    assert re.findall(r"`([a-z]+)`", states) == list(typing.get_args(RunState))
    what = _table(STATUS_SECTION[STATUS_SECTION.index("**Control**") :], "state")
    assert [_name(r["state"]) for r in what] == list(typing.get_args(RunState))
    for state in typing.get_args(RunState):
        header = json.dumps({"state": state, "run_id": "r"}).encode()
        payload = struct.pack("<4sHI", MAGIC_CONTROL, SCHEMA_VERSION, len(header)) + header
        assert decode_control(payload).state == state


# --- §7 reject reasons against the reasons the code can raise ---------------------------------

PACKAGE = REPO / "edge_rl"
# Where a reason is raised -> the words §7's "raised by" column uses for that place.
RAISED_BY = {"wire": "codec", "learner": "learner ingest", "actor": "actor policy slot"}
_REJECTS = ("CodecError", "Rejected", "reject", "_reject")


def _raised_reasons() -> dict[str, set[str]]:
    """reason -> the top packages (wire, learner, actor) whose code raises or counts it: the
    first argument of every ``CodecError(...)``, ``Rejected(...)`` and ``reject(...)``."""
    found: dict[str, set[str]] = {}
    for path in PACKAGE.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if not isinstance(node, ast.Call) or not node.args:
                continue
            func = node.func
            name = func.id if isinstance(func, ast.Name) else getattr(func, "attr", None)
            if name not in _REJECTS:
                continue
            first = node.args[0]
            if isinstance(first, ast.Constant) and isinstance(first.value, str):
                part = path.relative_to(PACKAGE).parts[0]
                found.setdefault(first.value, set()).add(part)
            else:  # a reason passed on (e.reason): it was raised with a literal elsewhere
                assert isinstance(first, ast.Attribute) and first.attr == "reason", (
                    f"{path}:{node.lineno}: a reason that is not a literal"
                )
    return found


REASON_ROWS = _table(_section("## 7. Reject reasons"), "reason")


def test_the_reject_table_is_the_set_of_reasons_the_code_raises():
    documented = {_name(r["reason"]) for r in REASON_ROWS}
    raised = _raised_reasons()
    assert set(raised) == documented, (
        f"raised, not in §7: {sorted(set(raised) - documented)}; "
        f"in §7, never raised: {sorted(documented - set(raised))}"
    )


def test_each_reason_s_raised_by_column_names_where_the_code_raises_it():
    by_reason: dict[str, str] = {}
    for r in REASON_ROWS:
        by_reason[_name(r["reason"])] = by_reason.get(_name(r["reason"]), "") + r["raised by"]
    for reason, parts in _raised_reasons().items():
        for part in parts:
            assert RAISED_BY[part] in by_reason[reason], f"{reason}: raised in edge_rl/{part}/"


# --- run ids: one length limit, the one the code checks ---------------------------------------


def test_every_documented_run_id_limit_is_the_code_s():
    from edge_rl.wire.messages import MAX_RUN_ID

    limits: set[int] = set()
    for m in re.finditer(r"`run_id`[^\n]*?(?:≤|at most) (\d+) characters", DOC):
        limits.add(int(m.group(1)))
    assert limits == {MAX_RUN_ID}, f"run id limits in docs/protocol.md: {limits}"
    long = "r" * (MAX_RUN_ID + 1)
    with pytest.raises(CodecError):
        _decode({**REQUIRED_HEADER, "run_id": long})


# --- §5.4: the board's state machine in one place ---------------------------------------------

MACHINE = _section("### 5.4 The board's states")


def test_the_state_machine_names_every_control_state_and_every_status_state():
    diagram = MACHINE[MACHINE.index("```") : MACHINE.index("```", MACHINE.index("```") + 3)]
    for state in typing.get_args(RunState):
        assert f"{state}(R" in diagram or f"{state}|" in diagram, f"{state} not in the diagram"
    rows = _table(MACHINE, "state")
    reported = {re.fullmatch(r"`([a-z]+)`", r["status `state`"]).group(1) for r in rows}
    assert reported == set(typing.get_args(ActorState)) - {"offline"}


def test_the_state_machine_s_timers_are_the_board_file_and_config_keys():
    timers = _table(MACHINE, "timer")
    text = " ".join(r["value (reference)"] for r in timers)
    for key in ("status_interval_s", "serving_status_interval_s", "flush_interval_s"):
        assert f"`{key}`" in text and hasattr(BoardConfig(board="x"), key)
    assert "`credit_timeout_s`" in text and "`fleet.identity_window_s`" in text


# --- §7.1: the summary keys ---------------------------------------------------------------------


def test_the_summary_keys_are_the_ones_the_learner_writes():
    source = (PACKAGE / "learner" / "summary.py").read_text()
    rows = _table(_section("### 7.1 Where the learner counts them"), "key")
    for row in rows:
        assert f'"{_name(row["key"])}":' in source, f"{row['key']} is not in summary.json"
    actors = {r["key"]: r for r in rows}["`actors`"]["what"]
    for key in re.findall(r"`([a-z_]+)`", actors):
        assert f'"{key}":' in source, f"actors.{key} is not in summary.json"
