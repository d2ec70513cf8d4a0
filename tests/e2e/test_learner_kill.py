"""Nothing is left running when a learner dies, and board commands end on SIGTERM.

`edge-rl learn --fleet 4` (embedded
Mosquitto, four `edge-rl actor` processes, the export worker) is killed with SIGKILL by
its PID once every board steps, and no process it started, nor one those started, is
alive after a bounded wait.

Every process of the run is found by walking /proc's parent links from the learner's PID,
over and over while it runs (the actors run in sessions of their own: a session or a
process group would not find them)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from edge_rl.sim.boards_file import BoardEntry, write_boards_file
from tests.harness.learn import learn_argv
from tests.harness.paths import REPO
from tests.harness.procs import alive, cmdline, survivors
from tests.harness.waits import bound, exit_code, until, wait_for

BOARDS = 4


def _descendants(root: int) -> set[int]:
    """Every process under ``root`` now, by /proc's parent links."""
    parent_of: dict[int, list[int]] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            ppid = int(stat.read_text().rsplit(")", 1)[1].split()[1])
        except (OSError, IndexError, ValueError):
            continue  # exited meanwhile
        parent_of.setdefault(ppid, []).append(int(stat.parent.name))
    found, todo = set(), [root]
    while todo:
        for child in parent_of.get(todo.pop(), []):
            found.add(child)
            todo.append(child)
    return found


def _joined(fleet_logs: Path) -> int:
    """Boards whose log says they joined the run start (their SIGTERM handling is set)."""
    return sum("joined run" in p.read_text() for p in fleet_logs.glob("sim-*.log"))


def _boards_started(pids: set[int]) -> int:
    """Of ``pids``, the `edge-rl actor` processes (starting, connecting or running)."""
    return sum("edge_rl.cli actor " in cmdline(p) for p in pids)


@pytest.mark.slow
@pytest.mark.parametrize("when", ["boards starting", "boards stepping"])
def test_kill_9_of_a_learner_leaves_no_process_of_its_run(
    tmp_path, mosquitto_available, setpriv_available, when
):
    """Killed while its boards start (importing, connecting, joining), or once every one
    steps: the kernel's SIGTERM reaches each board, and each ends within its bound."""
    run = tmp_path / "run"
    argv = learn_argv(
        "examples/cartpole_dqn.yaml",
        run,
        *("--fleet", str(BOARDS), "--set", "run=orphans", "--set", "total_env_steps=10000000"),
    )
    proc = subprocess.Popen(argv, cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    seen: set[int] = set()

    def fleet_up() -> bool:
        seen.update(_descendants(proc.pid))  # a child seen once is checked at the end
        if when == "boards starting":
            return proc.poll() is not None or _boards_started(seen) == BOARDS
        return proc.poll() is not None or _joined(run / "fleet") == BOARDS

    try:
        assert until(fleet_up, bound(120), step=0.2), "the fleet never joined the run"
        assert proc.poll() is None, proc.stderr.read().decode()[-3000:]
        seen.update(_descendants(proc.pid))
        assert _boards_started(seen) == BOARDS, {p: cmdline(p) for p in seen}
        os.kill(proc.pid, signal.SIGKILL)  # by PID: the learner only
        exit_code(proc, 30, "the learner after kill -9")
        left = survivors(sorted(seen), within_s=bound(40))
        assert not left, f"still running after the learner's kill -9: {left}"
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        for pid in seen:
            if alive(pid):
                os.kill(pid, signal.SIGKILL)


def _catches_sigterm(pid: int) -> bool:
    """Whether ``pid`` has its own SIGTERM handler in place (/proc's SigCgt mask)."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("SigCgt:"):
                return bool(int(line.split()[1], 16) & (1 << (signal.SIGTERM - 1)))
    except OSError:
        pass
    return False


@pytest.mark.slow
def test_board_commands_end_on_a_burst_of_sigterms(tmp_path, fresh_mosquitto, policy_keys):
    """A killed learner's boards get its pdeathsig once per learner thread as those die:
    SIGTERM after SIGTERM. Four `edge-rl actor` processes and an `edge-rl actors` of two
    boards, connected and waiting for a learner, each get 300 SIGTERMs half a millisecond
    apart by PID; every one ends within its bound (25 s) and a margin. (A handler that
    took a lock could be re-entered halfway through and wait for itself: 1 process of 12
    hung that way, on the code before cli/shutdown.py, at a load of ~19.)"""
    _, public_key = policy_keys
    common = ["--board", "rpi4", "--broker", fresh_mosquitto.url, "--env", "CartPole-v1"]
    common += ["--run", "burst", "--policy-key", str(public_key)]
    boards = tmp_path / "group.boards.json"
    write_boards_file(boards, [BoardEntry("g-0", 1), BoardEntry("g-1", 2)])
    argvs = [["actor", *common, "--id", f"a-{i}"] for i in range(4)]
    argvs.append(["actors", *common, "--boards-file", str(boards)])
    procs = [
        subprocess.Popen(
            [sys.executable, "-m", "edge_rl.cli", *argv],
            cwd=REPO,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        for argv in argvs
    ]
    try:
        wait_for(lambda: all(_catches_sigterm(p.pid) for p in procs), 60, "handlers set")
        for p in procs:
            for _ in range(300):
                os.kill(p.pid, signal.SIGTERM)  # by PID; once it exits, the default kills
                time.sleep(0.0005)
        left = survivors([p.pid for p in procs], within_s=bound(35))
        assert not left, f"still running after SIGTERM: {left}"
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
            p.wait()
