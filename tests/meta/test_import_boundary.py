"""A board installs edge-rl[edge]: the actor's code path must never import TensorFlow/keras."""

from __future__ import annotations

import subprocess
import sys
import textwrap

EDGE_MODULES = [
    "edge_rl.types",
    "edge_rl.specs",
    "edge_rl.boards",
    "edge_rl.envs",
    "edge_rl.wire",
    "edge_rl.transport",
    "edge_rl.runtime",
    "edge_rl.actor",
    "edge_rl.learner.ingest",
    "edge_rl.deploy.doctor",
    "edge_rl.sim.fleet",
    "edge_rl.cli",
]

SCRIPT = textwrap.dedent(
    """
    import importlib, pkgutil, sys

    class Block:
        def find_spec(self, name, path=None, target=None):
            if name.split(".")[0] in ("tensorflow", "keras", "tf_keras", "mujoco"):
                raise ImportError("edge-side import of " + name)
            return None

    sys.meta_path.insert(0, Block())
    for mod in sys.argv[1:]:
        pkg = importlib.import_module(mod)
        for info in pkgutil.walk_packages(getattr(pkg, "__path__", []), mod + "."):
            importlib.import_module(info.name)
    # The actor command itself, as a board runs it (--help parses and imports the command).
    from click.testing import CliRunner
    from edge_rl.cli.main import main
    for command in ("actor", "actors", "doctor"):  # what a board (or a board group) runs
        result = CliRunner().invoke(main, [command, "--help"])
        assert result.exit_code == 0, result.output
    print("ok")
    """
)


def test_edge_side_never_imports_tensorflow():
    proc = subprocess.run(
        [sys.executable, "-c", SCRIPT, *EDGE_MODULES], capture_output=True, text=True, timeout=120
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert proc.stdout.strip().endswith("ok")


def test_the_blocker_would_catch_a_tensorflow_import():
    # Guards the guard: importing the learner's agent must trip the same blocker.
    proc = subprocess.run(
        [sys.executable, "-c", SCRIPT, "edge_rl.agents.dqn.learning"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode != 0 and "edge-side import of" in proc.stderr
