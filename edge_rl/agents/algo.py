"""What the learner node needs to know of each algorithm, behind one small seam.

    algo = make_algo(name, config, spec, setup)   # agents/registry.py
    metrics = algo.update(replay.sample(algo.batch_size), steps)  # one compiled call
    algo.pretrain(demos.sample(algo.batch_size))  # on demonstrations alone (TD3: TD3+BC)
    net = algo.policy_network                     # what is exported and deployed
    weights = algo.deployable_weights(net.get_weights())  # as exported (DQN: centred Q)
    exploration = algo.exploration(env_steps)     # goes into the manifest
    ok, report = algo.judge(lite, reference)      # the parity gate before publishing
    algo.state(), algo.load_state(s), algo.stats()  # checkpoint and summary

Each algorithm's adapter lives in its own folder (``agents/<algo>/adapter.py``) and
subclasses ``Algo``; ``algo.learner`` is its TensorFlow learner (``DQNLearner``,
``TD3Learner``, ``SACLearner``). An adapter takes its own config section and an
``AlgoSetup``, never the run config: agents/ sits beside config.py in the layers and does
not import it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from edge_rl.compress.config import CompressionConfig  # plain dataclasses: no TensorFlow
from edge_rl.types import PartState, ReplaySample


@dataclass(frozen=True)
class ParityGate:
    """The export gate's thresholds (``export:`` in the run config): an export whose
    LiteRT outputs are further than this from the float network's is not published."""

    min_greedy_agreement: float  # Q-values: rows whose argmax matches the float network's
    # Actions, in fractions of the action half-range: the ``action_error_quantile`` of each
    # observation's largest error, and the mean error.
    max_action_error: float
    mean_action_error: float
    action_error_quantile: float


@dataclass(frozen=True)
class AlgoSetup:
    """What an adapter takes of the run besides its own config section."""

    seed: int
    total_env_steps: int  # the run's budget, which exploration schedules are fractions of
    total_updates: int  # the update budget, which compression schedules are fractions of
    gate: ParityGate
    compression: CompressionConfig


@dataclass(frozen=True)
class AlgoStats:
    updates: int
    skipped: int  # not applied: a loss or gradient was not finite
    compression: dict[str, Any] | None  # the compressor's summary; None without compression


