"""The algorithm registry: the one list the run config, the CLI and ``make_algo`` read."""

from __future__ import annotations

import dataclasses
import subprocess
import sys

import pytest

from edge_rl.agents import registry
from edge_rl.agents.algo import Algo, AlgoSetup, ParityGate
from edge_rl.agents.dqn.config import DQNConfig
from edge_rl.agents.registry import ALGORITHMS, algorithm, make_algo
from edge_rl.agents.sac.config import SACConfig
from edge_rl.agents.td3.config import TD3Config
from edge_rl.compress.config import CompressionConfig
from edge_rl.config import RunConfig, load_run_config, run_config_from_dict
from edge_rl.specs import EnvSpec

CARTPOLE = EnvSpec(obs_shape=(4,), num_actions=2)
PENDULUM = EnvSpec(obs_shape=(3,), action_shape=(1,), action_low=(-2.0,), action_high=(2.0,))
GATE = ParityGate(0.9, 0.75, 0.06, 1.0)
SETUP = AlgoSetup(0, 1_000, 500, GATE, CompressionConfig())
SMALL = {
    "dqn": DQNConfig(hidden=(8, 8), batch_size=4, updates_per_call=1, jit_compile=False),
    "td3": TD3Config(actor_hidden=(8, 8), critic_hidden=(8, 8), batch_size=4, updates_per_call=1),
    "sac": SACConfig(actor_hidden=(8, 8), critic_hidden=(8, 8), batch_size=4, updates_per_call=1),
}


def test_an_unknown_name_is_refused_with_the_known_ones_listed() -> None:
    with pytest.raises(ValueError, match=r"unknown algo 'ppo'; known: dqn, td3, sac"):
        algorithm("ppo")
    with pytest.raises(ValueError, match=r"unknown algo 'ppo'; known: dqn, td3, sac"):
        make_algo("ppo", SMALL["dqn"], CARTPOLE, SETUP)


def test_the_run_config_refuses_an_unknown_algo_with_the_known_ones_listed(tmp_path) -> None:
    with pytest.raises(ValueError, match=r"unknown algo 'ppo'; known: dqn, td3, sac"):
        run_config_from_dict({"env_id": "Pendulum-v1", "algo": "ppo"})
    path = tmp_path / "run.yaml"
    path.write_text("env_id: Pendulum-v1\nalgo: td3\n")
    assert load_run_config(path).algo == "td3"
    with pytest.raises(ValueError, match=r"run.yaml: .*unknown algo 'ppo'; known: dqn, td3, sac"):
        load_run_config(path, {"algo": "ppo"})  # as `edge-rl learn --set algo=ppo` gives it


def test_the_registry_drives_the_config_check(monkeypatch: pytest.MonkeyPatch) -> None:
    """A name the registry holds is a valid ``algo:``, and only such a name."""
    with pytest.raises(ValueError, match="known: dqn, td3, sac"):
        RunConfig(env_id="Pendulum-v1", algo="td3x")
    td3x = dataclasses.replace(ALGORITHMS["td3"], name="td3x")
    monkeypatch.setitem(registry.ALGORITHMS, "td3x", td3x)
    assert RunConfig(env_id="Pendulum-v1", algo="td3x").algo == "td3x"
    monkeypatch.delitem(registry.ALGORITHMS, "dqn")
    with pytest.raises(ValueError, match=r"unknown algo 'dqn'; known: td3, sac, td3x"):
        RunConfig(env_id="CartPole-v1", algo="dqn")


def test_every_entry_has_its_run_config_section() -> None:
    """``algo: NAME`` reads the section ``NAME:``, of the entry's config class."""
    fields = {f.name: f for f in dataclasses.fields(RunConfig)}
    for name, entry in ALGORITHMS.items():
        assert entry.name == name
        assert isinstance(fields[name].default_factory(), entry.config), name


@pytest.mark.parametrize("name", sorted(ALGORITHMS))
def test_make_algo_builds_each_entry_in_its_action_space(name: str) -> None:
    entry = ALGORITHMS[name]
    spec, other = (CARTPOLE, PENDULUM) if entry.discrete else (PENDULUM, CARTPOLE)
    algo = make_algo(name, SMALL[name], spec, SETUP)
    assert isinstance(algo, Algo) and isinstance(algo, entry.adapter())
    assert algo.updates == 0 and algo.batch_size == 4
    # The config's check (``pretrains``) says what the learner has: a pretraining loss.
    assert entry.pretrains == hasattr(algo.learner, "pretrain"), name
    if not entry.pretrains:
        with pytest.raises(NotImplementedError, match="has no pretraining loss"):
            algo.pretrain(None)  # type: ignore[arg-type]
    needs = "a discrete" if entry.discrete else "a Box"
    with pytest.raises(ValueError, match=f"{name} needs {needs} action space"):
        make_algo(name, SMALL[name], other, SETUP)
    wrong = SMALL["td3" if name == "dqn" else "dqn"]
    with pytest.raises(ValueError, match=f"{name} takes a {entry.config.__name__}"):
        make_algo(name, wrong, spec, SETUP)


def test_importing_the_registry_imports_no_tensorflow() -> None:
    """The config and the CLI read the table; only making an algorithm imports TF."""
    code = (
        "import sys; import edge_rl.config, edge_rl.agents.registry as r; "
        "assert r.ALGORITHMS; print(sorted(m for m in sys.modules "
        "if m.split('.')[0] in ('tensorflow', 'keras')))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True
    )
    assert out.stdout.strip() == "[]"
