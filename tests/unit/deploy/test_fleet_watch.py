"""FleetWatch over the in-process broker (the one seam): the retained control and each
board's latest status become reports; what does not decode, or names another board than
its topic, is counted and leaves the previous status standing."""

from __future__ import annotations

from edge_rl.deploy.fleet_watch import FleetWatch
from edge_rl.learner.fleet.figures import limits_for_env
from edge_rl.transport.memory import MemoryBroker
from edge_rl.types import ActorStatus, ControlMessage
from edge_rl.wire.messages import encode_control, encode_status
from edge_rl.wire.topics import Topics

TOPICS = Topics("edge-rl", "w1")
DIGEST = "ab" * 32


def test_reports_are_the_latest_good_status_of_each_board():
    broker = MemoryBroker()
    learner = broker.connect("learner")
    learner.start()
    assert learner.wait_connected(5)
    control = encode_control(ControlMessage("serving", "s1"))
    learner.publish(TOPICS.control, control, retain=True)
    good = ActorStatus(
        "pi-01",
        "serving",
        policy_version=3,
        policy_digest=DIGEST,
        recent_return=500.0,
        served_episodes=4,
        policies_failed=1,
        run_id="s1",
    )
    learner.publish(TOPICS.status("pi-01"), encode_status(good), retain=True)
    broker.wait_idle(5)
    with FleetWatch(broker.connect, TOPICS, clock=lambda: 7.0) as watch:
        watch.wait_connected(5)
        assert watch.wait_control(5) == ControlMessage("serving", "s1")
        broker.wait_idle(5)
        learner.publish(TOPICS.status("pi-01"), b"ERLS not a status")
        impostor = ActorStatus("pi-02", "serving", policy_version=9, run_id="s1")
        learner.publish(TOPICS.status("pi-01"), encode_status(impostor))
        learner.publish(TOPICS.status("pi-03"), b"")  # a cleared retained status
        broker.wait_idle(5)
        reports = watch.reports()
    assert set(reports) == {"pi-01"} and watch.rejected == 2
    r = reports["pi-01"]
    assert (r.policy_version, r.digest, r.recent_return, r.seen) == (3, DIGEST, 500.0, 7.0)
    assert (r.served_episodes, r.policies_failed, r.run_id) == (4, 1, "s1")
    broker.close()


def test_a_status_past_the_envs_return_range_is_shown_and_judged_at_its_bound():
    """``edge-rl fleet-status`` and ``edge-rl deploy`` read statuses through the watch: a
    board claiming 1e300 is held to the env's range, and counted."""
    broker = MemoryBroker()
    learner = broker.connect("learner")
    learner.start()
    assert learner.wait_connected(5)
    with FleetWatch(broker.connect, TOPICS, limits=limits_for_env("CartPole-v1")) as watch:
        watch.wait_connected(5)
        for actor, ret in (("pi-01", 1e300), ("pi-02", -1e308), ("pi-03", 212.0)):
            status = ActorStatus(actor, "serving", recent_return=ret, run_id="s1")
            learner.publish(TOPICS.status(actor), encode_status(status), retain=True)
        broker.wait_idle(5)
        reports = watch.reports()
    assert {a: r.recent_return for a, r in reports.items()} == {
        "pi-01": 500.0,
        "pi-02": 0.0,
        "pi-03": 212.0,
    }
    assert watch.clamped == 2
    broker.close()
