"""Node logic without a broker: the learner's parts, and a learner with a real actor over
the in-memory transport (transport/memory.py). The real-Mosquitto versions of these loops
are in test_integration.py and the CLI tests."""

from __future__ import annotations

import dataclasses
import json
import math
import signal
import threading

from edge_rl.actor.node import ActorNode, ActorOptions
from edge_rl.boards import BoardConfig
from edge_rl.config import FleetConfig, RunConfig
from edge_rl.learner.fleet.control import FleetControl
from edge_rl.learner.node import LearnerNode
from edge_rl.transport.memory import MemoryBroker
from edge_rl.types import ActorStatus, ControlMessage, CreditGrant
from edge_rl.wire.messages import decode_control, decode_credit, encode_control, encode_status
from edge_rl.wire.policy import decode_policy, encode_policy
from edge_rl.wire.topics import Topics
from edge_rl.wire.transitions import encode_transitions, peek_count
from tests.harness.cartpole_policies import cartpole_manifest
from tests.harness.configs import small_cartpole
from tests.harness.waits import wait_for

WAIT_S = 10.0


def run_config(run: str, **kw) -> RunConfig:
    base = dict(
        total_env_steps=1_200,
        learning_starts=200,
        max_lag_transitions=300,
        hidden=(16, 16),
        # One step per call: these tests count updates by calls (checkpoints, exports).
        dqn={"updates_per_call": 1},
        every_updates=40,
        sample=50,
        eval_episodes=2,
        select_every=2,
        select_episodes=2,
    )
    return small_cartpole(run, **{**base, **kw})


# --- FleetControl: statuses in, control and credit out ---------------------------------


RID = "run-start-1"  # the run id every FleetControl below is made with


class Recorder:
    def __init__(self) -> None:
        self.sent: list[tuple[str, bytes]] = []

    def __call__(self, topic: str, payload: bytes, **kw) -> bool:
        self.sent.append((topic, payload))
        return True

    def controls(self):
        return [decode_control(p) for t, p in self.sent if t.endswith("/control")]

    def grants(self) -> dict[str, CreditGrant]:
        """The last grant published to each actor."""
        return {t.split("/")[-2]: decode_credit(p) for t, p in self.sent if t.endswith("/credit")}

    def credits(self) -> dict[str, int]:
        return {a: g.credit for a, g in self.grants().items()}


def status(actor: str, state: str = "running", run_id: str = RID, session: int = 7, **kw) -> bytes:
    return encode_status(
        ActorStatus(actor_id=actor, state=state, run_id=run_id, session=session, **kw)
    )


def fleet_control(cfg: RunConfig, publish, received=lambda: (0, {})) -> FleetControl:
    return FleetControl(
        cfg.fleet, cfg.pacing, Topics(cfg.transport.root, cfg.run), publish, received, RID
    )


def test_fleet_control_records_only_statuses_from_their_own_topic():
    cfg = run_config("fc")
    topics = Topics(cfg.transport.root, cfg.run)
    fleet = fleet_control(cfg, Recorder())
    fleet.on_status(topics.status("a0"), status("a0"))
    fleet.on_status(topics.status("a1"), status("a0"))  # a0 speaking on a1's topic
    fleet.on_status(topics.status("a2"), b"not a status")
    assert set(fleet.actors()) == {"a0"}
    assert fleet.stats().status_rejected == 2


def test_statuses_of_another_run_start_are_ignored_and_not_in_the_fleet():
    """An earlier run's retained statuses (same run name) must not show up in this run."""
    cfg = run_config("runs")
    topics = Topics(cfg.transport.root, cfg.run)
    fleet = fleet_control(cfg, Recorder())
    fleet.on_status(topics.status("old"), status("old", "stopped", run_id="earlier-start"))
    fleet.on_status(topics.status("new"), status("new", "starting", run_id=""))  # not joined
    assert fleet.actors() == {} and fleet.stats().status_other_run == 2
    fleet.on_status(topics.status("new"), status("new"))
    assert set(fleet.actors()) == {"new"}


