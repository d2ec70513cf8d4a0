"""Ingest's parts, each alone: validate (Rejected), admission, dedup, accounting; and the
facade's checkpoint state composed of theirs."""

from __future__ import annotations

import dataclasses
import logging

import numpy as np
import pytest

from edge_rl.learner.ingest.accounting import Accounting
from edge_rl.learner.ingest.admission import Admission, AdmissionStats
from edge_rl.learner.ingest.dedup import Dedup, DedupStats
from edge_rl.learner.ingest.ingest import Ingest
from edge_rl.learner.ingest.validate import Rejected, Validator
from edge_rl.learner.replay import ReplayBuffer
from edge_rl.specs import EnvSpec
from edge_rl.types import TransitionBatch
from edge_rl.wire.envelope import CodecError
from edge_rl.wire.topics import Topics
from edge_rl.wire.transitions import decode_transitions, encode_transitions
from tests.harness.batches import small_batch

SPEC = EnvSpec(obs_shape=(2,), num_actions=3)
TOPICS = Topics("edge-rl", "parts")
RUN_ID = "5f0c2a9e71b3d846"


def batch(run_id: str = RUN_ID, **fields) -> TransitionBatch:
    return small_batch(run_id=run_id, **fields)


def validator(latest=3, lag=None, run_id=RUN_ID) -> Validator:
    return Validator(TOPICS, run_id, lambda: latest, max_policy_lag=lag)


# --- validate: Rejected, not CodecError ----------------------------------------------


def test_rejected_is_not_a_codec_error():
    assert not issubclass(Rejected, CodecError) and not issubclass(CodecError, Rejected)
    e = Rejected("stale", "v1 is 5 behind")
    assert e.reason == "stale" and str(e) == "stale: v1 is 5 behind"
    assert str(Rejected("wrong_run")) == "wrong_run"


def test_a_stale_batch_raises_rejected_in_validate_and_is_counted_under_stale():
    with pytest.raises(Rejected) as raised:
        validator(latest=10, lag=2).version(batch(version=7))
    assert raised.value.reason == "stale" and not isinstance(raised.value, CodecError)
    ingest = Ingest(SPEC, ReplayBuffer(SPEC, 100), TOPICS, lambda: 10, max_policy_lag=2)
    assert not ingest.handle(TOPICS.transitions("a"), encode_transitions(batch(version=7)))
    s = ingest.stats()
    assert dict(s.rejected) == {"stale": 1} and s.rejected_transitions == 4


def test_a_decoding_error_stays_a_codec_error_and_is_counted_by_its_reason():
    with pytest.raises(CodecError) as raised:
        decode_transitions(b"junk-junk-junk", SPEC)
    assert not isinstance(raised.value, Rejected) and raised.value.reason == "bad_magic"
    ingest = Ingest(SPEC, ReplayBuffer(SPEC, 100), TOPICS, lambda: 0)
    assert not ingest.handle(TOPICS.transitions("a"), b"junk-junk-junk")
    assert dict(ingest.stats().rejected) == {"bad_magic": 1}


@pytest.mark.parametrize(
    "topic,b,reason",
    [
        (TOPICS.transitions("b"), batch(actor="a"), "actor_mismatch"),
        (TOPICS.transitions("a"), batch(run_id="an-earlier-start"), "wrong_run"),
        (TOPICS.transitions("a"), batch(reward=2e6), "out_of_bounds"),
    ],
    ids=["spoofed actor", "earlier run start", "reward 2e6"],
)
def test_origin_refuses_with_its_reason(topic, b, reason):
    with pytest.raises(Rejected) as raised:
        validator().origin(topic, b)
    assert raised.value.reason == reason


def test_origin_takes_its_own_actors_batch_and_any_run_without_a_run_id():
    validator().origin(TOPICS.transitions("a"), batch())
    validator(run_id=None).origin(TOPICS.transitions("a"), batch(run_id="any"))


