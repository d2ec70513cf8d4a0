"""The SAC update step (Haarnoja et al. 2018): replay batch in, gradient steps out.

No I/O, no threads, no clocks. The learner node drives it as it drives TD3's::

    learner = SACLearner(spec, config, seed)
    learner.compile()
    while running:
        k, b = config.updates_per_call, config.batch_size
        metrics = learner.update(replay.sample(k * b))   # k gradient steps, one graph call
        if learner.updates % export_every == 0:
            publish(export_policy(learner.actor_network, replay.observations(n)))

Each gradient step, in Stable-Baselines3's ``SAC.train`` order: the temperature, then the
twin critics against their Polyak-averaged targets, then the squashed Gaussian policy, then
Polyak on the critics. All of it is one compiled TF function, K steps per call, on the
minibatch loop TD3 uses (``edge_rl.agents.minibatches``).

The critics see actions in the policy's tanh space [-1, 1] (replay's actions, which are in
the env's bounds, are mapped there), as SB3's do; log-probabilities are of that tanh-space
action too (SB3's; the rescale's constant log-Jacobian would only shift the entropy target).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import keras
import numpy as np
import tensorflow as tf

from edge_rl.agents.guards import all_finite
from edge_rl.agents.minibatches import check_steps, compile_calls, mean_over_steps
from edge_rl.agents.sac.config import SACConfig
from edge_rl.agents.sac.networks import make_actor, make_critic, make_log_std_head
from edge_rl.specs import EnvSpec
from edge_rl.types import ReplaySample

T = tf.Tensor
Critic = Callable[[T, T], T]  # (obs [B, obs_dim], tanh-space action [B, act_dim]) -> Q [B]
Policy = Callable[[T, T], tuple[T, T]]  # (obs, eps [B, act_dim]) -> (action, log_prob [B])

_HALF_LOG_2PI = 0.5 * math.log(2.0 * math.pi)
_LOG_2 = math.log(2.0)


def squashed_gaussian(mu: T, log_std: T, eps: T) -> tuple[T, T]:
    """A reparameterised sample of ``tanh(N(mu, sigma^2))`` and its log-density, ``[B, A]``
    and ``[B]``, for ``eps [B, A] ~ N(0, 1)`` (passed in: deterministic, testable):

        u = mu + sigma * eps,  a = tanh(u)
        log pi(a|s) = sum_i [log N(u_i; mu_i, sigma_i^2) - log(1 - tanh(u_i)^2)]

    The second term is the change of variables through tanh (Haarnoja et al. 2018, App. C);
    without it the density is that of ``u``, and the entropy bonus pushes ``u`` to saturate.
    ``log(1 - tanh(u)^2) = 2 (log 2 - u - softplus(-2u))``: exact, and finite where tanh
    rounds to 1 in float32 (SB3 adds 1e-6 inside the log instead).
    """
    u = mu + tf.exp(log_std) * eps  # [B, A]
    gaussian = -0.5 * tf.square(eps) - log_std - _HALF_LOG_2PI  # log N(u; mu, sigma^2)
    log_det = 2.0 * (_LOG_2 - u - tf.nn.softplus(-2.0 * u))  # log(1 - tanh(u)^2)
    return tf.tanh(u), tf.reduce_sum(gaussian - log_det, axis=1)


def sac_target(
    reward: T,
    terminated: T,
    next_obs: T,
    eps: T,
    *,
    policy: Policy,
    target_critics: tuple[Critic, Critic],
    alpha: T,
    gamma: float,
) -> T:
    """Soft Bellman target ``[B]`` with clipped double-Q:

        a', log pi(a'|s') ~ pi(.|s')           (eps: that sample's N(0, 1) draw)
        y = r + gamma * (1 - terminated) * (min(Q1_targ(s', a'), Q2_targ(s', a'))
                                            - alpha * log pi(a'|s'))

    ``terminated`` only, never ``truncated``: a time-limit cut still bootstraps.
    """
    next_action, next_log_prob = policy(next_obs, eps)
    q1, q2 = (critic(next_obs, next_action) for critic in target_critics)  # [B] each
    soft_q = tf.minimum(q1, q2) - alpha * next_log_prob
    y = reward + gamma * (1.0 - terminated) * soft_q
    return tf.stop_gradient(y)  # a regression label, not a function of theta


def temperature_loss(log_alpha: T, log_prob: T, target_entropy: float) -> T:
    """``J(alpha) = -mean(log(alpha) * (log pi(a|s) + target_entropy))`` (SB3's form, on
    log(alpha)): its gradient raises alpha while the policy's entropy ``-log pi`` is below
    the target and lowers it above. ``log_prob`` is a constant here."""
    return -tf.reduce_mean(log_alpha * tf.stop_gradient(log_prob + target_entropy))


class SACLearner:
    """Squashed Gaussian policy (mean actor + log-std head), twin critics, their targets,
    the temperature and three Adam optimisers.

    ``update`` takes up to ``updates_per_call`` gradient steps in one compiled call.
    """

    def __init__(self, spec: EnvSpec, config: SACConfig, seed: int = 0) -> None:
        if spec.discrete:
            raise ValueError("SAC needs a continuous (Box) action space, got a discrete spec")
        self.spec = spec
        self.config = config
        self.obs_dim = int(np.prod(spec.obs_shape))
        self.act_dim = int(np.prod(spec.action_shape))
        low = np.asarray(spec.action_low, np.float32).reshape(-1)
        high = np.asarray(spec.action_high, np.float32).reshape(-1)
        self._mid = tf.constant((high + low) / 2.0)  # [act_dim]
        self._half = tf.constant((high - low) / 2.0)
        self.target_entropy = config.entropy_target(self.act_dim)

        self._actor = make_actor(self.obs_dim, low, high, config.actor_hidden, seed)
        self._log_std = make_log_std_head(config.actor_hidden[-1], self.act_dim, seed + 500)
        self._hidden = [
            self._actor.get_layer(f"hidden_{i}") for i in range(len(config.actor_hidden))
        ]
        self._head = self._actor.get_layer("tanh_action")  # its pre-activation is mu(s)

        def critic(offset: int) -> keras.Model:
            # Distinct seeds: identical twins would stay identical and the min would be moot.
            return make_critic(self.obs_dim, self.act_dim, config.critic_hidden, seed + offset)

        self._q1 = critic(1000)
        self._q1_target = critic(1000)
        self._q2 = critic(2000)
        self._q2_target = critic(2000)
        self._pairs = [(self._q1, self._q1_target), (self._q2, self._q2_target)]
        for online, target in self._pairs:  # the targets start as copies
            target.set_weights(online.get_weights())

        # The mean actor's trainable layers (not the frozen rescale) and the log-std head.
        self._actor_vars = self._actor.trainable_variables + self._log_std.trainable_variables
        self._critic_vars = self._q1.trainable_variables + self._q2.trainable_variables
        self._log_alpha = tf.Variable(math.log(config.init_alpha), dtype=tf.float32)
        # One Adam over both critics on the summed loss, as SB3. Built now: creating slot
        # variables inside a tf.function trace is fragile.
        self._actor_opt = keras.optimizers.Adam(learning_rate=config.actor_lr)
        self._critic_opt = keras.optimizers.Adam(learning_rate=config.critic_lr)
        self._alpha_opt = keras.optimizers.Adam(learning_rate=config.alpha_lr)
        self._actor_opt.build(self._actor_vars)
        self._critic_opt.build(self._critic_vars)
        self._alpha_opt.build([self._log_alpha])

        self._actor_loss = tf.Variable(float("nan"), dtype=tf.float32, trainable=False)
        self._entropy = tf.Variable(float("nan"), dtype=tf.float32, trainable=False)
        # Steps of a part whose loss or gradient was not finite: not applied, counted.
        self._nonfinite = tf.Variable(0, dtype=tf.int64, trainable=False)
        self._rng = tf.random.Generator.from_seed(seed)
        self.updates = 0  # critic (gradient) steps taken, Python side
        # Optional constraint on the mean actor's kernels (edge_rl.compress.kernels, GST or
        # pruning): constrains its gradients and re-imposes itself after every actor step.
        # Set it before compile(): the update reads it when traced.
        self.constraint: Any = None

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
        self._sample = tf.function(self._policy, input_signature=[obs, act])
        self._qs = tf.function(
            lambda s, a: (self._q(self._q1, s, a), self._q(self._q2, s, a)),
            input_signature=[obs, act],
        )

    # --- public API ---------------------------------------------------------------------

    @property
    def actor_network(self) -> keras.Model:
        """The deterministic head, raw obs -> ``tanh(mu(s))`` rescaled to the bounds: what
        is exported and deployed."""
        return self._actor

    @property
    def log_std_head(self) -> keras.Model:
        return self._log_std

    @property
    def critics(self) -> tuple[keras.Model, keras.Model]:
        return self._q1, self._q2

    @property
    def critic_targets(self) -> tuple[keras.Model, keras.Model]:
        return self._q1_target, self._q2_target

    @property
    def alpha(self) -> float:
        return float(np.exp(self._log_alpha.numpy()))

    def update(self, batch: ReplaySample, steps: int | None = None) -> dict[str, float]:
        """``steps`` (default ``updates_per_call``) gradient steps, one per minibatch, as
        ``TD3Learner.update``. ``loss`` and ``mean_q`` are the steps' means; ``actor_loss``,
        ``entropy`` (``-mean log pi`` of the policy's samples) and ``alpha`` are the last
        step's."""
        steps = check_steps(batch, self.config.updates_per_call, steps)
        metrics = self._train(*self._tensors(batch), np.int32(steps)).numpy()  # one host sync
        self.updates += steps
        return {
            "loss": float(metrics[0]),
            "actor_loss": float(metrics[1]),
            "mean_q": float(metrics[2]),
            "entropy": float(metrics[3]),
            "alpha": float(metrics[4]),
        }

    @property
    def skipped(self) -> int:
        """Critic, actor or temperature steps not applied: a loss or gradient not finite."""
        return int(self._nonfinite.numpy())

    def compile(self) -> None:
        """Trace the update now and, with XLA, compile it for a call's batch, without taking
        a step (``TD3Learner.compile``)."""
        self._train.get_concrete_function()
        if self.config.jit_compile:
            rows = self.config.updates_per_call * self.config.batch_size
            compile_calls(self._train, self._train_signature, rows)
        self._pi.get_concrete_function()

    def act(self, obs: np.ndarray) -> np.ndarray:
        """Deterministic actions ``[n, *action_shape]`` (the deployed head, no noise)."""
        x = np.asarray(obs, np.float32).reshape(-1, self.obs_dim)
        return self._pi(x).numpy().reshape(-1, *self.spec.action_shape)

    def sample(self, obs: np.ndarray, eps: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The policy's reparameterised sample for ``eps ~ N(0, 1)`` ``[n, act_dim]``: actions
        in the env's bounds ``[n, act_dim]`` and their tanh-space log-density ``[n]``."""
        s = np.asarray(obs, np.float32).reshape(-1, self.obs_dim)
        e = np.asarray(eps, np.float32).reshape(-1, self.act_dim)
        a, log_prob = self._sample(s, e)
        return (a * self._half + self._mid).numpy(), log_prob.numpy()

    def critic_values(self, obs: np.ndarray, action: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Online ``(Q1(s, a), Q2(s, a))``, each ``[n]``, for actions in the env's bounds."""
        s = np.asarray(obs, np.float32).reshape(-1, self.obs_dim)
        a = (np.asarray(action, np.float32).reshape(-1, self.act_dim) - self._mid) / self._half
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

    def _policy(self, obs: T, eps: T) -> tuple[T, T]:
        """``(tanh-space action [B, A], log pi [B])``: the mean actor's hidden layers, its
        tanh head's pre-activation as ``mu``, the log-std head on the same features."""
        h = obs
        for layer in self._hidden:
            h = layer(h)  # [B, hidden_i]
        mu = tf.matmul(h, self._head.kernel) + self._head.bias  # [B, A], before the tanh
        cfg = self.config
        log_std = tf.clip_by_value(self._log_std(h), cfg.log_std_min, cfg.log_std_max)
        return squashed_gaussian(mu, log_std, eps)

    def _train_steps(self, obs: T, action: T, reward: T, next_obs: T, terminated: T, steps: T) -> T:
        """``steps`` gradient steps on the first minibatches; [mean loss, actor loss, mean Q1,
        entropy, alpha]."""
        action = (action - self._mid) / self._half  # env bounds -> tanh space, [B, A]
        batch = (obs, action, reward, next_obs, terminated)
        loss, mean_q = mean_over_steps(self._one_step, batch, self.config.updates_per_call, steps)
        alpha = tf.exp(self._log_alpha.read_value())
        return tf.stack(
            [loss, self._actor_loss.read_value(), mean_q, self._entropy.read_value(), alpha]
        )

    def _one_step(self, obs: T, action: T, reward: T, next_obs: T, terminated: T) -> tuple[T, T]:
        cfg = self.config
        eps_pi = self._rng.normal(tf.shape(action))  # the policy's sample at s, [B, A]
        eps_next = self._rng.normal(tf.shape(action))  # and at s'
        alpha = tf.exp(tf.stop_gradient(self._log_alpha.read_value()))  # this step's, as SB3

        # Temperature: J(alpha) on the current policy's log-density at s.
        if cfg.autotune:
            _, log_prob = self._policy(obs, eps_pi)
            self._step(
                lambda: (temperature_loss(self._log_alpha, log_prob, self.target_entropy), 0.0),
                [self._log_alpha],
                self._alpha_opt,
            )

        y = sac_target(
            reward,
            terminated,
            next_obs,
            eps_next,
            policy=self._policy,
            target_critics=(
                lambda s, a: self._q(self._q1_target, s, a),
                lambda s, a: self._q(self._q2_target, s, a),
            ),
            alpha=alpha,
            gamma=cfg.gamma,
        )  # [B]

        # Critics: L = 0.5 * (mean((Q1(s, a) - y)^2) + mean((Q2(s, a) - y)^2)), as SB3.
        def critic_loss() -> tuple[T, T]:
            q1, q2 = self._q(self._q1, obs, action), self._q(self._q2, obs, action)  # [B]
            mse = tf.reduce_mean(tf.square(q1 - y)) + tf.reduce_mean(tf.square(q2 - y))
            return 0.5 * mse, tf.reduce_mean(q1)

        loss, mean_q = self._step(critic_loss, self._critic_vars, self._critic_opt)

        # Policy: L_pi = mean(alpha * log pi(a|s) - min(Q1, Q2)(s, a)), a = the reparameterised
        # sample of eps_pi, through the critics just updated.
        def actor_loss() -> tuple[T, T]:
            a, log_prob = self._policy(obs, eps_pi)
            q = tf.minimum(self._q(self._q1, obs, a), self._q(self._q2, obs, a))
            return tf.reduce_mean(alpha * log_prob - q), -tf.reduce_mean(log_prob)

        pi_loss, entropy = self._step(
            actor_loss, self._actor_vars, self._actor_opt, self.constraint
        )
        self._actor_loss.assign(pi_loss)
        self._entropy.assign(entropy)

        # theta_targ <- tau * theta + (1 - tau) * theta_targ, every step (SB3's default
        # target_update_interval 1).
        tau = cfg.tau
        for online, target in self._pairs:
            for w, w_targ in zip(
                online.trainable_variables, target.trainable_variables, strict=True
            ):
                w_targ.assign(tau * w + (1.0 - tau) * w_targ)
        return loss, mean_q

    def _step(
        self,
        loss_fn: Callable[[], tuple[T, Any]],
        variables: list,
        optimizer: keras.optimizers.Optimizer,
        constraint: Any = None,
    ) -> tuple[T, Any]:
        """One Adam step on the first output of ``loss_fn`` (``(loss, aux)``); skipped and
        counted when the loss or a gradient is not finite. ``constraint`` (compression)
        shapes the gradients and is re-imposed after the step."""
        with tf.GradientTape() as tape:
            loss, aux = loss_fn()
        grads = tape.gradient(loss, variables)
        if constraint is not None:
            grads = constraint.gradients(grads, variables)

        def apply() -> T:
            optimizer.apply_gradients(zip(grads, variables, strict=True))
            if constraint is not None:
                constraint.apply()
            return tf.constant(0, tf.int64)

        tf.cond(all_finite(loss, grads), apply, lambda: self._nonfinite.assign_add(1))
        return loss, aux
