"""What the learner node needs to know of each algorithm, behind one small seam.

    algo = make_algo(cfg, spec)
    metrics = algo.update(replay.sample(algo.batch_size))  # one compiled call: >= 1 steps
    net = algo.policy_network                     # what is exported and deployed
    exploration = algo.exploration(env_steps)     # goes into the manifest
    ok, report = algo.check(exported, net, obs)   # LiteRT parity gate before publishing

The update math lives in ``edge_rl.agents``; this only adapts it to the node.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from edge_rl.config import RunConfig
from edge_rl.export.parity import check_action_parity, check_q_parity
from edge_rl.export.tflite import ExportedModel
from edge_rl.specs import EnvSpec
from edge_rl.types import ReplaySample


class Algo:
    """One learner agent behind the node's interface; subclasses set the rest."""

    output_kind: str  # what the deployed model outputs (manifest.output_kind)
    batch_size: int  # transitions one update() call samples
    agent: Any  # DQNLearner | TD3Learner

    def __init__(self, cfg: RunConfig) -> None:
        self.cfg = cfg
        self.compressor: Any = None  # edge_rl.compress.compressor.Compressor, when enabled
        self._episodes_seen = 0  # fleet episodes whose return the compressor has seen

    @property
    def updates(self) -> int:
        return self.agent.updates

    @property
    def skipped(self) -> int:
        """Updates not applied: their loss or a gradient was not finite."""
        return self.agent.skipped

    @property
    def policy_network(self) -> Any:
        raise NotImplementedError

    def compile(self) -> None:
        self.agent.compile()

    def update(self, batch: ReplaySample) -> dict[str, float]:
        """One compiled call on ``batch`` (``batch_size`` transitions)."""
        metrics = self.agent.update(batch)
        if self.compressor is not None:
            self.compressor.on_updates(self.agent.updates)  # transition, mask updates
        return metrics

    def compression(self) -> float | None:
        """The policy network's compression ratio now; None without compression."""
        return None if self.compressor is None else round(self.compressor.ratios().network, 4)

    def feed_returns(self, returns_since: Callable[[int], tuple[list[float], int]]) -> None:
        """GST's reward-aware controller follows the fleet's episode returns
        (``Ingest.returns_since``)."""
        if self.compressor is None:
            return
        returns, self._episodes_seen = returns_since(self._episodes_seen)
        for r in returns:
            self.compressor.observe_return(r)

    def _compress(self) -> None:
        """GST or iterative pruning of the policy network (the one deployed), when the
        config asks for it; before compile(), since the update reads the constraint when
        traced. The critics never leave the host and stay dense."""
        if self.cfg.compression.method == "none":
            return
        from edge_rl.compress.compressor import Compressor

        self.compressor = Compressor(
            self.cfg.compression, self.policy_network, self.cfg.total_updates
        )
        self.agent.constraint = self.compressor.constraint

    def exploration(self, env_steps: int) -> dict[str, float]:
        raise NotImplementedError

    def check(
        self, exported: ExportedModel, model: Any, obs: np.ndarray
    ) -> tuple[bool, dict[str, float]]:
        raise NotImplementedError


class DQNAlgo(Algo):
    output_kind = "q_values"

    def __init__(self, cfg: RunConfig, spec: EnvSpec) -> None:
        from edge_rl.agents.dqn.learning import DQNLearner

        super().__init__(cfg)
        self.agent = DQNLearner(spec, cfg.dqn, seed=cfg.seed)
        self.batch_size = cfg.dqn.batch_size
        self._compress()
        self.agent.sync_target()  # the target starts from the (circulant) online weights

    @property
    def policy_network(self) -> Any:
        return self.agent.q_network

    def exploration(self, env_steps: int) -> dict[str, float]:
        from edge_rl.agents.dqn.config import epsilon_at

        return {"epsilon": epsilon_at(self.cfg.dqn, env_steps, self.cfg.total_env_steps)}

    def check(
        self, exported: ExportedModel, model: Any, obs: np.ndarray
    ) -> tuple[bool, dict[str, float]]:
        r = check_q_parity(exported, model, obs)
        report = {"greedy_agreement": r.greedy_agreement, "max_abs_error": r.max_abs_error}
        return r.greedy_agreement >= self.cfg.export.min_greedy_agreement, report


class TD3Algo(Algo):
    output_kind = "action"  # already inside the env's bounds

    def __init__(self, cfg: RunConfig, spec: EnvSpec) -> None:
        from edge_rl.agents.td3.learning import TD3Learner

        super().__init__(cfg)
        self.agent = TD3Learner(spec, cfg.td3, seed=cfg.seed)
        # One call takes updates_per_call gradient steps, each on its own minibatch.
        self.batch_size = cfg.td3.batch_size * cfg.td3.updates_per_call
        self.half_range = (np.asarray(spec.action_high) - np.asarray(spec.action_low)) / 2
        self._compress()
        actor = self.agent.actor_network  # the target starts from the (circulant) weights
        self.agent.actor_target.set_weights(actor.get_weights())

    @property
    def policy_network(self) -> Any:
        return self.agent.actor_network

    def exploration(self, env_steps: int) -> dict[str, float]:
        return {"sigma": self.cfg.td3.exploration_sigma}

    def check(
        self, exported: ExportedModel, model: Any, obs: np.ndarray
    ) -> tuple[bool, dict[str, float]]:
        e = self.cfg.export
        r = check_action_parity(exported, model, obs, self.half_range, e.action_error_quantile)
        ok = r.passes(e.max_action_error, e.mean_action_error)
        figures = {"max_action_error": r.max_error, "mean_action_error": r.mean_error}
        if e.action_error_quantile < 1.0:
            figures[f"q{e.action_error_quantile:g}_action_error"] = r.quantile_error
        return ok, figures


def make_algo(cfg: RunConfig, spec: EnvSpec) -> Algo:
    if cfg.algo == "dqn":
        if not spec.discrete:
            raise ValueError(f"dqn needs a discrete action space; {cfg.env_id} has a Box")
        return DQNAlgo(cfg, spec)
    if spec.discrete:
        raise ValueError(f"td3 needs a Box action space; {cfg.env_id} is discrete")
    return TD3Algo(cfg, spec)
