"""A board's batch closed by count fits ``max_batch_bytes`` for any observation: the rows
``rows_within`` allows encode within the bound, and one more would not."""

from __future__ import annotations

import numpy as np
import pytest

from edge_rl.specs import EnvSpec
from edge_rl.types import TransitionBatch
from edge_rl.wire.transitions import encode_transitions, rows_within


def _batch(spec: EnvSpec, n: int) -> TransitionBatch:
    action = np.zeros(n, np.int64) if spec.discrete else np.zeros((n, *spec.action_shape))
    return TransitionBatch(
        actor_id="a-board-with-a-long-id-" + "x" * 40,
        session=2**53 - 1,
        seq=10**9,
        policy_version=10**6,
        run_id="f" * 16,
        obs=np.zeros((n, *spec.obs_shape), np.float32),
        action=action,
        reward=np.zeros(n, np.float32),
        next_obs=np.zeros((n, *spec.obs_shape), np.float32),
        terminated=np.zeros(n, bool),
        truncated=np.zeros(n, bool),
    )


@pytest.mark.parametrize(
    "spec",
    [
        EnvSpec(obs_shape=(4,), num_actions=2),  # CartPole
        EnvSpec(
            obs_shape=(348,), action_shape=(17,), action_low=[-0.4] * 17, action_high=[0.4] * 17
        ),
    ],
    ids=["cartpole", "humanoid-sized"],
)
def test_the_rows_allowed_fit_and_one_more_does_not(spec: EnvSpec) -> None:
    max_bytes = 200_000
    rows = rows_within(spec, max_bytes)
    assert len(encode_transitions(_batch(spec, rows))) <= max_bytes
    more = len(encode_transitions(_batch(spec, rows + 1)))
    assert more > max_bytes - 1024  # the header's room is all that is left unused


def test_at_least_one_row() -> None:
    assert rows_within(EnvSpec(obs_shape=(10_000,), num_actions=2), 1_000) == 1
