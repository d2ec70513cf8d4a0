"""A compromised board (valid credentials) can hurt only itself.

Unit tests, table-driven, of each check that bounds a board by what the learner granted
and by what its env can produce: ``Grants`` (learner/fleet/credit.py), ingest's not_granted,
not_owner and over_credit, the seq-gap bound (dedup), plausibility (plausible.py), and
fleet control's ``status_over_credit``. Then the attacks against a real run (``slow``):
Mosquitto with the run's ACL, a real learner, real actor processes on CartPole, and an
attacker holding a board's own password.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import math
import threading
import time
import uuid

import numpy as np
import pytest

from edge_rl.broker.config import BrokerAccounts
from edge_rl.broker.embedded import EmbeddedBroker
from edge_rl.config import CheckpointConfig, FleetConfig, IngestConfig, RunConfig
from edge_rl.learner.fleet.control import FleetControl
from edge_rl.learner.fleet.credit import Grants
from edge_rl.learner.fleet.figures import MAX_SECONDS
from edge_rl.learner.ingest.dedup import Dedup
from edge_rl.learner.ingest.ingest import Ingest
from edge_rl.learner.ingest.plausible import Bounds, bounds_for_env
from edge_rl.learner.ingest.validate import Rejected, Validator
from edge_rl.learner.replay import ReplayBuffer
from edge_rl.specs import EnvSpec
from edge_rl.types import ActorStatus
from edge_rl.wire.messages import encode_status
from edge_rl.wire.topics import Topics
from edge_rl.wire.transitions import encode_transitions
from tests.harness.attackers import MAX_SEQ, CompromisedBoard, cartpole_batch
from tests.harness.configs import small_cartpole
from tests.harness.paths import REPO
from tests.harness.runs import fleet_and_learner
from tests.harness.stalls import longest_flat_s

CARTPOLE = EnvSpec(obs_shape=(4,), num_actions=2)
TOPICS = Topics("edge-rl", "compromised")
RID = "5f0c2a9e71b3d846"


batch = functools.partial(cartpole_batch, run_id=RID)


CARTPOLE_BOUNDS = Bounds(
    obs_low=(-4.8, -math.inf, -0.418879, -math.inf),
    obs_high=(4.8, math.inf, 0.418879, math.inf),
    reward_low=1.0,
    reward_high=1.0,
    reward_source="known",
)


def ingest_with(grants: Grants) -> Ingest:
    replay = ReplayBuffer(CARTPOLE, 100_000)
    return Ingest(
        CARTPOLE, replay, TOPICS, lambda: 0, run_id=RID, grants=grants, bounds=CARTPOLE_BOUNDS
    )


# --- Grants: the record fleet control writes and ingest reads -------------------------


def test_grants_bound_only_the_session_they_were_granted_to():
    grants = Grants()
    assert grants.of("pi") is None and grants.bound("pi", 7) == 0
    grants.set("pi", 7, 100)
    assert grants.of("pi") == (7, 100)
    assert (grants.bound("pi", 7), grants.bound("pi", 8), grants.bound("other", 7)) == (100, 0, 0)


def test_grants_outlive_the_learner_as_ceilings_for_its_run_id_only(tmp_path):
    path = tmp_path / "grants.json"
    grants = Grants(path, RID, reserve=50)
    for credit in (10, 40, 60, 61, 200):
        grants.set("pi", 7, credit)
    # Rewritten only when a grant passes the ceiling: at 10 (-> 60), 61 (-> 111), 200 (-> 250).
    assert grants.writes == 3 and grants.of("pi") == (7, 200)
    resumed = Grants(path, RID, reserve=50)
    assert resumed.load() == 1 and resumed.of("pi") == (7, 250)  # >= every grant published
    assert Grants(path, "another-start").load() == 0  # another run start's grants bind nothing
    path.write_text(json.dumps({"run_id": RID, "grants": {"pi": [7, MAX_SEQ + 1], "x": "y"}}))
    assert Grants(path, RID).load() == 0  # a count past 2^53 or a non-pair is not a grant


# --- ingest: a batch only from the granted session, only up to its grant --------------

CASES = [  # (name, grant, batches sent in order, reason of the last one or None: accepted)
    ("never granted", None, [batch()], "not_granted"),
    ("another session of a granted id", (8, 100), [batch(session=7)], "not_owner"),
    ("within the grant", (7, 100), [batch(n=60), batch(seq=1, n=40)], None),
    ("one past the grant", (7, 100), [batch(n=60), batch(seq=1, n=41)], "over_credit"),
    ("a huge batch, plausible", (7, 100), [batch(n=19_000)], "over_credit"),
    (
        "a huge batch of +-1e6 rewards",
        (7, 100),
        [batch(n=19_000, reward=1e6)],
        "implausible_reward",
    ),
    ("reward 1e6, in |max_abs_reward|", (7, 100), [batch(reward=1e6)], "implausible_reward"),
    ("an observation outside the space", (7, 100), [batch(obs=5.0)], "out_of_bounds"),
    ("seq 2^53-1 after seq 0", (7, 100), [batch(), batch(seq=MAX_SEQ)], "over_credit"),
    ("a gap as wide as the unused credit", (7, 100), [batch(), batch(seq=97, n=1)], None),
    ("a gap one wider", (7, 100), [batch(), batch(seq=98, n=1)], "over_credit"),
]


@pytest.mark.parametrize(("name", "grant", "batches", "reason"), CASES, ids=[c[0] for c in CASES])
def test_ingest_takes_a_batch_only_within_its_sessions_grant(name, grant, batches, reason):
    grants = Grants()
    if grant is not None:
        grants.set("pi", *grant)
    ingest = ingest_with(grants)
    *before, last = batches
    for b in before:
        assert ingest.handle(TOPICS.transitions("pi"), encode_transitions(b))
    accepted = ingest.handle(TOPICS.transitions("pi"), encode_transitions(last))
    stats = ingest.stats()
    assert accepted is (reason is None)
    assert dict(stats.rejected) == ({} if reason is None else {reason: 1})
    in_replay = sum(len(b) for b in batches) if reason is None else sum(map(len, before))
    assert len(ingest.replay) == stats.transitions == in_replay
    assert stats.total_by_actor.get("pi", 0) <= (grant[1] if grant else 0)  # its share
    assert ingest.missing_batches <= (grant[1] if grant else 0)
    # Episode returns (the live view's) come only from what was taken: CartPole's are n.
    assert all(r == len(b) for r, b in zip(stats.returns, batches, strict=False))


def test_an_old_session_is_refused_once_the_id_has_a_newer_owner():
    grants = Grants()
    grants.set("pi", 7, 100)
    ingest = ingest_with(grants)
    assert ingest.handle(TOPICS.transitions("pi"), encode_transitions(batch()))
    grants.set("pi", 9, 50)  # a restarted board owns the id now
    assert not ingest.handle(TOPICS.transitions("pi"), encode_transitions(batch(seq=1)))
    assert ingest.handle(TOPICS.transitions("pi"), encode_transitions(batch(session=9)))
    assert dict(ingest.stats().rejected) == {"not_owner": 1}


def test_ingest_on_its_own_has_no_credit_bound():
    ingest = Ingest(CARTPOLE, ReplayBuffer(CARTPOLE, 100), TOPICS, lambda: 0, run_id=RID)
    assert ingest.handle(TOPICS.transitions("pi"), encode_transitions(batch(reward=5.0)))


@pytest.mark.parametrize("first_seq", [0, 5, 10, 11, MAX_SEQ])
def test_a_sessions_first_seq_counts_no_gap_and_a_hostile_one_cannot_inflate_it(first_seq):
    """A process that took part in an earlier run start numbers on (protocol §6 rule 9):
    below its first batch here, nothing is this run start's to count as missing."""
    dedup, room, missing = Dedup(), 10, 0
    assert dedup.first_time(("pi", 7), first_seq, room)
    assert dedup.stats().missing_batches == missing
    with pytest.raises(Rejected, match="over_credit"):
        dedup.first_time(("pi", 7), first_seq + room + 2, room)
    assert dedup.stats().missing_batches == missing  # the refused seq marked nothing


