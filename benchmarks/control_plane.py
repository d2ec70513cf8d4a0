#!/usr/bin/env python
"""The control plane at 10, 100 and 1,000 boards: one table.

    nice .venv/bin/python benchmarks/control_plane.py                       # 10, 100, 1000
    .venv/bin/python benchmarks/control_plane.py --boards 10 --window 5    # a smoke run

Each row starts a Mosquitto of its own (a password per board and the run's ACL, as
``edge-rl learn`` does), the learner's control plane (tests/harness/control_plane.py: its
real ``FleetControl`` on a real MQTT client, no training: credit flows as if the updates
kept up) and ``edge-rl fleet --procs P`` (rpi4 boards, emulated). Columns:

* boards / procs: simulated boards, and the ``edge-rl actors`` processes they run in
* arm: ``before``, every board connects at once and every grant that grew is published
  every 50 ms round; ``after``, connects spread over boards/200 s (``--start-spread``)
  and grants bounded to 200/s over the fleet (``fleet.max_grants_per_s``)
* spread s: each board connects after a random delay up to this (0: all at once)
* connect s: from the fleet's start until every board's first status was seen
* conn fail: boards whose log says a CONNECT failed or was refused before it got in
* status/s, grant/s: messages the learner received / published in the steady window
* cp cpu %: the learner's CPU inside FleetControl (statuses and grants) over the window,
  in % of one core; proc cpu %: the whole control-plane process (its MQTT thread too)
* int8 p50/p99 s, gst p50/p99 s: from a policy's publish until a board's status names it,
  over every board (int8: zlib codec; gst: GST-pruned int8, blocks codec)
* MB/board: the fleet processes' RSS / boards; broker KB/conn: Mosquitto's RSS / boards
* tr/s: transitions the learner received per second in the window

Timings depend on the machine's load: the table notes ``os.getloadavg()`` at the end.
Nothing here asserts a number: tests/e2e/benchmarks/test_control_plane_bench.py runs a
small one and checks its shape.
"""

from __future__ import annotations

import argparse
import os
import re
import resource
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
sys.path.insert(1, str(Path(__file__).resolve().parents[1]))  # the control-plane harness
from _common import md_table  # noqa: E402

from edge_rl.boards import board_file  # noqa: E402
from edge_rl.broker.config import BrokerAccounts  # noqa: E402
from edge_rl.broker.embedded import EmbeddedBroker  # noqa: E402
from edge_rl.sim.fleet import Fleet, fleet_ids  # noqa: E402
from edge_rl.wire.signing import Signer  # noqa: E402
from edge_rl.wire.topics import Topics  # noqa: E402
from tests.harness.control_plane import ControlPlane, Models, wait  # noqa: E402

HEADERS = [
    "arm",
    "boards",
    "procs",
    "spread s",
    "connect s",
    "conn fail",
    "status/s",
    "grant/s",
    "cp cpu %",
    "proc cpu %",
    "int8 p50 s",
    "int8 p99 s",
    "gst p50 s",
    "gst p99 s",
    "MB/board",
    "broker KB/conn",
    "tr/s",
]
RUN, RUN_ID = "scale", "scale-start"
CONNECT_FAILED = re.compile(r"refused the connection|cannot connect|disconnected \(")


# before: every board connects at once, every grown grant is published every round;
# after: connects spread over boards/200 s, grants bounded to 200/s over the fleet.
ARMS = {"before": (0.0, 0.0), "after": (1 / 200, 200.0)}