class Algo:
    """One algorithm behind the node's interface; subclasses set the rest."""

    output_kind: str  # what the deployed model outputs (manifest.output_kind)
    batch_size: int  # transitions one update() call samples: updates_per_call minibatches
    updates_per_call: int  # the most gradient steps one update() call takes
    learner: Any  # the TensorFlow learner: DQNLearner | TD3Learner | SACLearner

    def __init__(self, setup: AlgoSetup) -> None:
        self.setup = setup
        self.compressor: Any = None  # edge_rl.compress.compressor.Compressor, when enabled
        self._episodes_seen = 0  # fleet episodes whose return the compressor has seen

    @property
    def updates(self) -> int:
        return self.learner.updates

    @property
    def skipped(self) -> int:
        """Updates not applied: their loss or a gradient was not finite."""
        return self.learner.skipped

    @property
    def policy_network(self) -> Any:
        raise NotImplementedError

    def compile(self) -> None:
        self.learner.compile()

    def update(self, batch: ReplaySample, steps: int | None = None) -> dict[str, float]:
        """One compiled call on ``batch`` (``batch_size`` transitions): ``steps`` gradient
        steps, ``updates_per_call`` when None; ``updates`` grows by exactly that many."""
        return self._stepped(self.learner.update(batch, steps))

    def pretrain(self, batch: ReplaySample, steps: int | None = None) -> dict[str, float]:
        """As ``update``, on demonstrations alone, with the learner's pretraining loss
        (``learner.pretrain``; the registry's ``pretrains`` says which have one)."""
        if not hasattr(self.learner, "pretrain"):
            raise NotImplementedError(f"{type(self).__name__} has no pretraining loss")
        return self._stepped(self.learner.pretrain(batch, steps))

    def _stepped(self, metrics: dict[str, float]) -> dict[str, float]:
        """After the learner's steps: the compressor follows the update count."""
        if self.compressor is not None:
            self.compressor.on_updates(self.learner.updates)  # transition, mask updates
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
        if self.setup.compression.method == "none":
            return
        from edge_rl.compress.compressor import Compressor

        self.compressor = Compressor(
            self.setup.compression, self.policy_network, self.setup.total_updates
        )
        self.learner.constraint = self.compressor.constraint

    def exploration(self, env_steps: int) -> dict[str, float]:
        raise NotImplementedError

    def deployable_weights(self, weights: list[np.ndarray]) -> list[np.ndarray]:
        """The policy network's weights (``get_weights()`` order) as they are exported: the
        same network by default; an algorithm may change what its boards compute without
        changing what they do (DQN centres its Q-values)."""
        return weights

    def judge(self, lite: np.ndarray, reference: np.ndarray) -> tuple[bool, dict[str, float]]:
        """The export gate on the two models' outputs on the parity observations (LiteRT's
        and the float network's, ``[n, out]`` each): whether it passes, and the figures it
        was judged on."""
        raise NotImplementedError

    def stats(self) -> AlgoStats:
        compression = None if self.compressor is None else self.compressor.summary()
        return AlgoStats(self.updates, self.skipped, compression)

    # --- durable runs (edge_rl/learner/durable.py) ----------------------------------------

    def state(self) -> PartState:
        """The learner's every variable (``learner_arrays``) and update count; with a
        compressor, its masks, schedule and controller, and the episodes it has seen."""
        arrays = {f"learner/{k}": v for k, v in learner_arrays(self.learner).items()}
        meta: dict[str, Any] = {"updates": self.learner.updates, "compressor": None}
        if self.compressor is not None:
            c_arrays, meta["compressor"] = self.compressor.state()
            arrays |= {f"compressor/{k}": v for k, v in c_arrays.items()}
            meta["episodes_seen"] = self._episodes_seen
        return PartState(meta, arrays)

    def load_state(self, state: PartState) -> None:
        """ValueError when the saved variables or compression are not this algo's."""
        groups: dict[str, dict[str, np.ndarray]] = {"learner": {}, "compressor": {}}
        for key, value in state.arrays.items():
            group, _, name = key.partition("/")
            groups.setdefault(group, {})[name] = value
        meta = state.json
        if (meta["compressor"] is None) != (self.compressor is None):
            raise ValueError("compression was saved with another method than this config's")
        load_learner_arrays(self.learner, groups["learner"])
        self.learner.updates = int(meta["updates"])
        if self.compressor is not None:
            self.compressor.load_state(groups["compressor"], meta["compressor"])
            self._episodes_seen = int(meta["episodes_seen"])


def learner_variables(learner: Any) -> dict[str, list]:
    """Every piece of a TensorFlow learner's state, by attribute name, in a stable order:
    each Keras model's weights, each optimiser's variables (iterations, Adam slots), each
    tf.random.Generator's state and each tf.Variable, so that the next update after a
    restore is the one the run would have taken."""
    import keras
    import tensorflow as tf

    found: dict[str, list] = {}
    for name, v in sorted(vars(learner).items()):
        if isinstance(v, keras.Model):
            found[name] = list(v.weights)  # trainable and not (a frozen rescale layer)
        elif isinstance(v, keras.optimizers.Optimizer):
            found[name] = list(v.variables)  # iterations and the Adam slots
        elif isinstance(v, tf.random.Generator):
            found[name] = [v.state]
        elif isinstance(v, tf.Variable):
            found[name] = [v]
    return found


def learner_arrays(learner: Any) -> dict[str, np.ndarray]:
    return {
        f"{name}/{i}": np.asarray(var.numpy())
        for name, variables in learner_variables(learner).items()
        for i, var in enumerate(variables)
    }


def load_learner_arrays(learner: Any, arrays: dict[str, np.ndarray]) -> None:
    variables = learner_variables(learner)
    expected = {f"{n}/{i}" for n, vs in variables.items() for i in range(len(vs))}
    if expected != set(arrays):
        raise ValueError(f"the learner's variables differ: {sorted(expected ^ set(arrays))}")
    for name, vs in variables.items():
        for i, var in enumerate(vs):
            value = arrays[f"{name}/{i}"]
            if tuple(value.shape) != tuple(var.shape):
                raise ValueError(f"{name}/{i}: shape {value.shape} saved, {var.shape} here")
            var.assign(value)
