"""Ring buffer and ingest (decode, validate, dedup, episode accounting), no broker."""

from __future__ import annotations

import numpy as np
import pytest

from edge_rl.learner.ingest.dedup import SeqTracker
from edge_rl.learner.ingest.ingest import Ingest
from edge_rl.learner.replay import ReplayBuffer
from edge_rl.specs import EnvSpec
from edge_rl.wire.topics import Topics
from edge_rl.wire.transitions import encode_transitions
from tests.harness.batches import small_batch

SPEC = EnvSpec(obs_shape=(2,), num_actions=3)
TOPICS = Topics("edge-rl", "t")


batch = small_batch


def test_ring_buffer_wraps_and_keeps_the_newest():
    rb = ReplayBuffer(SPEC, capacity=5, seed=0)
    for i in range(3):
        b = batch(start=100.0 * i, n=3)
        rb.add(b.obs, b.action, b.reward, b.next_obs, b.terminated)
    assert len(rb) == 5 and rb.added == 9
    stored = set(map(tuple, rb.observations(5)))
    newest = {tuple(r) for r in batch(start=200.0, n=3).obs} | {
        tuple(r) for r in batch(start=100.0, n=3).obs[1:]
    }
    assert stored == newest  # the 4 oldest were overwritten
    s = rb.sample(32)
    assert s.obs.shape == (32, 2) and s.action.dtype == np.int64
    np.testing.assert_array_equal(s.next_obs, s.obs + 1)  # rows stay aligned


def test_empty_buffer_refuses_to_sample():
    with pytest.raises(ValueError):
        ReplayBuffer(SPEC, 4).sample(1)
    with pytest.raises(ValueError):
        ReplayBuffer(SPEC, 0)


@pytest.mark.parametrize(
    "seqs,dups,missing",
    [
        ([0, 1, 2], 0, 0),
        ([0, 0, 1, 1], 2, 0),
        ([2, 0, 1, 2], 1, 0),
        ([0, 3], 0, 2),
        ([5, 5, 4], 1, 4),
    ],
)
def test_seq_tracker(seqs, dups, missing):
    t = SeqTracker()
    assert sum(not t.first_time(s) for s in seqs) == dups
    assert t.missing == missing


def make_ingest(latest=3, lag=None):
    rb = ReplayBuffer(SPEC, 1000)
    return Ingest(SPEC, rb, TOPICS, latest_version=lambda: latest, max_policy_lag=lag), rb


def test_ingest_accepts_dedups_and_counts_episodes():
    ing, rb = make_ingest()
    topic = TOPICS.transitions("a")
    assert ing.handle(topic, encode_transitions(batch(seq=0, done_at=(1,))))
    assert not ing.handle(topic, encode_transitions(batch(seq=0, done_at=(1,))))  # resend
    assert ing.handle(topic, encode_transitions(batch(seq=1, done_at=(3,))))
    # a restarted actor (new session) starts at seq 0 again: not a duplicate
    assert ing.handle(topic, encode_transitions(batch(session=2, seq=0)))
    s = ing.stats()
    assert (s.batches, s.transitions, len(rb)) == (3, 12, 12)
    assert (s.duplicate_batches, s.duplicate_transitions) == (1, 4)
    # episode 1: 2 steps; episode 2: the 2 leftover steps + 4 steps of seq 1 = 6
    assert s.episodes == 2 and list(s.returns) == [2.0, 6.0]
    assert s.by_actor["a"] == 4  # the restarted process's own count (session 2)


@pytest.mark.parametrize(
    "topic,payload,reason",
    [
        (TOPICS.transitions("a"), b"junk-junk-junk", "bad_magic"),
        (TOPICS.transitions("b"), encode_transitions(batch(actor="a")), "actor_mismatch"),
        (TOPICS.transitions("a"), encode_transitions(batch(version=4)), "unknown_policy"),
        (
            TOPICS.transitions("a"),
            encode_transitions(batch(), describe=True).replace(b'"n":4', b'"n":5'),
            "shape",
        ),
        (
            TOPICS.transitions("a"),
            encode_transitions(batch()).replace(b'"n":4', b'"n":5'),
            "truncated",
        ),
        (TOPICS.transitions("a"), encode_transitions(batch(reward=3e38)), "out_of_bounds"),
        (TOPICS.transitions("a"), encode_transitions(batch(start=2e6)), "out_of_bounds"),
        (TOPICS.transitions("a"), encode_transitions(batch(reward=-2e6)), "out_of_bounds"),
    ],
    ids=[
        "garbage",
        "spoofed actor",
        "future version",
        "wrong n",
        "wrong n, compact",
        "reward 3e38",
        "obs 2e6",
        "reward -2e6",
    ],
)
def test_ingest_rejects_without_touching_replay(topic, payload, reason):
    ing, rb = make_ingest()
    assert not ing.handle(topic, payload)
    s = ing.stats()
    assert len(rb) == 0 and s.rejected[reason] == 1 and s.rejected_batches == 1


