"""Grant publishing (``GrantPublisher``): a grant is recorded before it goes out, a new
session's goes at once, more credit waits its turn under the rate (oldest first), and one the
transport refused goes out again."""

from __future__ import annotations

from edge_rl.learner.fleet.credit import Grants
from edge_rl.learner.fleet.identity import Identities
from edge_rl.learner.fleet.publisher import GrantPublisher
from edge_rl.wire.messages import decode_credit
from edge_rl.wire.topics import Topics

TOPICS = Topics("edge-rl", "grants")
RUN_ID = "g-start"


class Sent:
    def __init__(self) -> None:
        self.credits: list[tuple[str, int]] = []
        self.cleared: list[str] = []
        self.refuse: set[str] = set()

    def __call__(self, topic: str, payload: bytes, **_) -> bool:
        actor = TOPICS.actor_of(topic)
        if actor in self.refuse:
            return False
        if payload:
            self.credits.append((actor, decode_credit(payload).credit))
        else:
            self.cleared.append(actor)
        return True


def setup(rate: float, actors: int) -> tuple[GrantPublisher, Sent, Identities, Grants]:
    sent, grants, ids = Sent(), Grants(), Identities(10.0)
    for i in range(actors):
        assert ids.admit(f"b-{i}", 100 + i, "running")
    now = [0.0]  # the rate's clock stands still: only the burst goes
    return GrantPublisher(TOPICS, sent, grants, rate, lambda: now[0]), sent, ids, grants


def test_new_sessions_at_once_more_credit_by_the_rate_oldest_first():
    out, sent, ids, grants = setup(rate=4.0, actors=6)  # a burst of 2
    out.publish({f"b-{i}": 10 for i in range(6)}, ids, RUN_ID, now=1.0)
    assert len(sent.credits) == 6  # new sessions: never held back
    assert grants.of("b-3") == (103, 10)
    out.publish({f"b-{i}": 20 for i in range(6)}, ids, RUN_ID, now=2.0)
    assert sent.credits[6:] == [("b-0", 20), ("b-1", 20)]  # the burst, in order
    out.publish({f"b-{i}": 20 for i in range(6)}, ids, RUN_ID, now=3.0)
    assert sent.credits[8:] == []  # no token left; nothing lost: it waits in the ledger
    assert grants.of("b-5") == (105, 10)  # not published: not recorded either


def test_a_grant_goes_to_the_owner_only_and_unchanged_ones_not_again():
    out, sent, ids, _ = setup(rate=0.0, actors=1)
    out.publish({"b-0": 10, "ghost": 10}, ids, RUN_ID, now=1.0)
    out.publish({"b-0": 10}, ids, RUN_ID, now=2.0)
    assert sent.credits == [("b-0", 10)]


def test_a_refused_grant_is_recorded_counted_and_sent_next_round():
    out, sent, ids, grants = setup(rate=0.0, actors=1)
    sent.refuse.add("b-0")
    out.publish({"b-0": 10}, ids, RUN_ID, now=1.0)
    assert sent.credits == [] and out.unsent == 1
    assert grants.of("b-0") == (100, 10)  # recorded before it could step under it
    sent.refuse.clear()
    out.publish({"b-0": 10}, ids, RUN_ID, now=2.0)
    assert sent.credits == [("b-0", 10)]


def test_republish_resend_and_clear():
    out, sent, ids, _ = setup(rate=0.0, actors=2)
    out.publish({"b-0": 10, "b-1": 20}, ids, RUN_ID, now=1.0)
    out.republish()
    out.resend("b-1")
    out.resend("nobody")  # never granted: nothing
    assert sent.credits == [("b-0", 10), ("b-1", 20), ("b-0", 10), ("b-1", 20), ("b-1", 20)]
    out.clear()
    assert sorted(sent.cleared) == ["b-0", "b-1"]
    out.republish()  # no grant is retained any more
    assert len(sent.credits) == 5
