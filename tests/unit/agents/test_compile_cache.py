"""agents/compile_cache.py: where XLA's persistent cache goes, and that a fresh process
writes its compiled update there and the next one compiles from it."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
import tensorflow as tf

from edge_rl.agents import compile_cache
from tests.harness.paths import REPO


def test_cache_root_follows_the_environment(monkeypatch, tmp_path):
    monkeypatch.delenv(compile_cache.ENV, raising=False)
    assert compile_cache.cache_root() == compile_cache.DEFAULT.expanduser()
    monkeypatch.setenv(compile_cache.ENV, str(tmp_path))
    assert compile_cache.cache_root() == tmp_path
    for off in ("off", "", "0"):
        monkeypatch.setenv(compile_cache.ENV, off)
        assert compile_cache.cache_root() is None


def test_the_flag_names_a_directory_per_tensorflow_version(monkeypatch, tmp_path):
    monkeypatch.setenv("TF_XLA_FLAGS", "--tf_xla_auto_jit=0")
    used = compile_cache.use_xla_cache(tmp_path)
    assert used == tmp_path / f"tf-{tf.__version__}" and used.is_dir()
    flags = os.environ["TF_XLA_FLAGS"]
    assert flags == f"--tf_xla_auto_jit=0 --tf_xla_persistent_cache_directory={used}"
    # Already set (by us or by the user): left as it is.
    assert compile_cache.use_xla_cache(tmp_path / "other") is None
    assert os.environ["TF_XLA_FLAGS"] == flags


def test_off_leaves_the_flags_alone(monkeypatch):
    monkeypatch.setenv(compile_cache.ENV, "off")
    monkeypatch.setenv("TF_XLA_FLAGS", "")
    assert compile_cache.use_xla_cache() is None
    assert os.environ["TF_XLA_FLAGS"] == ""


# A fresh process (TensorFlow reads the flag once per process): the TD3 update compiled with
# the cache on, then its first call's result, which must not depend on where the program
# came from.
CHILD = """
import json, os, sys
import numpy as np
from edge_rl.agents.compile_cache import use_xla_cache
from edge_rl.agents.td3.config import TD3Config
from edge_rl.agents.td3.learning import TD3Learner
from edge_rl.envs import env_spec
from edge_rl.types import ReplaySample
from pathlib import Path
used = use_xla_cache(Path(sys.argv[1]))
cfg = TD3Config(actor_hidden=(16, 16), critic_hidden=(16, 16), batch_size=8, updates_per_call=2)
learner = TD3Learner(env_spec("Pendulum-v1"), cfg, seed=0)
learner.compile()
rng = np.random.default_rng(0)
col = lambda *s: rng.standard_normal((16, *s)).astype(np.float32)
m = learner.update(ReplaySample(col(3), col(1), col(), col(3), np.zeros(16, np.float32)))
print(json.dumps({"dir": str(used), "loss": m["loss"]}))
"""


def _child(root) -> dict:
    env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2", "TF_XLA_FLAGS": ""}
    proc = subprocess.run(
        [sys.executable, "-c", CHILD, str(root)],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=REPO,
        env=env,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


@pytest.mark.slow  # two processes import TensorFlow: ~15 s quiet, 90 s at a load of 30
def test_a_fresh_process_writes_the_program_and_the_next_reads_it(tmp_path):
    first = _child(tmp_path)
    directory = tmp_path / f"tf-{tf.__version__}"
    assert first["dir"] == str(directory)
    programs = sorted(p.name for p in directory.iterdir())
    assert programs and all(p.endswith("XLA_CPU_JIT.pb") for p in programs)
    stamps = {p.name: p.stat().st_mtime_ns for p in directory.iterdir()}
    second = _child(tmp_path)
    # Read, not compiled and written again: the same files, untouched; the same update.
    assert {p.name: p.stat().st_mtime_ns for p in directory.iterdir()} == stamps
    assert second["loss"] == first["loss"]
