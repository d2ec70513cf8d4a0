"""The quarantine rule (learner/fleet/quarantine.py), replay's per-row source and eviction, and
ingest refusing a quarantined board's data."""

from __future__ import annotations

import dataclasses
import logging

import numpy as np
import pytest

from edge_rl.config import QuarantineConfig, RunConfig
from edge_rl.envs import env_spec
from edge_rl.learner.fleet.credit import Grants
from edge_rl.learner.fleet.quarantine import Z_SCALE, BoardWatch, median_noise, robust_z
from edge_rl.learner.ingest.ingest import Ingest
from edge_rl.learner.node import ingest_for
from edge_rl.learner.replay import ReplayBuffer
from edge_rl.types import TransitionBatch
from edge_rl.wire.topics import Topics
from edge_rl.wire.transitions import encode_transitions

# The rule's mechanics at a MAD floor of 10 % of |median|; the shipped floor is below.
RULE = QuarantineConfig(
    min_transitions=100, window_transitions=200, min_episodes=2, max_z=5.0, mad_floor=0.1
)


def feed(watch: BoardWatch, actor: str, reward: float, n: int = 200, returns=()) -> None:
    watch.accepted(actor, np.full(n, reward, np.float32), list(returns))


def test_robust_z_is_the_mad_score_with_a_floor():
    z = robust_z({"a": 1.0, "b": 2.0, "c": 3.0, "d": 100.0}, mad_floor=0.0)
    # median 2.5, |x - 2.5| = 1.5, 0.5, 0.5, 97.5: MAD 1.0
    assert z == pytest.approx(
        {"a": -1.5 * 0.6745, "b": -0.5 * 0.6745, "c": 0.5 * 0.6745, "d": 97.5 * 0.6745}
    )
    # All equal: the floor (10 % of |median|) keeps a small difference small.
    z = robust_z({"a": -6.0, "b": -6.0, "c": -6.0, "d": -6.3}, mad_floor=0.1)
    assert max(abs(v) for v in z.values()) == pytest.approx(0.6745 * 0.3 / 0.6)
    assert robust_z({}, 0.1) == {}


CASES = [  # (name, each board's mean reward per step, who is quarantined)
    ("an honest fleet, noisy", {"a": -6.1, "b": -5.4, "c": -6.9, "d": -5.9}, set()),
    (
        "one board at the bound's edge",
        {"a": -6.1, "b": -5.4, "c": -6.9, "d": -6.0, "evil": 0.0},
        {"evil"},
    ),
    ("one board far below", {"a": -1.0, "b": -1.1, "c": -0.9, "evil": -16.0}, {"evil"}),
    ("two boards: too few to judge", {"a": -6.0, "evil": 0.0}, set()),
    ("three boards, one off", {"a": -6.0, "b": -6.2, "evil": 0.0}, {"evil"}),
]


SHIPPED = QuarantineConfig()


@pytest.mark.parametrize("rule", [RULE, SHIPPED], ids=["floor 0.1, max_z 5", "shipped"])
@pytest.mark.parametrize(("name", "means", "expected"), CASES, ids=[c[0] for c in CASES])
def test_a_board_whose_mean_reward_is_far_off_the_fleets_is_quarantined(
    rule, name, means, expected
):
    watch = BoardWatch(rule)
    for actor, mean in means.items():
        feed(watch, actor, mean, n=rule.window_transitions)
    verdicts = watch.judge(env_steps=800, now=0.0)
    assert {v.actor for v in verdicts} == expected
    assert all(v.rule == "reward" and abs(v.z) > rule.max_z for v in verdicts)
    assert set(watch.quarantined()) == expected
    assert all(watch.is_quarantined(a) == (a in expected) for a in means)


def play(watch: BoardWatch, phases: list[dict[str, tuple[int, float, int]]]) -> None:
    """A run in phases (the fleet's policy improving from one to the next); in each phase,
    each board's (episodes, return, steps per episode), sent one episode a round, the boards
    taking turns (the watch's clock advances with every batch)."""
    for phase in phases:
        for i in range(max(episodes for episodes, _, _ in phase.values())):
            for actor, (episodes, ret, steps) in phase.items():
                if i < episodes:
                    feed(watch, actor, 1.0, n=steps, returns=[ret])


