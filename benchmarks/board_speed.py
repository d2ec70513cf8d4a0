"""A board file on a real board adds no sleep: the same short ``--fleet 0`` run, side by side.

Each round starts a Mosquitto of its own (loopback, anonymous), an ``edge-rl learn --fleet 0
--broker URL`` on the CartPole example with a 4,000-step budget, and one ``edge-rl actor``
process, in one of three arms:

* ``rpi4``: the shipped ``--board rpi4`` file (``emulation.compute_slowdown: 6``), as a
  real board runs it;
* ``no emulation``: a copy of that file without its ``emulation`` section;
* ``rpi4 --emulate``: the same file with the emulation applied, as the simulated fleet
  runs it.

It prints, per arm (median and range of the rounds), from summary.json: the run's
``wall_s`` (the learner's; it trains as the data comes), the actor's busy seconds (its
runtime breakdown's ``wall`` - ``idle``: what its 4,000 steps cost it, emulation sleep
included), of which ``emulation``, its steps/s over that busy time, and the fleet's energy
(the power model charges busy seconds at ``busy_w``). Arms take turns in each round (order
rotated), under ``nice``: the machine's load moves absolute times, not the side-by-side.

A second table takes the learner out: the actor alone (this script plays the learner: a
retained ``running`` control and a credit grant with no practical limit; the actor stops
after ``--max-env-steps``), so its own speed decides its time: wall seconds of its loop for
the steps, of which ``emulation``, and steps/s.

    .venv/bin/python benchmarks/board_speed.py [--rounds 3] [--alone-rounds 5] [--steps 4000]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from benchmarks._common import md_table  # noqa: E402
from edge_rl.boards import board_file  # noqa: E402
from edge_rl.broker.embedded import EmbeddedBroker  # noqa: E402
from edge_rl.broker.executables import die_with_parent  # noqa: E402

ARMS = ("rpi4", "no emulation", "rpi4 --emulate")
# The example's networks (256-256) and export cadence; no model selection, a short eval.
LEARN_SETS = ["learning_starts=1000", "select_every=0", "select_recheck=0", "eval_episodes=2"]


def one_run(arm: str, steps: int, work: Path, key: Path, plain_board: Path) -> dict:
    cli = [sys.executable, "-m", "edge_rl.cli"]
    out = work / f"run-{time.monotonic_ns()}"
    with EmbeddedBroker(kind="mosquitto", log_dir=work) as broker:
        learn = [
            *cli,
            "learn",
            "--config",
            str(ROOT / "examples" / "cartpole_dqn.yaml"),
            "--fleet",
            "0",
            "--broker",
            broker.url,
            "--out",
            str(out),
            "--run",
            "speed",
            "--signing-key",
            str(key),
            "--set",
            f"total_env_steps={steps}",
            *(a for s in LEARN_SETS for a in ("--set", s)),
        ]
        board = str(plain_board) if arm == "no emulation" else "rpi4"
        actor = [
            *cli,
            "actor",
            "--board",
            board,
            "--broker",
            broker.url,
            "--env",
            "CartPole-v1",
            "--id",
            "pi-01",
            "--run",
            "speed",
            "--policy-key",
            str(key.with_suffix(".pub")),
            "--seed",
            "1",
            *(["--emulate"] if arm.endswith("--emulate") else []),
        ]
        env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2")
        with open(work / "learn.log", "ab") as log_l, open(work / "actor.log", "ab") as log_a:
            # Children die with this script (setpriv --pdeathsig): none is left behind.
            out_l, out_a, err = log_l, log_a, subprocess.STDOUT
            lp = subprocess.Popen(die_with_parent(learn), stdout=out_l, stderr=err, env=env)
            t0 = time.monotonic()
            ap = subprocess.Popen(die_with_parent(actor), stdout=out_a, stderr=err, env=env)
            try:
                ap.wait(timeout=900)
                actor_s = time.monotonic() - t0
                lp.wait(timeout=300)
            finally:
                for p in (ap, lp):
                    if p.poll() is None:
                        p.kill()
                        p.wait()
    if lp.returncode != 0 or ap.returncode != 0:
        raise RuntimeError(f"{arm}: learner {lp.returncode}, actor {ap.returncode}; see {work}")
    summary = json.loads((out / "summary.json").read_text())
    b = summary["runtime_breakdown"]["actors"]["pi-01"]
    busy = b["wall"] - b["idle"]  # the actor's own work (and emulation sleep) for its steps
    return {
        "actor_s": actor_s,
        "learner_s": summary["wall_s"],
        "busy_s": busy,
        "busy_steps_per_s": summary["env_steps"] / busy if busy > 0 else float("nan"),
        "emulation_s": b["emulation"],
        "fleet_kwh": summary["energy"]["fleet"]["kwh"],
    }


def alone(arm: str, steps: int, work: Path, key: Path, plain_board: Path) -> dict:
    """The actor with no learner: it steps as fast as it can, ``steps`` of them."""
    import paho.mqtt.client as mqtt

    from edge_rl.types import ControlMessage, CreditGrant
    from edge_rl.wire.messages import decode_status, encode_control, encode_credit
    from edge_rl.wire.topics import Topics

    topics = Topics("edge-rl", f"alone-{time.monotonic_ns()}")
    board = str(plain_board) if arm == "no emulation" else "rpi4"
    got: list = []
    with EmbeddedBroker(kind="mosquitto", log_dir=work) as broker:
        client = mqtt.Client(mqtt.CallbackAPIVersion.VERSION2, protocol=mqtt.MQTTv5)
        client.on_message = lambda _c, _u, m: got.append(decode_status(m.payload))
        client.connect(broker.host, broker.port)
        client.loop_start()
        try:
            client.subscribe(topics.status("pi-01"), qos=1)
            actor = [
                sys.executable,
                "-m",
                "edge_rl.cli",
                "actor",
                "--board",
                board,
                "--broker",
                broker.url,
                "--env",
                "CartPole-v1",
                "--id",
                "pi-01",
                "--run",
                topics.run,
                "--policy-key",
                str(key.with_suffix(".pub")),
                "--seed",
                "1",
                "--max-env-steps",
                str(steps),
                *(["--emulate"] if arm.endswith("--emulate") else []),
            ]
            proc = subprocess.Popen(
                die_with_parent(actor), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
            )
            try:
                # Be the learner (protocol v3): a run start, and unlimited credit for the
                # session the actor's first status names.
                deadline = time.monotonic() + 60
                while not any(s.session for s in got):
                    if time.monotonic() > deadline or proc.poll() is not None:
                        raise RuntimeError(f"{arm}: the actor never reported (see {work})")
                    time.sleep(0.02)
                session = next(s.session for s in got if s.session)
                control = encode_control(ControlMessage("running", "bench"))
                grant = encode_credit(CreditGrant("bench", session, 10**9))
                for topic, payload in ((topics.control, control), (topics.credit("pi-01"), grant)):
                    client.publish(topic, payload, qos=1, retain=True).wait_for_publish(5)
                proc.wait(timeout=600)
            finally:
                if proc.poll() is None:
                    proc.kill()
                    proc.wait()
            deadline = time.monotonic() + 10
            while not any(s.state == "stopped" for s in got) and time.monotonic() < deadline:
                time.sleep(0.05)
        finally:
            client.disconnect()
            client.loop_stop()
    b = next(s for s in got if s.state == "stopped").breakdown
    loop = b["wall"] - b["idle"]  # stepping, publishing and sleeping: not waiting
    return {"loop_s": loop, "emulation_s": b["emulation"], "steps_per_s": steps / loop}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--alone-rounds", type=int, default=5)
    ap.add_argument("--steps", type=int, default=4000)
    args = ap.parse_args()
    os.nice(5)
    with tempfile.TemporaryDirectory(prefix="board-speed-") as tmp:
        work = Path(tmp)
        key = work / "learner.key"
        subprocess.run(
            [sys.executable, "-m", "edge_rl.cli", "keygen", str(key)],
            check=True,
            capture_output=True,
        )
        plain = yaml.safe_load(board_file("rpi4").read_text())
        plain.pop("emulation")
        plain_board = work / "rpi4-plain.yaml"
        plain_board.write_text(yaml.safe_dump(plain))
        results: dict[str, list[dict]] = {a: [] for a in ARMS}
        for r in range(args.rounds):
            for arm in ARMS[r % 3 :] + ARMS[: r % 3]:
                res = one_run(arm, args.steps, work, key, plain_board)
                results[arm].append(res)
                print(
                    f"round {r + 1} {arm}: actor {res['actor_s']:.1f} s, "
                    f"emulation {res['emulation_s']:.1f} s",
                    flush=True,
                )
        solo: dict[str, list[dict]] = {a: [] for a in ARMS}
        for r in range(args.alone_rounds):
            for arm in ARMS[r % 3 :] + ARMS[: r % 3]:
                solo[arm].append(alone(arm, args.steps, work, key, plain_board))
    load = os.getloadavg()[0]
    if args.alone_rounds:
        rows = []
        for arm, rs in solo.items():
            col = _columns(rs)
            rows.append(
                [
                    arm,
                    col("loop_s", "{:.2f}"),
                    col("emulation_s", "{:.2f}"),
                    col("steps_per_s", "{:,.0f}"),
                ]
            )
        print(f"\nthe actor alone, {args.steps} env steps, {args.alone_rounds} rounds\n")
        print(md_table(["actor's board", "loop s", "of which emulation s", "steps/s"], rows))
    if not args.rounds:
        return
    rows = []
    for arm, rs in results.items():
        col = _columns(rs)
        rows.append(
            [
                arm,
                col("learner_s"),
                col("busy_s", "{:.2f}"),
                col("emulation_s", "{:.2f}"),
                col("busy_steps_per_s", "{:,.0f}"),
                col("fleet_kwh", "{:.2e}"),
            ]
        )
    print(
        f"\n{args.steps} env steps, CartPole-v1, 1 actor, {args.rounds} rounds; "
        f"load average at the end {load:.1f}\n"
    )
    print(
        md_table(
            [
                "actor's board",
                "run wall_s",
                "actor busy s",
                "of which emulation s",
                "busy steps/s",
                "fleet kWh",
            ],
            rows,
        )
    )


def _columns(rs: list[dict]):
    """``col(key, fmt)``: the median of the rounds and their range, formatted."""

    def col(k: str, fmt: str = "{:.1f}") -> str:
        xs = [x[k] for x in rs]
        med = fmt.format(statistics.median(xs))
        return med if len(xs) == 1 else f"{med} ({fmt.format(min(xs))}-{fmt.format(max(xs))})"

    return col


if __name__ == "__main__":
    main()
