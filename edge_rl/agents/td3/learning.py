"""The TD3 update step (Fujimoto et al. 2018): replay batch in, gradient steps out.

No I/O, no threads, no clocks. The learner node drives it::

    learner = TD3Learner(spec, config, seed)
    learner.compile()
    while running:
        k, b = config.updates_per_call, config.batch_size
        metrics = learner.update(replay.sample(k * b))   # k gradient steps, one graph call
        if learner.updates % export_every == 0:
            publish(export_policy(learner.actor_network, replay.observations(n)))

Twin critics and their Polyak-averaged targets, a deterministic actor updated every
``policy_delay`` critic steps, target policy smoothing: CleanRL's
``td3_continuous_action.py`` written as one compiled TF function. ``learner.pretrain(batch)``
is the same step with TD3+BC's actor loss, for demonstrations alone before a run's fleet
starts (learner/demos.py).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import keras
import numpy as np
import tensorflow as tf

from edge_rl.agents.guards import all_finite
from edge_rl.agents.minibatches import check_steps, compile_calls, mean_over_steps
from edge_rl.agents.td3.config import TD3Config
from edge_rl.agents.td3.networks import make_actor, make_critic
from edge_rl.specs import EnvSpec
from edge_rl.types import ReplaySample

T = tf.Tensor
Critic = Callable[[T, T], T]  # (obs [B, obs_dim], action [B, act_dim]) -> Q [B]


def td3_target(
    reward: T,
    terminated: T,
    next_obs: T,
    noise: T,
    *,
    target_actor: Callable[[T], T],
    target_critics: tuple[Critic, Critic],
    action_low: T,
    action_high: T,
    noise_clip: float,
    gamma: float,
) -> T:
    """Bellman target ``[B]`` with target policy smoothing and clipped double-Q.

    ``noise [B, act_dim]`` is ``eps ~ N(0, target_noise^2)`` in tanh units (passed in, so
    that the function is deterministic and testable):
        a' = clip(pi_targ(s') + clip(eps, -c, c) * half_range, low, high)
        y  = r + gamma * (1 - terminated) * min(Q1_targ(s', a'), Q2_targ(s', a'))
    ``terminated`` only, never ``truncated``: a time-limit cut still bootstraps.
    """
    low = tf.convert_to_tensor(action_low, tf.float32)
    high = tf.convert_to_tensor(action_high, tf.float32)
    half_range = (high - low) / 2.0  # [act_dim]
    smoothing = tf.clip_by_value(noise, -noise_clip, noise_clip) * half_range  # [B, act_dim]
    next_action = tf.clip_by_value(target_actor(next_obs) + smoothing, low, high)
    q1, q2 = (critic(next_obs, next_action) for critic in target_critics)  # [B] each
    y = reward + gamma * (1.0 - terminated) * tf.minimum(q1, q2)
    return tf.stop_gradient(y)  # a regression label, not a function of theta


class TD3Learner:
    """Actor, twin critics, their targets and two Adam optimisers.

    ``update`` takes up to ``updates_per_call`` gradient steps in one compiled call.
    """

    def __init__(self, spec: EnvSpec, config: TD3Config, seed: int = 0) -> None:
        if spec.discrete:
            raise ValueError("TD3 needs a continuous (Box) action space, got a discrete spec")
        self.spec = spec
        self.config = config
        self.obs_dim = int(np.prod(spec.obs_shape))
        self.act_dim = int(np.prod(spec.action_shape))
        self._low = tf.constant(spec.action_low, tf.float32)  # [act_dim]
        self._high = tf.constant(spec.action_high, tf.float32)
        self._half = (self._high - self._low) / 2.0  # [act_dim], BC in tanh units

        def actor() -> keras.Model:
            low, high = spec.action_low, spec.action_high
            return make_actor(self.obs_dim, low, high, config.actor_hidden, seed)

        def critic(offset: int) -> keras.Model:
            # Distinct seeds: identical twins would stay identical and the min would be moot.
            return make_critic(self.obs_dim, self.act_dim, config.critic_hidden, seed + offset)

        self._actor = actor()
        self._actor_target = actor()
        self._q1 = critic(1000)
        self._q1_target = critic(1000)
        self._q2 = critic(2000)
        self._q2_target = critic(2000)
        self._pairs = [  # (online, target)
            (self._actor, self._actor_target),
            (self._q1, self._q1_target),
            (self._q2, self._q2_target),
        ]
        for online, target in self._pairs:  # the targets start as copies
            target.set_weights(online.get_weights())

        self._actor_vars = self._actor.trainable_variables  # not the frozen rescale layer
        self._critic_vars = self._q1.trainable_variables + self._q2.trainable_variables
        # One Adam over both critics on the summed loss, as CleanRL. Built now: creating
        # slot variables inside a tf.function trace is fragile.
        self._actor_opt = keras.optimizers.Adam(learning_rate=config.actor_lr)
        self._critic_opt = keras.optimizers.Adam(learning_rate=config.critic_lr)
        self._actor_opt.build(self._actor_vars)
        self._critic_opt.build(self._critic_vars)

        # Graph-side state: exact policy delay across calls, and the noise generator.
        self._critic_steps = tf.Variable(0, dtype=tf.int64, trainable=False)
        self._actor_loss = tf.Variable(float("nan"), dtype=tf.float32, trainable=False)
        # TD3+BC (pretrain()): its alpha, 0 until a pretraining (plain TD3); the critic step
        # its last call ended at, from which the BC term's weight goes to
        # config.bc_final_weight over config.bc_decay_updates; True while a call runs.
        self._bc_alpha = tf.Variable(0.0, dtype=tf.float32, trainable=False)
        self._bc_from = tf.Variable(0, dtype=tf.int64, trainable=False)
        self._pretraining = tf.Variable(False, dtype=tf.bool, trainable=False)
        self._bc_weight = tf.Variable(0.0, dtype=tf.float32, trainable=False)  # latest step's
        # Critic or actor steps whose loss or gradient was not finite: not applied, counted.
        self._nonfinite = tf.Variable(0, dtype=tf.int64, trainable=False)
        self._rng = tf.random.Generator.from_seed(seed)
        self.updates = 0  # critic (gradient) steps taken, Python side
        # Optional constraint on the actor's kernels (edge_rl.compress.kernels, GST or
        # pruning): constrains its gradients and re-imposes itself after every actor step.
        # Set it before compile(): the update reads it when traced.
        self.constraint: Any = None

        # A None leading dimension, so that one trace serves every batch size.
        obs = tf.TensorSpec([None, self.obs_dim], tf.float32)
        act = tf.TensorSpec([None, self.act_dim], tf.float32)
        vec = tf.TensorSpec([None], tf.float32)
        self._train_signature = [obs, act, vec, obs, vec, tf.TensorSpec([], tf.int32)]
        self._train = tf.function(
            self._train_steps,
            input_signature=self._train_signature,
            jit_compile=config.jit_compile,
        )
        self._pi = tf.function(lambda s: self._actor(s, training=False), input_signature=[obs])
        self._qs = tf.function(
            lambda s, a: (self._q(self._q1, s, a), self._q(self._q2, s, a)),
            input_signature=[obs, act],
        )

    # --- public API ---------------------------------------------------------------------

    @property
    def actor_network(self) -> keras.Model:
        """The online actor, raw obs -> action in bounds (what is exported and deployed)."""
        return self._actor

    @property
    def actor_target(self) -> keras.Model:
        return self._actor_target

    @property
    def critics(self) -> tuple[keras.Model, keras.Model]:
        return self._q1, self._q2

    @property
    def critic_targets(self) -> tuple[keras.Model, keras.Model]:
        return self._q1_target, self._q2_target

    def update(self, batch: ReplaySample, steps: int | None = None) -> dict[str, float]:
        """``steps`` (default ``updates_per_call``) gradient steps, one per minibatch.

        ``batch`` holds ``updates_per_call`` minibatches of equal size: step i trains on
        rows ``[i * b, (i + 1) * b)``, and the minibatches past ``steps`` are not used (the
        batch keeps one shape, so XLA compiles once). ``loss`` and ``mean_q`` are the
        steps' means; ``actor_loss`` is that of the latest actor step (nan before the first),
        ``bc_weight`` its BC term's weight (0 but after a ``pretrain``).
        """
        steps = check_steps(batch, self.config.updates_per_call, steps)
        metrics = self._train(*self._tensors(batch), np.int32(steps)).numpy()  # one host sync
        self.updates += steps
        return {
            "loss": float(metrics[0]),
            "actor_loss": float(metrics[1]),
            "mean_q": float(metrics[2]),
            "bc_weight": float(metrics[3]),  # the latest actor step's (0: plain TD3)
        }

    def pretrain(self, batch: ReplaySample, steps: int | None = None) -> dict[str, float]:
        """As ``update``, on demonstrations alone: the actor's step is TD3+BC's
        (``config.bc_alpha``); the critics' is TD3's. The updates after the last such
        call keep the BC term, its weight going linearly from 1 to
        ``config.bc_final_weight`` over ``config.bc_decay_updates`` (default: it stays
        whole; plain TD3 at once unlearned a pretrained actor), and the Q term normalised
        by mean|Q1|."""
        self._bc_alpha.assign(self.config.bc_alpha)
        self._pretraining.assign(True)
        try:
            return self.update(batch, steps)
        finally:
            self._pretraining.assign(False)
            self._bc_from.assign(self._critic_steps)

    @property
    def skipped(self) -> int:
        """Critic or actor steps not applied because a loss or gradient was not finite."""
        return int(self._nonfinite.numpy())

    def compile(self) -> None:
        """Trace the update now and, with XLA, compile it for a call's batch
        (``updates_per_call`` x ``batch_size`` rows), without taking a step.

        Tracing holds the GIL for seconds and XLA's compile takes seconds of CPU; the
        learner does both before the fleet starts, while its export worker is still
        importing TensorFlow, rather than in its first update.
        """
        self._train.get_concrete_function()
        if self.config.jit_compile:
            rows = self.config.updates_per_call * self.config.batch_size
            compile_calls(self._train, self._train_signature, rows)
        self._pi.get_concrete_function()

    def act(self, obs: np.ndarray) -> np.ndarray:
        """Deterministic actions ``[n, *action_shape]`` for raw observations (no noise)."""
        x = np.asarray(obs, np.float32).reshape(-1, self.obs_dim)
        return self._pi(x).numpy().reshape(-1, *self.spec.action_shape)

    def critic_values(self, obs: np.ndarray, action: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Online ``(Q1(s, a), Q2(s, a))``, each ``[n]``."""
        s = np.asarray(obs, np.float32).reshape(-1, self.obs_dim)
        a = np.asarray(action, np.float32).reshape(-1, self.act_dim)
        q1, q2 = self._qs(s, a)
        return q1.numpy(), q2.numpy()

    # --- the graph ----------------------------------------------------------------------

    def _tensors(self, batch: ReplaySample) -> tuple[np.ndarray, ...]:
        n = int(np.shape(batch.reward)[0])
        return (
            np.asarray(batch.obs, np.float32).reshape(n, self.obs_dim),
            np.asarray(batch.action, np.float32).reshape(n, self.act_dim),
            np.asarray(batch.reward, np.float32).reshape(n),
            np.asarray(batch.next_obs, np.float32).reshape(n, self.obs_dim),
            np.asarray(batch.terminated, np.float32).reshape(n),
        )

    @staticmethod
    def _q(critic: keras.Model, obs: T, action: T) -> T:
        return tf.squeeze(critic(tf.concat([obs, action], axis=1)), axis=1)  # [B, 1] -> [B]

    def _train_steps(self, obs: T, action: T, reward: T, next_obs: T, terminated: T, steps: T) -> T:
        """``steps`` gradient steps on the first minibatches; [mean loss, actor loss, mean Q1]."""
        batch = (obs, action, reward, next_obs, terminated)
        loss, mean_q = mean_over_steps(self._one_step, batch, self.config.updates_per_call, steps)
        return tf.stack([loss, self._actor_loss.read_value(), mean_q, self._bc_weight.read_value()])

    def _one_step(self, obs: T, action: T, reward: T, next_obs: T, terminated: T) -> tuple[T, T]:
        cfg = self.config
        # eps ~ N(0, target_noise^2), in tanh units; td3_target clips it and scales it.
        noise = self._rng.normal(tf.shape(action)) * cfg.target_noise  # [B, act_dim]
        y = td3_target(
            reward,
            terminated,
            next_obs,
            noise,
            target_actor=lambda s: self._actor_target(s, training=False),
            target_critics=(
                lambda s, a: self._q(self._q1_target, s, a),
                lambda s, a: self._q(self._q2_target, s, a),
            ),
            action_low=self._low,
            action_high=self._high,
            noise_clip=cfg.target_noise_clip,
            gamma=cfg.gamma,
        )  # [B]

        # Critics: L = mean((Q1(s, a) - y)^2) + mean((Q2(s, a) - y)^2).
        with tf.GradientTape() as tape:
            q1 = self._q(self._q1, obs, action)  # [B]
            q2 = self._q(self._q2, obs, action)
            loss = tf.reduce_mean(tf.square(q1 - y)) + tf.reduce_mean(tf.square(q2 - y))
        grads = tape.gradient(loss, self._critic_vars)

        def apply_critics() -> T:
            self._critic_opt.apply_gradients(zip(grads, self._critic_vars, strict=True))
            return tf.constant(0, tf.int64)

        tf.cond(all_finite(loss, grads), apply_critics, lambda: self._nonfinite.assign_add(1))
        step = self._critic_steps.assign_add(1)

        # Every policy_delay critic steps: one actor step, then Polyak on all targets.
        actor_due = step % cfg.policy_delay == 0
        tf.cond(actor_due, lambda: self._actor_step(obs, action, step), tf.no_op)
        return loss, tf.reduce_mean(q1)

    def _actor_step(self, obs: T, action: T, step: T) -> T:
        # Deterministic policy gradient through Q1 only: L_pi = -mean(Q1(s, pi(s))). From a
        # pretraining on, TD3+BC's: L_pi = -lambda mean(Q1(s, pi(s))) + w mean(((pi(s) - a)
        # / h)^2), lambda = alpha / mean|Q1| (not differentiated), h the action half-range,
        # w the BC weight: 1 while pretraining, then going to config.bc_final_weight.
        alpha = self._bc_alpha.read_value()
        since = tf.cast(step - self._bc_from.read_value(), tf.float32)
        decay = float(self.config.bc_decay_updates)  # >= 1 (TD3Config)
        final = self.config.bc_final_weight
        fade = tf.clip_by_value(1.0 - since / decay, 0.0, 1.0)  # 1 -> 0 over the decay
        w = tf.where(self._pretraining, 1.0, final + (1.0 - final) * fade)
        with tf.GradientTape() as tape:
            pi = self._actor(obs, training=True)  # [B, act_dim]
            q = self._q(self._q1, obs, pi)  # [B]
            lam = alpha / (tf.stop_gradient(tf.reduce_mean(tf.abs(q))) + 1e-6)
            bc = tf.reduce_mean(tf.square((pi - action) / self._half))
            # Once pretrained, the Q term keeps its normalisation even at w = 0, so that the
            # actor's loss never changes scale at once (by 1/lambda, ~50 on Pendulum) under
            # Adam's running moments.
            pretrained = alpha > 0.0
            actor_loss = tf.where(pretrained, -lam * tf.reduce_mean(q) + w * bc, -tf.reduce_mean(q))
        self._bc_weight.assign(tf.where(pretrained, w, 0.0))
        grads = tape.gradient(actor_loss, self._actor_vars)
        if self.constraint is not None:
            grads = self.constraint.gradients(grads, self._actor_vars)

        def apply_actor() -> T:
            self._actor_opt.apply_gradients(zip(grads, self._actor_vars, strict=True))
            if self.constraint is not None:
                self.constraint.apply()
            return tf.constant(0, tf.int64)

        tf.cond(all_finite(actor_loss, grads), apply_actor, lambda: self._nonfinite.assign_add(1))
        self._actor_loss.assign(actor_loss)
        # theta_targ <- tau * theta + (1 - tau) * theta_targ. Trainable weights only: the
        # frozen rescale layer is identical in both actors by construction.
        tau = self.config.tau
        for online, target in self._pairs:
            for w, w_targ in zip(
                online.trainable_variables, target.trainable_variables, strict=True
            ):
                w_targ.assign(tau * w + (1.0 - tau) * w_targ)
        return tf.no_op()