@dataclass
class Row:
    arm: str
    boards: int
    procs: int
    spread: float
    connect_s: float | None = None
    conn_fail: int = 0
    status_per_s: float = 0.0
    grant_per_s: float = 0.0
    cp_cpu: float = 0.0
    proc_cpu: float = 0.0
    int8: tuple[float, float] | None = None
    gst: tuple[float, float] | None = None
    mb_per_board: float = 0.0
    broker_kb: float = 0.0
    transitions_per_s: float = 0.0

    def cells(self) -> list:
        def q(p: tuple[float, float] | None, i: int) -> str:
            return "-" if p is None else f"{p[i]:.2f}"

        return [
            self.arm,
            self.boards,
            self.procs,
            f"{self.spread:g}",
            "-" if self.connect_s is None else f"{self.connect_s:.1f}",
            self.conn_fail,
            f"{self.status_per_s:.0f}",
            f"{self.grant_per_s:.0f}",
            f"{self.cp_cpu:.1f}",
            f"{self.proc_cpu:.1f}",
            q(self.int8, 0),
            q(self.int8, 1),
            q(self.gst, 0),
            q(self.gst, 1),
            f"{self.mb_per_board:.1f}",
            f"{self.broker_kb:.0f}",
            f"{self.transitions_per_s:.0f}",
        ]


def rss_kb(pid: int | None) -> int:
    try:
        text = Path(f"/proc/{pid}/status").read_text()
    except (OSError, TypeError):
        return 0
    m = re.search(r"VmRSS:\s+(\d+) kB", text)
    return int(m.group(1)) if m else 0


