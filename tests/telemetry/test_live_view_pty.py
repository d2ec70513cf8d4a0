"""`edge-rl learn` in a real pseudo-terminal, read back through a terminal emulator.

The live view must redraw in place: at any moment the screen holds one copy of it. A
log record or a native library's line written to the terminal past the live display
leaves the last frame behind and the next one is drawn below it (the view "stacks").
The run ends with the short result, not the summary's JSON, and no TensorFlow start-up
line reaches the terminal.
"""

from __future__ import annotations

import json
import os
import re
import sys
import time
from pathlib import Path

import pexpect
import pyte
import pytest

ROOT = Path(__file__).resolve().parents[2]
ROWS, COLS = 60, 160
HEADER = re.compile(r"^\s*episodes\s+recent return\s+updates\s")
DATA_ROW = re.compile(r"^\s*\d+\s+(-|-?\d+\.\d)\s+\d+\s")
# What TensorFlow, absl and LiteRT print on start-up, and the summary's JSON.
NOT_IN_TERMINAL = [b"cuInit", b"oneDNN", b"absl::", b"cudart_stub", b"XNNPACK delegate",
                   b'"transitions_received"', b'"runtime_breakdown"']  # fmt: skip


def _headers(lines: list[str]) -> list[int]:
    return [i for i, line in enumerate(lines) if HEADER.match(line)]


def _with_data_row(lines: list[str], i: int) -> bool:
    return i + 1 < len(lines) and bool(DATA_ROW.match(lines[i + 1]))


@pytest.mark.slow
def test_learn_redraws_in_place_and_ends_with_a_short_result(
    tmp_path, mosquitto_available, tiny_learn
):
    run = tmp_path / "run"
    env = {k: v for k, v in os.environ.items() if k not in ("COLUMNS", "LINES", "NO_COLOR")}
    env["TERM"] = "xterm-256color"
    args = ["-m", "edge_rl.cli", "learn", "--config", "examples/cartpole_dqn.yaml",
            "--out", str(run), *tiny_learn("dqn"), "--set", "total_env_steps=2000"]  # fmt: skip
    child = pexpect.spawn(sys.executable, args, cwd=str(ROOT), env=env, dimensions=(ROWS, COLS))
    screen = pyte.Screen(COLS, ROWS)
    stream = pyte.ByteStream(screen)
    raw = bytearray()
    most_headers, worst, whole_views = 0, "", 0
    deadline = time.monotonic() + 240
    try:
        while True:
            try:
                chunk = child.read_nonblocking(65536, timeout=5)
            except pexpect.EOF:
                break
            except pexpect.TIMEOUT:
                assert time.monotonic() < deadline, "edge-rl learn did not end in 240 s"
                continue
            raw += chunk
            stream.feed(chunk)
            lines = screen.display
            headers = _headers(lines)
            if len(headers) > most_headers:
                most_headers, worst = len(headers), "\n".join(x.rstrip() for x in lines)
            if len(headers) == 1 and _with_data_row(lines, headers[0]):
                whole_views += 1
    finally:
        child.close(force=True)
    final = screen.display
    text = "\n".join(line.rstrip() for line in final)
    assert child.exitstatus == 0, text
    # One copy of the view at every moment (a stacked view shows two or more at once),
    # seen whole (header and data row) at several moments.
    assert most_headers == 1, f"{most_headers} headers on one screen:\n{worst}"
    assert whole_views >= 3, f"the view was seen whole {whole_views} times:\n{text}"
    # The last frame stays; below it, the short result.
    assert len(_headers(final)) == 1, text
    assert re.search(r"final return -?\d+\.\d ± \d+\.\d over 2 greedy episodes", text), text
    assert f"edge-rl eval {run}/policy.tflite --env CartPole-v1 --episodes 10" in text
    assert f"edge-rl report {run}" in text
    for noise in NOT_IN_TERMINAL:
        assert noise not in raw, f"{noise!r} reached the terminal:\n{text}"
    # What the terminal did not get is in the run directory.
    assert (run / "summary.json").exists()
    assert "published v1" in (run / "learner.log").read_text()


@pytest.mark.slow
def test_learn_json_prints_the_full_summary(tmp_path, mosquitto_available, tiny_learn, cli):
    run = tmp_path / "run"
    proc = cli("learn", "--config", "examples/cartpole_dqn.yaml", "--out", str(run),
               *tiny_learn("dqn"), "--json")  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    # stdout is the summary and nothing else (no tty here: the progress lines are on stderr).
    assert json.loads(proc.stdout) == json.loads((run / "summary.json").read_text())
    assert "edge-rl report" not in proc.stdout
