"""TD3 behind the learner node's seam (``Algo``): its learner, exploration noise and
parity gate.

    algo = TD3Algo(config, spec, setup)   # or make_algo("td3", ...) (agents/registry.py)

An export passes when LiteRT's actions lie close enough to the float actor's, in fractions
of the action half-range.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from edge_rl.agents.algo import Algo, AlgoSetup
from edge_rl.agents.td3.config import TD3Config
from edge_rl.agents.td3.learning import TD3Learner
from edge_rl.export.parity import judge_actions
from edge_rl.specs import EnvSpec


class TD3Algo(Algo):
    output_kind = "action"  # already inside the env's bounds

    def __init__(self, config: TD3Config, spec: EnvSpec, setup: AlgoSetup) -> None:
        super().__init__(setup)
        self.config = config
        self.learner = TD3Learner(spec, config, seed=setup.seed)
        # One call takes up to updates_per_call gradient steps, each on its own minibatch.
        self.updates_per_call = config.updates_per_call
        self.batch_size = config.batch_size * self.updates_per_call
        self.half_range = (np.asarray(spec.action_high) - np.asarray(spec.action_low)) / 2
        self._compress()
        actor = self.learner.actor_network  # the target starts from the (circulant) weights
        self.learner.actor_target.set_weights(actor.get_weights())

    @property
    def policy_network(self) -> Any:
        return self.learner.actor_network

    def exploration(self, env_steps: int) -> dict[str, float]:
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