# --- plausibility: from the config, the env's known range, a warm-up, or generic -------


def run_config(env_id: str, **ingest) -> RunConfig:
    return RunConfig(env_id=env_id, ingest=IngestConfig(**ingest))


PENDULUM_LOW = -(math.pi**2 + 0.1 * 8**2 + 0.001 * 2**2)


@pytest.mark.parametrize(
    ("cfg", "low", "high", "source"),
    [
        (run_config("CartPole-v1", reward_low=-2.0, reward_high=3.0), -2.0, 3.0, "config"),
        (run_config("CartPole-v1"), 1.0, 1.0, "known"),
        (run_config("Pendulum-v1"), PENDULUM_LOW, 0.0, "known"),
        # A random policy sees only -1 (Acrobot's 0 is its goal): widened by 10 widths of 1.
        (run_config("Acrobot-v1"), -11.0, 9.0, "warm-up"),
        (run_config("Acrobot-v1", warmup_steps=0), -1e6, 1e6, "generic"),
    ],
)
def test_reward_bounds_come_from_the_first_rule_that_applies(cfg, low, high, source):
    b = bounds_for_env(cfg.env_id, cfg.ingest, cfg.seed, cfg.max_abs_reward)
    assert (b.reward_low, b.reward_high, b.reward_source) == (pytest.approx(low), high, source)