def test_fleet_control_grants_credit_to_known_actors_and_serving_is_final():
    cfg = run_config("fc2")
    topics = Topics(cfg.transport.root, cfg.run)
    publish = Recorder()
    fleet = fleet_control(cfg, publish)
    fleet.send("running", updates=0)  # nobody known yet: nothing granted
    assert publish.grants() == {}
    fleet.on_status(topics.status("a0"), status("a0", session=1))
    fleet.on_status(topics.status("a1"), status("a1", session=2))
    fleet.on_status(topics.status("gone"), status("gone", "offline"))
    fleet.send("running", updates=0)
    sent = len(publish.sent)
    fleet.send("running", updates=0)  # nothing new to grant: not sent again
    assert len(publish.sent) == sent
    allowed = cfg.learning_starts + cfg.max_lag_transitions
    grants = publish.grants()
    assert set(grants) == {"a0", "a1"} and sum(g.credit for g in grants.values()) == allowed
    assert (grants["a0"].session, grants["a1"].session) == (1, 2)  # each to its process
    assert {g.run_id for g in grants.values()} == {RID}
    fleet.send("serving")
    fleet.send("running", updates=1_000)  # after serving: ignored
    fleet.send("paused")  # (the learner's exit path sends it: a no-op once served)
    assert [(c.state, c.run_id) for c in publish.controls()] == [("running", RID), ("serving", RID)]
    before = list(publish.sent)
    fleet.republish()  # after a reconnect: the control message and every grant again
    assert sorted(publish.sent[len(before) :]) == sorted(
        [before[-1]] + [(t, p) for t, p in before if t.endswith("/credit")]
    )
    fleet.clear()  # the end of the run: the grants are no longer retained
    assert publish.sent[-2:] == [(topics.credit("a0"), b""), (topics.credit("a1"), b"")]


def test_the_control_message_stays_small_and_each_grant_too_for_10000_actors():
    """Protocol v3: credit travels per actor, so no message grows with the fleet (v2's
    control message, with every actor's credit in it, passed its 64 KB header cap at
    ~4,000 actors)."""
    cfg = run_config(
        "big", total_env_steps=200_000, learning_starts=99_000, max_lag_transitions=1_000
    )
    topics = Topics(cfg.transport.root, cfg.run)
    publish = Recorder()
    fleet = fleet_control(cfg, publish)
    ids = [f"board-{i:05d}-{'x' * 40}" for i in range(10_000)]  # long ids: the worst case
    for n, actor in enumerate(ids):
        fleet.on_status(topics.status(actor), status(actor, session=n))
    fleet.send("running", updates=0)
    grants = publish.grants()
    assert len(grants) == 10_000 and all(g.credit == 10 for g in grants.values())
    assert max(len(p) for _, p in publish.sent) < 200
    assert max(len(p) for t, p in publish.sent if t == topics.control) < 100


def _sliced_round(min_grant: int, total: int, updates: int) -> dict[str, int]:
    """Four actors that used and delivered a first grant of 500 steps: what the next round,
    at ``updates`` (each update frees one step), grants each beyond the 125 it had."""
    cfg = run_config(
        "slices",
        total_env_steps=total,
        learning_starts=100,
        replay_ratio=1.0,
        max_lag_transitions=400,
        fleet=FleetConfig(actors=0, min_grant=min_grant),
    )
    topics, publish = Topics(cfg.transport.root, cfg.run), Recorder()
    delivered: dict[str, int] = {}
    fleet = fleet_control(cfg, publish, received=lambda: (sum(delivered.values()), delivered))
    actors = ["a0", "a1", "a2", "a3"]
    for n, actor in enumerate(actors):
        fleet.on_status(topics.status(actor), status(actor, session=n))
    fleet.send("running", updates=0)
    assert publish.credits() == dict.fromkeys(actors, 125)
    delivered.update(publish.credits())
    fleet.send("running", updates=updates)
    return {a: c - 125 for a, c in publish.credits().items()}


