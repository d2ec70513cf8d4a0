"""`edge-rl learn` in a real pseudo-terminal, read back through a terminal emulator.

The live view must redraw in place: at any moment the screen holds one copy of it. A
log record or a native library's line written to the terminal past the live display
leaves the last frame behind and the next one is drawn below it (the view "stacks").
The run ends with the short result, not the summary's JSON, and no TensorFlow start-up
line or codecarbon warning reaches the terminal.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time

import pexpect
import pyte
import pytest

from tests.harness.paths import REPO
from tests.harness.waits import bound

ROOT = REPO
ROWS, COLS = 60, 160
HEADER = re.compile(r"^\s*episodes\s+recent return\s+greedy\s+updates\s")
DATA_ROW = re.compile(r"^\s*\d+\s+(-|-?\d+\.\d)\s+(-|-?\d+\.\d \(v\d+\))\s+\d+\s")
# What TensorFlow, absl and LiteRT print on start-up, and the summary's JSON.
NOT_IN_TERMINAL = [
    b"cuInit",
    b"oneDNN",
    b"absl::",
    b"cudart_stub",
    b"XNNPACK delegate",
    b'"transitions_received"',
    b'"runtime_breakdown"',
    b"[codecarbon",  # codecarbon's records, in its own handler's format or ours
    b"WARNING codecarbon",
    b"ERROR codecarbon",
    b"Regional emissions retrieval failed",
]


def _headers(lines: list[str]) -> list[int]:
    return [i for i, line in enumerate(lines) if HEADER.match(line)]


def _with_data_row(lines: list[str], i: int) -> bool:
    return i + 1 < len(lines) and bool(DATA_ROW.match(lines[i + 1]))


class Terminal:
    """``edge-rl learn ARGS`` in a ROWS x COLS pseudo-terminal, its output fed to a screen."""

    def __init__(self, *args: str) -> None:
        env = {k: v for k, v in os.environ.items() if k not in ("COLUMNS", "LINES", "NO_COLOR")}
        env["TERM"] = "xterm-256color"
        self.child = pexpect.spawn(
            sys.executable,
            ["-m", "edge_rl.cli", "learn", *args],
            cwd=str(ROOT),
            env=env,
            dimensions=(ROWS, COLS),
        )
        self.screen = pyte.Screen(COLS, ROWS)
        self._stream = pyte.ByteStream(self.screen)
        self.raw = bytearray()
        self.most_headers = 0
        self.worst = ""
        self.whole_views = 0

    def read(self, until=lambda lines: False, timeout: float = 240) -> bool:
        """Read until EOF (False) or until ``until(screen lines)`` (True), checking every
        screen on the way: the most headers seen at once, how often the view was whole."""
        deadline = time.monotonic() + timeout
        while True:
            try:
                chunk = self.child.read_nonblocking(65536, timeout=5)
            except pexpect.EOF:
                return False
            except pexpect.TIMEOUT:
                assert time.monotonic() < deadline, f"no end in {timeout} s:\n{self.text()}"
                continue
            self.raw += chunk
            self._stream.feed(chunk)
            lines = self.screen.display
            headers = _headers(lines)
            if len(headers) > self.most_headers:
                self.most_headers = len(headers)
                self.worst = self.text()
            if len(headers) == 1 and _with_data_row(lines, headers[0]):
                self.whole_views += 1
            if until(lines):
                return True

    def text(self) -> str:
        return "\n".join(line.rstrip() for line in self.screen.display)

    def close(self) -> int | None:
        self.child.close(force=True)
        return self.child.exitstatus


@pytest.mark.slow
def test_learn_redraws_in_place_and_ends_with_a_short_result(
    tmp_path, mosquitto_available, tiny_learn
):
    run = tmp_path / "run"
    term = Terminal(
        "--config",
        "examples/cartpole_dqn.yaml",
        "--out",
        str(run),
        *tiny_learn("dqn"),
        "--set",
        "total_env_steps=2000",
        "--set",
        "energy.region=atlantis",  # codecarbon warns that it has no such region, on any host
    )
    try:
        term.read()
    finally:
        status = term.close()
    final, text = term.screen.display, term.text()
    assert status == 0, text
    # One copy of the view at every moment (a stacked view shows two or more at once),
    # seen whole (header and data row) at several moments.
    assert term.most_headers == 1, f"{term.most_headers} headers on one screen:\n{term.worst}"
    assert term.whole_views >= 3, f"the view was seen whole {term.whole_views} times:\n{text}"
    # The last frame stays; below it, the short result.
    assert len(_headers(final)) == 1, text
    assert re.search(r"final return -?\d+\.\d ± \d+\.\d \(2 greedy episodes", text), text
    # The last frame shows a scored policy's greedy return beside the exploring one.
    header = _headers(final)[0]
    assert re.search(r"\s-?\d+\.\d \(v\d+\)\s", final[header + 1]), final[header + 1]
    # The next commands run as printed, with this Python (edge-rl is not on PATH here).
    prog = f"{sys.executable} -m edge_rl.cli"
    # Compared without whitespace: the terminal wraps a long line wherever the width falls,
    # inside a path too (xdist's popen-gwN/ in the path moves it).
    flat = "".join(text.split())
    assert (
        f"next:{prog}eval{run}/policy.tflite--envCartPole-v1--episodes10".replace(" ", "") in flat
    ), text
    report = f"{prog} report {run}"
    assert flat.endswith(report.replace(" ", "")), flat[-300:]
    done = subprocess.run(
        f"{report} --out {tmp_path / 'report'}",
        shell=True,
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=bound(120),
    )
    assert done.returncode == 0 and (tmp_path / "report" / "report.md").is_file(), done.stderr
    for noise in NOT_IN_TERMINAL:
        assert noise not in term.raw, f"{noise!r} reached the terminal:\n{text}"
    # What the terminal did not get is in the run directory.
    assert (run / "summary.json").exists()
    learner_log = (run / "learner.log").read_text()
    assert "published v1" in learner_log
    assert "Regional emissions retrieval failed" in learner_log
    assert text.count("learner energy by codecarbon: CPU ") == 1, text


@pytest.mark.slow
def test_ctrl_c_leaves_the_view_and_says_where_the_run_is(tmp_path, mosquitto_available):
    run = tmp_path / "run"
    term = Terminal(
        "--config",
        "examples/cartpole_dqn.yaml",
        "--out",
        str(run),
        "--fleet",
        "1",
        "--board",
        "rpi5",
        "--set",
        "dqn.hidden=[32, 32]",
        "--set",
        "total_env_steps=10000000",
    )
    try:
        stepping = re.compile(r"^env steps .* [1-9]\d*/10000000 ")
        assert term.read(until=lambda lines: any(stepping.match(x) for x in lines)), term.text()
        term.child.sendintr()  # Ctrl-C: SIGINT to the terminal's foreground process group
        term.read(timeout=90)
    finally:
        status = term.close()
    text = term.text()
    assert status == 130, text
    assert term.most_headers == 1, f"{term.most_headers} headers on one screen:\n{term.worst}"
    assert len(_headers(term.screen.display)) == 1, text
    # The learner checkpointed and wrote its summary (issue 14): it says how to go on.
    flat = "".join(text.split())  # (the line wraps at the terminal's width)
    assert f"checkpointandsummary.jsonin{run};continuewith" in flat, text
    assert f"{sys.executable}-medge_rl.clilearn--resume{run}" in flat, text
    assert "Aborted!" not in text and "Traceback" not in text
    assert json.loads((run / "summary.json").read_text())["interrupted"] is True
    assert (run / "checkpoint").is_dir() and (run / "metrics.csv").exists()
