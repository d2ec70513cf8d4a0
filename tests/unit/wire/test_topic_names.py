"""Run names, topic roots and actor ids are topic levels that every broker edge-rl ships
carries, nats-server's MQTT included (docs/scale.md): a name with '.', '*', '>' or
whitespace is refused where it is made or accepted (credentials enrolment, the run config,
the board file), with a clear error, not when a nats config is written at the end."""

from __future__ import annotations

import re

import pytest

from edge_rl.boards import ActorSection
from edge_rl.broker.nats_conf import subject
from edge_rl.config import RunConfig, TransportConfig
from edge_rl.deploy.credentials import make_credentials
from edge_rl.deploy.ids import Registry
from edge_rl.wire.topics import Topics, check_name

NOT_NATS = ["v1.2", "pi.01", "a*b", "a>", "pi 01", "tab\there"]


@pytest.mark.parametrize("name", NOT_NATS)
def test_a_level_nats_cannot_carry_is_refused_with_the_reason(name):
    with pytest.raises(ValueError, match="NATS subject token"):
        check_name("run name", name)
    with pytest.raises(ValueError, match="NATS subject token"):
        Topics("edge-rl", name)
    with pytest.raises(ValueError, match="NATS subject token"):
        Topics(f"site/{name}", "r1")


def test_every_name_check_name_takes_has_a_nats_subject():
    for name in ("pi-01", "cartpole_v1", "Run-2026-12-02", "x" * 128):
        assert subject(Topics("edge-rl", check_name("run name", name)).status(name))


@pytest.mark.parametrize("name", ["v1.2", "a*b", "pi 01"])
def test_the_run_config_refuses_such_a_run_name_or_root_at_load(name):
    with pytest.raises(ValueError, match=f"invalid run name '{re.escape(name)}'"):
        RunConfig(env_id="CartPole-v1", run=name)
    with pytest.raises(ValueError, match="transport.root level"):
        RunConfig(env_id="CartPole-v1", transport=TransportConfig(root=f"edge-rl/{name}"))
    assert RunConfig(env_id="CartPole-v1", run="v1-2").run == "v1-2"


@pytest.mark.parametrize("field", ["id", "run", "root"])
def test_the_board_file_refuses_such_an_id_run_or_root(field):
    kw = {"id": "pi-01", "run": "r1", "env": "CartPole-v1", "broker": "mqtt://h:1883"}
    with pytest.raises(ValueError, match=rf"actor\.{field}.*NATS subject token"):
        ActorSection(**{**kw, field: "pi.01"})
    assert ActorSection(**kw).id == "pi-01"


def test_credentials_refuse_such_an_id_and_enrolment_such_a_run(tmp_path):
    with pytest.raises(ValueError, match="invalid username 'pi.01'.*NATS"):
        make_credentials(tmp_path / "creds", ["pi.01"], passwords=True)
    assert not (tmp_path / "creds").exists()  # refused before anything is written
    with Registry.open(tmp_path / "reg") as reg:
        with pytest.raises(ValueError, match="invalid run name 'v1.2'.*NATS"):
            reg.enroll(["pi-01"], run="v1.2")
        with pytest.raises(ValueError, match="invalid username 'pi.02'.*NATS"):
            reg.enroll(["pi.02"], run="r1")
        assert reg.actors == {}
