"""TD3 hyper-parameters, validated on construction.

Defaults are CleanRL's ``td3_continuous_action.py`` (256-256 MLPs, Adam 3e-4 for both nets,
batch 256, gamma 0.99, tau 0.005, policy delay 2, target noise 0.2 clipped at 0.5,
exploration noise 0.1), which follow Fujimoto et al. 2018 ("Addressing Function
Approximation Error in Actor-Critic Methods") except for the network width and learning
rate: the paper used 400-300 MLPs, Adam 1e-3 and batch 100.

Noise scales (``target_noise``, ``target_noise_clip``, ``exploration_sigma``) are fractions
of the action half-range ``(high - low) / 2``, i.e. they live in the actor's tanh space
[-1, 1], so one value fits every env (CleanRL multiplies by ``action_scale`` the same way).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class TD3Config:
    # Networks and optimisers.
    actor_hidden: tuple[int, ...] = (256, 256)
    critic_hidden: tuple[int, ...] = (256, 256)
    actor_lr: float = 3e-4
    critic_lr: float = 3e-4
    batch_size: int = 256  # transitions per gradient step

    # Bellman target and target networks.
    gamma: float = 0.99
    tau: float = 0.005  # Polyak: theta_targ <- tau * theta + (1 - tau) * theta_targ
    # Fujimoto et al. 2018, Sec. 5.2: delayed policy updates, one actor step per 2 critic steps.
    policy_delay: int = 2
    # Target policy smoothing (Sec. 5.3): eps ~ N(0, target_noise^2), clipped to +-clip.
    target_noise: float = 0.2
    target_noise_clip: float = 0.5

    # Exploration on the actors: a + N(0, (sigma * half_range)^2); the learner only forwards
    # it in the policy manifest (edge_rl.actor.exploration applies it on the board).
    exploration_sigma: float = 0.1

    # Pretraining on demonstrations alone (replay.pretrain_updates): TD3+BC (Fujimoto and
    # Gu 2021), L_pi = -lambda mean Q1(s, pi(s)) + mean(((pi(s) - a) / half)^2) with
    # lambda = bc_alpha / mean|Q1|. The paper's 2.5 leans on a critic trained on millions
    # of rows; from a few thousand Q is still far from converged and BC must lead
    # (docs/demonstrations.md).
    bc_alpha: float = 0.25
    # After pretraining the online updates keep the BC term, its weight going linearly from
    # 1 to ``bc_final_weight`` over ``bc_decay_updates`` updates and staying there. 1: it
    # stays whole (TD3+BC online). Faded to 0 or 0.1 on Pendulum, the actor collapsed once
    # it had faded: a good policy's data stays narrow and the critic's errors outside it
    # are the actor's to find (docs/demonstrations.md).
    bc_decay_updates: int = 10_000
    bc_final_weight: float = 1.0

    # Execution. Several gradient steps per compiled call amortise the Python -> TF dispatch,
    # which dominates at batch 256 with 256-256 nets on a small CPU: 16 steps per XLA-compiled
    # call ran 1.5x the updates/s of one step per call (docs/benchmarks.md, updates/s).
    updates_per_call: int = 16
    jit_compile: bool = True  # XLA-compile the update

    def __post_init__(self) -> None:
        # Fail at construction, not at the first update an hour into a run.
        for name in ("actor_hidden", "critic_hidden"):
            hidden = getattr(self, name)
            if not hidden or any(int(h) <= 0 for h in hidden):
                raise ValueError(
                    f"TD3Config: {name} must be a non-empty tuple of positive sizes, got {hidden}"
                )
        _check(self.actor_lr > 0, "actor_lr must be > 0", self.actor_lr)
        _check(self.critic_lr > 0, "critic_lr must be > 0", self.critic_lr)
        _check(self.batch_size >= 1, "batch_size must be >= 1", self.batch_size)
        _check(0.0 <= self.gamma < 1.0, "gamma must be in [0, 1)", self.gamma)
        # tau = 0 freezes the targets (useful in tests); tau = 1 is a hard copy.
        _check(0.0 <= self.tau <= 1.0, "tau must be in [0, 1]", self.tau)
        _check(self.policy_delay >= 1, "policy_delay must be >= 1", self.policy_delay)
        _check(self.target_noise >= 0.0, "target_noise must be >= 0", self.target_noise)
        _check(
            self.target_noise_clip >= 0.0, "target_noise_clip must be >= 0", self.target_noise_clip
        )
        _check(
            self.exploration_sigma >= 0.0, "exploration_sigma must be >= 0", self.exploration_sigma
        )
        _check(self.bc_alpha > 0.0, "bc_alpha must be > 0", self.bc_alpha)
        _check(
            0.0 <= self.bc_final_weight <= 1.0, "bc_final_weight in [0, 1]", self.bc_final_weight
        )
        _check(self.bc_decay_updates >= 1, "bc_decay_updates must be >= 1", self.bc_decay_updates)
        _check(self.updates_per_call >= 1, "updates_per_call must be >= 1", self.updates_per_call)
        _check(isinstance(self.jit_compile, bool), "jit_compile must be a bool", self.jit_compile)


def _check(ok: bool, message: str, value: object) -> None:
    if not ok:
        raise ValueError(f"TD3Config: {message}, got {value!r}")
