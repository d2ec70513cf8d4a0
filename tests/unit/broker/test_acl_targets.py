"""A rollout's targets under the ACLs edge-rl writes (broker/acl.py): the learner writes
every board's target, each board reads its own only and writes none (docs/security.md)."""

from __future__ import annotations

import pytest

from edge_rl.broker.acl import (
    deployment_acl,
    may_publish,
    may_read,
    may_subscribe,
    mosquitto_acl,
    parse_acl,
    run_acl,
)
from edge_rl.wire.topics import Topics

RUN, OTHER = Topics("edge-rl", "r1"), Topics("edge-rl", "r2")


@pytest.mark.parametrize(
    "users",
    [
        run_acl(RUN, "learner", ["pi-01", "pi-02"]),
        deployment_acl("learner", {"pi-01": RUN, "pi-02": RUN, "pi-09": OTHER}),
    ],
    ids=["run", "deployment"],
)
def test_only_the_learner_writes_a_target_and_only_its_board_reads_it(users):
    grants = parse_acl(mosquitto_acl(users))
    mine, theirs = RUN.target("pi-01"), RUN.target("pi-02")
    assert may_publish(grants, "learner", mine) and may_publish(grants, "learner", theirs)
    assert may_read(grants, "pi-01", mine) and may_subscribe(grants, "pi-01", mine)
    assert not may_read(grants, "pi-01", theirs)
    assert not may_publish(grants, "pi-01", mine) and not may_publish(grants, "pi-01", theirs)
    assert not may_read(grants, "pi-01", OTHER.target("pi-01"))  # its id in another run
    assert not may_subscribe(grants, "pi-01", f"{RUN.base}/actors/+/target")
