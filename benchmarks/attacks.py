#!/usr/bin/env python
"""The deployed CartPole return of an attacked run next to a clean run of the same seed.

    nice .venv/bin/python benchmarks/attacks.py --seeds 1,2,3
    .venv/bin/python benchmarks/attacks.py --seeds 1 --steps 3000 --arms clean,outlier

Each arm runs examples/cartpole_dqn.yaml (its nets, hyper-parameters and model selection)
in this process: Mosquitto with the run's ACL and a password per client, a learner, three
honest simulated Pi 4 actor processes, and in the attacked arms a fourth board whose real
password the attacker holds (tests/harness/attackers.py ``PerfectBoard``): it follows its
credit like an honest board and sends episodes that pass every check of ingest but never
fall (every return 100). Arms:

* clean: no attacker
* outlier: the attacker, with the shipped quarantine rule
* outlier, no quarantine: the attacker, ``quarantine.enabled: false`` (its data stays)

Columns: the deployed int8 policy's ``final_eval_return`` (10 greedy episodes in LiteRT) ±
its std, env steps, the attacker's rows left in replay and where it was quarantined.
Nothing here asserts a number: tests/e2e/benchmarks/test_attacks_bench.py runs it tiny.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
sys.path.insert(1, str(Path(__file__).resolve().parents[1]))  # the shared attackers
from _common import md_table  # noqa: E402

from edge_rl.boards import board_file  # noqa: E402
from edge_rl.broker.config import BrokerAccounts  # noqa: E402
from edge_rl.broker.embedded import EmbeddedBroker  # noqa: E402
from edge_rl.config import load_run_config  # noqa: E402
from edge_rl.learner.node import LearnerNode  # noqa: E402
from edge_rl.sim.fleet import Fleet  # noqa: E402
from edge_rl.transport.mqtt import mqtt_connect  # noqa: E402
from edge_rl.wire.signing import Signer  # noqa: E402
from edge_rl.wire.topics import Topics  # noqa: E402
from tests.harness.attackers import PerfectBoard  # noqa: E402
from tests.harness.paths import REPO  # noqa: E402

ARMS = {"clean": None, "outlier": True, "outlier, no quarantine": False}
HONEST = 3
OUTLIER = "outlier"
HEADERS = ["seed", "arm", "env steps", "deployed return", "attacker rows", "quarantined", "wall s"]


def run_arm(arm: str, seed: int, steps: int, out: Path) -> list:
    quarantine = ARMS[arm]
    overrides = {
        "seed": seed,
        "total_env_steps": steps,
        "run": f"atk-{seed}-{arm.split(',')[0]}-{os.getpid()}",
        "fleet.actors": 0,
        "checkpoint.every_s": 0,
        "quarantine.enabled": quarantine is not False,
    }
    cfg = load_run_config(REPO / "examples" / "cartpole_dqn.yaml", overrides)
    work = Path(tempfile.mkdtemp(prefix=f"{arm.replace(' ', '').replace(',', '-')}-", dir=out))
    signer = Signer.load_or_create(work / "learner.key")
    signer.write_public(work / "learner.pub")
    honest = tuple(f"sim-{i:02d}" for i in range(HONEST))
    accounts = BrokerAccounts(actors=(*honest, OUTLIER), root=cfg.transport.root, run=cfg.run)
    t0 = time.monotonic()
    with EmbeddedBroker(kind="mosquitto", accounts=accounts, log_dir=work) as broker:
        fleet = Fleet(
            HONEST,
            board_file(cfg.fleet.board),
            broker.url,
            cfg.env_id,
            policy_key=work / "learner.pub",
            run=cfg.run,
            seed=seed,
            log_dir=work / "fleet",
            auth=broker.auth,
        )
        node = LearnerNode(
            cfg,
            mqtt_connect(broker.url, broker.auth("learner")),
            work / "run",
            signer=signer,
            fleet_alive=fleet.alive,
        )
        board = None
        if quarantine is not None:
            topics = Topics(cfg.transport.root, cfg.run)
            board = PerfectBoard(broker.url, broker.auth(OUTLIER), topics, node.run_id, OUTLIER)
            board.start()
        with fleet:
            summary = node.run()
            fleet.stop()
        if board is not None:
            board.stop()
    wall = time.monotonic() - t0
    verdict = summary["quarantined"].get(OUTLIER)
    ret, std = summary["final_eval_return"], summary["final_eval_return_std"]
    return [
        seed,
        arm,
        f"{summary['env_steps']:,}",
        "-" if ret is None else f"{ret:.1f} ± {std:.1f}",
        "-" if quarantine is None else f"{node.replay.rows_by_source().get(OUTLIER, 0):,}",
        f"at {verdict['env_steps']:,}" if verdict else "-",
        f"{wall:.0f}",
    ]


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--seeds", default="1,2,3")
    p.add_argument("--steps", type=int, default=50_000, help="total_env_steps of each run")
    p.add_argument("--arms", default=",".join(ARMS).replace(", ", "_"))
    p.add_argument("--out", type=Path, default=REPO / "runs" / "attacks")
    args = p.parse_args()
    arms = [a.replace("_", ", ") for a in args.arms.split(",")]
    unknown = [a for a in arms if a not in ARMS]
    if unknown:
        p.error(f"unknown arms {unknown}; arms: {', '.join(a.replace(', ', '_') for a in ARMS)}")
    args.out.mkdir(parents=True, exist_ok=True)
    rows = []
    for seed in map(int, args.seeds.split(",")):
        for arm in arms:
            rows.append(run_arm(arm, seed, args.steps, args.out))
            print(" | ".join(map(str, rows[-1])), flush=True)
    print()
    print(f"load average at the end: {os.getloadavg()[0]:.1f}")
    print(md_table(HEADERS, rows))


if __name__ == "__main__":
    main()
