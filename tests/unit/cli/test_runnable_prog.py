"""The commands a result prints next run as printed (cli/common.py ``runnable_prog``):
``edge-rl`` only when ``PATH`` finds that very script, else its path, else ``python -m``."""

from __future__ import annotations

import os
import shlex
import subprocess
import sys

from edge_rl.cli.common import runnable_prog


def _script(d):
    d.mkdir()
    script = d / "edge-rl"
    script.write_text(f"#!{sys.executable}\nfrom edge_rl.cli.main import main\nmain()\n")
    script.chmod(0o755)
    return script


def test_edge_rl_on_path_is_edge_rl(tmp_path):
    script = _script(tmp_path / "bin")
    assert runnable_prog(str(script), path=str(tmp_path / "bin")) == "edge-rl"


def test_a_venv_script_off_path_is_its_path(tmp_path, monkeypatch):
    script = _script(tmp_path / ".venv bin")
    monkeypatch.chdir(tmp_path)
    assert runnable_prog(str(script), path="/nonexistent") == "'.venv bin/edge-rl'"
    other = _script(tmp_path / "other")  # another edge-rl on PATH is not this one
    assert runnable_prog(str(script), path=str(other.parent)) == "'.venv bin/edge-rl'"


def test_python_dash_m_is_this_python_and_runs(tmp_path):
    prog = runnable_prog("/x/edge_rl/cli/__main__.py")
    assert prog == f"{shlex.quote(sys.executable)} -m edge_rl.cli"
    env = dict(os.environ, PYTHONPATH=os.getcwd())
    done = subprocess.run(f"{prog} --version", shell=True, capture_output=True, text=True, env=env)
    assert done.returncode == 0 and done.stdout.startswith("edge-rl "), done
