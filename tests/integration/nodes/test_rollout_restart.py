"""A board that restarts mid-rollout (docs/protocol.md §5.5): a real ActorNode started on a
broker holding the run's retained policy, ``serving`` control and this board's retained
target serves the target's policy, not the run's, and refuses nothing as ``wrong_run``."""

from __future__ import annotations

import threading

from edge_rl.actor.node import ActorNode, ActorOptions
from edge_rl.boards import BoardConfig
from edge_rl.transport.memory import MemoryBroker
from edge_rl.types import ControlMessage, PolicyTarget
from edge_rl.wire.messages import encode_control, encode_target
from edge_rl.wire.policy import decode_policy, encode_policy
from edge_rl.wire.signing import Signer
from edge_rl.wire.topics import Topics
from tests.harness.cartpole_policies import MODELS, policy_bundle
from tests.harness.waits import wait_for

RUN, START = "restart-mid-rollout", "served-start"
WAIT_S = 20.0


def test_a_restarted_board_serves_its_retained_target(tmp_path):
    signer = Signer.load_or_create(tmp_path / "k")
    signer.write_public(tmp_path / "k.pub")
    topics = Topics("edge-rl", RUN)

    def signed(quality: str, version: int) -> bytes:
        bundle = policy_bundle(MODELS[quality].read_bytes(), run=RUN, run_id=START, version=version)
        return encode_policy(bundle, signer)

    new = signed("good2", 4)
    digest = decode_policy(new, signer.verifier()).manifest.model_sha256
    broker = MemoryBroker()
    broker.retained[topics.policy] = signed("good", 3)  # what the run deployed
    broker.retained[topics.control] = encode_control(ControlMessage("serving", START))
    broker.retained[topics.target("b0")] = encode_target(
        PolicyTarget(START, 4, digest, "v4", new)  # this board's step, sent before it restarted
    )
    opts = ActorOptions(
        "b0", "CartPole-v1", broker.url, run=RUN, policy_key=str(tmp_path / "k.pub")
    )
    actor = ActorNode(BoardConfig(board="test-board"), opts, connect=broker.connect)
    thread = threading.Thread(target=actor.run, name="actor", daemon=True)
    thread.start()
    try:
        wait_for(
            lambda: actor.slot.version == 4,
            WAIT_S,
            "v4 served",
            detail=lambda: f"serves v{actor.slot.version}",
        )
        assert actor.slot.digest == digest and actor.rc.state == "serving"
        assert actor.slot.rejected["wrong_run"] == 0 and actor.slot.failed == 0
    finally:
        actor.stop()
        thread.join(WAIT_S)
        broker.close()
