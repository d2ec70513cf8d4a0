"""The DQN update: replay batch in, gradient steps out. No I/O, no threads, no clocks.

The learner node drives it::

    learner = DQNLearner(spec, config, seed)
    learner.compile()
    while running:
        k, b = config.updates_per_call, config.batch_size
        metrics = learner.update(replay.sample(k * b))   # k gradient steps, one graph call
        if learner.updates % export_every == 0:
            publish(export_policy(learner.q_network, replay.observations(n)))

Double DQN (van Hasselt et al. 2016) with a hard-copied target network, Huber loss and
global-norm gradient clipping, as Stable-Baselines3's DQN (plus the double-DQN target).
"""

from __future__ import annotations

from typing import Any

import keras
import numpy as np
import tensorflow as tf

from edge_rl.agents.dqn.config import DQNConfig
from edge_rl.agents.dqn.networks import make_q_network
from edge_rl.agents.guards import all_finite
from edge_rl.agents.minibatches import check_steps, compile_calls, mean_over_steps
from edge_rl.specs import EnvSpec
from edge_rl.types import ReplaySample

T = tf.Tensor


def dqn_target(
    reward: tf.Tensor,
    terminated: tf.Tensor,
    next_q_target: tf.Tensor,
    gamma: float,
    next_q_online: tf.Tensor | None = None,
) -> tf.Tensor:
    """Bellman target ``[B]`` from rewards ``[B]``, terminal flags ``[B]`` and ``Q(s') [B, A]``.

    Double DQN (``next_q_online`` given): the online net picks the action, the target
    net rates it, which removes the max operator's over-estimation bias:
        y = r + gamma * (1 - terminated) * Q_target(s', argmax_a Q_online(s', a))
    Plain DQN (``next_q_online`` is None):
        y = r + gamma * (1 - terminated) * max_a Q_target(s', a)
    ``terminated`` only, never ``truncated``: a time-limit cut still bootstraps.
    """
    reward = tf.convert_to_tensor(reward, tf.float32)
    terminated = tf.convert_to_tensor(terminated, tf.float32)
    next_q_target = tf.convert_to_tensor(next_q_target, tf.float32)
    if next_q_online is None:
        next_value = tf.reduce_max(next_q_target, axis=1)  # [B]
    else:
        best = tf.argmax(next_q_online, axis=1)  # [B]
        next_value = tf.gather(next_q_target, best, batch_dims=1)  # [B]
    return reward + gamma * (1.0 - terminated) * next_value


def _learning_rate(config: DQNConfig) -> float | keras.optimizers.schedules.LearningRateSchedule:
    """Constant, or linear decay over ``lr_decay_updates`` (see ``learning_rate_at``)."""
    if config.lr_decay_updates == 0:
        return config.learning_rate
    return keras.optimizers.schedules.PolynomialDecay(
        config.learning_rate, config.lr_decay_updates, config.learning_rate_end, power=1.0
    )


def huber(error: tf.Tensor, delta: float) -> tf.Tensor:
    """Elementwise Huber loss: quadratic within ``delta``, linear outside (bounded gradient)."""
    abs_error = tf.abs(error)
    quadratic = tf.minimum(abs_error, delta)
    return 0.5 * tf.square(quadratic) + delta * (abs_error - quadratic)


