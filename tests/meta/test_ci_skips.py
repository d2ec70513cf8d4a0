"""The suite's rule for CI, enforced by tests/conftest.py: a skip is a failure there.

Runs pytest on a tiny suite that carries this repository's conftest, with and without
``CI`` set, and counts the outcomes.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from tests.harness.paths import REPO

CONFTEST = REPO / "tests" / "conftest.py"
SUITE = textwrap.dedent(
    """
    import pytest

    @pytest.mark.skipif(True, reason="a tool is missing")
    def test_marked():
        pass

    def test_skips_itself():
        pytest.skip("a dependency is missing")

    @pytest.fixture
    def needs_tool():
        pytest.skip("no such tool")

    def test_fixture_skips(needs_tool):
        pass

    @pytest.mark.xfail(reason="known bug", strict=True)
    def test_expected_failure():
        assert False

    def test_passes():
        pass
    """
)
MODULE_SKIP = (
    'import pytest\npytest.importorskip("no_such_module_edge_rl")\n\ndef test_x():\n    pass\n'
)


def run_suite(tmp_path: Path, ci: str | None, suite: str = SUITE) -> dict[str, int]:
    """Outcome -> count, from pytest's last line (``3 failed, 1 passed, ... in 0.1s``)."""
    (tmp_path / "conftest.py").write_text(CONFTEST.read_text())
    (tmp_path / "test_suite.py").write_text(suite)
    env = {k: v for k, v in os.environ.items() if k != "CI"}
    # The conftest imports the suite's shared parts (tests/harness/) from the repository.
    env["PYTHONPATH"] = os.pathsep.join([str(REPO), env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    if ci is not None:
        env["CI"] = ci
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--rootdir", "."],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=tmp_path,
        env=env,
    )
    last = proc.stdout.splitlines()[-1]
    return {word: int(n) for n, word in re.findall(r"(\d+) (\w+)", last)} | {"line": last}


@pytest.mark.parametrize("ci", ["true"])
def test_in_ci_every_skip_fails(tmp_path, ci):
    got = run_suite(tmp_path, ci)
    # The 3 skipping tests fail: the one that skips itself as a failure, the two that skip
    # at setup (a skipif mark, a fixture) as errors. The xfail and the pass stand.
    assert got == {"failed": 1, "errors": 2, "passed": 1, "xfailed": 1, "line": got["line"]}
    # A module that skips itself is a collection error, which stops the run.
    got = run_suite(tmp_path, ci, MODULE_SKIP)
    assert got == {"error": 1, "line": got["line"]}


@pytest.mark.parametrize("ci", [None, "false"])
def test_off_ci_skips_stay_skips(tmp_path, ci):
    got = run_suite(tmp_path, ci)
    assert got == {"passed": 1, "skipped": 3, "xfailed": 1, "line": got["line"]}
    got = run_suite(tmp_path, ci, MODULE_SKIP)
    assert got == {"skipped": 1, "line": got["line"]}
