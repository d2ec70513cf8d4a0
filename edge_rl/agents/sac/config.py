"""SAC hyper-parameters, validated on construction.

Defaults are Stable-Baselines3's ``SAC`` (256-256 MLPs, Adam 3e-4 for the actor, the critics
and the temperature, batch 256, gamma 0.99, tau 0.005, one actor step and one Polyak step per
critic step, temperature learned from 1.0 towards the target entropy ``-|A|``, log-std
clipped to [-20, 2]), which follow Haarnoja et al. 2018 ("Soft Actor-Critic Algorithms and
Applications", Alg. 1 and Sec. 5: automatic temperature) without a value network.

Exploration on the boards is not SAC's own: a board runs the int8 export of the
deterministic head ``tanh(mu(s))`` rescaled to the bounds, never the log-std head, so it
explores as TD3's boards do, ``a + N(0, (sigma * half_range)^2)``: ``exploration_sigma`` is
a fraction of the action half-range (docs/config.md says why).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class SACConfig:
    # Networks and optimisers.
    actor_hidden: tuple[int, ...] = (256, 256)
    critic_hidden: tuple[int, ...] = (256, 256)
    actor_lr: float = 3e-4
    critic_lr: float = 3e-4
    alpha_lr: float = 3e-4  # Adam on log(alpha)
    batch_size: int = 256  # transitions per gradient step

    # Bellman target and target networks (the critics only: SAC has no target actor).
    gamma: float = 0.99
    tau: float = 0.005  # Polyak: theta_targ <- tau * theta + (1 - tau) * theta_targ

    # Entropy temperature (Haarnoja et al. 2018, Sec. 5): with autotune, log(alpha) follows
    # J(alpha) = E[-alpha * (log pi(a|s) + target_entropy)], from init_alpha; without, alpha
    # stays init_alpha. target_entropy None is -|A| (the paper's heuristic, SB3's "auto").
    autotune: bool = True
    init_alpha: float = 1.0
    target_entropy: float | None = None
    # The policy's log-std is clipped to this range (SB3's LOG_STD_MIN/MAX): exp(-20) is a
    # point mass, exp(2) already covers [-1, 1] after tanh.
    log_std_min: float = -20.0
    log_std_max: float = 2.0

    # Exploration on the actors: a + N(0, (sigma * half_range)^2) around the deployed mean
    # action; the learner only forwards it in the policy manifest (edge_rl.actor.exploration).
    exploration_sigma: float = 0.1

    # Execution: as TD3Config (several gradient steps per XLA-compiled call).
    updates_per_call: int = 16
    jit_compile: bool = True

    def __post_init__(self) -> None:
        for name in ("actor_hidden", "critic_hidden"):
            hidden = getattr(self, name)
            if not hidden or any(int(h) <= 0 for h in hidden):
                raise ValueError(
                    f"SACConfig: {name} must be a non-empty tuple of positive sizes, got {hidden}"
                )
        for name in ("actor_lr", "critic_lr", "alpha_lr", "init_alpha"):
            _check(getattr(self, name) > 0, f"{name} must be > 0", getattr(self, name))
        _check(self.batch_size >= 1, "batch_size must be >= 1", self.batch_size)
        _check(0.0 <= self.gamma < 1.0, "gamma must be in [0, 1)", self.gamma)
        _check(0.0 <= self.tau <= 1.0, "tau must be in [0, 1]", self.tau)
        _check(isinstance(self.autotune, bool), "autotune must be a bool", self.autotune)
        _check(
            self.log_std_min < self.log_std_max,
            "log_std_min must be < log_std_max",
            (self.log_std_min, self.log_std_max),
        )
        _check(
            self.exploration_sigma >= 0.0, "exploration_sigma must be >= 0", self.exploration_sigma
        )
        _check(self.updates_per_call >= 1, "updates_per_call must be >= 1", self.updates_per_call)
        _check(isinstance(self.jit_compile, bool), "jit_compile must be a bool", self.jit_compile)

    def entropy_target(self, act_dim: int) -> float:
        """The temperature's target entropy: ``target_entropy``, or ``-act_dim``."""
        return -float(act_dim) if self.target_entropy is None else float(self.target_entropy)


def _check(ok: bool, message: str, value: object) -> None:
    if not ok:
        raise ValueError(f"SACConfig: {message}, got {value!r}")
