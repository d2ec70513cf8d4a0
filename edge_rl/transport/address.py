"""Broker addresses: ``mqtt://HOST:PORT`` and ``mqtts://HOST:PORT`` URLs, lists of them
(``URL[,URL...]``: the nodes of one clustered broker, tried in turn), free loopback ports.
Standard library only."""

from __future__ import annotations

import ipaddress
import socket
from typing import NamedTuple
from urllib.parse import urlsplit

DEFAULT_PORT = 1883
DEFAULT_TLS_PORT = 8883
_SCHEMES = {"mqtt": (DEFAULT_PORT, False), "mqtts": (DEFAULT_TLS_PORT, True)}


class BrokerAddress(NamedTuple):
    host: str
    port: int
    tls: bool  # mqtts://: TLS from the first byte


def free_port(host: str = "127.0.0.1") -> int:
    """A TCP port that nothing listens on right now (the OS picks it)."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        return int(sock.getsockname()[1])


def is_loopback(host: str) -> bool:
    """True for ``localhost`` and loopback IP addresses (127.0.0.0/8, ::1)."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def parse_broker_address(url: str) -> BrokerAddress:
    """``mqtt://HOST[:PORT]`` (port 1883) or ``mqtts://HOST[:PORT]`` (TLS, port 8883)."""
    if not isinstance(url, str) or "://" not in url:
        raise ValueError(f"broker URL must look like mqtt://HOST:PORT, got {url!r}")
    parts = urlsplit(url.strip())
    if parts.scheme not in _SCHEMES:
        raise ValueError(
            f"unsupported broker URL scheme {parts.scheme!r} in {url!r}: use mqtt:// or mqtts://"
        )
    if parts.username is not None or parts.password is not None:
        raise ValueError(
            f"broker URL {url!r} must not carry credentials: use --username and "
            "--password-file (or the config's transport.auth)"
        )
    if parts.path not in ("", "/") or parts.query or parts.fragment:
        raise ValueError(f"broker URL {url!r} has a path, query or fragment: use mqtt://HOST:PORT")
    if not parts.hostname:
        raise ValueError(f"broker URL {url!r} has no host")
    try:
        port = parts.port  # urlsplit raises ValueError for a non-numeric or out-of-range port
    except ValueError as exc:
        raise ValueError(f"broker URL {url!r} has an invalid port: {exc}") from None
    if port == 0:
        raise ValueError(f"broker URL {url!r} has port 0")
    default_port, tls = _SCHEMES[parts.scheme]
    return BrokerAddress(parts.hostname, default_port if port is None else port, tls)


def parse_broker_url(url: str) -> tuple[str, int]:
    """``(HOST, PORT)`` of a broker URL (see ``parse_broker_address``)."""
    address = parse_broker_address(url)
    return address.host, address.port


def split_broker_urls(urls: str) -> tuple[str, ...]:
    """The URLs of ``URL[,URL...]``, each checked (``parse_broker_address``), in order, at
    least one, none twice. One URL is a list of one."""
    if not isinstance(urls, str):
        raise ValueError(f"broker URL list must be a string, got {urls!r}")
    parts = tuple(u.strip() for u in urls.split(","))
    if not parts or any(not u for u in parts):
        raise ValueError(f"broker URL list {urls!r} has an empty entry: use URL[,URL...]")
    if len(set(parts)) != len(parts):
        raise ValueError(f"broker URL list {urls!r} names a URL twice")
    for url in parts:
        parse_broker_address(url)
    return parts


def parse_broker_list(urls: str) -> tuple[BrokerAddress, ...]:
    """Every address of ``URL[,URL...]`` (see ``split_broker_urls``): all TLS or none, since
    one client has one set of credentials for every node."""
    addresses = tuple(parse_broker_address(u) for u in split_broker_urls(urls))
    if len({a.tls for a in addresses}) > 1:
        raise ValueError(f"broker URL list {urls!r} mixes mqtt:// and mqtts://")
    return addresses
