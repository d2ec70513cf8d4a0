"""Every field of the run config is set somewhere by an example, a test or a benchmark: a
knob nothing sets is either untested or dead.

The fields are every leaf of ``RunConfig``, through its sections (``quarantine``,
``transport.auth``, ...). A field counts as set when one of these sets it:

* a YAML key: ``examples/*.yaml``, a YAML file or string in tests/ or benchmarks/, or a
  dict literal (``{"quarantine": {"min_boards": 2}}``), flattened to its dotted path;
* a dotted override: ``--set quarantine.min_boards=2``, ``"quarantine.min_boards"`` as an
  overrides key, or the ``edge-rl learn`` flag that sets it (``--fleet-procs``);
* a keyword: ``QuarantineConfig(min_boards=2)``, ``dataclasses.replace(rule, min_boards=2)``,
  ``dict(min_boards=2)``; a keyword of any other call (a test's own config helper), a dict
  key or a parametrized field name (``("max_z", 0.0)``) sets the field of that name in
  each section whose class the same file calls, or in any section when no other section
  has a field of that name.
"""

from __future__ import annotations

import ast
import dataclasses
import re
import typing
from collections import Counter
from collections.abc import Iterator
from typing import Any

import yaml

from edge_rl.config import RunConfig
from tests.harness.paths import REPO

# `edge-rl learn`'s named flags (cli/learn.py, LearnFlags.overrides) and the key each sets.
FLAGS = {
    "--fleet": "fleet.actors",
    "--fleet-procs": "fleet.procs",
    "--board": "fleet.board",
    "--seed": "seed",
    "--run": "run",
    "--signing-key": "signing_key",
    "--demos": "demos",
}
# Calls whose keywords are fields of the config they copy or build.
COPIES = {"replace", "dict"}


@dataclasses.dataclass(frozen=True)
class Field:
    path: str  # dotted, from RunConfig: "quarantine.min_boards"
    owner: str  # the dataclass that declares it: "QuarantineConfig"

    @property
    def name(self) -> str:
        return self.path.rsplit(".", 1)[-1]


def config_fields(cls: type = RunConfig, prefix: str = "") -> Iterator[Field]:
    """Every leaf field below ``cls``; a section (a dataclass, or one that may be None) is
    walked into."""
    hints = typing.get_type_hints(cls)
    for f in dataclasses.fields(cls):
        kind = hints[f.name]
        inner = [a for a in (kind, *typing.get_args(kind)) if dataclasses.is_dataclass(a)]
        if inner:
            yield from config_fields(inner[0], f"{prefix}{f.name}.")
        else:
            yield Field(prefix + f.name, cls.__name__)


def flatten(data: dict[Any, Any], prefix: str = "") -> Iterator[str]:
    for key, value in data.items():
        if isinstance(key, str):
            yield prefix + key
            if isinstance(value, dict):
                yield from flatten(value, f"{prefix}{key}.")


