"""One learner process, wired: what ``edge-rl learn`` runs, callable without it.

    summary = run_learner(cfg, run_dir, LearnOptions())   # embedded broker, simulated fleet

In data-flow order: the policy signing key (the fleet verifies what the learner publishes)
-> a broker and its accounts (an embedded one unless ``LearnOptions.broker``) -> the
simulated fleet (``cfg.fleet.actors`` boards: a process each, or ``cfg.fleet.procs``
board groups) -> the live view -> the learner node,
which runs until ``cfg.total_env_steps`` or a stop request and returns summary.json's content.
On the way out the parts stop in reverse: the node has told the actors to stop, the fleet's
processes end, the embedded broker goes last.

No command-line code: errors are exceptions (``BrokerError``: no broker to be had;
``ValueError``: a bad signing key, a config or checkpoint that does not fit). The caller
sets up logging and, on a terminal, hands it to the live view (telemetry/progress.py).
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Callable
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from edge_rl.boards import board_file
from edge_rl.broker.config import BrokerAccounts, raise_fd_limit
from edge_rl.broker.embedded import EmbeddedBroker
from edge_rl.config import RunConfig
from edge_rl.learner.durable import StopRequest
from edge_rl.learner.node import LearnerNode
from edge_rl.learner.run_dir import RunDir
from edge_rl.sim.fleet import Fleet, fleet_ids
from edge_rl.telemetry.progress import LiveView
from edge_rl.transport.auth import BrokerAuth
from edge_rl.transport.mqtt import mqtt_connect
from edge_rl.wire.signing import Signer

log = logging.getLogger("edge_rl")


@dataclass(frozen=True)
class LearnOptions:
    """How a learner process runs, beside its config."""

    broker: str | None = None  # mqtt[s]://HOST:PORT of a running broker; None: an embedded one
    embedded_broker: str = "auto"  # its kind: auto (Mosquitto if installed), mosquitto, amqtt
    auth: BrokerAuth | None = None  # the learner's credentials for ``broker``
    resume: bool = False  # continue from run_dir's checkpoint, with run_dir/config.yaml
    stop: StopRequest | None = None  # set by a signal handler: checkpoint, summary, stop
    live_view: bool = True  # progress on the terminal (elsewhere: a log line every 5 s)
    keep_quarantine: bool = False  # resumed: keep the boards quarantined before (else lifted)
    release: tuple[str, ...] = ()  # resumed with keep_quarantine: lift these boards' alone


@dataclass(frozen=True)
class _Bus:
    """The broker the learner and the fleet use, and the credentials of each."""

    url: str
    learner: BrokerAuth | None
    actor: Callable[[str], BrokerAuth | None] | None  # actor id -> its credentials


def run_learner(cfg: RunConfig, run_dir: Path, options: LearnOptions) -> dict[str, Any]:
    """Run a learner with ``cfg`` in ``run_dir`` (made if missing) to its end; returns the
    summary it wrote to ``run_dir/summary.json``. A new run first writes its config.yaml,
    which ``options.resume`` reads back on a later start."""
    files = RunDir(run_dir)
    files.mkdir()
    if not options.resume:
        files.config.write_text(yaml.safe_dump(_plain(dataclasses.asdict(cfg))))
    # The signing key: the learner signs every policy; the fleet gets the public half.
    key = files.signing_key_for(cfg.signing_key)
    signer = Signer.load_or_create(key)
    public_key = files.signing_public_key
    signer.write_public(public_key)
    beside = key.with_suffix(".pub")  # where edge-rl keygen puts it, and the boards' copy
    if cfg.signing_key and not beside.exists():
        signer.write_public(beside)
    log.info("policies signed by key %s (%s); public key %s", signer.key_id.hex(), key, public_key)
    with ExitStack() as stack:
        # The broker, with an account per actor and one for the learner when embedded.
        bus = _bus(stack, cfg, run_dir, options)
        # The simulated fleet: actor processes on that broker, verifying with the public key.
        fleet = None
        if cfg.fleet.actors > 0:
            fleet = stack.enter_context(_fleet(cfg, run_dir, bus, public_key))
        # The live view, fed once a second by the node's meter.
        view = stack.enter_context(LiveView(cfg.total_env_steps)) if options.live_view else None
        # The node: transitions in, training, policies out, until the budget or a stop.
        node = LearnerNode(
            cfg,
            mqtt_connect(bus.url, bus.learner),
            run_dir,
            signer=signer,
            fleet_alive=fleet.alive if fleet else None,
            view=view,
            stop=options.stop,
            resume=options.resume,
            keep_quarantine=options.keep_quarantine,
            release=options.release,
        )
        return node.run()


def _bus(stack: ExitStack, cfg: RunConfig, run_dir: Path, options: LearnOptions) -> _Bus:
    """``options.broker`` as given, or an embedded broker on loopback (entered on ``stack``):
    a password per actor and for the learner, and an ACL that keeps each to its own topics."""
    if options.broker is not None:
        return _Bus(options.broker, options.auth, None)
    accounts = BrokerAccounts(fleet_ids(cfg.fleet.actors), root=cfg.transport.root, run=cfg.run)
    # The broker inherits this process's open-files limit: one socket per board, and
    # a thousand simulated boards pass the common soft limit of 1,024.
    raise_fd_limit(2 * cfg.fleet.actors + 1024)
    embedded = stack.enter_context(
        EmbeddedBroker(
            kind=options.embedded_broker,
            log_dir=run_dir,
            max_packet_size=cfg.transport.max_packet_bytes,
            accounts=accounts,
        )
    )
    if not embedded.authenticated:
        how = "UNAUTHENTICATED, loopback only"
    elif embedded.config_path is not None:
        how = f"authenticated, config {embedded.config_path}"
    else:
        how = "authenticated: a password per client and the run's ACL, loopback only"
    log.info("embedded %s broker on %s (%s)", embedded.kind, embedded.url, how)
    return _Bus(embedded.url, embedded.auth("learner"), embedded.auth)


def _fleet(cfg: RunConfig, run_dir: Path, bus: _Bus, public_key: Path) -> Fleet:
    return Fleet(
        cfg.fleet.actors,
        board_file(cfg.fleet.board),
        bus.url,
        cfg.env_id,
        policy_key=public_key,
        run=cfg.run,
        root=cfg.transport.root,
        seed=cfg.seed,
        log_dir=RunDir(run_dir).fleet_logs,
        auth=bus.actor,
        procs=cfg.fleet.procs,
        start_spread_s=cfg.fleet.start_spread_s,
    )


def _plain(x: Any) -> Any:
    """A config's ``asdict`` as YAML's plain types (tuples as lists)."""
    if isinstance(x, dict):
        return {k: _plain(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [_plain(v) for v in x]
    return x
