"""``compression:`` in the run config: none, GST, or the iterative-pruning baseline.

Pure dataclass (no TensorFlow), validated on construction like every other config block::

    compression:
      method: gst               # none | gst | iterative
      block_size: 4             # gst: circulant block b_c; iterative: pruning block
      s_shift: 0.25             # gst: fraction of the update budget spent block-circulant

Fractions of training (``s_shift``, ``begin``, ``end``) are of the learner's update budget,
``replay_ratio * (total_env_steps - learning_starts)``. What each field does, and why each
default, is in docs/gst.md.
"""

from __future__ import annotations

from dataclasses import dataclass

from edge_rl.compress.controller import ControllerConfig
from edge_rl.compress.plan import TransitionMethod, resolve_pruning_block_size

METHODS = ("none", "gst", "iterative")


@dataclass(frozen=True)
class CompressionConfig:
    method: str = "none"
    block_size: int = 4
    prune_every: int = 1_000  # updates between mask updates (both methods)

    # GST (Lee et al. 2021): circulant until s_shift, then the transition, then
    # reward-aware block pruning of the same layers.
    s_shift: float = 0.25  # the paper's Humanoid setting
    transition: str = "block4_friendly_block4"  # projection | block4_friendly_block2 | ..4
    pruning_block_size: int | None = None  # projection only; None: the circulant block
    # Blocks pruned at the transition. None: 1 - 1/block_size, the circulant phase's own
    # compression, so the stored parameters never grow back at the transition.
    transition_sparsity: float | None = None
    # Reward-aware controller (edge_rl.compress.controller), fed the fleet's episode returns.
    max_sparsity: float = 0.9
    # Lowest target the controller steps back to. None: the transition's sparsity, so the
    # compression never falls below the circulant phase's (GST's promise: high during all
    # of training). Measured without a floor on CartPole DQN: the noisy epsilon-greedy
    # returns stepped the target down to 0 within 10k updates (docs/gst.md, Results).
    min_sparsity: float | None = None
    step_up: float = 0.05
    step_down: float = 0.05
    window: int = 10  # episodes per decision
    tolerance: float = 0.05

    # Iterative baseline (Zhu & Gupta 2017): polynomial from 0 to final_sparsity between
    # begin and end, the 20 %-80 % window of Graesser et al. 2022's DRL pruning study.
    final_sparsity: float = 0.9
    begin: float = 0.2
    end: float = 0.8

    def __post_init__(self) -> None:
        if self.method not in METHODS:
            raise ValueError(f"compression.method must be one of {METHODS}: {self.method!r}")
        if self.prune_every < 1:
            raise ValueError(f"compression.prune_every must be >= 1, got {self.prune_every}")
        if self.method == "iterative":
            if self.block_size < 1:
                raise ValueError(f"compression.block_size must be >= 1, got {self.block_size}")
            if not 0.0 < self.final_sparsity < 1.0 or not 0.0 <= self.begin < self.end <= 1.0:
                raise ValueError("compression: need 0 < final_sparsity < 1, 0 <= begin < end <= 1")
        if self.method == "gst":
            if not 0.0 <= self.s_shift <= 1.0:
                raise ValueError(f"compression.s_shift must be in [0, 1], got {self.s_shift}")
            _ = self.pruning_block  # resolves method and block sizes: ValueError if undefined
            _ = self.controller  # validates the sparsity range and steps

    @property
    def transition_method(self) -> TransitionMethod:
        try:
            return TransitionMethod(self.transition)
        except ValueError:
            names = [m.value for m in TransitionMethod]
            raise ValueError(f"compression.transition must be one of {names}") from None

    @property
    def pruning_block(self) -> int:
        """Block size of the masks: GST's ``b_p`` (from its method), or ``block_size``."""
        if self.method != "gst":
            return self.block_size
        return resolve_pruning_block_size(
            self.transition_method, self.block_size, self.pruning_block_size
        )

    @property
    def start_sparsity(self) -> float:
        """GST: the fraction of blocks pruned at the transition."""
        if self.transition_sparsity is not None:
            return self.transition_sparsity
        return 1.0 - 1.0 / self.block_size

    @property
    def controller(self) -> ControllerConfig:
        s0 = self.start_sparsity
        return ControllerConfig(
            initial_sparsity=s0,
            min_sparsity=s0 if self.min_sparsity is None else self.min_sparsity,
            max_sparsity=self.max_sparsity,
            step_up=self.step_up,
            step_down=self.step_down,
            window=self.window,
            tolerance=self.tolerance,
        )