def raise_fd_limit(n: int) -> None:
    """Mosquitto (a child: it inherits the limit) holds a socket per board."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    want = n * 2 + 1024 if hard == resource.RLIM_INFINITY else min(n * 2 + 1024, hard)
    if soft != resource.RLIM_INFINITY and soft < want:
        resource.setrlimit(resource.RLIMIT_NOFILE, (want, hard))


def percentiles(xs: list[float], n: int) -> tuple[float, float] | None:
    if len(xs) < n:
        return None  # not every board loaded it in time
    return xs[len(xs) // 2], xs[min(len(xs) - 1, int(len(xs) * 0.99))]


def fan_out(cp: ControlPlane, payload: bytes, version: int, n: int, timeout: float):
    cp.publish_policy(payload, version)
    wait(lambda: cp.loaded(version) == n, timeout)
    return percentiles(cp.fan_out_s(version), n)


def measure(arm: str, n: int, procs: int, window: float, models: Models, work: Path) -> Row:
    spread_per_board, grant_rate = ARMS[arm]
    spread = n * spread_per_board
    row = Row(arm, n, procs, spread)
    signer = Signer.generate()
    key = work / f"signing-{n}-{arm}.pub"
    signer.write_public(key)
    ids = fleet_ids(n)
    topics = Topics("edge-rl", RUN)
    accounts = BrokerAccounts(ids, root="edge-rl", run=RUN)
    logs = work / f"fleet-{n}-{arm}"
    timeout = 60 + n * 0.3
    with (
        EmbeddedBroker(kind="mosquitto", accounts=accounts, log_dir=work) as broker,
        ControlPlane(
            broker.url,
            broker.auth("learner"),
            topics,
            RUN_ID,
            signer,
            boards=n,
            max_grants_per_s=grant_rate,
        ) as cp,
    ):
        cp.fleet.send("running")
        fleet = Fleet(
            n,
            board_file("rpi4"),
            broker.url,
            "CartPole-v1",
            policy_key=key,
            run=RUN,
            log_dir=logs,
            auth=broker.auth,
            procs=procs,
            start_spread_s=spread,
        )
        with fleet:
            t0 = time.monotonic()
            if wait(lambda: len(cp.first_seen) == n, timeout):
                row.connect_s = max(cp.first_seen.values()) - t0
            row.int8 = fan_out(cp, models.bundle("int8", 1, RUN, RUN_ID, signer), 1, n, timeout)
            row.gst = fan_out(cp, models.bundle("gst", 2, RUN, RUN_ID, signer), 2, n, timeout)
            wait(lambda: cp.stepping() == n, timeout)
            before = (cp.statuses, cp.sent["grant"], cp.status_cpu_s + cp.grant_cpu_s)
            received, cpu0 = cp.fleet_received(), time.process_time()
            time.sleep(window)
            row.status_per_s = (cp.statuses - before[0]) / window
            row.grant_per_s = (cp.sent["grant"] - before[1]) / window
            row.cp_cpu = 100 * (cp.status_cpu_s + cp.grant_cpu_s - before[2]) / window
            row.proc_cpu = 100 * (time.process_time() - cpu0) / window
            row.transitions_per_s = (cp.fleet_received() - received) / window
            row.mb_per_board = sum(rss_kb(p.pid) for p in fleet.procs) / 1024 / n
            row.broker_kb = rss_kb(broker.pid) / n
        row.conn_fail = sum(
            1 for f in logs.glob("*.log") for line in f.open() if CONNECT_FAILED.search(line)
        )
    return row


def read_table(path: Path) -> list[dict[str, str]]:
    """The rows of a table this script wrote (``--out``), as column -> cell."""
    lines = [x for x in path.read_text().splitlines() if x.startswith("|")]
    header = [c.strip() for c in lines[0].strip("|").split("|")]
    return [
        dict(zip(header, (c.strip() for c in line.strip("|").split("|")), strict=True))
        for line in lines[2:]
    ]


def plot(table: Path, out: Path) -> None:
    """Messages/s and fan-out p99 against the fleet size, before and after."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = read_table(table)
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(10, 4))
    for arm, style in (("before", "o--"), ("after", "s-")):
        mine = [r for r in rows if r["arm"] == arm]
        n = [int(r["boards"]) for r in mine]
        for col, colour in (("grant/s", "C0"), ("status/s", "C1")):
            ax1.plot(n, [float(r[col]) for r in mine], style, color=colour, label=f"{col} {arm}")
        for col, colour in (("int8 p99 s", "C2"), ("gst p99 s", "C3")):
            ys = [float(r[col]) if r[col] != "-" else float("nan") for r in mine]
            ax2.plot(n, ys, style, color=colour, label=f"{col} {arm}")
    for ax, title in ((ax1, "learner: messages/s"), (ax2, "policy fan-out p99 (s)")):
        ax.set_xscale("log")
        ax.set_xlabel("boards")
        ax.set_title(title)
        ax.legend(fontsize=7)
        ax.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(out, dpi=110)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--boards", default="10,100,1000", help="comma-separated fleet sizes")
    ap.add_argument("--per-proc", type=int, default=250, help="boards per edge-rl actors process")
    ap.add_argument("--arms", default="before,after", help=f"of {sorted(ARMS)}")
    ap.add_argument("--window", type=float, default=20.0, help="steady-state window (s)")
    ap.add_argument("--out", type=Path, help="also write the table here")
    ap.add_argument("--plot", type=Path, help="plot the table (--out, or --replot's) here")
    ap.add_argument("--replot", type=Path, help="only plot this earlier --out table")
    args = ap.parse_args()
    if args.replot is not None:
        plot(args.replot, args.plot)
        return
    sizes = [int(x) for x in args.boards.split(",")]
    raise_fd_limit(max(sizes))
    models = Models()
    rows = []
    with tempfile.TemporaryDirectory(prefix="edge-rl-cp-") as tmp:
        for n in sizes:
            procs = max(1, -(-n // args.per_proc))
            for arm in args.arms.split(","):
                row = measure(arm, n, procs, args.window, models, Path(tmp))
                print(md_table(HEADERS, [row.cells()]).splitlines()[-1], flush=True)
                rows.append(row)
    table = md_table(HEADERS, [r.cells() for r in rows])
    load = ", ".join(f"{x:.2f}" for x in os.getloadavg())
    sizes = {k: len(models.bundle(k, 1, RUN, RUN_ID, Signer.generate())) for k in ("int8", "gst")}
    text = (
        f"{table}\n\nload average at the end: {load} ({os.cpu_count()} CPUs); policy bundle "
        f"bytes: int8 (zlib) {sizes['int8']:,}, gst (blocks) {sizes['gst']:,}\n"
    )
    print(text)
    if args.out is not None:
        args.out.write_text(text)
        if args.plot is not None:
            plot(args.out, args.plot)


if __name__ == "__main__":
    main()