def test_ingest_staleness_filter():
    ing, _ = make_ingest(latest=10, lag=2)
    assert not ing.handle(TOPICS.transitions("a"), encode_transitions(batch(version=7)))
    assert ing.stats().rejected["stale"] == 1 and ing.stats().rejected_transitions == 4
    assert ing.handle(TOPICS.transitions("a"), encode_transitions(batch(version=8, seq=1)))
    # The stale batch was seen: rejected, not missing; its resend is a duplicate.
    assert ing.missing_batches == 0
    assert not ing.handle(TOPICS.transitions("a"), encode_transitions(batch(version=7)))
    assert ing.stats().rejected["stale"] == 1 and ing.stats().duplicate_batches == 1


def test_ingest_never_raises_on_an_unexpected_error(monkeypatch):
    ing, rb = make_ingest()

    def broken_add(*a, **k):
        raise RuntimeError("disk on fire")

    monkeypatch.setattr(rb, "add", broken_add)
    assert not ing.handle(TOPICS.transitions("a"), encode_transitions(batch()))
    assert ing.stats().rejected["internal_error"] == 1


def test_ingest_accepts_magnitudes_up_to_its_bounds():
    ing, rb = make_ingest()
    assert ing.handle(TOPICS.transitions("a"), encode_transitions(batch(reward=-1e6)))
    assert ing.handle(TOPICS.transitions("a"), encode_transitions(batch(seq=1, start=9e5)))
    assert len(rb) == 8 and not ing.stats().rejected


def test_ingest_state_is_bounded_in_actors_and_sessions():
    rb = ReplayBuffer(SPEC, capacity=1000, seed=0)
    ing = Ingest(SPEC, rb, TOPICS, latest_version=lambda: 3, max_actors=2, max_sessions_per_actor=2)
    for actor in ("a", "b"):
        assert ing.handle(TOPICS.transitions(actor), encode_transitions(batch(actor=actor)))
    # A third id is refused before any state is kept for it.
    assert not ing.handle(TOPICS.transitions("c"), encode_transitions(batch(actor="c")))
    assert ing.stats().rejected["too_many_actors"] == 1 and len(rb) == 8
    # Restarts of "a": only its two newest sessions are tracked.
    for session in (2, 3, 4):
        payload = encode_transitions(batch(actor="a", session=session))
        assert ing.handle(TOPICS.transitions("a"), payload)
    assert sorted((a, n) for a, n, *_ in ing.state()["seqs"] if a == "a") == [("a", 3), ("a", 4)]


def test_ingest_keeps_what_the_learner_itself_lost_per_actor_session():
    """Payloads the inbox dropped unread, and batches refused after decoding (policy
    version), count as lost for their actor's current session (fleet control writes that
    credit off at once); garbage, another id's payload, or an older session do not."""
    ing, _ = make_ingest(latest=0)
    enc = encode_transitions
    a, drop = TOPICS.transitions("a"), ing.learner_losses.dropped_unread
    assert drop(a, enc(batch(seq=0, n=5))) == 5  # before a's first batch
    assert ing.lost() == {"a": 5}
    assert drop(a, b"junk") == 0
    assert drop(a, enc(batch(actor="b", n=7))) == 7  # counted, not a's loss
    assert ing.handle(a, enc(batch(seq=1)))
    assert not ing.handle(a, enc(batch(seq=2, n=3, version=9)))  # unknown_policy
    assert ing.lost() == {"a": 8}
    assert drop(a, enc(batch(session=2, n=6)))  # a restarted a, not read yet
    assert ing.lost() == {}  # by_actor still counts session 1: so does the loss, or none
    assert ing.handle(a, enc(batch(session=2, seq=1)))
    assert ing.lost() == {"a": 6}


def test_flags_and_rows_in_the_order_added():
    """``truncated`` and ``intervention`` are kept per row; ``rows(source)`` gives a board's
    rows oldest first, across the ring's wrap (what ``edge-rl record`` reads)."""
    spec = EnvSpec(obs_shape=(1,), num_actions=2)
    buf = ReplayBuffer(spec, 5)
    for i, src in enumerate(["a", "b", "a", "a", "b", "a", "a"]):  # 7 rows: 2 overwritten
        obs = np.full((1, 1), i, np.float32)
        buf.add(
            obs,
            np.zeros(1, np.int64),
            np.zeros(1, np.float32),
            obs + 1,
            np.zeros(1),
            src,
            np.array([i == 3], np.uint8),
            np.array([i % 2], np.uint8),
        )
    rows = buf.rows("a")
    assert rows.obs[:, 0].tolist() == [2, 3, 5, 6]
    assert rows.truncated.tolist() == [False, True, False, False]
    assert rows.intervention.tolist() == [False, True, True, False]
    assert buf.interventions() == 2  # rows 3 and 5 (row 1 was overwritten)
    assert buf.rows().obs[:, 0].tolist() == [2, 3, 4, 5, 6]


def test_a_checkpoint_without_the_flags_restores_them_as_zeros():
    spec = EnvSpec(obs_shape=(1,), num_actions=2)
    buf = ReplayBuffer(spec, 5)
    obs = np.ones((2, 1), np.float32)
    buf.add(
        obs,
        np.zeros(2, np.int64),
        np.zeros(2, np.float32),
        obs,
        np.zeros(2),
        "a",
        None,
        np.ones(2, np.uint8),
    )
    saved = buf.state()
    older = {k: v for k, v in saved.arrays.items() if k not in ("truncated", "intervention")}
    fresh = ReplayBuffer(spec, 5)
    fresh.load_state(type(saved)(saved.json, older))
    assert len(fresh) == 2 and fresh.interventions() == 0
