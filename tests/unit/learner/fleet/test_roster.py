"""The roster (``Roster``): which statuses are recorded, which are refused or ignored (and
counted), and who is online."""

from __future__ import annotations

import pytest

from edge_rl.learner.fleet.credit import Grants
from edge_rl.learner.fleet.roster import Roster
from edge_rl.types import ActorStatus
from edge_rl.wire.messages import encode_status
from edge_rl.wire.topics import Topics

TOPICS = Topics("edge-rl", "roster")
RUN_ID = "ro-start"


def roster(max_actors: int = 10) -> Roster:
    grants = Grants()
    grants.set("a", 7, 100)
    return Roster(TOPICS, RUN_ID, grants, max_actors, identity_window_s=10.0)


def payload(actor: str = "a", **kw) -> bytes:
    return encode_status(ActorStatus(actor, kw.pop("state", "running"), **kw))


@pytest.mark.parametrize(
    ("topic", "data", "counter"),
    [
        (TOPICS.status("a"), b"not a status", "status_rejected"),
        (TOPICS.status("b"), payload("a", run_id=RUN_ID, session=7), "status_rejected"),
        (TOPICS.status("a"), payload(run_id="another-start", session=7), "status_other_run"),
        (
            TOPICS.status("a"),
            payload(run_id=RUN_ID, session=7, env_steps=101),
            "status_over_credit",
        ),
        (
            TOPICS.status("a"),
            payload(run_id=RUN_ID, session=7, transitions_sent=90, transitions_dropped=11),
            "status_over_credit",
        ),
        (TOPICS.status("a"), payload(run_id=RUN_ID, session=8, env_steps=1), "status_over_credit"),
    ],
)
def test_a_status_not_to_record_is_counted(topic, data, counter):
    r = roster()
    assert r.check(topic, data) is None
    counts = {
        c: getattr(r, c) for c in ("status_rejected", "status_other_run", "status_over_credit")
    }
    assert counts == {c: int(c == counter) for c in counts}


@pytest.mark.parametrize(
    "data",
    [
        payload(run_id=RUN_ID, session=7, env_steps=100, transitions_sent=100),  # at its grant
        payload(state="offline", session=7),  # a will: no run id, no counts to check
    ],
)
def test_a_status_within_its_grant_passes(data):
    assert roster().check(TOPICS.status("a"), data) is not None


def test_record_keeps_the_owner_within_max_actors_and_a_will_keeps_the_counters():
    r = roster(max_actors=2)
    for actor, session in (("a", 7), ("b", 8), ("c", 9)):
        r.record(ActorStatus(actor, "running", run_id=RUN_ID, session=session, env_steps=5))
    assert sorted(r.actors) == ["a", "b"] and r.actors_refused == 1 and r.status_rejected == 1
    r.record(ActorStatus("a", "running", run_id=RUN_ID, session=99))  # a second process
    assert r.actors["a"].session == 7 and r.ids.refused("a") == (99,)
    r.record(ActorStatus("b", "offline", session=8))  # its will carries no counters
    assert r.actors["b"].state == "offline" and r.actors["b"].env_steps == 5
    assert r.online() == 1 and r.online_ids(lambda _a: False) == {"a"}
    assert r.online_ids(lambda a: a == "a") == set()  # quarantined: left out
    assert r.stepping() == ["a"] and r.behind("paused") == (1, 1)