def test_observation_bounds_are_the_spaces_with_room_for_float_rounding():
    pendulum = run_config("Pendulum-v1")
    b = bounds_for_env("Pendulum-v1", pendulum.ingest, pendulum.seed, pendulum.max_abs_reward)
    assert (b.obs_low, b.obs_high) == ((-1.0, -1.0, -8.0), (1.0, 1.0, 8.0))
    edge = np.array([[1.0, -1.0, np.float32(8.0) * (1 + 1e-7)]], np.float32)
    assert not b.obs_outside(edge)
    assert b.obs_outside(np.array([[1.0, 0.0, 8.1]], np.float32))
    assert not b.reward_outside(np.array([PENDULUM_LOW, 0.0], np.float32))
    assert b.reward_outside(np.array([0.01], np.float32))
    assert b.reward_outside(np.array([PENDULUM_LOW - 0.01], np.float32))


def test_an_implausible_batch_is_refused_by_reason():
    check = Validator(TOPICS, RID, lambda: 0, bounds=CARTPOLE_BOUNDS)
    check.origin(TOPICS.transitions("pi"), batch())
    for b, reason in [
        (batch(reward=0.5), "implausible_reward"),
        (batch(obs=-4.9), "out_of_bounds"),
    ]:
        with pytest.raises(Rejected) as raised:
            check.origin(TOPICS.transitions("pi"), b)
        assert raised.value.reason == reason


# --- statuses: no count past the session's grant --------------------------------------


class Published:
    def __init__(self) -> None:
        self.sent: list[tuple[str, bytes]] = []

    def __call__(self, topic: str, payload: bytes, retain: bool = False, **_kw) -> bool:
        self.sent.append((topic, payload))
        return True


STATUS_CASES = [  # (claims, recorded)
    (dict(env_steps=0), True),
    (dict(env_steps=100, transitions_sent=96), True),
    (dict(env_steps=101), False),
    (dict(env_steps=MAX_SEQ), False),
    (dict(env_steps=100, transitions_sent=60, transitions_dropped=41), False),
    (dict(env_steps=100, transitions_oversize=MAX_SEQ), False),
]


@pytest.mark.parametrize(("claims", "recorded"), STATUS_CASES)
def test_a_status_claiming_more_than_its_grant_is_refused_and_counted(claims, recorded):
    cfg = RunConfig(env_id="CartPole-v1", run="compromised", fleet=FleetConfig(actors=0))
    grants = Grants()
    fleet = FleetControl(
        cfg.fleet, cfg.pacing, TOPICS, Published(), lambda: (0, {}), RID, grants=grants
    )
    grants.set("pi", 7, 100)
    status = ActorStatus("pi", "running", run_id=RID, session=7, **claims)
    fleet.on_status(TOPICS.status("pi"), encode_status(status))
    assert ("pi" in fleet.actors()) is recorded
    assert fleet.stats().status_over_credit == (not recorded)
    # Another session of the id was granted nothing: any step it claims is refused.
    other = dataclasses.replace(status, session=8, env_steps=1, transitions_sent=0)
    fleet.on_status(TOPICS.status("pi"), encode_status(other))
    assert fleet.stats().status_over_credit == (not recorded) + 1


