#!/usr/bin/env python
"""What waiting boards cost: CPU, wake-ups and threads of a simulated fleet at rest.

    .venv/bin/python benchmarks/fleet_at_rest.py                       # 100 and 1,000 boards
    .venv/bin/python benchmarks/fleet_at_rest.py --boards 100 --window 10
    git worktree add /tmp/base <commit>
    .venv/bin/python benchmarks/fleet_at_rest.py --baseline /tmp/base  # that code beside this

Per fleet size and arm: a Mosquitto on a free loopback port, no learner, and `edge-rl fleet
--boards N --procs P` (CartPole, rpi4 board file) connected to it. Every board is then
connected and waiting for a learner that never comes: the state a fleet is in before a run,
between runs and while its learner is down. Once every board has said hello (the broker's
log counts the connections), the fleet's processes are sampled over ``--window`` seconds:

* cpu %: the board hosts' CPU time (user + system, every thread) over the window, in %
  of one core; broker cpu %: Mosquitto's
* wakes/s: voluntary context switches a second summed over every thread of the hosts (a
  thread that sleeps and wakes counts one): what keeps a board's CPU from its deepest sleep
* threads: of the hosts, at the end; load: the 1-min load average at the end

``--baseline DIR``: each size is also run with ``PYTHONPATH=DIR`` (an older checkout of
this repository: `before`), one arm after the other on the same broker settings, so the
two compare on one machine in one run. Nothing here asserts a number.
"""

from __future__ import annotations

import argparse
import os
import re
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
sys.path.insert(1, str(Path(__file__).resolve().parents[1]))
from _common import md_table  # noqa: E402
from _proc_cpu import cpu_s, tree  # noqa: E402

from edge_rl.broker.embedded import EmbeddedBroker  # noqa: E402
from edge_rl.wire.signing import Signer  # noqa: E402

HEADERS = ["arm", "boards", "procs", "connected", "cpu %", "wakes/s", "threads", "broker cpu %"]
HEADERS += ["load"]


def switches(pid: int) -> tuple[int, int]:
    """Voluntary context switches and threads of ``pid``, over its threads."""
    total, threads = 0, 0
    try:
        tasks = list(Path(f"/proc/{pid}/task").iterdir())
    except OSError:
        return 0, 0
    for task in tasks:
        try:
            text = (task / "status").read_text()
        except OSError:
            continue
        m = re.search(r"^voluntary_ctxt_switches:\s+(\d+)", text, re.M)
        total += int(m.group(1)) if m else 0
        threads += 1
    return total, threads


def sample(root: int) -> tuple[float, int, int]:
    """CPU seconds, voluntary switches and threads of the board hosts under ``root``."""
    cpu, wakes, threads = 0.0, 0, 0
    for pid in tree(root):
        cpu += cpu_s(f"/proc/{pid}/stat") or 0.0
        w, t = switches(pid)
        wakes, threads = wakes + w, threads + t
    return cpu, wakes, threads


def connected(log: Path) -> int:
    """Clients the broker has seen connect (its log's ``New client connected``)."""
    try:
        return log.read_text(errors="replace").count("New client connected")
    except OSError:
        return 0


def one(arm: str, boards: int, procs: int, window: float, baseline: Path | None) -> list:
    env = {**os.environ}
    if baseline is not None:
        env["PYTHONPATH"] = str(baseline)
    with tempfile.TemporaryDirectory(prefix="at-rest-") as tmp:
        work = Path(tmp)
        pub = work / "signing.pub"  # no policy is ever signed: the boards only wait
        Signer.generate().write_public(pub)
        with EmbeddedBroker(kind="mosquitto", log_dir=work) as broker:
            cmd = [str(Path(sys.executable).with_name("edge-rl")), "fleet"]
            cmd += ["--broker", broker.url, "--env", "CartPole-v1", "--boards", str(boards)]
            cmd += ["--procs", str(procs), "--policy-key", str(pub), "--run", "at-rest"]
            cmd += ["--log-dir", str(work / "boards"), "--start-spread", str(boards / 100)]
            # From the temporary directory: `python -m` puts the working directory first
            # on sys.path, which would win over PYTHONPATH from this checkout's root.
            fleet = subprocess.Popen(
                cmd, env=env, cwd=work, stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT
            )
            try:
                deadline = time.monotonic() + 60 + boards / 10
                while time.monotonic() < deadline and connected(broker.log_path) < boards:
                    time.sleep(1.0)
                seen = connected(broker.log_path)
                time.sleep(5.0)  # the last hellos answered (by nobody) and settled
                broker_cpu = lambda: cpu_s(f"/proc/{broker.pid}/stat") or 0.0  # noqa: E731
                c0, w0, _ = sample(fleet.pid)
                b0, t0 = broker_cpu(), time.monotonic()
                time.sleep(window)
                c1, w1, threads = sample(fleet.pid)
                b1, t1 = broker_cpu(), time.monotonic()
            finally:
                fleet.send_signal(signal.SIGINT)
                try:
                    fleet.wait(60)
                except subprocess.TimeoutExpired:
                    for pid in reversed(tree(fleet.pid)):
                        os.kill(pid, signal.SIGKILL)
                    fleet.wait(10)
    dt = t1 - t0
    return [
        arm,
        boards,
        procs,
        seen,
        f"{100 * (c1 - c0) / dt:.1f}",
        f"{(w1 - w0) / dt:,.0f}",
        threads,
        f"{100 * (b1 - b0) / dt:.1f}",
        f"{os.getloadavg()[0]:.1f}",
    ]


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--boards", default="100,1000", help="fleet sizes, comma-separated")
    p.add_argument("--window", type=float, default=30.0, help="seconds sampled at rest")
    p.add_argument("--baseline", type=Path, help="an older checkout: the `before` arm")
    args = p.parse_args()
    rows = []
    for n in map(int, args.boards.split(",")):
        procs = 1 if n <= 100 else 4
        arms = [("after", None)]
        if args.baseline is not None:
            arms.insert(0, ("before", args.baseline.resolve()))
        for arm, base in arms:
            rows.append(one(arm, n, procs, args.window, base))
            print(" | ".join(map(str, rows[-1])), flush=True)
    print()
    print(md_table(HEADERS, rows))


if __name__ == "__main__":
    main()
