"""A board whose data is plausible by the env's spec but far off the fleet's is
quarantined in a real run: Mosquitto with the run's ACL, a real learner, three honest
actor processes on CartPole, and a board with its own valid password that plays by the
credit rules and sends perfect-looking episodes (obs at the centre, reward 1, every episode
truncated at 200 steps: a return of 200 while the honest fleet's stays at ~10-20).

Each transition passes every check of ingest (inside the observation space, CartPole's
reward of exactly 1, within its grant); only its distribution against the fleet's gives
it away (learner/fleet/quarantine.py). The test holds: it is quarantined by the return rule and
no honest board is; its credit stops at once; its rows leave replay; the run reaches its
budget.
"""

from __future__ import annotations

import threading
import time
import uuid

import pytest

from edge_rl.broker.config import BrokerAccounts
from edge_rl.broker.embedded import EmbeddedBroker
from edge_rl.config import (
    CheckpointConfig,
    QuarantineConfig,
    RunConfig,
)
from edge_rl.wire.topics import Topics
from tests.harness.attackers import PerfectBoard
from tests.harness.configs import small_cartpole
from tests.harness.runs import fleet_and_learner

HONEST = ("sim-00", "sim-01", "sim-02")
OUTLIER = "outlier"
EPISODE = 200  # the outlier's episodes: always truncated here, never fallen
# Long enough that the rule (applied once a second) judges the outlier well before the
# end on a quiet machine too, where the fleet steps a few thousand env steps a second.
BUDGET = 10_000


def real_config(run: str) -> RunConfig:
    return small_cartpole(
        run,
        total_env_steps=BUDGET,
        learning_starts=500,
        max_lag_transitions=600,
        # Barely learning: the honest fleet's returns stay near a random policy's ~20 all
        # run. At the default rate its median reached 40-80 within the budget on a quiet
        # host, and the outlier's 200 no longer stood out (z 2.2).
        dqn={"learning_rate": 1e-5},
        every_updates=100,
        eval_episodes=2,
        select_every=0,
        checkpoint=CheckpointConfig(every_s=0),
        # 3 of its 200-step episodes judge it.
        quarantine=QuarantineConfig(min_episodes=3),
    )


@pytest.mark.slow
@pytest.mark.long
@pytest.mark.timeout(600)
def test_an_outlying_board_is_quarantined_its_rows_evicted_and_the_run_finishes(
    tmp_path, policy_keys, fast_board, wait_for
):
    cfg = real_config(f"q-{uuid.uuid4().hex[:8]}")
    topics = Topics(cfg.transport.root, cfg.run)
    accounts = BrokerAccounts(actors=(*HONEST, OUTLIER), root=cfg.transport.root, run=cfg.run)
    with EmbeddedBroker(kind="mosquitto", accounts=accounts, log_dir=tmp_path) as broker:
        assert broker.authenticated
        fleet, node = fleet_and_learner(cfg, broker, len(HONEST), fast_board, policy_keys, tmp_path)
        board = PerfectBoard(
            broker.url, broker.auth(OUTLIER), topics, node.run_id, OUTLIER, EPISODE
        )
        watch = node.ingest.watch
        assert watch is not None
        seen: dict = {}

        def note_quarantine() -> None:  # the grant when it was quarantined, and after
            if wait_for(lambda: watch.is_quarantined(OUTLIER), 300):
                seen["grant_then"] = node.grants.of(OUTLIER)
                seen["steps_then"] = node.env_steps

        board.start()
        watcher = threading.Thread(target=note_quarantine, daemon=True)
        watcher.start()
        t0 = time.monotonic()
        with fleet:
            summary = node.run()
            fleet.stop()
        wall = time.monotonic() - t0
        board.stop()
        watcher.join(5)
    assert fleet.exit_codes() == [0, 0, 0]
    assert summary["env_steps"] == BUDGET  # the run reached its budget
    verdict = summary["quarantined"][OUTLIER]
    assert set(summary["quarantined"]) == {OUTLIER}  # no honest board
    assert verdict["rule"] == "return" and verdict["value"] == EPISODE and verdict["z"] > 5
    assert seen["steps_then"] < BUDGET
    # Its credit stopped: no grant after the quarantine.
    assert node.grants.of(OUTLIER) == seen["grant_then"]
    # Its rows left replay; what is left is the honest boards' (replay holds the budget).
    assert verdict["rows_evicted"] >= cfg.quarantine.min_transitions
    assert set(node.replay.rows_by_source()) <= set(HONEST)
    taken_from_outlier = summary["boards"][OUTLIER]["transitions"]
    assert verdict["rows_evicted"] == taken_from_outlier  # all of them (replay never wrapped)
    assert len(node.replay) == BUDGET - taken_from_outlier
    assert summary["boards"][OUTLIER]["replay_rows"] == 0
    assert all(summary["boards"][a]["replay_rows"] > 0 for a in HONEST)
    print(
        f"quarantine run: {verdict}, {wall:.0f} s, batches_rejected {summary['batches_rejected']}"
    )
