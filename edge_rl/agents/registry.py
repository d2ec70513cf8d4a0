"""The algorithms a run can name (``algo:`` in the run config), in one table.

    entry = algorithm("td3")          # ValueError naming the known ones for any other name
    algo = make_algo("td3", cfg.td3, spec, setup)   # its adapter (imports TensorFlow)

The run config checks ``algo:`` against this table, ``edge-rl learn --help`` lists it and
``make_algo`` builds from it. Importing it imports no TensorFlow: an entry's adapter is
imported only when a run makes one. Adding an algorithm is its folder (``config.py``,
``networks.py``, ``learning.py``, ``adapter.py``), its entry here, a section of the same
name in ``RunConfig`` and the docs.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from edge_rl.agents.dqn.config import DQNConfig  # plain dataclasses: no TensorFlow import
from edge_rl.agents.sac.config import SACConfig
from edge_rl.agents.td3.config import TD3Config
from edge_rl.specs import EnvSpec

if TYPE_CHECKING:
    from edge_rl.agents.algo import Algo, AlgoSetup


def _dqn() -> type[Algo]:
    from edge_rl.agents.dqn.adapter import DQNAlgo

    return DQNAlgo


def _td3() -> type[Algo]:
    from edge_rl.agents.td3.adapter import TD3Algo

    return TD3Algo


def _sac() -> type[Algo]:
    from edge_rl.agents.sac.adapter import SACAlgo

    return SACAlgo


@dataclass(frozen=True)
class Algorithm:
    name: str  # ``algo:`` in the run config, and the name of its config section
    config: type  # that section's frozen dataclass
    discrete: bool  # True: a discrete action space; False: a Box
    adapter: Callable[[], type[Algo]]  # imports its ``Algo`` subclass (TensorFlow)
    # True: ``Algo.pretrain`` has a loss for demonstrations alone (replay.pretrain_updates)
    pretrains: bool = False


ALGORITHMS: dict[str, Algorithm] = {
    a.name: a
    for a in (
        Algorithm("dqn", DQNConfig, discrete=True, adapter=_dqn),
        Algorithm("td3", TD3Config, discrete=False, adapter=_td3, pretrains=True),
        Algorithm("sac", SACConfig, discrete=False, adapter=_sac),
    )
}


def algorithm(name: str) -> Algorithm:
    """The entry named ``name``; ValueError naming the known ones for any other."""
    if name not in ALGORITHMS:
        raise ValueError(f"unknown algo {name!r}; known: {', '.join(ALGORITHMS)}")
    return ALGORITHMS[name]


def make_algo(name: str, config: Any, spec: EnvSpec, setup: AlgoSetup) -> Algo:
    """The adapter of algorithm ``name`` with its config section ``config``, for an env of
    ``spec``; ValueError for an unknown name, a config of another algorithm or an action
    space the algorithm cannot act in."""
    entry = algorithm(name)
    if not isinstance(config, entry.config):
        raise ValueError(f"{name} takes a {entry.config.__name__}, got {type(config).__name__}")
    if entry.discrete != spec.discrete:
        needs, has = ("discrete", "a Box") if entry.discrete else ("Box", "discrete")
        raise ValueError(f"{name} needs a {needs} action space; this env's is {has}")
    return entry.adapter()(config, spec, setup)
