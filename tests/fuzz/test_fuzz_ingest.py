"""Fuzz the learner's ``Ingest.handle(topic, payload)``: it never raises, and a malformed
batch never reaches replay.

How each case is judged: ``fuzzkit.transition_violation`` (§3.1) and the topic decide
whether the batch is acceptable; ``handle`` must return True exactly then, ``len(replay)``
must grow by exactly the batch's ``n`` then and not at all otherwise, every reject must be
counted under a §7 reason, and nothing may be counted as ``internal_error`` (which would
mean an exception escaped the decoder). The rows §3.1's ``intervention`` flags (v5) must go
into the demonstration buffer too, exactly those, and none of a refused batch. A second
ingest whose version source raises runs every payload through the ``internal_error`` path,
whose count reads ``peek_count``.
"""

from __future__ import annotations

import logging

import numpy as np
import pytest
from hypothesis import strategies as st

from edge_rl.learner.demos import BatchMixer
from edge_rl.learner.ingest.ingest import Ingest
from edge_rl.learner.replay import ReplayBuffer
from edge_rl.wire.topics import Topics
from edge_rl.wire.transitions import decode_transitions, peek_count
from tests.fuzz import fuzzkit as fk
from tests.fuzz.budgets import BUDGETS
from tests.fuzz.transition_cases import payloads

MAX = 1_000_000
TOPICS = Topics(run="fuzz")
INGEST_REASONS = fk.CODEC_REASONS | {"actor_mismatch", "out_of_bounds", "unknown_policy", "stale"}
BOUND = 1e6  # Ingest's default max_abs_observation and max_abs_reward


# The actor's own transitions topic mostly; else another actor's, its status topic, others.
topic_choices = st.sampled_from(
    [TOPICS.transitions] * 4
    + [
        lambda _: TOPICS.transitions("sim-99"),
        TOPICS.status,
        lambda _: "edge-rl/other/actors/x/y",
        lambda _: TOPICS.base + "/actors//transitions",
        lambda _: "",
    ]
)


def check_ingest(topic: str, payload: bytes, spec, latest: int) -> None:
    replay, demos = ReplayBuffer(spec, capacity=1_000), ReplayBuffer(spec, capacity=1_000)
    ingest = Ingest(
        spec,
        replay,
        TOPICS,
        latest_version=lambda: latest,
        max_payload_bytes=MAX,
        demos=BatchMixer(replay, demos),
    )
    values, why = fk.read_transitions(payload, spec, MAX)
    if why is None:
        header = fk.parse_header(payload)
        if header["actor_id"] != TOPICS.actor_of(topic):
            why = "actor_mismatch"
        elif too_big(payload, spec):
            why = "out_of_bounds"
        elif header["policy_version"] > latest:
            why = "unknown_policy"
    accepted = ingest.handle(topic, payload)
    s = ingest.stats()
    assert s.rejected["internal_error"] == 0, "an exception escaped the decoder"
    assert set(s.rejected) <= INGEST_REASONS
    if why is None:
        n = fk.parse_header(payload)["n"]
        assert accepted and len(replay) == min(n, replay.capacity) and s.transitions == n
        acted = int(values["intervention"].sum())
        assert len(demos) == demos.interventions() == min(acted, demos.capacity)
        if n <= replay.capacity:  # else the ring wrote over some of them
            assert replay.interventions() == acted
        assert ingest.handle(topic, payload) is False  # QoS 1 resend
        assert ingest.stats().duplicate_batches == 1
        assert len(replay) == min(n, replay.capacity)
    else:
        assert not accepted, f"a malformed batch went into replay: {why}"
        assert len(replay) == 0 and s.transitions == 0 and s.rejected_batches == 1
        assert len(demos) == 0
        assert s.rejected_transitions == peek_count(payload)


def too_big(payload: bytes, spec) -> bool:
    """Finite but past the learner's magnitude bounds (the payload is valid by then)."""
    b = decode_transitions(payload, spec, MAX)
    obs = max(float(np.abs(b.obs).max(initial=0)), float(np.abs(b.next_obs).max(initial=0)))
    return obs > BOUND or float(np.abs(b.reward).max(initial=0)) > BOUND


def check_internal_error_path(topic: str, payload: bytes, spec) -> None:
    def broken() -> int:
        raise RuntimeError("version source down")

    replay = ReplayBuffer(spec, capacity=1_000)
    ingest = Ingest(spec, replay, TOPICS, latest_version=broken, max_payload_bytes=MAX)
    assert ingest.handle(topic, payload) is False  # must not raise, even on this path
    assert len(replay) == 0 and ingest.stats().rejected_batches == 1


@pytest.fixture
def quiet_ingest():
    """Every case is a new Ingest, so each logs its first reject (with a traceback on the
    internal_error path): formatting them is most of the time. The counters are checked."""
    logger = logging.getLogger("edge_rl.learner.ingest")
    level = logger.level
    logger.setLevel(logging.CRITICAL)
    yield
    logger.setLevel(level)


@BUDGETS
def test_fuzz_ingest_handle(seeds, budget, quiet_ingest):
    def run(case):
        (payload, spec), topic_choice, latest = case
        topic = topic_choice("sim-00" if spec == seeds.cartpole_spec else "sim-01")
        check_ingest(topic, payload, spec, latest)
        check_internal_error_path(topic, payload, spec)

    cases = st.tuples(payloads(seeds), topic_choices, st.sampled_from([3, 3, 3, 2, 0]))
    fk.fuzz(budget, cases, run)


def test_the_seeds_are_ingested(seeds):
    check_ingest(TOPICS.transitions("sim-00"), seeds.cartpole, seeds.cartpole_spec, 3)
    check_ingest(TOPICS.transitions("sim-01"), seeds.pendulum, seeds.pendulum_spec, 3)
    check_ingest(TOPICS.transitions("sim-00"), seeds.cartpole_compact, seeds.cartpole_spec, 3)
    check_ingest(TOPICS.transitions("sim-01"), seeds.pendulum_compact, seeds.pendulum_spec, 3)
