"""Broker URL lists, ``URL[,URL...]``: the nodes of one clustered broker."""

from __future__ import annotations

import pytest

from edge_rl.transport.address import BrokerAddress, parse_broker_list, split_broker_urls
from edge_rl.transport.auth import AuthError, BrokerAuth


def test_a_list_keeps_its_order_and_one_url_is_a_list_of_one() -> None:
    assert parse_broker_list("mqtt://a:1884, mqtt://b,mqtt://c:1") == (
        BrokerAddress("a", 1884, False),
        BrokerAddress("b", 1883, False),
        BrokerAddress("c", 1, False),
    )
    assert split_broker_urls("mqtts://h") == ("mqtts://h",)


@pytest.mark.parametrize(
    "text",
    [
        "",
        "mqtt://a,",
        ",mqtt://a",
        "mqtt://a,,mqtt://b",
        "mqtt://a,mqtt://a",  # one node twice
        "mqtt://a,mqtts://b",  # one client, one set of TLS settings
        "mqtt://a,http://b",
        "mqtt://u:p@a,mqtt://b",  # credentials never in a URL
    ],
)
def test_bad_lists_are_refused(text: str) -> None:
    with pytest.raises(ValueError):
        parse_broker_list(text)


def test_tls_files_need_every_url_of_the_list_to_be_tls(tmp_path) -> None:
    ca = tmp_path / "ca.crt"
    ca.write_text("x")
    auth = BrokerAuth(ca_file=str(ca))
    assert auth.check_url("mqtts://a,mqtts://b") is True
    with pytest.raises(AuthError):
        auth.check_url("mqtt://a,mqtt://b")
    assert BrokerAuth().check_url("mqtt://a,mqtt://b") is False
