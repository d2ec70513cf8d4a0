"""On-device exploration: turn the model's output into the action the env gets."""

from __future__ import annotations

import numpy as np

from edge_rl.specs import EnvSpec


def greedy(out: np.ndarray, spec: EnvSpec) -> np.ndarray:
    """The model's own choice, no exploration: argmax of the Q-values (the lowest index on
    a tie), or the action clipped to the bounds in float32 (what a served board acts on)."""
    if spec.discrete:
        return np.int64(np.argmax(out))
    low, high = np.asarray(spec.action_low, np.float32), np.asarray(spec.action_high, np.float32)
    a = np.asarray(out, np.float32).reshape(-1)
    return np.clip(a, low, high).reshape(spec.action_shape)


class Explorer:
    """The actor loop's exploration, drawn from the RNG once per block of steps.

        explorer.plan(manifest.exploration, n)   # or plan(None, n) while there is no policy
        for i in range(n):
            action = explorer.act(out, i)          # ``out``: the model's output for step i

    ``plan`` draws what the next ``n`` steps need with one call to the RNG; ``act`` is then
    a list lookup (and an ``argmax``, or ``clip(a + noise)``) per step. The actions follow
    epsilon-greedy (a uniform action with probability ``epsilon``, else ``argmax_a Q(s, a)``)
    and TD3's noise (``clip(a + N(0, (sigma * half_range)^2), low, high)``: ``sigma`` is a
    fraction of the action half-range, so one value fits every env); without a policy every
    action is uniform over the action space.
    """

    def __init__(self, spec: EnvSpec, rng: np.random.Generator) -> None:
        self.spec = spec
        self.rng = rng
        self.discrete = spec.discrete  # read on every step: a property of the spec
        self.low = np.asarray(spec.action_low, np.float32).reshape(-1)  # flat, as the
        self.high = np.asarray(spec.action_high, np.float32).reshape(-1)  # model's output
        self.half_range = (self.high - self.low) / 2
        # Discrete: the action of step i, or None where the greedy action is taken.
        # Box with a policy: the noise to add to step i's action; without: the action.
        self._plan: list = []
        self._noisy = False

    def plan(self, exploration: dict[str, float] | None, n: int) -> None:
        """Draw the exploration of the next ``n`` steps (``None``: no policy, act randomly)."""
        rng, spec = self.rng, self.spec
        if self.discrete:
            if exploration is None:
                self._plan = list(rng.integers(spec.num_actions, size=n))
                return
            self._plan = self._epsilon_greedy(exploration.get("epsilon", 0.0), n)
            return
        self._noisy = exploration is not None
        if exploration is None:
            actions = rng.uniform(self.low, self.high, (n, self.low.size)).astype(np.float32)
            self._plan = list(actions.reshape(n, *spec.action_shape))
            return
        sigma = exploration.get("sigma", 0.0)
        noise = rng.normal(0.0, sigma, (n, self.low.size)).astype(np.float32)
        self._plan = list(noise * self.half_range)

    def _epsilon_greedy(self, epsilon: float, n: int) -> list[np.int64 | None]:
        """One uniform draw ``u`` per step: the step explores if ``u < epsilon``, and then
        takes action ``floor(u / epsilon * num_actions)``, uniform given ``u < epsilon``."""
        k = self.spec.num_actions
        scale, top = k / max(epsilon, 1e-300), k - 1  # top: u / epsilon rounds up to 1
        i64 = np.int64
        return [
            None if u >= epsilon else i64(min(u * scale, top)) for u in self.rng.random(n).tolist()
        ]

    def act(self, out: np.ndarray | None, i: int) -> np.ndarray:
        """Step ``i``'s action from the model's output ``out`` (Q-values, or an action in
        bounds), or from the plan alone (``out`` is None without a policy)."""
        a = self._plan[i]
        if self.discrete:
            return out.argmax() if a is None else a
        if not self._noisy:
            return a
        noisy = np.asarray(out, np.float32).reshape(-1) + a
        return np.clip(noisy, self.low, self.high).reshape(self.spec.action_shape)