def test_the_ledger_never_grants_from_a_refused_claim():
    """The stall: a status of 2^53-1 env steps was passed to the ledger as ``stepped``, its
    grant became 2^53-1, outstanding, and nobody was granted again."""
    cfg = RunConfig(
        env_id="CartPole-v1",
        run="compromised",
        learning_starts=100,
        max_lag_transitions=100,
        fleet=FleetConfig(actors=0),
    )
    grants, published = Grants(), Published()
    fleet = FleetControl(
        cfg.fleet, cfg.pacing, TOPICS, published, lambda: (0, {}), RID, grants=grants
    )
    for actor, session in (("honest", 1), ("evil", 2)):
        fleet.on_status(
            TOPICS.status(actor),
            encode_status(ActorStatus(actor, "running", run_id=RID, session=session)),
        )
    fleet.send("running", updates=0)
    assert grants.of("evil") == (2, 100) and grants.of("honest") == (1, 100)
    stall = ActorStatus("evil", "running", run_id=RID, session=2, env_steps=MAX_SEQ)
    fleet.on_status(TOPICS.status("evil"), encode_status(stall))
    fleet.send("running", updates=50)  # 100 more steps: shared, none to the claim
    assert grants.of("evil") == (2, 150) and grants.of("honest") == (1, 150)
    assert fleet.stats().status_over_credit == 1


# --- the attacks against a real run ------------------------------------------------------

HONEST = ("sim-00", "sim-01")
INTRUDER = "intruder"  # a board whose real password the attacker holds
ATTACK_AT_UPDATE = 10
BUDGET = 3_000


def real_config(run: str) -> RunConfig:
    # One step per call: the attack fires in the call that starts at update 10.
    return small_cartpole(
        run,
        total_env_steps=BUDGET,
        dqn={"updates_per_call": 1},
        eval_episodes=2,
        select_every=0,
        checkpoint=CheckpointConfig(every_s=0),
    )


REASONS = ("implausible_reward", "over_credit", "not_owner")


def run_attacked(tmp_path, broker, cfg, policy_keys, fast_board, wait_for, resume=False):
    """One learner run with 2 honest actors and the attacker; what the test asserts on."""
    topics = Topics(cfg.transport.root, cfg.run)
    fleet, node = fleet_and_learner(
        cfg,
        broker,
        2,
        fast_board,
        policy_keys,
        tmp_path,
        fleet_logs=f"fleet-{resume}",
        resume=resume,
    )
    evil = CompromisedBoard(broker.url, broker.auth, topics, node.run_id, INTRUDER, HONEST[1])
    log: dict = {}
    progress: list[tuple[float, int]] = []
    done = threading.Event()

    def sample() -> None:  # env steps over time: a stall is a long flat stretch
        while not done.wait(0.2):
            progress.append((time.monotonic(), node.env_steps))

    real_update = node.algo.update

    def update_then_attack(*args, **kwargs):
        if node.algo.updates == ATTACK_AT_UPDATE and "grant" not in log:
            assert wait_for(lambda: node.grants.of(INTRUDER) is not None, 30)
            log["grant"] = node.grants.of(INTRUDER)[1]
            evil.play(log["grant"])
            log["counted"] = wait_for(
                lambda: all(node.ingest.stats().rejected.get(r, 0) >= 1 for r in REASONS), 30
            )
            log["attacked_at"] = node.env_steps
        return real_update(*args, **kwargs)

    node.algo.update = update_then_attack
    evil.announce()
    threading.Thread(target=sample, daemon=True).start()
    with fleet:
        summary = node.run()
        # The run is over: every actor serves its result (no control message ends a
        # board) until the fleet is stopped, and SIGTERM ends each one cleanly.
        assert all(c is None for c in fleet.exit_codes()), fleet.exit_codes()
        fleet.stop()
    done.set()
    evil.stop()
    assert fleet.exit_codes() == [0, 0]
    return summary, node, log, progress


