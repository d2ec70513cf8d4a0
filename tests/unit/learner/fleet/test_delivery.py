"""Credit against delivery (write_off.py, credit.py): a board that
claims steps it never delivers holds less of the fleet's lead the more it claims and the
less it sends; what it withheld lands within its grant, no further."""

from __future__ import annotations

import numpy as np
import pytest

from edge_rl.config import FleetConfig, RunConfig
from edge_rl.learner.fleet.control import FleetControl
from edge_rl.learner.fleet.credit import CreditLedger, Grants
from edge_rl.learner.fleet.timing import Quiet
from edge_rl.learner.fleet.write_off import DELIVERY_PRIOR, WriteOff
from edge_rl.learner.ingest.ingest import Ingest
from edge_rl.learner.replay import ReplayBuffer
from edge_rl.specs import EnvSpec
from edge_rl.types import ActorStatus
from edge_rl.wire.messages import encode_status
from edge_rl.wire.topics import Topics
from edge_rl.wire.transitions import encode_transitions
from tests.harness.attackers import cartpole_batch
from tests.harness.waits import wait_for

CARTPOLE = EnvSpec(obs_shape=(4,), num_actions=2)
TOPICS = Topics("edge-rl", "delivery")
RID = "d5f0c2a9e71b3d84"


def written_off(actor: str, session: int, sent: int, received: int) -> WriteOff:
    w = WriteOff(Quiet(1.0))
    status = ActorStatus(actor, "running", session=session, transitions_sent=sent)
    w.lost(status, received, 0, now=0.0)
    w.lost(status, received, 0, now=2.0)  # silent past the bound: written off
    return w


@pytest.mark.parametrize(
    ("sent", "received", "trust"),
    [
        (0, 0, 1.0),  # nothing claimed
        (500, 500, 1.0),  # all of it delivered
        (1_000, 800, (800 + DELIVERY_PRIOR) / (1_000 + DELIVERY_PRIOR)),  # a lost stretch
        (5_000, 0, DELIVERY_PRIOR / (5_000 + DELIVERY_PRIOR)),  # its grant claimed, none sent
    ],
)
def test_delivery_is_the_share_of_its_claims_that_arrived(sent, received, trust):
    w = written_off("x", 7, sent, received)
    assert w.delivery("x", 7, received) == pytest.approx(trust)
    assert w.delivery("x", 8, received) == 1.0  # another session's claims are not its


def test_the_more_it_claims_and_the_less_it_sends_the_lower_its_trust():
    claims = [written_off("x", 1, sent, 100).delivery("x", 1, 100) for sent in (200, 1_000, 5_000)]
    sends = [written_off("x", 1, 1_000, got).delivery("x", 1, got) for got in (0, 300, 900)]
    assert claims == sorted(claims, reverse=True) and sends == sorted(sends)


def test_the_ledger_grants_a_distrusted_board_less_and_counts_what_it_withheld():
    ledger = CreditLedger()
    out = ledger.grant(1_000, 0, {}, ["h", "x"], max_outstanding=400, trust={"h": 1.0, "x": 0.05})
    assert out == {"h": 400, "x": 20}
    assert ledger.withheld == 380


def test_a_board_claiming_its_grant_unsent_gets_less():
    cfg = RunConfig(
        env_id="CartPole-v1",
        run="delivery",
        credit_timeout_s=0.5,
        learning_starts=2_000,
        max_lag_transitions=4_000,
        fleet=FleetConfig(actors=0),
    )
    grants = Grants()
    replay = ReplayBuffer(CARTPOLE, 10_000)
    ingest = Ingest(CARTPOLE, replay, TOPICS, lambda: 0, run_id=RID, grants=grants)
    fleet = FleetControl(
        cfg.fleet,
        cfg.pacing,
        TOPICS,
        lambda *_a, **_k: True,
        ingest.received,
        RID,
        grants=grants,
        session_of=ingest.accounting.session_of,
    )

    def say(actor: str, session: int, steps: int) -> None:
        status = ActorStatus(
            actor, "running", run_id=RID, session=session, env_steps=steps, transitions_sent=steps
        )
        fleet.on_status(TOPICS.status(actor), encode_status(status))

    say("h", 1, 0)
    say("x", 2, 0)
    fleet.send("running", updates=0)
    first = grants.bound("x", 2)
    assert first > 0 and grants.bound("h", 1) == first
    # h delivers all it was granted; x says it sent all of it and delivers nothing.
    h_seq = 0
    batch = cartpole_batch("h", 1, h_seq, first, run_id=RID)
    assert ingest.handle(TOPICS.transitions("h"), encode_transitions(batch))
    say("h", 1, first)
    say("x", 2, first)

    def written() -> bool:
        fleet.send("running", updates=0)
        return fleet.write_off.written_off.get("x") == first

    wait_for(written, 10, "x's claim written off")
    # The lead freed by the write-off went mostly to h.
    for _ in range(3):
        fleet.send("running", updates=10)
    x_more = grants.bound("x", 2) - first
    h_more = grants.bound("h", 1) - first
    assert 0 <= x_more < h_more / 4, (x_more, h_more)
    assert fleet.stats().credit_withheld > 0
    # Its late dump of what it claimed lands within its grant, and no further.
    dump = cartpole_batch("x", 2, 0, first, run_id=RID)
    assert ingest.handle(TOPICS.transitions("x"), encode_transitions(dump))
    assert len(replay) == 2 * first
    over = cartpole_batch("x", 2, 1, x_more + 1, run_id=RID)
    assert not ingest.handle(TOPICS.transitions("x"), encode_transitions(over))
    assert dict(ingest.stats().rejected) == {"over_credit": 1}
    assert np.isfinite(fleet.stats().credit_written_off)


def test_a_board_almost_fully_trusted_still_gets_the_last_step():
    """Near the budget a board may hold one step; 1 x its trust (0.97) floored to 0 and
    withheld the run's last steps for ever (the run stalled 2 steps short)."""
    ledger = CreditLedger()
    out = ledger.grant(1_200, 1_198, {"x": 1_198}, ["x"], max_outstanding=1, trust={"x": 0.97})
    assert out == {"x": 1_199} and ledger.withheld == 0


def test_withheld_is_the_most_held_back_at_once_not_a_sum_over_rounds():
    ledger = CreditLedger()
    for _ in range(5):  # the same 380 steps held back, round after round
        ledger.grant(1_000, 0, {}, ["h", "x"], max_outstanding=400, trust={"h": 1.0, "x": 0.05})
    assert ledger.withheld == 380
