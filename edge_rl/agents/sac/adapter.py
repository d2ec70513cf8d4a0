"""SAC behind the learner node's seam (``Algo``): its learner, the boards' exploration and
the parity gate.

    algo = SACAlgo(config, spec, setup)   # or make_algo("sac", ...) (agents/registry.py)

What is exported and deployed is the policy's deterministic head, ``tanh(mu(s))`` rescaled
to the bounds: the same network shape as TD3's actor, so the export, the gate (LiteRT's
actions against the float head's, in fractions of the action half-range) and the boards
take it as they take TD3's. The log-std head stays on the host.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from edge_rl.agents.algo import Algo, AlgoSetup
from edge_rl.agents.sac.config import SACConfig
from edge_rl.agents.sac.learning import SACLearner
from edge_rl.export.parity import judge_actions
from edge_rl.specs import EnvSpec


class SACAlgo(Algo):
    output_kind = "action"  # already inside the env's bounds

    def __init__(self, config: SACConfig, spec: EnvSpec, setup: AlgoSetup) -> None:
        super().__init__(setup)
        self.config = config
        self.learner = SACLearner(spec, config, seed=setup.seed)
        self.updates_per_call = config.updates_per_call
        self.batch_size = config.batch_size * self.updates_per_call
        self.half_range = (np.asarray(spec.action_high) - np.asarray(spec.action_low)) / 2
        self._compress()  # the mean actor's hidden kernels; the log-std head stays dense

    @property
    def policy_network(self) -> Any:
        return self.learner.actor_network

    def exploration(self, env_steps: int) -> dict[str, float]:
        # A board runs the int8 mean head only, never the log-std head: it explores with
        # Gaussian noise around the mean action, as TD3's boards do (docs/config.md, sac:).
        return {"sigma": self.config.exploration_sigma}

    def judge(self, lite: np.ndarray, reference: np.ndarray) -> tuple[bool, dict[str, float]]:
        g = self.setup.gate
        return judge_actions(
            lite,
            reference,
            self.half_range,
            g.action_error_quantile,
            g.max_action_error,
            g.mean_action_error,
        )
