"""Build an environment from ``--env``: a gymnasium id or ``package.module:callable``.

The second form is how a real robot plugs in: a callable returning a gymnasium-style env.
"""

from __future__ import annotations

import importlib
from typing import Any

from edge_rl.specs import EnvSpec


def make_env(env: str, **kwargs: Any) -> Any:
    if ":" in env:
        module_name, _, attr = env.partition(":")
        try:
            factory = getattr(importlib.import_module(module_name), attr)
        except (ImportError, AttributeError) as e:
            raise ValueError(f"cannot load env factory {env!r}: {e}") from None
        return factory(**kwargs)
    import gymnasium as gym

    try:
        return gym.make(env, **kwargs)
    except gym.error.Error as e:
        raise ValueError(f"unknown environment {env!r}: {e}") from None


def env_spec(env: str) -> EnvSpec:
    """The observation and action spec of ``env`` (made and closed again)."""
    e = make_env(env)
    try:
        return EnvSpec.from_gym(e.observation_space, e.action_space)
    finally:
        e.close()
