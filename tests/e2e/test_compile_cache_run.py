"""A real ``edge-rl learn`` points XLA's persistent cache at its directory before it
compiles its update, and the compiled program is there after the run."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from edge_rl.agents.compile_cache import cache_root


@pytest.mark.slow
def test_the_shared_run_compiled_into_the_cache(cartpole_run):
    log = (cartpole_run.run_dir / "learner.log").read_text()
    found = re.search(r"XLA compile cache: (\S+)", log)
    if cache_root() is None:  # EDGE_RL_XLA_CACHE=off in this environment
        assert found is None
        return
    assert found is not None, log[-3000:]
    directory = Path(found.group(1))
    assert directory.parent == cache_root()
    assert any(p.name.endswith("XLA_CPU_JIT.pb") for p in directory.iterdir())