@pytest.mark.parametrize(
    "version,latest,lag,reason",
    [(4, 3, None, "unknown_policy"), (0, 3, 2, "stale"), (0, 99, None, None), (1, 3, 2, None)],
    ids=["future", "3 behind, lag 2", "no lag limit", "2 behind, lag 2"],
)
def test_version_checks_against_the_latest_published(version, latest, lag, reason):
    check = validator(latest=latest, lag=lag)
    if reason is None:
        check.version(batch(version=version))
    else:
        with pytest.raises(Rejected, match=reason):
            check.version(batch(version=version))


def test_wrong_run_through_ingest_is_counted_and_leaves_a_gap():
    ingest = Ingest(SPEC, ReplayBuffer(SPEC, 100), TOPICS, lambda: 0, run_id=RUN_ID)
    a = TOPICS.transitions("a")
    assert not ingest.handle(a, encode_transitions(batch(seq=0, run_id="an-earlier-start")))
    assert ingest.handle(a, encode_transitions(batch(seq=1)))
    assert ingest.stats().rejected["wrong_run"] == 1
    assert ingest.missing_batches == 0  # not this run start's to lose
    assert ingest.handle(a, encode_transitions(batch(seq=3)))
    assert ingest.missing_batches == 1  # seq 2: lost in this run start


# --- admission -----------------------------------------------------------------------


def test_admission_bounds_actors_and_each_actors_sessions():
    admission = Admission(max_actors=2, max_sessions=2)
    assert admission.admit("a", 1) == [] and admission.admit("a", 1) == []
    assert admission.admit("b", 1) == []
    with pytest.raises(Rejected, match="too_many_actors"):
        admission.admit("c", 1)
    assert admission.stats() == AdmissionStats(actors=2, sessions=2)  # nothing kept for c
    assert admission.admit("a", 2) == []
    assert admission.admit("a", 3) == [("a", 1)]  # the oldest session is forgotten
    assert admission.admit("b", 5) == [] and admission.stats() == AdmissionStats(2, 4)


def test_admission_state_round_trips_and_forgets_restarted_actors():
    admission = Admission(max_actors=3, max_sessions=2)
    for actor, session in (("a", 1), ("a", 2), ("sim-00", 4)):
        admission.admit(actor, session)
    state = admission.state()
    assert state == {"sessions": {"a": [1, 2], "sim-00": [4]}}
    again = Admission(max_actors=3, max_sessions=2)
    again.load_state(state, restarted={"sim-00"})
    assert again.state() == {"sessions": {"a": [1, 2]}}
    assert again.admit("a", 2) == [] and again.admit("a", 3) == [("a", 1)]


# --- dedup ---------------------------------------------------------------------------


def test_dedup_is_per_actor_session_and_forgets_a_session():
    dedup = Dedup()
    assert dedup.first_time(("a", 1), 0) and not dedup.first_time(("a", 1), 0)
    assert dedup.first_time(("a", 2), 0)  # a restarted process counts from 0 again
    assert dedup.first_time(("b", 1), 3)  # seqs 0-2 of b: another run start's
    assert dedup.first_time(("b", 1), 7)  # 4-6 never came
    assert dedup.stats() == DedupStats(sessions=3, missing_batches=3)
    dedup.forget(("b", 1))
    assert dedup.stats() == DedupStats(sessions=2, missing_batches=0)
    assert dedup.first_time(("a", 1), 1)


def test_missing_counts_only_what_this_run_start_could_have_lost():
    """A board that sent 585 batches for an earlier run start joins this one with plenty
    of credit: its seqs go on from 585 (protocol.md §6 rule 9), and none is missing until
    a batch of this run start is."""
    dedup = Dedup()
    assert dedup.first_time(("pi", 9), 585, room=10_000)
    assert dedup.first_time(("pi", 9), 586, room=10_000)
    assert dedup.stats().missing_batches == 0
    assert dedup.first_time(("pi", 9), 589, room=10_000)  # 587 and 588 lost here
    assert dedup.stats().missing_batches == 2
    with pytest.raises(Rejected, match="over_credit"):  # a gap past the credit: refused
        dedup.first_time(("pi", 9), 600, room=5)