# A loaded honest CartPole run (seed 1, docs/security.md): sim-01 was starved less, so its
# last 20 episodes all came from the better policies (72) while the other boards' reached
# back to the weak ones (~30). On its own window sim-01's z was 7.5 at floor 0.1.
STAGGERED = [
    {"sim-01": (20, 30.0, 30), "sim-02": (15, 30.0, 30), "sim-03": (15, 33.0, 33)}
    | {"sim-00": (15, 35.0, 35)},
    {"sim-01": (20, 72.0, 72), "sim-02": (5, 72.0, 72), "sim-03": (5, 72.0, 72)}
    | {"sim-00": (5, 72.0, 72)},
]
# A board starved since the early, weak policies (returns 20) while the others went on to
# returns of 300: its window holds only old episodes.
STARVED = [
    {"a": (30, 20.0, 20), "b": (30, 20.0, 20), "c": (30, 20.0, 20), "starved": (10, 20.0, 20)},
    {"a": (20, 300.0, 300), "b": (20, 300.0, 300), "c": (20, 300.0, 300)},
]
# A board whose pole never falls (200-step episodes) in the staggered fleet.
OUTLIER = [
    STAGGERED[0] | {"evil": (20, 200.0, 200)},
    STAGGERED[1] | {"evil": (5, 200.0, 200)},
]


@pytest.mark.parametrize(
    ("phases", "expected"),
    [(STAGGERED, set()), (STARVED, set()), (OUTLIER, {"evil"})],
    ids=["one board less starved", "one board starved", "an outlier"],
)
def test_boards_are_compared_on_the_same_stretch_of_the_run(phases, expected):
    """The shipped rule: a board judged on its own window alone is an outlier in the first
    two fleets (z 7.5 and 6.3); on the stretch the other boards' windows span, it is not."""
    watch = BoardWatch(SHIPPED)
    play(watch, phases)
    assert {v.actor for v in watch.judge(0, now=0.0)} == expected
    assert all(b.peak_z < SHIPPED.max_z for a, b in watch.stats().boards.items() if a != "evil")


@pytest.mark.parametrize(
    ("medians", "expected"),
    [
        ({"sim-00": 102.0, "sim-01": 72.0, "sim-02": 24.0, "sim-03": 26.0}, set()),
        # A board whose pole never falls (200-step episodes) in a fleet returning ~20.
        ({"a": 24.0, "b": 19.0, "c": 22.0, "evil": 200.0}, {"evil"}),
    ],
)
def test_the_shipped_rule_keeps_a_spread_honest_fleet_and_catches_a_gross_outlier(
    medians, expected
):
    watch = BoardWatch(SHIPPED)
    for actor, median in medians.items():
        feed(watch, actor, 1.0, n=SHIPPED.min_transitions, returns=[median] * 5)
    assert {v.actor for v in watch.judge(0, now=0.0)} == expected


def test_the_stretch_reaches_back_at_most_stretch_steps():
    """A board whose data is older than ``stretch_steps`` is not judged: the fleet has
    moved on and its figures say nothing of the present."""
    rule = dataclasses.replace(SHIPPED, stretch_steps=5_000)
    watch = BoardWatch(rule)
    play(watch, [{"a": (10, 20.0, 20), "b": (10, 20.0, 20), "c": (10, 20.0, 20)}])
    play(watch, [{"old": (5, 20.0, 20)}])
    play(watch, [{"a": (10, 300.0, 300), "b": (10, 300.0, 300), "c": (10, 300.0, 300)}])
    assert watch.judge(0, now=0.0) == []
    assert "old" in watch.stats().boards and watch.stats().boards["old"].peak_z == 0.0
    # Judged on their stretch alone (the last 5,000 env steps), a, b and c agree.
    assert all(watch.stats().boards[a].peak_z < 1 for a in "abc")


