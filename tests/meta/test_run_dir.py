"""One RunDir owns every file name of a run directory: no other module of edge_rl spells one."""

from __future__ import annotations

import ast
from pathlib import Path

from edge_rl.config import RunConfig
from edge_rl.learner.run_dir import RunDir
from tests.harness.paths import REPO

PACKAGE = REPO / "edge_rl"
FILE_NAMES = {
    "config.yaml",
    "learner.log",
    "metrics.csv",
    "publishes.jsonl",
    "policy.tflite",
    "manifest.json",
    "policy.bundle",
    "summary.json",
    "breakdown.csv",
    "checkpoint.old",
    "checkpoint.tmp",
    "signing.key",
    "signing.pub",
    "deployments.jsonl",
}
# Below the learner's layer, a model's manifest is the file beside it (docs/protocol.md §4.4):
# runtime/ reads it by that name, as a run directory and a flashed board both lay it out.
BESIDE_A_MODEL = {("runtime/evaluate.py", "manifest.json")}


def test_run_dir_names_each_file(tmp_path):
    run = RunDir(tmp_path / "run")
    names = {
        run.config,
        run.log,
        run.metrics,
        run.publishes,
        run.policy,
        run.manifest,
        run.bundle,
        run.summary,
        run.breakdown,
        run.checkpoint_old,
        run.checkpoint_tmp,
        run.signing_key,
        run.signing_public_key,
        run.deployments,
    }
    assert {p.name for p in names} == FILE_NAMES and {p.parent for p in names} == {run.path}
    assert run.earlier_summary(2).name == "summary.2.json"
    assert (run.checkpoint.name, run.tensorboard.name, run.fleet_logs.name) == (
        "checkpoint",
        "tb",
        "fleet",
    )
    assert run.signing_key_for(RunConfig("CartPole-v1").signing_key) == run.signing_key
    own = RunConfig("CartPole-v1", signing_key="/keys/learner.key")
    assert run.signing_key_for(own.signing_key) == Path("/keys/learner.key")
    assert run.summary in run.earlier_run() and run.checkpoint in run.earlier_run()


def test_no_other_module_spells_a_run_directory_file_name():
    found = set()
    for f in sorted(PACKAGE.rglob("*.py")):
        for node in ast.walk(ast.parse(f.read_text())):
            if isinstance(node, ast.Constant) and node.value in FILE_NAMES:
                found.add((str(f.relative_to(PACKAGE)), node.value))
    mine = {(p, name) for p, name in found if p == "learner/run_dir.py"}
    assert {name for _, name in mine} == FILE_NAMES
    assert found - mine - BESIDE_A_MODEL == set()
    assert BESIDE_A_MODEL <= found, sorted(BESIDE_A_MODEL - found)