def test_a_trickle_of_credit_is_granted_in_slices_of_min_grant():
    """An actor ships its batch when its credit runs out: 40 steps freed for 4 actors are
    one slice (one batch), not 10 each (four batches). No actor holds more than half the
    outstanding lead (40 // 2 = 20), so the slice of 32 is cut to 20 and the rest waits."""
    assert sorted(_sliced_round(32, 100_000, 40).values()) == [0, 0, 0, 20]
    assert sorted(_sliced_round(32, 100_000, 10).values()) == [0, 0, 0, 0]
    assert _sliced_round(1, 100_000, 40) == dict.fromkeys(["a0", "a1", "a2", "a3"], 10)
    # The slice is at most half the lead per actor: 400 // (2 x 4) = 50.
    assert sorted(_sliced_round(1_000, 100_000, 100).values()) == [0, 0, 50, 50]
    # Once the budget is allowed, the last steps go out as they are.
    assert _sliced_round(32, 540, 40) == dict.fromkeys(["a0", "a1", "a2", "a3"], 10)


def test_fleet_control_bounds_its_actors_and_credits_only_announced_ones():
    cfg = run_config("fc3", fleet=FleetConfig(actors=0, max_actors=2))
    topics = Topics(cfg.transport.root, cfg.run)
    publish = Recorder()
    # "ghost" delivered data without ever announcing itself: it earns no credit.
    fleet = fleet_control(cfg, publish, received=lambda: (10, {"ghost": 10}))
    for actor in ("a0", "a1", "a2"):
        fleet.on_status(topics.status(actor), status(actor))
    assert set(fleet.actors()) == {"a0", "a1"} and fleet.roster.actors_refused == 1
    fleet.on_status(topics.status("a0"), status("a0", "paused"))  # a known actor: updated
    assert fleet.actors()["a0"].state == "paused"
    fleet.send("running", updates=0)
    assert set(publish.grants()) == {"a0", "a1"}


def test_a_second_live_process_under_one_id_is_refused_in_the_grant(monkeypatch):
    """Two boards with one id: the first owns it; the newcomer's session is listed as
    refused in the id's grant (it stops on it) and gets no credit; the run goes on."""
    import edge_rl.learner.fleet.identity as identity

    now = [500.0]
    monkeypatch.setattr(identity.time, "monotonic", lambda: now[0])
    cfg = run_config("dup")
    topics = Topics(cfg.transport.root, cfg.run)
    publish = Recorder()
    fleet = fleet_control(cfg, publish)
    fleet.on_status(topics.status("pi"), status("pi", session=111))
    fleet.send("running", updates=0)
    assert publish.grants()["pi"].session == 111
    now[0] += 1
    fleet.on_status(topics.status("pi"), status("pi", "starting", session=222))  # the newcomer
    fleet.send("running", updates=0)
    grant = publish.grants()["pi"]
    assert grant.session == 111 and grant.refused == (222,)
    assert fleet.stats().actor_sessions_refused == 1
    assert fleet.actors()["pi"].session == 111  # the newcomer's status is not recorded