class DQNLearner:
    """Online and target Q-networks plus an Adam optimiser.

    ``update`` takes up to ``updates_per_call`` gradient steps in one compiled call.
    """

    def __init__(self, spec: EnvSpec, config: DQNConfig, seed: int = 0) -> None:
        if not spec.discrete:
            raise ValueError("DQN needs a discrete action space (spec.num_actions > 0)")
        self.spec = spec
        self.config = config
        self.obs_dim = int(np.prod(spec.obs_shape))
        self.num_actions = spec.num_actions
        self._online = make_q_network(self.obs_dim, self.num_actions, config.hidden, seed)
        self._target = make_q_network(self.obs_dim, self.num_actions, config.hidden, seed)
        self._optimizer = keras.optimizers.Adam(
            learning_rate=_learning_rate(config), global_clipnorm=config.max_grad_norm
        )
        # Build the optimiser's slots now: creating variables inside a tf.function trace
        # is fragile, and this keeps the first update as cheap as the rest.
        self._optimizer.build(self._online.trainable_variables)
        self.updates = 0  # gradient steps taken, Python side
        # Graph-side step count: the target copy falls on exact multiples of its interval
        # wherever they fall within a call.
        self._steps = tf.Variable(0, dtype=tf.int64, trainable=False)
        # Steps whose loss or gradient was not finite: not applied (a poisoned batch must
        # not wreck the network), counted.
        self._nonfinite = tf.Variable(0, dtype=tf.int64, trainable=False)
        # Optional kernel constraint (edge_rl.compress.kernels.KernelConstraint, GST or
        # pruning): constrains the gradients and re-imposes itself after every step. Set it
        # before compile(): the update reads it when traced.
        self.constraint: Any = None

        # A None batch dimension so that one trace serves every batch size.
        obs = tf.TensorSpec([None, self.obs_dim], tf.float32)
        vec = tf.TensorSpec([None], tf.float32)
        batch_signature = [obs, tf.TensorSpec([None], tf.int64), vec, obs, vec]
        self._train_signature = [*batch_signature, tf.TensorSpec([], tf.int32)]
        self._train = tf.function(
            self._train_steps,
            input_signature=self._train_signature,
            jit_compile=config.jit_compile,
        )
        self._td = tf.function(self._td_errors, input_signature=batch_signature)
        self._q = tf.function(lambda x: self._online(x, training=False), input_signature=[obs])
        # Compiled: eager `assign`s per variable cost several times the one graph call.
        self._sync = tf.function(self._copy_online_to_target)
        self.sync_target()  # the target starts as a copy of the online net

    @property
    def q_network(self) -> keras.Model:
        """The online network (what the exporter converts and the actors run)."""
        return self._online

    @property
    def target_network(self) -> keras.Model:
        return self._target

    def update(self, batch: ReplaySample, steps: int | None = None) -> dict[str, float]:
        """``steps`` (default ``updates_per_call``) gradient steps, one per minibatch.

        ``batch`` holds ``updates_per_call`` minibatches of equal size: step i trains on
        rows ``[i * b, (i + 1) * b)``, and the minibatches past ``steps`` are not used (the
        batch keeps one shape, so XLA compiles once). The target is hard-copied after every
        ``target_update_interval``-th step. ``loss`` and ``mean_q`` are the steps' means.
        """
        steps = check_steps(batch, self.config.updates_per_call, steps)
        metrics = self._train(*self._tensors(batch), np.int32(steps)).numpy()  # one host sync
        self.updates += steps
        return {"loss": float(metrics[0]), "mean_q": float(metrics[1])}

    @property
    def skipped(self) -> int:
        """Updates not applied because their loss or a gradient was not finite."""
        return int(self._nonfinite.numpy())

    def compile(self) -> None:
        """Trace the update now and, with XLA, compile it for a call's batch
        (``updates_per_call`` x ``batch_size`` rows), without taking a step.

        Tracing runs Python under the GIL for seconds and XLA's compile takes seconds of
        CPU; the learner does both before the fleet starts, so that its ingest thread is
        never starved during the first update, and the first update is as fast as the rest.
        """
        self._train.get_concrete_function()
        if self.config.jit_compile:
            rows = self.config.updates_per_call * self.config.batch_size
            compile_calls(self._train, self._train_signature, rows)
        self._q.get_concrete_function()

    def sync_target(self) -> None:
        """theta_target <- theta_online (hard copy, Mnih et al. 2015)."""
        self._sync()

    def _copy_online_to_target(self) -> None:
        for target, online in zip(self._target.weights, self._online.weights, strict=True):
            target.assign(online)

    def q_values(self, obs: np.ndarray) -> np.ndarray:
        """Online-net Q-values ``[n, A]`` for raw observations ``[n, *obs_shape]``."""
        x = np.asarray(obs, np.float32).reshape(-1, self.obs_dim)
        return self._q(x).numpy()

    def td_errors(self, batch: ReplaySample) -> np.ndarray:
        """``|y - Q(s, a)|`` per transition ``[B]`` against the current target net."""
        return self._td(*self._tensors(batch)).numpy()

    def _tensors(self, batch: ReplaySample) -> tuple[np.ndarray, ...]:
        n = int(np.shape(batch.reward)[0])
        return (
            np.asarray(batch.obs, np.float32).reshape(n, self.obs_dim),
            np.asarray(batch.action, np.int64).reshape(n),
            np.asarray(batch.reward, np.float32).reshape(n),
            np.asarray(batch.next_obs, np.float32).reshape(n, self.obs_dim),
            np.asarray(batch.terminated, np.float32).reshape(n),
        )

    def _target_values(
        self, reward: tf.Tensor, next_obs: tf.Tensor, terminated: tf.Tensor
    ) -> tf.Tensor:
        next_q_target = self._target(next_obs, training=False)  # [B, A]
        next_q_online = self._online(next_obs, training=False) if self.config.double_dqn else None
        y = dqn_target(reward, terminated, next_q_target, self.config.gamma, next_q_online)
        return tf.stop_gradient(y)  # the target is a regression label, not a function of theta

    def _train_steps(
        self, obs: T, action: T, reward: T, next_obs: T, terminated: T, steps: T
    ) -> tf.Tensor:
        """``steps`` gradient steps on the first minibatches; [mean loss, mean Q]."""
        batch = (obs, action, reward, next_obs, terminated)
        loss, mean_q = mean_over_steps(self._one_step, batch, self.config.updates_per_call, steps)
        return tf.stack([loss, mean_q])

    def _one_step(self, obs: T, action: T, reward: T, next_obs: T, terminated: T) -> tuple[T, T]:
        # y = r + gamma * (1 - terminated) * Q_target(s', argmax_a Q_online(s', a))
        y = self._target_values(reward, next_obs, terminated)  # [B]
        variables = self._online.trainable_variables
        # L = mean(huber(y - Q(s, a)))
        with tf.GradientTape() as tape:
            q_taken = tf.gather(self._online(obs, training=True), action, batch_dims=1)  # [B]
            loss = tf.reduce_mean(huber(y - q_taken, self.config.huber_delta))
        grads = tape.gradient(loss, variables)
        if self.constraint is not None:
            grads = self.constraint.gradients(grads, variables)

        def apply() -> tf.Tensor:
            self._optimizer.apply_gradients(zip(grads, variables, strict=True))  # clipped
            if self.constraint is not None:
                self.constraint.apply()
            return tf.constant(0, tf.int64)

        def sync() -> tf.Tensor:
            self._copy_online_to_target()
            return tf.constant(0, tf.int64)

        tf.cond(all_finite(loss, grads), apply, lambda: self._nonfinite.assign_add(1))
        step = self._steps.assign_add(1)
        interval = self.config.target_update_interval
        tf.cond(step % interval == 0, sync, lambda: tf.constant(0, tf.int64))
        return loss, tf.reduce_mean(q_taken)

    def _td_errors(self, obs: T, action: T, reward: T, next_obs: T, terminated: T) -> tf.Tensor:
        y = self._target_values(reward, next_obs, terminated)
        q_taken = tf.gather(self._online(obs, training=False), action, batch_dims=1)  # [B]
        return tf.abs(y - q_taken)