def test_dedup_state_round_trips_and_forgets_restarted_actors():
    dedup = Dedup()
    for seq in (0, 1, 4, 6):
        dedup.first_time(("a", 7), seq)
    dedup.first_time(("sim-00", 1), 0)
    state = dedup.state()
    assert state == {"seqs": [["a", 7, 1, [4, 6], 6], ["sim-00", 1, 0, [], 0]]}
    again = Dedup()
    again.load_state(state, restarted={"sim-00"})
    assert again.stats() == DedupStats(sessions=1, missing_batches=3)
    assert not again.first_time(("a", 7), 4) and again.first_time(("a", 7), 5)
    assert again.first_time(("sim-00", 1), 0)  # forgotten: its new process starts over


# --- accounting ----------------------------------------------------------------------


def test_accounting_logs_each_reason_once_and_counts_every_reject(caplog):
    accounting = Accounting()
    with caplog.at_level(logging.WARNING, logger="edge_rl.learner.ingest.accounting"):
        for _ in range(3):
            accounting.reject("stale", "stale: v1 is 5 behind", 4)
        accounting.reject("bad_magic", "bad_magic: not ERLT", 0)
    assert [r.getMessage() for r in caplog.records] == [
        "transition batch rejected (stale): stale: v1 is 5 behind",
        "transition batch rejected (bad_magic): bad_magic: not ERLT",
    ]
    s = accounting.stats()
    assert dict(s.rejected) == {"stale": 3, "bad_magic": 1}
    assert (s.rejected_batches, s.rejected_transitions) == (4, 12)


def test_accounting_cuts_the_budget_exactly():
    accounting = Accounting(max_transitions=10)
    assert accounting.within_budget(6) == 6
    accounting.accepted(("a", 1), 0, np.ones(6, np.float32), np.zeros(6, bool))
    assert accounting.within_budget(6) == 4  # the batch that crosses it is cut there
    accounting.accepted(("a", 1), 1, np.ones(4, np.float32), np.zeros(4, bool))
    assert accounting.within_budget(3) == 0
    assert accounting.stats().over_budget == 2 + 3 and accounting.transitions == 10
    assert Accounting().within_budget(10**9) == 10**9  # no budget: no cut


def test_accounting_episodes_span_batches_and_a_restart_counts_from_zero():
    accounting = Accounting()
    done = np.array([False, True, False, False])
    accounting.accepted(("a", 1), 0, np.full(4, 2.0, np.float32), done)
    accounting.accepted(("a", 1), 1, np.ones(2, np.float32), np.array([True, False]))
    accounting.accepted(("a", 2), 0, np.ones(3, np.float32), np.zeros(3, bool))
    s = accounting.stats()
    assert s.episodes == 2 and s.returns == (4.0, 5.0)  # 2+2, then 2+2 carried over + 1
    assert (s.batches, s.transitions) == (3, 9)
    assert dict(s.by_actor) == {"a": 3} and dict(s.total_by_actor) == {"a": 9}
    assert accounting.received() == (9, {"a": 3})
    assert dict(accounting.session_of) == {"a": 2}
    assert accounting.recent_return() == 4.5 and accounting.returns_since(1) == ([5.0], 2)
    accounting.forget(("a", 1))  # its open episode (1.0 so far) is dropped
    assert [k for *k, _, _ in accounting.state()["episode_returns"]] == [["a", 2]]


def test_accounting_an_episode_across_a_seq_gap_has_no_return():
    """A batch the board's spool dropped: summing on across it would join two episodes
    (CartPole's 20 + 20 read as one of 40). The episode it cut has no return; the next
    whole one has."""
    accounting = Accounting()
    ones, done_at = np.ones(10, np.float32), np.eye(10, dtype=bool)
    accounting.accepted(("a", 1), 0, ones, done_at[3])  # 4; then 6 so far
    accounting.accepted(("a", 1), 2, ones, done_at[4] | done_at[8])  # seq 1 never came
    assert accounting.stats().returns == (4.0, 4.0)  # not 6 + ? + 5: that one is cut
    accounting.accepted(("a", 1), 3, ones, done_at[0])  # goes on: 1 + 1
    assert accounting.stats().returns == (4.0, 4.0, 2.0) and accounting.stats().episodes == 3
    accounting.accepted(("b", 5), 4, ones, done_at[2])  # a session first seen past seq 0
    assert accounting.stats().returns == (4.0, 4.0, 2.0)  # its first episode began unseen
    accounting.accepted(("a", 1), 3, ones, done_at[9])  # a seq again (out of order): a gap
    assert accounting.stats().episodes == 3