def refuse_constant(name: str) -> float:
    raise ValueError(f"{name} in summary.json: not strict JSON")


def assert_bounded(summary, node, log, cfg) -> dict:
    """The honest run reaches its budget exactly, the attacker's share of replay is within
    its grant (counted from what the honest actors report sent), refusals by reason."""
    assert summary["env_steps"] == cfg.total_env_steps == len(node.replay)
    actors = summary["actors"]
    sent_by_honest = sum(actors[a]["transitions_sent"] for a in HONEST)
    honest_in_replay = sent_by_honest - summary["transitions_over_budget"]
    attacker_share = len(node.replay) - honest_in_replay
    grant = node.grants.of(INTRUDER)[1]
    assert 0 <= attacker_share <= grant, (attacker_share, grant)
    assert node.ingest.stats().total_by_actor.get(INTRUDER, 0) == attacker_share
    assert set(node.ingest.stats().total_by_actor) <= {*HONEST, INTRUDER}
    assert summary["batches_missing"] <= grant
    rejected = summary["batches_rejected"]
    return {"share": attacker_share, "grant": grant, "rejected": dict(rejected)}


@pytest.mark.slow
def test_a_compromised_board_holds_at_most_its_grant_and_stalls_no_one(
    tmp_path, policy_keys, fast_board, wait_for
):
    cfg = real_config(f"cb-{uuid.uuid4().hex[:8]}")
    accounts = BrokerAccounts(actors=(*HONEST, INTRUDER), root=cfg.transport.root, run=cfg.run)
    with EmbeddedBroker(kind="mosquitto", accounts=accounts, log_dir=tmp_path) as broker:
        assert broker.authenticated
        summary, node, log, progress = run_attacked(
            tmp_path, broker, cfg, policy_keys, fast_board, wait_for
        )
    assert log["counted"] and log["attacked_at"] < cfg.total_env_steps, log
    result = assert_bounded(summary, node, log, cfg)
    rejected = result["rejected"]
    assert rejected["implausible_reward"] == 1  # 19,000 transitions of +-1e6
    assert rejected["over_credit"] == 2  # grant + 1 transitions; seq 2^53-1
    assert rejected["not_owner"] == 2  # the old session; the twin under sim-01
    assert summary["status_over_credit"] >= 1  # the 2^53-1 status: refused, not credit
    # Returns of 1e300 and 1e308, 1e308 s per bucket: clamped, counted, strict JSON.
    assert summary["status_clamped"] >= 2
    written = json.loads(node.run_dir.summary.read_text(), parse_constant=refuse_constant)
    assert written["runtime_breakdown"]["actors"][INTRUDER]["wall"] <= MAX_SECONDS
    assert summary["actor_sessions_refused"] == 1  # the twin
    assert result["share"] == 0 or result["share"] <= log["grant"]
    # No stall: the fleet never stood still for long once it stepped (the actor processes'
    # start-up before the first step is not one: ~20 s on a loaded host).
    stepping = [p for p in progress if p[1] > 0]
    assert longest_flat_s(stepping, cfg.total_env_steps) < 3 * cfg.credit_timeout_s
    print("compromised board:", result, "flat", longest_flat_s(stepping, BUDGET))


def test_every_reason_ingest_refuses_by_is_in_the_protocols_table():
    """docs/protocol.md §7 lists each reason a batch is refused by: a third party reads the
    counters by it."""
    import re

    root = REPO
    source = "".join(p.read_text() for p in (root / "edge_rl/learner/ingest").glob("*.py"))
    raised = set(re.findall(r'Rejected\(\s*"([a-z_]+)"', source))
    doc = (root / "docs/protocol.md").read_text().split("## 7. Reject reasons")[1]
    listed = set(re.findall(r"^\| `([a-z_]+)` \|", doc, re.M))
    assert {"not_granted", "not_owner", "over_credit", "implausible_reward"} <= raised
    assert raised <= listed, raised - listed
