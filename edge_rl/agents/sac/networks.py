"""SAC's squashed Gaussian policy and its twin critics.

The policy is two networks that share their hidden layers:

    mean actor   obs -> hidden... -> Dense(tanh) -> frozen rescale  = a_det in [low, high]
    log-std head (output of the last hidden layer) -> Dense          = log sigma (pre-tanh)

The mean actor is TD3's actor network (``edge_rl.agents.td3.networks.make_actor``): a pure
Dense stack whose tanh head's pre-activation is the Gaussian's mean ``mu(s)``, so its output
``tanh(mu(s)) * half_range + mid`` is SAC's deterministic action, and the export path
(``edge_rl.export``: Dense stacks only) and the boards take it unchanged. The log-std head
never leaves the host. The critics are TD3's too.
"""

from __future__ import annotations

import keras

from edge_rl.agents.td3.networks import make_actor, make_critic

__all__ = ["make_actor", "make_critic", "make_log_std_head"]


def make_log_std_head(hidden_out: int, act_dim: int, seed: int) -> keras.Model:
    """``features [B, hidden_out] -> log_std [B, act_dim]`` (unclipped), on the features of
    the mean actor's last hidden layer."""
    if hidden_out <= 0 or act_dim <= 0:
        raise ValueError(f"hidden_out and act_dim must be positive, got {hidden_out}, {act_dim}")
    return keras.Sequential(
        [
            keras.Input(shape=(hidden_out,), dtype="float32"),
            keras.layers.Dense(
                act_dim,
                activation=None,
                kernel_initializer=keras.initializers.GlorotUniform(seed=seed),
                name="log_std",
            ),
        ],
        name="log_std_head",
    )
