"""The embedded amqtt broker's child process:
``python -m edge_rl.broker.amqtt_child HOST PORT [--password-file F --acl-file A]``.

Started by ``EmbeddedBroker(kind="amqtt")`` (embedded.py); it prints a ready line on stderr,
which the parent waits for, and exits on SIGTERM/SIGINT or when the parent closes its stdin.
With a password file and an ACL (the run's, the same files Mosquitto would read) it refuses
anonymous clients and checks every topic (``amqtt_plugins.py``); without them it is
anonymous (the test fixtures' broker).
"""

from __future__ import annotations

import argparse
import logging
import os
import sys


def _plugins(password_file: str | None, acl_file: str | None) -> dict:
    if password_file is None or acl_file is None:
        return {"amqtt.plugins.authentication.AnonymousAuthPlugin": {"allow_anonymous": True}}
    return {
        "edge_rl.broker.amqtt_plugins.PasswordFileAuth": {
            "password_file": password_file,
            "acl_file": acl_file,
        },
        "edge_rl.broker.amqtt_plugins.AclFileTopics": {"acl_file": acl_file},
    }


def _run_amqtt(host: str, port: int, password_file: str | None, acl_file: str | None) -> int:
    """Serve amqtt on host:port until SIGTERM/SIGINT or until the parent closes our stdin."""
    import asyncio
    import signal

    from amqtt.broker import Broker  # imported here: the parent never needs amqtt

    logging.basicConfig(
        level=logging.WARNING, format="%(asctime)s %(name)s %(levelname)s %(message)s"
    )
    config = {
        "listeners": {"default": {"type": "tcp", "bind": f"{host}:{port}"}},
        # No packet/event logger plugins: they log every packet.
        "plugins": _plugins(password_file, acl_file),
    }

    async def serve() -> None:
        loop = asyncio.get_running_loop()
        stop = asyncio.Event()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, stop.set)

        def on_stdin() -> None:  # EOF on the stdin pipe: the parent is gone, however it died
            if not os.read(0, 4096):
                loop.remove_reader(0)
                stop.set()

        # A raw-fd reader, not a thread blocked in sys.stdin.read(): that thread makes the
        # interpreter abort at exit ("could not acquire lock for <stdin>").
        loop.add_reader(0, on_stdin)
        broker = Broker(config)
        await broker.start()
        print(f"amqtt broker listening on {host}:{port}", file=sys.stderr, flush=True)
        await stop.wait()
        await broker.shutdown()

    try:
        asyncio.run(serve())
    except Exception as exc:  # reported through the log file the parent reads
        cause = exc.__cause__ or exc
        print(f"amqtt broker failed: {exc} ({cause!r})", file=sys.stderr, flush=True)
        return 1
    return 0


def _main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="python -m edge_rl.broker.amqtt_child")
    parser.add_argument("host")
    parser.add_argument("port", type=int)
    parser.add_argument("--password-file")
    parser.add_argument("--acl-file")
    args = parser.parse_args(argv)
    return _run_amqtt(args.host, args.port, args.password_file, args.acl_file)


if __name__ == "__main__":
    sys.exit(_main(sys.argv[1:]))
