"""One profile for the fleet's commands (cli/profile.py): a profile file and the
``EDGE_RL_*`` variables reach each command's parameters through click's own parsing, a flag
overrides them, and a bad profile is a one-line error."""

from __future__ import annotations

from pathlib import Path

import click
import pytest

from edge_rl.cli.main import main
from edge_rl.cli.profile import PROFILE_COMMANDS, default_map, env_name, load_file, resolve


@pytest.fixture
def files(tmp_path: Path) -> dict[str, str]:
    """Files the commands' options require to exist, and the credentials' layout."""
    (tmp_path / "creds" / "learner").mkdir(parents=True)
    for name in ("learner.key", "learner.pub", "board.yaml"):
        (tmp_path / name).write_text("x\n")
    return {
        "credentials": str(tmp_path / "creds"),
        "signing_key": str(tmp_path / "learner.key"),
        "policy_key": str(tmp_path / "learner.pub"),
        "board": str(tmp_path / "board.yaml"),
    }


def params(command: str, profile: dict[str, str], *args: str) -> dict:
    """The parameters ``command ARGS`` gets under ``profile``, parsed by click itself (the
    callback is not run)."""
    defaults = default_map(profile, main.commands)[command]
    cmd = main.commands[command]
    return cmd.make_context(command, list(args), default_map=defaults).params


def test_profile_reaches_every_fleet_command(files):
    profile = {"broker": "mqtts://hub:8883", "run": "lab", "root": "farm", "env": "Acrobot-v1"}
    profile |= files
    learner_creds = str(Path(files["credentials"]) / "learner")
    want = {
        "fleet-status": {"broker": "mqtts://hub:8883", "run": "lab", "root": "farm"},
        "stop": {"broker": "mqtts://hub:8883", "run": "lab", "root": "farm"},
        "deploy": {"broker": "mqtts://hub:8883", "run": "lab", "signing_key": files["signing_key"]},
        "fleet": {"broker": "mqtts://hub:8883", "env_id": "Acrobot-v1", "run": "lab"},
        "actor": {"broker": "mqtts://hub:8883", "run": "lab", "root": "farm"},
        "doctor": {"config": files["board"]},
    }
    assert set(want) == set(PROFILE_COMMANDS)
    for command, expected in want.items():
        got = params(command, profile)
        for name, value in expected.items():
            assert str(got[name]) == value, (command, name, got[name])
    # credentials is the top directory: the learner's commands log in from learner/ ...
    for command in ("fleet-status", "stop", "deploy"):
        assert params(command, profile)["credentials_dir"] == learner_creds
    # ... the simulated fleet takes the whole of it, an actor its boards/<id> (cli/actor.py)
    assert params("fleet", profile)["credentials_dir"] == files["credentials"]
    assert params("actor", profile)["credentials_dir"] is None
    assert str(params("fleet", profile)["policy_key"]) == files["policy_key"]


def test_a_flag_overrides_the_profile(files):
    profile = {"broker": "mqtt://from-profile:1883", "run": "lab"} | files
    got = params("stop", profile, "--broker", "mqtt://from-flag:1883", "--run", "other")
    assert got["broker"] == "mqtt://from-flag:1883" and got["run"] == "other"
    got = params("stop", profile, "--credentials", "/elsewhere")
    assert got["credentials_dir"] == "/elsewhere"


def test_without_a_profile_a_required_option_is_still_required():
    with pytest.raises(click.MissingParameter):
        params("stop", {})


def test_environment_variables_win_over_the_file(tmp_path):
    f = tmp_path / "fleet.yaml"
    f.write_text("broker: mqtt://file:1883\nrun: from-file\n")
    env = {env_name("run"): "from-env", "EDGE_RL_PROFILE": str(f)}
    assert resolve(None, env) == {"broker": "mqtt://file:1883", "run": "from-env"}
    assert resolve(None, {env_name("broker"): "mqtt://env:1"}) == {"broker": "mqtt://env:1"}


@pytest.mark.parametrize(
    "text, message",
    [
        ("broker: [a, b]\n", "broker must be one value"),
        ("brokr: mqtt://x:1\n", "unknown key brokr"),
        ("- broker\n", "must be a mapping"),
        ("broker: 'unclosed\n", "is not valid YAML (line"),
    ],
)
def test_a_bad_profile_is_a_one_line_error(tmp_path, text, message):
    f = tmp_path / "p.yaml"
    f.write_text(text)
    with pytest.raises(click.ClickException) as e:
        load_file(f)
    assert message in e.value.message and "\n" not in e.value.message


def test_a_missing_profile_named_is_an_error_a_missing_default_is_not(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path))
    assert resolve(None, {}) == {}
    with pytest.raises(click.ClickException, match="No such file"):
        resolve(str(tmp_path / "nope.yaml"), {})
