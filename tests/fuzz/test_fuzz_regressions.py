"""One named case for every decoder bug the fuzz suite found (docs: the fix's comment)."""

from __future__ import annotations

import numpy as np
import pytest

from edge_rl.specs import EnvSpec
from edge_rl.transport import codec
from edge_rl.types import TransitionBatch

CARTPOLE = EnvSpec(obs_shape=(4,), num_actions=2)


def _record(n_shape: tuple[int, ...]) -> TransitionBatch:
    z = np.zeros(n_shape, np.float32)
    return TransitionBatch(
        "sim-00", 0, 0, 0, obs=np.zeros((*n_shape, 4), np.float32),
        action=np.zeros(n_shape, np.int64), reward=z, next_obs=np.zeros((*n_shape, 4), np.float32),
        terminated=z.astype(bool), truncated=z.astype(bool),
    )  # fmt: skip


@pytest.mark.parametrize(
    "record",
    [_record(()), _record((0,))],
    ids=["0-d reward: len() raised IndexError", "no rows: min() raised ValueError"],
)
def test_validate_batch_refuses_a_record_without_rows(record):
    with pytest.raises(codec.CodecError) as err:
        codec.validate_batch(record, CARTPOLE)
    assert err.value.reason == "shape"
