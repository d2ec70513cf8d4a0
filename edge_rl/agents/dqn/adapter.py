"""DQN behind the learner node's seam (``Algo``): its learner, epsilon and parity gate.

    algo = DQNAlgo(config, spec, setup)   # or make_algo("dqn", ...) (agents/registry.py)

Epsilon decays over a fraction of ``setup.total_env_steps`` (``epsilon_at``); an export
passes when LiteRT's greedy actions agree with the float network's often enough.

What a board computes is ``Q(s, a) - mean_a Q(s, a)`` (``centred_q``): the same greedy
action, but an int8 output tensor whose range is the action gaps, not the Q-values.
CartPole's Q-values reach ~60 and ~100 with gaps of ~0.2, finer than an int8 step over
that range: a 1024-1024 network that scored 500.0 in fp32 scored 343.5 in int8, and 500.0
centred (docs/actorq.md).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from edge_rl.agents.algo import Algo, AlgoSetup
from edge_rl.agents.dqn.config import DQNConfig, epsilon_at
from edge_rl.agents.dqn.learning import DQNLearner
from edge_rl.export.parity import q_report
from edge_rl.specs import EnvSpec


class DQNAlgo(Algo):
    output_kind = "q_values"

    def __init__(self, config: DQNConfig, spec: EnvSpec, setup: AlgoSetup) -> None:
        super().__init__(setup)
        self.config = config
        self.learner = DQNLearner(spec, config, seed=setup.seed)
        # One call takes up to updates_per_call gradient steps, each on its own minibatch.
        self.updates_per_call = config.updates_per_call
        self.batch_size = config.batch_size * self.updates_per_call
        self._compress()
        self.learner.sync_target()  # the target starts from the (circulant) online weights

    @property
    def policy_network(self) -> Any:
        return self.learner.q_network

    def deployable_weights(self, weights: list[np.ndarray]) -> list[np.ndarray]:
        return centred_q(weights)

    def exploration(self, env_steps: int) -> dict[str, float]:
        return {"epsilon": epsilon_at(self.config, env_steps, self.setup.total_env_steps)}

    def judge(self, lite: np.ndarray, reference: np.ndarray) -> tuple[bool, dict[str, float]]:
        r = q_report(lite, reference)
        report = {"greedy_agreement": r.greedy_agreement, "max_abs_error": r.max_abs_error}
        return r.greedy_agreement >= self.setup.gate.min_greedy_agreement, report


def centred_q(weights: list[np.ndarray]) -> list[np.ndarray]:
    """A Dense stack's weights with its last layer (kernel ``[in, A]``, bias ``[A]``) less
    their mean over the ``A`` outputs: the network then returns ``Q - mean_a Q``, exactly
    (a linear map of the same hidden layer), whose argmax is Q's."""
    *rest, kernel, bias = weights
    kernel = kernel - kernel.mean(axis=1, keepdims=True)
    return [*rest, kernel.astype(weights[-2].dtype), (bias - bias.mean()).astype(bias.dtype)]