def pendulum_like(seed: int, episode_mean, attacker: bool, steps: int = 20_000) -> BoardWatch:
    """Four honest boards taking turns with 20-transition batches of 200-step episodes, each
    episode's mean reward drawn by ``episode_mean``; the shipped rule applied after every
    round. ``attacker``: a fifth board whose every reward is 0 (the bound's edge)."""
    rng = np.random.default_rng(seed)
    watch = BoardWatch(SHIPPED, every_s=0.0)
    actors = ["h0", "h1", "h2", "h3"] + (["evil"] if attacker else [])
    mean = {a: episode_mean(rng) for a in actors}
    for t in range(0, steps, 20 * len(actors)):
        for actor in actors:
            reward = np.zeros(20) if actor == "evil" else rng.normal(mean[actor], 0.5, 20)
            done = (t // len(actors)) % 200 == 180
            returns = [mean[actor] * 200] if done else []
            if done:
                mean[actor] = episode_mean(rng)
            watch.accepted(actor, reward.astype(np.float32), returns)
        watch.judge(t, now=float(t))
    return watch


def learned(rng: np.random.Generator) -> float:
    """A learned Pendulum policy: most episodes balance (-0.6 a step), some swing long."""
    return rng.normal(-0.6, 0.3) if rng.random() < 0.7 else rng.normal(-2.5, 1.0)


@pytest.mark.parametrize("seed", [1, 3, 4, 6])
def test_an_honest_fleet_whose_figures_are_noisy_is_not_quarantined(seed):
    """With four boards, three that agree by chance made the fourth's ordinary spread a z
    of 7-9 on these seeds (MAD and floor alone); the spans' own spread keeps it below 6."""
    watch = pendulum_like(seed, learned, attacker=False)
    assert watch.quarantined() == {}
    assert max(b.peak_z for b in watch.stats().boards.values()) < SHIPPED.max_z


@pytest.mark.parametrize("seed", [1, 2])
def test_a_board_at_the_bounds_edge_among_noisy_random_boards_is_quarantined(seed):
    watch = pendulum_like(seed, lambda rng: rng.normal(-6.0, 1.5), attacker=True)
    assert set(watch.quarantined()) == {"evil"}
    assert watch.quarantined()["evil"].rule == "reward"


def cartpole_late(seed: int, draw, outlier: bool = False, rounds: int = 60) -> BoardWatch:
    """Four honest boards taking turns, one episode a batch, its return drawn by ``draw``;
    ``outlier``: a fifth whose every episode returns 200. The shipped rule after every round."""
    rng = np.random.default_rng(seed)
    watch = BoardWatch(SHIPPED, every_s=0.0)
    actors = ["h0", "h1", "h2", "h3"] + (["evil"] if outlier else [])
    for t in range(rounds):
        for actor in actors:
            ret = 200.0 if actor == "evil" else draw(rng)
            watch.accepted(actor, np.ones(int(ret), np.float32), [ret])
        watch.judge(0, now=float(t))
    return watch


def bimodal(rng: np.random.Generator) -> float:
    """Late in a CartPole run: half the episodes fall at once, the rest last long."""
    return float(rng.choice([rng.integers(9, 30), rng.integers(100, 300), 500], p=[0.5, 0.3, 0.2]))


def test_honest_boards_whose_returns_spread_from_10_to_500_are_not_quarantined():
    """Seed 5: on the spans' spread alone, h0 and then h1 reached z 7.7 (their medians of
    a few such episodes are far apart by chance); a median's own noise keeps them below 6."""
    watch = cartpole_late(5, bimodal)
    assert watch.quarantined() == {}
    assert max(b.peak_z for b in watch.stats().boards.values()) < SHIPPED.max_z


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_a_board_returning_200_among_boards_returning_about_30_is_quarantined(seed):
    watch = cartpole_late(seed, lambda rng: max(8.0, rng.normal(30.0, 12.0)), outlier=True)
    assert set(watch.quarantined()) == {"evil"}
    assert watch.quarantined()["evil"].rule == "return"


def test_too_few_transitions_are_not_judged():
    watch = BoardWatch(RULE)
    for actor, mean in {"a": -6.0, "b": -6.1, "c": -5.9}.items():
        feed(watch, actor, mean)
    feed(watch, "evil", 0.0, n=RULE.min_transitions - 1)
    assert watch.judge(0, now=0.0) == []
    feed(watch, "evil", 0.0, n=1)
    assert [v.actor for v in watch.judge(0, now=10.0)] == ["evil"]


def test_only_the_recent_window_counts():
    """An honest board's early rewards (a random policy) leave its window as it learns."""
    watch = BoardWatch(RULE)
    for actor in ("a", "b", "c", "d"):
        feed(watch, actor, -6.0)
    feed(watch, "d", -1.0, n=RULE.window_transitions)  # d moves on first
    assert watch.stats().boards["d"].mean_reward == pytest.approx(-1.0)
    assert watch.stats().boards["d"].window == RULE.window_transitions


def test_episode_returns_far_off_the_fleet_quarantine_a_board():
    """CartPole: every reward is 1, so only the returns tell a board whose pole never
    falls (every episode truncated at 200) from a fleet that returns ~20."""
    watch = BoardWatch(RULE)
    for actor, ret in {"a": 24.0, "b": 19.0, "c": 22.0}.items():
        feed(watch, actor, 1.0, returns=[ret - 3, ret + 3, ret])
    feed(watch, "evil", 1.0, returns=[200.0] * 20)
    feed(watch, "c", 1.0, returns=[500.0])  # one long episode moves a mean, not a median
    (verdict,) = watch.judge(env_steps=900, now=0.0)
    assert (verdict.actor, verdict.rule, verdict.value, verdict.env_steps) == (
        "evil",
        "return",
        200.0,
        900,
    )
    # The median of the boards' medians (24, 19, 23.5, 200); c's mean return (141.5) would
    # have been as far off as evil's.
    assert verdict.fleet == pytest.approx(23.75)
    assert watch.stats().boards["c"].mean_return == pytest.approx(141.5)


def test_a_board_with_most_of_its_batches_refused_is_quarantined_alone(caplog):
    watch = BoardWatch(RULE)
    feed(watch, "bad", 1.0, n=10)
    for _ in range(RULE.min_refused - 1):
        watch.refused("bad")
    assert watch.judge(0, now=0.0) == []  # 9 refused of 10: below min_refused
    watch.refused("bad")
    with caplog.at_level(logging.WARNING):
        (verdict,) = watch.judge(0, now=5.0)
    assert (verdict.rule, verdict.value) == ("refused", pytest.approx(10 / 11))
    # In words, in the log once and in what the board is told: a share, not a z-score.
    said = f"91% of its batches refused (more than {RULE.max_refused_share:.0%})"
    assert caplog.text.count(said) == 1 and "z " not in caplog.text
    assert said in watch.reason("bad")
    watch.refused(None)  # a topic that names no actor: nothing to count


def test_the_rule_runs_at_most_every_every_s_and_can_be_off():
    watch = BoardWatch(RULE, every_s=1.0)
    for actor, mean in {"a": -6.0, "b": -6.1, "c": -5.9}.items():
        feed(watch, actor, mean)
    assert watch.judge(0, now=100.0) == []
    feed(watch, "evil", 0.0)
    assert watch.judge(0, now=100.5) == []  # too soon
    assert len(watch.judge(0, now=101.0)) == 1
    off = BoardWatch(dataclasses.replace(RULE, enabled=False))
    for actor, mean in {"a": -6.0, "b": -6.1, "c": -5.9, "evil": 0.0}.items():
        feed(off, actor, mean)
    assert off.judge(0, now=0.0) == []


def test_boards_are_bounded_and_quarantine_survives_a_resume():
    watch = BoardWatch(RULE, max_boards=4)
    for actor, mean in {"a": -6.0, "b": -6.1, "c": -5.9, "evil": 0.0, "fifth": 0.0}.items():
        feed(watch, actor, mean, returns=[float(mean)] * 3)
    assert set(watch.stats().boards) == {"a", "b", "c", "evil"}
    watch.judge(1234, now=0.0)
    watch.evicted("evil", 200)
    resumed = BoardWatch(RULE, max_boards=4)
    resumed.load_state(watch.state())
    assert resumed.quarantined() == watch.quarantined()
    assert resumed.quarantined()["evil"].rows_evicted == 200
    assert resumed.stats().boards == watch.stats().boards
    assert resumed.state() == watch.state()  # the clock and every board's tagged data


def test_a_checkpoint_without_clocks_resumes_with_its_data_at_clock_zero():
    board = {"batches": [[200, -1200.0, 7200.0]], "returns": [-1200.0], "counts": [200, 1, 0]}
    old = {"boards": {a: board for a in ("a", "b", "c")}, "quarantined": {}}
    watch = BoardWatch(RULE)
    watch.load_state(old)
    assert watch.state()["clock"] == 600
    # ... and under version 0 (a checkpoint from before versions were kept)
    assert watch.state()["boards"]["a"]["batches"] == [[0, 200, -1200.0, 7200.0, 0]]
    assert watch.stats().boards["a"].mean_reward == pytest.approx(-6.0)
    feed(watch, "evil", 0.0)
    assert [v.actor for v in watch.judge(0, now=0.0)] == ["evil"]


# --- replay: per-row source, eviction ---------------------------------------------------


def rows(n: int, value: float) -> tuple:
    obs = np.full((n, 4), value, np.float32)
    return obs, np.zeros(n, np.int64), np.full(n, value, np.float32), obs, np.zeros(n, np.float32)


@pytest.mark.parametrize("capacity", [100, 25])  # not full; wrapped around
def test_evicting_a_source_drops_its_rows_and_keeps_the_others_oldest_first(capacity):
    replay = ReplayBuffer(env_spec("CartPole-v1"), capacity)
    for i in range(10):
        replay.add(*rows(3, float(i)), source="evil" if i % 3 == 0 else "honest")
    kept_before = [float(r) for r in replay.state().arrays["reward"] if r % 3 != 0]
    assert replay.rows_by_source()["evil"] == sum(
        int(r) % 3 == 0 for r in replay.state().arrays["reward"]
    )
    dropped = replay.evict("evil")
    assert dropped > 0 and replay.rows_by_source() == {"honest": len(replay)}
    rewards = replay.state().arrays["reward"].tolist()
    assert sorted(rewards) == sorted(kept_before) and rewards == sorted(rewards)  # oldest first
    assert replay.evict("evil") == 0 and replay.evict("never-seen") == 0
    replay.add(*rows(3, 99.0), source="honest")  # the ring goes on after the kept rows
    assert replay.state().arrays["reward"].tolist()[-3:] == [99.0] * 3


def test_the_source_column_survives_a_checkpoint():
    spec = env_spec("CartPole-v1")
    replay = ReplayBuffer(spec, 50)
    replay.add(*rows(4, 1.0), source="a")
    replay.add(*rows(2, 2.0))  # no source named
    restored = ReplayBuffer(spec, 50)
    restored.load_state(replay.state())
    assert restored.rows_by_source() == {"a": 4}
    assert restored.evict("a") == 4 and len(restored) == 2


# --- ingest: refused as quarantined, rows evicted -------------------------------------


def cartpole_batch(actor: str, seq: int, n: int, episode_len: int) -> TransitionBatch:
    o = np.zeros((n, 4), np.float32)
    ends = (np.arange(n) % episode_len) == episode_len - 1
    return TransitionBatch(
        actor,
        7,
        seq,
        0,
        o,
        np.zeros(n, np.int64),
        np.ones(n, np.float32),
        o,
        np.zeros(n, bool),
        ends,
    )


def test_ingest_evicts_a_quarantined_boards_rows_and_refuses_the_rest():
    spec, topics = env_spec("CartPole-v1"), Topics("edge-rl", "q")
    watch = BoardWatch(RULE, every_s=0.0)
    replay = ReplayBuffer(spec, 10_000)
    ingest = Ingest(spec, replay, topics, lambda: 0, watch=watch)
    for seq in range(3):  # three honest boards, episodes of ~20; one that ends every step
        for actor in ("a", "b", "c"):
            assert ingest.handle(
                topics.transitions(actor), encode_transitions(cartpole_batch(actor, seq, 100, 20))
            )
        ingest.handle(
            topics.transitions("evil"), encode_transitions(cartpole_batch("evil", seq, 100, 1))
        )
    assert watch.quarantined()["evil"].rule == "return"
    assert watch.quarantined()["evil"].rows_evicted > 0
    assert "evil" not in replay.rows_by_source()
    assert not ingest.handle(
        topics.transitions("evil"), encode_transitions(cartpole_batch("evil", 9, 10, 1))
    )
    # Quarantined after its first batch (the first time every board had 100 transitions):
    # its next two and the last one refused.
    assert watch.quarantined()["evil"].rows_evicted == 100
    assert ingest.stats().rejected["quarantined"] == 3
    assert len(replay) == 900  # the honest boards' rows, all of them


# --- the rule's knobs, each set off its shipped value ------------------------------------


@pytest.mark.parametrize(("min_boards", "expected"), [(3, {"evil"}), (4, set())])
def test_a_rule_applies_only_with_min_boards_judged(min_boards, expected):
    watch = BoardWatch(dataclasses.replace(RULE, min_boards=min_boards))
    for actor, mean in {"a": -6.0, "b": -6.2, "evil": 0.0}.items():
        feed(watch, actor, mean)
    assert {v.actor for v in watch.judge(0, now=0.0)} == expected


def test_a_boards_return_window_is_its_last_window_episodes_returns():
    watch = BoardWatch(dataclasses.replace(RULE, window_episodes=4))
    feed(watch, "a", 1.0, returns=[10.0] * 6 + [20.0, 30.0, 40.0, 50.0])
    figures = watch.stats().boards["a"]
    assert figures.returns == 4 and figures.mean_return == pytest.approx(35.0)


@pytest.mark.parametrize(("bins", "expected"), [(1, {"sim-01"}), (4, set())])
def test_stretch_bins_set_a_board_against_the_fleet_span_by_span(bins, expected):
    """In one span (each board's median over the whole stretch) the board starved less is an
    outlier (z 7.5): most of its episodes came from the better policies. In the shipped four
    spans it meets the others' episodes of the same time, and it is not."""
    watch = BoardWatch(dataclasses.replace(SHIPPED, stretch_bins=bins))
    play(watch, STAGGERED)
    assert {v.actor for v in watch.judge(0, now=0.0)} == expected


@pytest.mark.parametrize(
    ("min_refused", "share", "expected"),
    [(10, 0.2, set()), (3, 0.5, set()), (3, 0.2, {"bad"})],
    ids=["fewer than min_refused", "share not over", "both"],
)
def test_refusals_quarantine_at_min_refused_over_max_refused_share(min_refused, share, expected):
    rule = dataclasses.replace(RULE, min_refused=min_refused, max_refused_share=share)
    watch = BoardWatch(rule)
    for _ in range(10):
        feed(watch, "bad", 1.0, n=10)
    for _ in range(3):  # 3 refused of 13 batches: 23 %
        watch.refused("bad")
    verdicts = watch.judge(0, now=0.0)
    assert {v.actor for v in verdicts} == expected
    assert all((v.rule, v.fleet) == ("refused", share) for v in verdicts)


@pytest.mark.parametrize("evict", [True, False])
def test_quarantine_evict_decides_whether_a_quarantined_boards_rows_leave_replay(evict):
    cfg = RunConfig(
        env_id="CartPole-v1", run="q", quarantine=dataclasses.replace(RULE, evict=evict)
    )
    spec, topics, rid = env_spec(cfg.env_id), Topics(cfg.transport.root, cfg.run), "q-start"
    grants = Grants()
    for actor in ("a", "b", "c", "evil"):
        grants.set(actor, 7, 10_000)
    replay = ReplayBuffer(spec, 10_000)
    ingest = ingest_for(cfg, spec, replay, lambda: 0, rid, grants)
    ingest.watch = BoardWatch(cfg.quarantine, every_s=0.0)  # judged at every batch
    for seq in range(3):  # as above: "evil" ends an episode every step
        for actor, episode_len in (("a", 20), ("b", 20), ("c", 20), ("evil", 1)):
            b = dataclasses.replace(cartpole_batch(actor, seq, 100, episode_len), run_id=rid)
            ingest.handle(topics.transitions(actor), encode_transitions(b))
    verdict = ingest.watch.quarantined()["evil"]
    assert ingest.stats().rejected["quarantined"] == 2  # refused either way
    assert verdict.rows_evicted == (100 if evict else 0)
    assert replay.rows_by_source().get("evil", 0) == (0 if evict else 100)
    assert len(replay) == (900 if evict else 1000)


def test_boards_are_compared_only_under_the_same_policy_version():
    """Early training: the fleet's policy changes every few hundred steps. A board whose
    batches came under a newer policy (less exploration, higher return) than the others'
    at the same clock was compared with them, and an honest board was quarantined (z 7.1
    at 5,021 env steps, 3 boards). Compared version by version, nothing is off; the same
    figures with no versions give the misfire."""
    rule = dataclasses.replace(RULE, min_boards=3)

    def fleet(versioned: bool) -> BoardWatch:
        watch = BoardWatch(rule, every_s=0.0)
        for step in range(4):
            for actor in ("a", "b", "c"):
                # a is a step ahead: each of its batches comes under the next version
                version = step + (actor == "a")
                reward = -6.0 + 3.0 * version  # each version explores less, earns more
                watch.accepted(
                    actor,
                    np.full(100, reward, np.float32),
                    [],
                    version if versioned else 0,
                )
        return watch

    assert fleet(versioned=False).judge(1_200, now=1.0)  # what it was: a misfire
    watch = fleet(versioned=True)
    assert watch.judge(1_200, now=1.0) == []
    watch.accepted("evil", np.full(400, 0.0, np.float32), [], 3)  # off under its version
    assert [v.actor for v in watch.judge(1_600, now=2.0)] == ["evil"]
    # A board that tags its data with a version no other board acts under is judged on
    # the clock alone: it neither escapes the rule nor stops it for the fleet.
    watch = fleet(versioned=True)
    watch.accepted("sly", np.full(400, 50.0, np.float32), [], 99)
    assert [v.actor for v in watch.judge(1_600, now=2.0)] == ["sly"]


def early_two_clusters(rng: np.random.Generator) -> float:
    """Early in a CartPole run: the pole falls at once (9-25) or is held a while (60-200)."""
    return float(rng.integers(9, 26) if rng.random() < 0.55 else rng.integers(60, 200))


@pytest.mark.parametrize("seed", [52, 70])
def test_three_honest_boards_whose_returns_form_two_clusters_are_not_quarantined(seed):
    """Seeds 52 and 70: one board's few episodes fell mostly in the upper cluster, the two
    others' in the lower; with the median's noise from a normal's estimate alone it
    scored a z of 6.2-7.0 (honest pi-03 and sim-00 were quarantined so, 3-board fleets
    early in training). The median's own quantiles see the gap it can stray across."""
    rng = np.random.default_rng(seed)
    watch = BoardWatch(SHIPPED, every_s=0.0)
    for t in range(20):
        for actor in ("h0", "h1", "h2"):
            ret = early_two_clusters(rng)
            watch.accepted(actor, np.ones(int(ret), np.float32), [ret])
        watch.judge(0, now=float(t))
    assert watch.quarantined() == {}


def test_a_median_s_noise_is_at_least_what_its_own_quantiles_show():
    """Two clusters, half and half: the median strays across the gap between them."""
    two = [10.0] * 10 + [100.0] * 10
    assert median_noise(two) >= Z_SCALE * 45.0 * 0.99
    # One cluster: the normal's estimate, as before.
    rng = np.random.default_rng(0)
    one = list(rng.normal(50.0, 10.0, 400))
    normal = Z_SCALE * 1.2533 * float(np.std(one)) / 20.0
    assert median_noise(one) == pytest.approx(normal, rel=0.35)


def test_an_episode_acted_under_two_policy_versions_is_not_compared():
    """A board short of credit waits mid-episode while the policy improves: its episode,
    begun under v1 and ended under v3, returned more than the fleet's of v3 (honest starved
    boards were quarantined so). Each board: a batch ending open under v1, then one under
    v3 that ends it (return 150 for the starved board, whose v1 part was long) and holds
    four whole episodes of v3."""
    watch = BoardWatch(dataclasses.replace(SHIPPED, min_episodes=3), every_s=0.0)
    for actor, first in {"a": 20.0, "b": 22.0, "c": 21.0, "starved": 150.0}.items():
        watch.accepted(actor, np.ones(300, np.float32), [], 1, ends_open=True)
        watch.accepted(actor, np.ones(300, np.float32), [first, 20, 21, 22, 20], 3, False)
    assert watch.judge(0, now=0.0) == []
    assert watch.stats().boards["starved"].median_return == pytest.approx(20.5)
    # Not known whether an episode was open (ends_open None): every return counts, as before.
    legacy = BoardWatch(dataclasses.replace(SHIPPED, min_episodes=3), every_s=0.0)
    for actor, first in {"a": 20.0, "b": 22.0, "c": 21.0, "starved": 150.0}.items():
        legacy.accepted(actor, np.ones(300, np.float32), [], 1)
        legacy.accepted(actor, np.ones(300, np.float32), [first, 20, 21, 22, 20], 3)
    assert legacy.stats().boards["starved"].median_return == pytest.approx(21.0)


def test_a_board_whose_versions_go_back_gains_no_exemption():
    """An honest board's versions only grow; one that names v1 after v3 (to make every
    episode look carried across versions) has its episodes compared as they are."""
    watch = BoardWatch(dataclasses.replace(SHIPPED, min_episodes=3), every_s=0.0)
    for version in (3, 1, 3, 1, 3, 1, 3):
        watch.accepted("evil", np.ones(100, np.float32), [200.0], version, ends_open=True)
    assert watch.stats().boards["evil"].returns >= 5
