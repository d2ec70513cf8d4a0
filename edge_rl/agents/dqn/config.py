"""DQN hyper-parameters, validated on construction.

Defaults follow RL Baselines3 Zoo's tuned ``CartPole-v1`` DQN (``hyperparams/dqn.yml``:
lr 2.3e-3, batch 64, gamma 0.99, 256-256 MLP, target update every 10 env steps with
``train_freq=256, gradient_steps=128``, exploration 1.0 -> 0.04 over 16 % of the budget),
which reaches a return of 500 at 50k env steps; ``max_grad_norm`` is SB3's DQN default.
The zoo counts the target interval (10) in env steps, but SB3 only checks it between env
steps, while its 128 gradient steps run in one burst every 256 env steps: the target is
in effect copied once per 128 gradient updates. We count in gradient updates (the learner
has no env-step clock of its own) and use 128. A copy every 5 updates, the literal
translation, kept CartPole near a return of 10-100 in our runs.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class DQNConfig:
    # Network and optimiser.
    hidden: tuple[int, ...] = (256, 256)
    learning_rate: float = 2.3e-3
    # Linear decay of the learning rate to ``learning_rate_end`` over the first
    # ``lr_decay_updates`` gradient updates, flat after; 0 keeps it constant (the zoo's).
    learning_rate_end: float = 0.0
    lr_decay_updates: int = 0
    batch_size: int = 64
    max_grad_norm: float = 10.0  # global-norm gradient clipping

    # Bellman target.
    gamma: float = 0.99
    target_update_interval: int = 128  # gradient updates between hard target copies
    huber_delta: float = 1.0  # Huber loss (Mnih et al. 2015 clip the TD error at 1)
    double_dqn: bool = True  # van Hasselt et al. 2016: online net picks, target net rates

    # Epsilon-greedy exploration, decayed linearly over a fraction of the env-step budget.
    epsilon_start: float = 1.0
    epsilon_end: float = 0.04
    exploration_fraction: float = 0.16

    # Execution. Several gradient steps per compiled call amortise the Python -> TF
    # dispatch, which dominates at batch 64 with 256-256 nets on a small CPU: 16 steps per
    # XLA-compiled call ran 3x the updates/s of one step per call (docs/benchmarks.md,
    # updates/s). A call's K steps equal K one-step calls (tests/unit/agents/test_fast_path.py);
    # the tests that reason step by step set 1.
    updates_per_call: int = 16
    jit_compile: bool = True  # XLA-compile the update

    def __post_init__(self) -> None:
        # Fail at construction, not at the first update an hour into a run.
        if not self.hidden or any(int(h) <= 0 for h in self.hidden):
            raise ValueError(
                f"hidden must be a non-empty tuple of positive sizes, got {self.hidden}"
            )
        _check(self.learning_rate > 0, "learning_rate must be > 0", self.learning_rate)
        _check(
            0.0 <= self.learning_rate_end <= self.learning_rate,
            "learning_rate_end must be in [0, learning_rate]",
            self.learning_rate_end,
        )
        _check(self.lr_decay_updates >= 0, "lr_decay_updates must be >= 0", self.lr_decay_updates)
        _check(self.batch_size >= 1, "batch_size must be >= 1", self.batch_size)
        _check(self.max_grad_norm > 0, "max_grad_norm must be > 0", self.max_grad_norm)
        _check(0.0 <= self.gamma < 1.0, "gamma must be in [0, 1)", self.gamma)
        _check(
            self.target_update_interval >= 1,
            "target_update_interval must be >= 1",
            self.target_update_interval,
        )
        _check(self.huber_delta > 0, "huber_delta must be > 0", self.huber_delta)
        _check(
            0.0 <= self.epsilon_start <= 1.0, "epsilon_start must be in [0, 1]", self.epsilon_start
        )
        _check(0.0 <= self.epsilon_end <= 1.0, "epsilon_end must be in [0, 1]", self.epsilon_end)
        _check(
            0.0 < self.exploration_fraction <= 1.0,
            "exploration_fraction must be in (0, 1]",
            self.exploration_fraction,
        )
        _check(self.updates_per_call >= 1, "updates_per_call must be >= 1", self.updates_per_call)
        _check(isinstance(self.jit_compile, bool), "jit_compile must be a bool", self.jit_compile)


def _check(ok: bool, message: str, value: object) -> None:
    if not ok:
        raise ValueError(f"DQNConfig: {message}, got {value!r}")


def epsilon_at(config: DQNConfig, env_steps: int, total_env_steps: int) -> float:
    """Epsilon after ``env_steps`` of a ``total_env_steps`` budget (SB3's linear schedule).

    Linear from ``epsilon_start`` to ``epsilon_end`` over the first
    ``exploration_fraction * total_env_steps`` steps, then flat at ``epsilon_end``.
    """
    if total_env_steps <= 0:
        raise ValueError(f"total_env_steps must be > 0, got {total_env_steps}")
    decay_steps = config.exploration_fraction * total_env_steps
    progress = min(max(env_steps, 0) / decay_steps, 1.0)
    return config.epsilon_start + progress * (config.epsilon_end - config.epsilon_start)


def learning_rate_at(config: DQNConfig, updates: int) -> float:
    """The learning rate of gradient update number ``updates`` (0-based), as Adam applies it."""
    if config.lr_decay_updates == 0:
        return config.learning_rate
    progress = min(max(updates, 0) / config.lr_decay_updates, 1.0)
    return config.learning_rate + progress * (config.learning_rate_end - config.learning_rate)
