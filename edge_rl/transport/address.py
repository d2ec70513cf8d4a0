"""Broker addresses: ``mqtt://HOST:PORT`` URLs and free loopback ports. Standard library only."""

from __future__ import annotations

import socket
from urllib.parse import urlsplit

DEFAULT_PORT = 1883


def free_port(host: str = "127.0.0.1") -> int:
    """A TCP port that nothing listens on right now (the OS picks it)."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        return int(sock.getsockname()[1])


def parse_broker_url(url: str) -> tuple[str, int]:
    """``mqtt://HOST[:PORT]`` → ``(HOST, PORT)``; the port defaults to 1883."""
    if not isinstance(url, str) or "://" not in url:
        raise ValueError(f"broker URL must look like mqtt://HOST:PORT, got {url!r}")
    parts = urlsplit(url.strip())
    if parts.scheme != "mqtt":
        raise ValueError(f"unsupported broker URL scheme {parts.scheme!r} in {url!r}: use mqtt://")
    if parts.username is not None or parts.password is not None:
        raise ValueError(f"broker URL {url!r} must not carry credentials")
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
    return parts.hostname, DEFAULT_PORT if port is None else port
