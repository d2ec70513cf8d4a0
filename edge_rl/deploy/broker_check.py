"""The doctor's broker checks: the credentials' files, then a real login as this board.

``check_brokers`` makes one check per URL of the board file's broker list (a cluster's
nodes: the board may be sent to any of them, so each must take its login); each connects
with the board's credentials (TLS with its CA, its client certificate and/or password),
waits for the CONNACK (bounded), and disconnects. Each way it can fail gets its own fix:
nothing listening, a name that does not resolve, a certificate that does not chain to the
CA, credentials the broker refuses.
"""

from __future__ import annotations

import dataclasses
import socket
import ssl
import threading

import paho.mqtt.client as mqtt

from edge_rl.boards import BoardConfig
from edge_rl.deploy.check import Check, Failed, run_check
from edge_rl.transport.address import BrokerAddress, parse_broker_list
from edge_rl.transport.auth import AuthError, BrokerAuth
from edge_rl.transport.mqtt import apply_auth


def board_auth(board: BoardConfig) -> BrokerAuth:
    """The board file's credentials as the actor completes them (username: the actor id)."""
    auth = board.auth
    if auth.has_password and auth.username is None:
        auth = dataclasses.replace(auth, username=board.actor.id)
    return auth


def check_credentials(board: BoardConfig) -> str:
    auth = board_auth(board)
    try:
        auth.check(board.actor.broker)
    except (AuthError, ValueError) as e:
        raise Failed(
            str(e),
            "copy this board's credentials with their modes (install.sh "
            "does: 0600, owned by edge-rl); or re-flash it",
        ) from None
    have = [
        n
        for n, v in (
            ("CA", auth.ca_file),
            ("certificate", auth.cert_file),
            ("password", auth.has_password),
        )
        if v
    ]
    return f"user {auth.username or '-'}: {', '.join(have) or 'none (anonymous)'}"


def check_brokers(board: BoardConfig, timeout: float) -> list[Check]:
    """One check per broker URL: ``broker`` for one, ``broker 1`` .. ``broker N`` for a list,
    in the list's order (the order the board tries them)."""
    try:
        addresses = parse_broker_list(board.actor.broker)
    except ValueError as e:
        return [Check("broker", False, str(e), "set actor.broker to mqtts://HOST:PORT (re-flash)")]
    if len(addresses) == 1:
        return [run_check("broker", lambda: check_broker(board, addresses[0], timeout))]
    return [
        run_check(f"broker {i}", lambda a=a: check_broker(board, a, timeout))
        for i, a in enumerate(addresses, 1)
    ]


def check_broker(board: BoardConfig, address: BrokerAddress, timeout: float) -> str:
    """A login as this board at one broker ``address``, bounded by ``timeout``."""
    auth = board_auth(board)
    client = mqtt.Client(
        mqtt.CallbackAPIVersion.VERSION2,
        client_id=f"doctor-{board.actor.id}",
        protocol=mqtt.MQTTv5,
    )
    answered, result = threading.Event(), {}

    def on_connect(_c, _u, _flags, reason_code, _props) -> None:
        result["reason"] = reason_code
        answered.set()

    client.on_connect = on_connect
    try:
        apply_auth(client, auth, address.tls)
        client.connect(address.host, address.port, keepalive=max(5, int(timeout)))
    except AuthError as e:
        raise Failed(str(e), "re-flash the board's credentials") from None
    except ssl.SSLCertVerificationError as e:
        raise Failed(
            f"TLS: {e.verify_message or e}",
            f"the broker's certificate must chain to {auth.ca_file or 'the system CAs'} "
            f"and name {address.host!r}: use the deployment's ca.crt "
            "(edge-rl credentials --server-name)",
        ) from None
    except ssl.SSLError as e:
        raise Failed(
            f"TLS handshake with {address.host}:{address.port}: {e}",
            "is that port the broker's TLS listener (8883)? mqtts:// needs TLS",
        ) from None
    except socket.gaierror as e:
        raise Failed(
            f"cannot resolve {address.host!r}: {e}",
            "check the network and the name (or use the learner's IP)",
        ) from None
    except ConnectionRefusedError:
        raise Failed(
            f"nothing listens on {address.host}:{address.port}",
            "start the broker (sudo systemctl start mosquitto) or fix actor.broker",
        ) from None
    except (TimeoutError, OSError) as e:
        raise Failed(
            f"cannot reach {address.host}:{address.port}: {e}",
            "check the network, the firewall and the broker's address",
        ) from None
    client.loop_start()
    try:
        if not answered.wait(timeout):
            raise Failed(
                f"no answer from {address.host}:{address.port} in {timeout:g} s",
                "is it an MQTT broker? check the port and its TLS (mqtts://)",
            )
    finally:
        client.disconnect()
        client.loop_stop()
    reason = result["reason"]
    if reason.is_failure:
        raise Failed(
            f"the broker refused the login as {auth.username!r}: {reason}",
            "add this board's password to the broker (install creds/broker/"
            "mosquitto.passwd, reload mosquitto) or check its certificate",
        )
    how = "TLS" if address.tls else "plain TCP (no TLS)"
    return f"logged in to {address.host}:{address.port} as {auth.username or '-'} over {how}"