@dataclasses.dataclass
class Settings:
    """What the examples, tests and benchmarks set, in each of the forms above."""

    paths: set[str] = dataclasses.field(default_factory=set)  # full dotted paths
    owner_keywords: set[tuple[str, str]] = dataclasses.field(default_factory=set)
    copy_keywords: set[str] = dataclasses.field(default_factory=set)
    loose_names: set[str] = dataclasses.field(default_factory=set)  # any call, key, tuple
    strings: list[str] = dataclasses.field(default_factory=list)

    def add_yaml(self, text: str) -> None:
        try:
            data = yaml.safe_load(text)
        except yaml.YAMLError:
            return
        if isinstance(data, dict):
            self.paths.update(flatten(data))

    def add_python(self, source: str) -> None:
        called: set[str] = set()  # the classes and functions this file calls
        loose: set[str] = set()  # this file's names that may be fields
        for node in ast.walk(ast.parse(source)):
            if isinstance(node, ast.Call):
                func = node.func
                name = getattr(func, "id", None) or getattr(func, "attr", "")
                called.add(name)
                for kw in node.keywords:
                    if kw.arg is None:
                        continue
                    self.owner_keywords.add((name, kw.arg))
                    (self.copy_keywords if name in COPIES else loose).add(kw.arg)
            elif isinstance(node, ast.Constant) and isinstance(node.value, str):
                self.strings.append(node.value)
                if "\n" in node.value and ":" in node.value:
                    self.add_yaml(node.value)
            elif isinstance(node, ast.Dict):
                keys = [k.value for k in node.keys if isinstance(k, ast.Constant)]
                loose.update(k for k in keys if isinstance(k, str))
                try:
                    data = ast.literal_eval(node)
                except ValueError:
                    continue
                self.paths.update(flatten(data))
            elif isinstance(node, ast.Tuple) and node.elts:  # ("max_z", 0.0) in a parametrize
                first = node.elts[0]
                if isinstance(first, ast.Constant) and isinstance(first.value, str):
                    loose.add(first.value)
        self.loose_names |= loose
        self.owner_keywords |= {(owner, name) for owner in called for name in loose}

    def sets(self, field: Field, unique: bool) -> bool:
        text = "\n".join(self.strings)
        dotted = re.compile(rf"(?:^|[\s\"']){re.escape(field.path)}=", re.M)
        flagged = any(flag in self.strings for flag, path in FLAGS.items() if path == field.path)
        return (
            field.path in self.paths
            or field.path in self.strings
            or bool(dotted.search(text))
            or flagged
            or (field.owner, field.name) in self.owner_keywords
            or field.name in self.copy_keywords
            or (unique and field.name in self.loose_names)
        )


def settings() -> Settings:
    found = Settings()
    for example in sorted((REPO / "examples").glob("*.yaml")):
        found.add_yaml(example.read_text())
    for root in ("tests", "benchmarks"):
        for file in sorted((REPO / root).rglob("*")):
            if file.suffix in (".yaml", ".yml"):
                found.add_yaml(file.read_text())
            elif file.suffix == ".py" and file.name != "test_config_fields_used.py":
                found.add_python(file.read_text())
    return found


def unset_fields() -> list[str]:
    fields = list(config_fields())
    counts = Counter(f.name for f in fields)
    found = settings()
    return [f.path for f in fields if not found.sets(f, unique=counts[f.name] == 1)]


def test_the_walk_reaches_every_section():
    paths = {f.path for f in config_fields()}
    assert {"env_id", "quarantine.evict", "transport.auth.ca_file", "energy.region"} <= paths
    assert "quarantine" not in paths and len(paths) > 100


def test_each_form_of_setting_a_field_is_read():
    found = Settings()
    found.add_python(
        "QuarantineConfig(min_boards=2)\n"
        "run(['--set', 'quarantine.evict=false', '--fleet-procs', '2'])\n"
        "cfg = {'ingest': {'warmup_margin': 0.5}}\n"
        "helper(stretch_bins=3)\n"
        "helper(enabled=False)\n"
    )
    in_context = Settings()
    in_context.add_python("EnergyConfig(**{name: value})\nCASES = [('enabled', 'no')]\n")
    fields = {f.path: f for f in config_fields()}
    for path in (
        "quarantine.min_boards",
        "quarantine.evict",
        "fleet.procs",
        "ingest.warmup_margin",
        "quarantine.stretch_bins",
    ):
        assert found.sets(fields[path], unique=True), path
    # "enabled" is a field of more than one section: a helper's keyword sets it only in
    # the sections the file builds (QuarantineConfig here), not in energy's.
    assert found.sets(fields["quarantine.enabled"], unique=False)
    assert not found.sets(fields["energy.enabled"], unique=False)
    # ...but in a file that builds one section, a parametrized name is that section's.
    assert in_context.sets(fields["energy.enabled"], unique=False)
    assert not in_context.sets(fields["quarantine.enabled"], unique=False)
    assert not found.sets(fields["quarantine.window_episodes"], unique=True)


def test_every_config_field_is_set_by_an_example_a_test_or_a_benchmark():
    unset = unset_fields()
    assert not unset, f"config fields that no example, test or benchmark sets: {unset}"
