"""Every repository path that the docs, the host and script files, the build files and the
code's comments name exists: a file that moves takes its mentions along.

Two forms are read. A rooted path (``tests/e2e/security/test_broker_limits.py``,
``host/acl``, ``edge_rl/sim/``) names a path from the repository's root. A relative one
with a file extension (``actor/group.py``, ``ingest/validate.py``) names a path under
``edge_rl/``, or under the naming file's own folder or one of its parents. Braces expand
(``host/cluster/node-{a,b,c}.conf``); placeholders (``<board>``, ``*``) end a path before
they start, so ``firmware_configs/<board>.yaml`` is not read, and a path with an f-string's
``{name}`` is not read either.
"""

from __future__ import annotations

import itertools
import re
from pathlib import Path

from tests.harness.paths import REPO

# What is read: the docs, the deployment and script files, the build files, the code.
ROOTS = ("docs", "host", "scripts", "edge_rl", "tests", "benchmarks", "examples", ".ci")
TOP_FILES = ("README.md", "pyproject.toml", "Makefile")
SUFFIXES = {".py", ".md", ".yaml", ".yml", ".toml", ".conf", ".nft", ".sh", ".service", ""}
SUFFIXES |= {".template"}

TOP = r"(?:edge_rl|tests|host|docs|scripts|benchmarks|examples|firmware_configs)"
# Not part of a longer path or word on its left; braces for alternatives; ends on a name.
ROOTED = re.compile(rf"(?<![\w./-]){TOP}/[\w./{{}},-]*[\w}}]")
RELATIVE = re.compile(r"(?<![\w./-])[\w-]+/[\w./{},-]*\.(?:py|md|yaml|conf|nft|sh|service|toml)\b")

# Relative paths that name no repository file: a run's or a board's files, a benchmark's
# output directory, third-party sources a comment cites.
NOT_IN_REPO = (
    "OUT/",
    "RUN_DIR/",
    "run_dir/",
    "runs/",
    "etc/",
    "ETC/",
    "SRC/",
    "DIR/",
    "rl_zoo3/",
    "codecarbon/",
)
# Rooted paths that are examples of what one would add.
EXAMPLES = {"edge_rl/agents/sac"}  # docs/architecture.md: "A new algorithm (say SAC)"


def expand(path: str) -> list[str]:
    """``a/{b,c}.py`` -> ``a/b.py``, ``a/c.py`` (any number of brace groups); none for a
    path with a placeholder (``a/{name}.py``)."""
    parts = re.split(r"\{([^{}]*)\}", path)
    if any("," not in p for p in parts[1::2]):
        return []
    choices = [[p] if i % 2 == 0 else p.split(",") for i, p in enumerate(parts)]
    return ["".join(c) for c in itertools.product(*choices)]


def named_paths(text: str) -> list[tuple[str, bool]]:
    """``(path, rooted)`` for each path ``text`` names."""
    rooted = [(m.group(0), True) for m in ROOTED.finditer(text)]
    spans = {m.start() for m in ROOTED.finditer(text)}
    relative = [
        (m.group(0), False)
        for m in RELATIVE.finditer(text)
        if m.start() not in spans and not m.group(0).startswith(NOT_IN_REPO)
    ]
    return rooted + relative


def exists(path: str, rooted: bool, where: Path) -> bool:
    if rooted:
        bases = [REPO]
    else:
        bases = [REPO, REPO / "edge_rl", *itertools.takewhile(lambda d: d != REPO, where.parents)]
    return any((base / path.rstrip(".")).exists() for base in bases)


def scanned() -> list[Path]:
    files = [REPO / name for name in TOP_FILES]
    for root in ROOTS:
        files += [
            f
            for f in sorted((REPO / root).rglob("*"))
            if f.is_file() and f.suffix in SUFFIXES and "__pycache__" not in f.parts
        ]
    return [f for f in files if f != Path(__file__).resolve()]


def missing(file: Path) -> list[str]:
    try:
        text = file.read_text()
    except UnicodeDecodeError:
        return []
    return [
        path
        for named, rooted in named_paths(text)
        for path in expand(named)
        if path not in EXAMPLES and not exists(path, rooted, file)
    ]


def test_paths_are_read_in_both_forms():
    text = (
        "see tests/e2e/security/test_broker_limits.py, host/acl and edge_rl/sim/.\n"
        "(actor/group.py) host/cluster/node-{a,b}.conf firmware_configs/<board>.yaml\n"
        "https://github.com/x/y/blob/main/z/w.py OUT/table.md a.b/c\n"
    )
    assert named_paths(text) == [
        ("tests/e2e/security/test_broker_limits.py", True),
        ("host/acl", True),
        ("edge_rl/sim", True),
        ("host/cluster/node-{a,b}.conf", True),
        ("actor/group.py", False),
    ]
    assert expand("host/cluster/node-{a,b}.conf") == [
        "host/cluster/node-a.conf",
        "host/cluster/node-b.conf",
    ]
    assert expand("edge_rl/{part}/") == []


def test_a_moved_file_is_caught():
    doc = REPO / "docs" / "x.md"
    assert exists("actor/group.py", False, doc)  # under edge_rl/
    assert exists("ingest/validate.py", False, REPO / "edge_rl/learner/outbound/x.py")
    assert not exists("tests/security/test_broker_limits.py", True, doc)
    assert not exists("actor/host.py", False, doc)


def test_every_named_repository_path_exists():
    files = scanned()
    assert len(files) > 300 and REPO / "host" / "edge-rl.nft" in files  # the walk found them
    stale = {str(f.relative_to(REPO)): m for f in files if (m := missing(f))}
    assert not stale, f"paths that do not exist, by the file that names them: {stale}"