def test_accounting_stats_is_a_frozen_copy():
    accounting = Accounting()
    accounting.duplicate(4)
    s = accounting.stats()
    with pytest.raises(dataclasses.FrozenInstanceError):
        s.batches = 1  # type: ignore[misc]
    with pytest.raises(TypeError):
        s.rejected["stale"] = 1  # type: ignore[index]
    accounting.duplicate(4)
    accounting.reject("stale", "stale", 4)
    assert (s.duplicate_batches, s.duplicate_transitions, s.rejected["stale"]) == (1, 4, 0)
    assert accounting.stats().duplicate_batches == 2


def test_accounting_state_round_trips_and_restarted_actors_start_over():
    accounting = Accounting(max_transitions=100)
    accounting.accepted(("pi-01", 1), 0, np.ones(5, np.float32), np.eye(5, dtype=bool)[2])
    accounting.accepted(("sim-00", 3), 0, np.ones(2, np.float32), np.zeros(2, bool))
    accounting.reject("stale", "stale", 4)
    accounting.duplicate(2)
    state = accounting.state()
    assert state["stats"]["transitions"] == 7 and state["session_of"] == {"pi-01": 1, "sim-00": 3}
    again = Accounting(max_transitions=100)
    again.load_state(state)
    assert again.stats() == accounting.stats() and again.state() == state
    fresh = Accounting(max_transitions=100)
    fresh.load_state(state, restarted={"sim-00"})
    s = fresh.stats()
    assert dict(s.by_actor) == {"pi-01": 5} and dict(s.total_by_actor) == {"pi-01": 5, "sim-00": 2}
    assert dict(fresh.session_of) == {"pi-01": 1}
    assert fresh.state()["episode_returns"] == [["pi-01", 1, 2.0, 1]]
    old = {**state, "episode_returns": [["pi-01", 1, 2.0]]}  # a row without its next seq
    fresh.load_state(old)
    assert fresh.state()["episode_returns"] == [["pi-01", 1, None, -1]]
    assert fresh.within_budget(100) == 93  # the budget goes on from the saved count


# --- the facade: its checkpoint state is its parts' -------------------------------------


def test_ingest_state_is_its_parts_and_a_loaded_ingest_goes_on():
    def make() -> tuple[Ingest, ReplayBuffer]:
        rb = ReplayBuffer(SPEC, 100)
        return Ingest(SPEC, rb, TOPICS, lambda: 0, max_sessions_per_actor=1), rb

    ingest, _ = make()
    a = TOPICS.transitions("a")
    assert ingest.handle(a, encode_transitions(batch(seq=0, done_at=(1,))))
    assert ingest.handle(a, encode_transitions(batch(seq=2)))
    state = ingest.state()
    assert set(state) == {"stats", "session_of", "episode_returns", "sessions", "seqs"}
    assert state["sessions"] == {"a": [1]} and state["seqs"] == [["a", 1, 0, [2], 2]]
    assert state["episode_returns"] == [["a", 1, None, 3]]  # seq 1 missing: no return
    second, rb = make()
    second.load_state(state)
    assert second.state() == state and second.missing_batches == 1
    assert not second.handle(a, encode_transitions(batch(seq=2)))  # a resend: a duplicate
    assert second.stats().duplicate_batches == 1 and len(rb) == 0
    # A new session of "a" evicts the old one from dedup and from the open episodes.
    assert second.handle(a, encode_transitions(batch(session=2, seq=0)))
    after = second.state()
    assert after["sessions"] == {"a": [2]} and [s[:2] for s in after["seqs"]] == [["a", 2]]
    assert after["episode_returns"] == [["a", 2, 4.0, 1]]