def test_an_actor_that_holds_credit_and_does_nothing_is_granted_no_more(monkeypatch):
    """A board that announces itself and then neither steps nor delivers keeps its grant
    but gets no share of new credit after credit_timeout_s; the one that works gets it all."""
    import edge_rl.learner.fleet.control as fc

    now = [1000.0]
    monkeypatch.setattr(fc.time, "monotonic", lambda: now[0])
    cfg = run_config("idle", credit_timeout_s=5.0, learning_starts=100, max_lag_transitions=100)
    topics = Topics(cfg.transport.root, cfg.run)
    received = {"worker": 0}
    publish = Recorder()
    fleet = fleet_control(cfg, publish, received=lambda: (sum(received.values()), received))
    for n, actor in enumerate(("worker", "hoarder")):
        fleet.on_status(topics.status(actor), status(actor, session=n))
    fleet.send("running", updates=0)
    first = publish.credits()
    assert first == {"worker": 100, "hoarder": 100}
    grants = []
    for t, updates in ((3.0, 50), (6.0, 100), (9.0, 150)):  # the worker steps and delivers
        now[0] = 1000.0 + t
        received["worker"] = 100 * int(t // 3)
        fleet.on_status(
            topics.status("worker"),
            status(
                "worker",
                session=0,
                env_steps=received["worker"],
                transitions_sent=received["worker"],
            ),
        )
        fleet.send("running", updates=updates)
        grants.append(publish.credits())
    at3, at6, at9 = grants
    assert at3["hoarder"] > first["hoarder"]  # before the timeout: a share like anyone
    assert at6["hoarder"] == at9["hoarder"] == at3["hoarder"]  # after it: no more
    allowed = cfg.learning_starts + cfg.max_lag_transitions + int(150 / cfg.replay_ratio)
    lead = allowed - received["worker"]
    # The worker is granted on, up to half the lead (no actor holds more); what the idle
    # hoarder holds is not outstanding any more, so the lead is overcommitted by at most
    # that, never by what anyone is granted anew.
    assert at9["worker"] == received["worker"] + math.ceil(lead / 2)
    held = {a: at9[a] - received.get(a, 0) for a in at9}
    assert held["worker"] <= lead and sum(held.values()) <= lead + held["hoarder"]


def test_what_the_learner_dropped_itself_is_written_off_at_once(monkeypatch):
    """A full inbox drops a batch of a0's: its credit comes back in the next grant, not after
    credit_timeout_s (a0 keeps delivering other batches, which restarts that clock, so the
    lost share stalled the fleet every time it filled the lead: ingest_queue=2)."""
    import edge_rl.learner.fleet.control as fc

    now = [1000.0]
    monkeypatch.setattr(fc.time, "monotonic", lambda: now[0])
    cfg = run_config("lost", credit_timeout_s=5.0, learning_starts=100, max_lag_transitions=100)
    topics = Topics(cfg.transport.root, cfg.run)
    received, dropped = {"a0": 0}, {}
    publish = Recorder()
    fleet = FleetControl(
        cfg.fleet,
        cfg.pacing,
        topics,
        publish,
        lambda: (received["a0"], dict(received)),
        RID,
        lambda: dict(dropped),
    )
    fleet.on_status(topics.status("a0"), status("a0"))
    fleet.send("running", updates=0)
    assert publish.credits() == {"a0": 100}  # half the lead of 200: no actor holds more
    # a0 stepped and sent all 100; 75 arrived, the learner's full inbox dropped 25.
    fleet.on_status(
        topics.status("a0"), status("a0", "paused", env_steps=100, transitions_sent=100)
    )
    received["a0"] = 75
    now[0] += 1.0  # well within credit_timeout_s
    fleet.send("running", updates=0)
    # Nothing is known lost: the 25 in transit count as held, within half the lead (125).
    assert publish.credits() == {"a0": 75 + 63}
    dropped["a0"] = 25
    fleet.send("running", updates=0)
    assert publish.credits() == {"a0": 75 + 63 + 25}  # the 25 at once
    assert fleet.write_off.written_off == {}  # not by the timeout
    dropped["a0"] = 40  # more than is in transit (a copy of a received batch): capped
    fleet.send("running", updates=0)
    assert publish.credits() == {"a0": 163}


def test_a_full_inbox_tells_ingest_what_it_dropped():
    import numpy as np

    from edge_rl.envs import env_spec
    from edge_rl.learner.inbox import Inbox
    from edge_rl.learner.ingest.ingest import Ingest
    from edge_rl.learner.replay import ReplayBuffer
    from edge_rl.telemetry.breakdown import learner_clocks
    from edge_rl.types import TransitionBatch

    spec, topics = env_spec("CartPole-v1"), Topics("edge-rl", "inbox")
    ingest = Ingest(spec, ReplayBuffer(spec, 100), topics, latest_version=lambda: 0)
    inbox = Inbox(ingest, maxsize=1, clock=learner_clocks()["ingest"])  # not started: stays full
    obs = np.zeros((3, 4), np.float32)
    zeros = np.zeros(3, bool)
    for seq in (0, 1):
        batch = TransitionBatch(
            "a0",
            7,
            seq,
            0,
            obs,
            zeros.astype(np.int64),
            zeros.astype(np.float32),
            obs,
            zeros,
            zeros,
        )
        inbox.offer(topics.transitions("a0"), encode_transitions(batch))
    assert (inbox.dropped, inbox.dropped_transitions) == (1, 3)
    assert ingest.lost() == {"a0": 3}


def test_a_killed_actor_keeps_its_last_counters():
    cfg = run_config("will")
    topics = Topics(cfg.transport.root, cfg.run)
    publish = Recorder()
    fleet = fleet_control(cfg, publish)
    fleet.on_status(topics.status("a0"), status("a0"))
    fleet.send("running", updates=0)
    granted = publish.credits()["a0"]  # its counts are within its grant: recorded
    running = ActorStatus(
        actor_id="a0",
        state="running",
        env_steps=granted,
        transitions_sent=granted - 10,
        run_id=RID,
        session=7,
    )
    fleet.on_status(topics.status("a0"), encode_status(running))
    # Its last will: zeros, and no run id (made before the actor joined): matched by session.
    fleet.on_status(topics.status("a0"), status("a0", "offline", run_id=""))
    assert fleet.actors()["a0"] == dataclasses.replace(running, state="offline")
    fleet.on_status(topics.status("a1"), status("a1", "offline"))  # never seen: not recorded
    assert "a1" not in fleet.actors()


def test_actors_join_while_the_main_thread_reads_the_registry():
    """Statuses arrive on the transport's thread while the live view and the credit loop
    read the registry on the main thread: every read is a copy taken under the lock, so
    iterating it while actors join never raises and never sees a half-made entry."""
    cfg = run_config("race")
    topics = Topics(cfg.transport.root, cfg.run)
    fleet = fleet_control(cfg, Recorder())
    payloads = [(topics.status(f"a{i}"), status(f"a{i}")) for i in range(3_000)]
    joined = threading.Event()

    def join_all() -> None:
        for topic, payload in payloads:
            fleet.on_status(topic, payload)
        joined.set()

    writer = threading.Thread(target=join_all)
    reads, seen = 0, 0
    writer.start()
    while not joined.is_set() and reads < 100_000:
        snapshot = fleet.actors()
        for actor_id, st in snapshot.items():  # the live view's loop
            assert st.actor_id == actor_id
            if len(fleet.actors()) > len(snapshot):  # actors joined meanwhile
                seen += 1
                break
        reads += 1
    writer.join(WAIT_S)
    assert not writer.is_alive() and len(fleet.actors()) == 3_000
    assert reads > 1  # the reads did overlap the joins


# --- a learner and a real actor, in one process, no broker ------------------------------


FAST_BOARD = BoardConfig(
    board="test-board", batch_size=16, flush_interval_s=0.05, status_interval_s=0.1
)


def test_learner_and_actor_over_the_memory_transport(tmp_path):
    cfg = run_config("mem")
    topics = Topics(cfg.transport.root, cfg.run)
    summary, actor, broker, learner = run_in_memory(tmp_path, cfg)

    # The budget was met from this actor alone; everything it sent is in replay, once.
    assert summary["env_steps"] >= cfg.total_env_steps
    assert actor.transitions_sent == summary["transitions_received"] == len(learner.replay)
    assert summary["batches_missing"] == 0 and summary["transitions_rejected"] == 0
    # Policies went out retained, for this run start; the actor ran one; publishes.jsonl
    # has a line for each. The learner cleared an earlier run's at the start, and leaves
    # the deployed one retained at the end: the fleet serves it.
    policies = [p for t, p, retain in broker.published if t == topics.policy and retain]
    assert policies[0] == b"" and broker.retained[topics.policy] == policies[-1]
    policy = decode_policy(policies[-1], learner.signer.verifier(), len(policies[-1]))
    assert policy.manifest.policy_version == summary["policy_version"] >= 2
    assert actor.slot.version == summary["policy_version"]  # the actor served it
    assert (policy.manifest.run, policy.manifest.run_id) == (cfg.run, summary["run_id"])
    assert summary["run_id"] == learner.run_id and len(learner.run_id) == 16
    assert summary["actors"]["a0"]["policy_version"] >= 1
    lines = (tmp_path / "run" / "publishes.jsonl").read_text().splitlines()
    assert [json.loads(x)["policy_version"] for x in lines] == list(
        range(1, summary["policy_version"] + 1)
    )
    # The replay ratio was paid in full, and the final control message says serving.
    assert summary["updates"] >= int(cfg.replay_ratio * (summary["env_steps"] - 200))
    assert decode_control(broker.retained[topics.control]).state == "serving"
    # A learner that vanished now (an unclean close) would leave it serving: its last will
    # (what MemoryBroker.drop publishes) became that final control.
    topic, will = learner.transport.will
    final = decode_control(will)
    assert (topic, final.state, final.run_id) == (topics.control, "serving", learner.run_id)
    saved = json.loads((tmp_path / "run" / "summary.json").read_text())
    assert saved == json.loads(json.dumps(summary))


def run_in_memory(
    tmp_path, cfg, before_run=None, resume: bool = False, learner_connect=None
) -> tuple:
    """A learner and one real actor (a thread) over a MemoryBroker:
    ``(summary, actor, broker, learner)``; ``resume``: from tmp_path/run's checkpoint;
    ``learner_connect(broker)``: the learner's ``Connect`` (default: the broker's own)."""
    broker = MemoryBroker()
    try:
        connect = broker.connect if learner_connect is None else learner_connect(broker)
        learner = LearnerNode(cfg, connect, tmp_path / "run", resume=resume)
        public_key = tmp_path / "run" / "signing.pub"
        learner.signer.write_public(public_key)
        opts = ActorOptions(
            "a0", cfg.env_id, broker.url, run=cfg.run, seed=3, policy_key=str(public_key)
        )
        actor = ActorNode(FAST_BOARD, opts, connect=broker.connect)
        if before_run is not None:
            before_run(broker, learner)
        thread = threading.Thread(target=actor.run, name="actor", daemon=True)
        thread.start()
        summary = learner.run()
        # Serving the result, or holding for a resume: no control message ends an actor.
        told = "paused" if summary["interrupted"] else "serving"
        wait_for(lambda: actor.rc.state == told, WAIT_S, f"the board {told}", 0.01)
        assert thread.is_alive()
        actor.stop()  # what its SIGTERM does
        thread.join(WAIT_S)
        assert not thread.is_alive(), "the actor did not stop on SIGTERM"
    finally:
        broker.close()
    return summary, actor, broker, learner


def refusing_grants(refusals: int, refused: list[str]):
    """A learner ``Connect`` whose transport refuses its first ``refusals`` credit grants
    (as paho does with its queue full), each topic appended to ``refused``."""

    def learner_connect(broker: MemoryBroker):
        def connect(*args, **kwargs):
            transport = broker.connect(*args, **kwargs)
            publish = transport.publish

            def refuse_first(topic: str, payload: bytes, **kw) -> bool:
                if topic.endswith("/credit") and payload and len(refused) < refusals:
                    refused.append(topic)
                    return False
                return publish(topic, payload, **kw)

            transport.publish = refuse_first
            return transport

        return connect

    return learner_connect


def test_a_signal_after_the_budget_finishes_the_run_without_its_evaluation(tmp_path):
    """SIGTERM while the learner pays the updates still owed after the budget (what the
    handler does, called there): the run still finishes (deployed, checkpointed final,
    serving) and writes its summary, not interrupted; what the signal cuts is the rest of
    the payment and the final evaluation, and the summary says so. It used to raise
    KeyboardInterrupt there: no summary, exit 130, for a run that had met its budget."""
    cfg = run_config("late-signal", replay_ratio=4.0)
    paid: list[int] = []

    def signal_while_paying(broker, learner):
        real = learner.trainer.pay_in_full

        def pay_in_full(stop=lambda: False):
            learner.stop(signal.SIGTERM, None)  # raised here when the handler is disarmed
            real(stop)
            paid.append(learner.trainer.target() - learner.algo.updates)

        learner.trainer.pay_in_full = pay_in_full

    summary, _, _, learner = run_in_memory(tmp_path, cfg, signal_while_paying)
    assert paid and paid[0] > 0  # updates were owed, and the signal left them unpaid
    assert summary["interrupted"] is False and summary["final_eval_skipped"] is True
    assert summary["final_eval_return"] is None and summary["eval_episodes"] == 0
    assert summary["env_steps"] >= cfg.total_env_steps and summary["policy_version"] >= 1
    assert learner.durable.checkpoint.load().header["finished"]  # never resumed
    saved = json.loads((tmp_path / "run" / "summary.json").read_text())
    assert saved == json.loads(json.dumps(summary))


def test_lost_batches_are_written_off_and_the_run_reaches_its_budget_exactly(tmp_path):
    """Three batches vanish in transit (as in a broker crash). The credit spent on them
    used to stall the run for ever; it is written off after credit_timeout_s and granted
    again, and the run ends at exactly total_env_steps, from independent counts: what the
    broker lost, what the actor says it sent, what replay holds. The learner's transport
    also refuses its first three grants (a full queue): each is sent again the next round,
    and summary.json counts them (``grants_unsent``)."""
    cfg = run_config("lost", credit_timeout_s=0.5, max_lag_transitions=200)
    refused: list[str] = []

    def lose_three_mid_run(broker, learner):
        real = learner.algo.update
        armed = [True]

        def update(*args, **kwargs):  # once past the 20th update: training is under way
            # (a call takes up to updates_per_call steps: the count may step over 20)
            if armed[0] and learner.algo.updates >= 20:
                armed[0] = False
                broker.lose(learner.topics.all_transitions, 3)
            return real(*args, **kwargs)

        learner.algo.update = update

    summary, actor, broker, _ = run_in_memory(
        tmp_path, cfg, lose_three_mid_run, learner_connect=refusing_grants(3, refused)
    )
    assert len(refused) == 3 and summary["grants_unsent"] == 3
    lost = sum(peek_count(p) for _, p in broker.lost)
    assert len(broker.lost) == 3 and lost > 0
    assert summary["env_steps"] == cfg.total_env_steps  # exactly, not a step more
    assert summary["credit_written_off"] >= lost
    # Replay holds what arrived, once; the actor sent more than that by what was lost
    # and what came past the budget.
    assert summary["transitions_duplicate"] == 0 and summary["batches_missing"] >= 3
    over = summary["transitions_over_budget"]
    assert actor.transitions_sent == summary["transitions_received"] + lost + over


def test_the_recheck_deploys_the_best_combined_score_not_a_lucky_one(monkeypatch):
    """Three policies scored 500 on the first 10 episodes; on 20 more, v3 fails now and then.
    The recheck picks the best combined score among the top 5 and the last (a seam test:
    evaluate_policy is replaced by a table of returns)."""
    import edge_rl.learner.outbound.selection as sel
    from edge_rl.runtime.evaluate import EvalResult

    first = {1: 500.0, 2: 480.0, 3: 500.0, 4: 500.0, 5: 200.0}
    again = {1: 500.0, 2: 400.0, 3: 300.0, 4: 490.0, 5: 150.0}
    calls: list[tuple[int, int]] = []

    def fake(published, episodes, seed, evaluators=None, stop_below=None):
        v = published.bundle.manifest.policy_version
        calls.append((v, episodes))
        table = first if episodes == 10 else again
        return EvalResult(returns=(table[v],) * episodes, lengths=(500,) * episodes)

    monkeypatch.setattr(sel, "evaluate_policy", fake)
    policies = {v: fake_published(v) for v in first}
    selection = sel.ModelSelection(every=1, episodes=10, seed=0, recheck=20)
    for v in sorted(policies):
        selection.score(policies[v])
    best, best_score, last_score = selection.better_than(policies[5])
    assert best.bundle.manifest.policy_version == 1  # 500 and 500, not v3's 500 and 300
    assert best_score == 500.0 and last_score == (200 * 10 + 150 * 20) / 30
    assert sorted(v for v, n in calls if n == 20) == [1, 2, 3, 4, 5]  # top 5 and the last
    # Without the recheck, the newest of the 500s would have gone out.
    plain = sel.ModelSelection(every=1, episodes=10, seed=0)
    for v in sorted(policies):
        plain.score(policies[v])
    assert plain.better_than(policies[5])[0].bundle.manifest.policy_version == 4


def fake_published(version: int):
    from types import SimpleNamespace

    manifest = SimpleNamespace(policy_version=version)
    return SimpleNamespace(bundle=SimpleNamespace(manifest=manifest), model=b"")


def old_policy(run: str, signer) -> bytes:
    """A policy an earlier start of run ``run`` left retained: version 50, same key."""

    from edge_rl.types import PolicyBundle

    model = b"an earlier run's model"
    m = cartpole_manifest(
        model, version=50, codec="none", run=run, run_id="an-earlier-start", learner_step=9
    )
    return encode_policy(PolicyBundle(m, model), signer)


def test_an_earlier_runs_leftovers_never_reach_this_run(tmp_path):
    """Protocol v3 §5: under the same run name, an earlier learner's retained policy (signed
    with the same key, at version 50), its "running" control, and another actor's status.
    The actor joins this run start only: it never loads the old policy, this learner's
    versions start at 1, and the summary counts this run's actor alone."""
    cfg = run_config("leftovers")
    topics = Topics(cfg.transport.root, cfg.run)

    def leave_leftovers(broker, learner):
        broker.retained[topics.policy] = old_policy(cfg.run, learner.signer)
        old_start = ControlMessage("running", "an-earlier-start")
        broker.retained[topics.control] = encode_control(old_start)
        broker.retained[topics.status("ghost")] = status("ghost", run_id="an-earlier-start")

    summary, actor, broker, learner = run_in_memory(tmp_path, cfg, before_run=leave_leftovers)
    assert set(summary["actors"]) == {"a0"} and summary["status_other_run"] >= 1
    assert summary["env_steps"] == cfg.total_env_steps and summary["transitions_rejected"] == 0
    versions = [
        json.loads(x)["policy_version"]
        for x in (tmp_path / "run" / "publishes.jsonl").read_text().splitlines()
    ]
    assert versions[0] == 1 and summary["policy_version"] < 50
    assert actor.rc.run_id == learner.run_id and actor.slot.version <= summary["policy_version"]
    # The old policy was tried again when the actor joined this run start, and refused for
    # it. (Before, the actor had joined the old start, whose "running" was retained: its
    # policy was tried for that one, and its junk model refused; no credit, no step.)
    assert actor.slot.rejected["wrong_run"] == 1


def test_a_restarted_board_owns_its_id_once_silent_for_identity_window_s():
    """A board's process restarts: its last will, then a new session. The new session owns
    the id (its status is the board's) once the old one has been silent
    ``fleet.identity_window_s``: at once with a window of 0, not within one of 600 s."""
    for window_s, owner in ((0.0, 222), (600.0, 111)):
        cfg = run_config("restart", fleet=FleetConfig(actors=0, identity_window_s=window_s))
        topics = Topics(cfg.transport.root, cfg.run)
        fleet = fleet_control(cfg, Recorder())
        fleet.on_status(topics.status("pi"), status("pi", session=111))
        fleet.send("running", updates=0)
        fleet.on_status(topics.status("pi"), status("pi", "offline", session=111))  # its will
        fleet.on_status(topics.status("pi"), status("pi", "starting", session=222))
        fleet.send("running", updates=0)
        assert fleet.actors()["pi"].session == owner, window_s


def test_an_export_due_past_max_busy_share_waits(tmp_path):
    """The exporter may be busy a millionth of the run's wall time: after the first
    version, every due export waits (counted) until the run's last one."""
    cfg = run_config("budget")
    cfg = dataclasses.replace(cfg, export=dataclasses.replace(cfg.export, max_busy_share=1e-6))
    summary, *_ = run_in_memory(tmp_path, cfg)
    assert summary["exports_deferred"] >= 1
    assert summary["policy_version"] <= 2
