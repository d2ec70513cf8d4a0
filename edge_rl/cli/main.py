"""``edge-rl``: learn | fleet | credentials; actor | doctor (cli_actor.py, what a board runs);
flash | retire (cli_flash.py); eval | report | keygen (cli_tools.py).

Heavy imports happen inside each command: ``edge-rl actor`` on a board must never import
TensorFlow (the learner's parts are imported by ``learn`` only).
"""

from __future__ import annotations

import dataclasses
import json
import logging
import signal
import sys
import time
from pathlib import Path

import click

from edge_rl.broker.embedded import BrokerError  # standard library only
from edge_rl.cli import tools as cli_tools
from edge_rl.cli.actor import actor, doctor
from edge_rl.cli.common import auth_from_options, auth_options, complete
from edge_rl.cli.common import setup_logging as _setup_logging
from edge_rl.cli.credentials import credentials
from edge_rl.cli.flash import flash, retire
from edge_rl.cli.fleet import fleet
from edge_rl.cli.resume import check_new_run_dir, resumed

log = logging.getLogger("edge_rl")


def _parse_sets(sets: tuple[str, ...]) -> dict:
    import yaml

    out = {}
    for item in sets:
        key, eq, value = item.partition("=")
        if not eq or not key:
            raise click.BadParameter(f"--set takes KEY=VALUE, got {item!r}")
        out[key] = yaml.safe_load(value)
    return out


@click.group()
@click.option("-v", "--verbose", is_flag=True, help="Debug logging.")
@click.pass_context
def main(ctx: click.Context, verbose: bool) -> None:
    """edge-rl: a host learner, int8 LiteRT actors on edge boards, MQTT in between."""
    ctx.obj = {"verbose": verbose}


@main.command()
@click.option("--config", "config_path", type=click.Path(exists=True, dir_okay=False))
@click.option(
    "--resume",
    "resume_dir",
    type=click.Path(exists=True, file_okay=False),
    help="Continue the run in RUN_DIR from its checkpoint.",
)
@click.option(
    "--out", type=click.Path(file_okay=False), help="Run directory (default runs/<name>)."
)
@click.option("--broker", help="mqtt[s]://HOST:PORT of an existing broker (default: embedded).")
@click.option(
    "--embedded-broker",
    type=click.Choice(["auto", "mosquitto", "amqtt"]),
    default="auto",
    show_default=True,
    help="Without --broker: Mosquitto if installed (auto), else the Python broker amqtt.",
)
@click.option("--fleet", "n_fleet", type=int, help="Simulated actors to start (overrides config).")
@click.option("--board", help="Board of the simulated fleet: rpi4, rpi5 or a board file.")
@click.option("--seed", type=int, help="Overrides the config's seed.")
@click.option("--run", "run_name", help="Run name, as the actors' --run (overrides run:).")
@click.option("--set", "sets", multiple=True, metavar="KEY=VALUE", help="Override a config key.")
@click.option(
    "--signing-key",
    type=click.Path(dir_okay=False),
    help="Policy signing key (PEM; made if missing). Default: RUN_DIR/signing.key.",
)
@click.option("--json", "as_json", is_flag=True, help="End by printing summary.json in full.")
@auth_options("The learner's directory of `edge-rl credentials` (DIR/learner).")
@click.pass_context
def learn(
    ctx,
    config_path,
    resume_dir,
    out,
    broker,
    embedded_broker,
    n_fleet,
    board,
    seed,
    run_name,
    sets,
    signing_key,
    as_json,
    auth_opts,
):
    """Train: a learner, an embedded broker unless --broker, and a simulated fleet.

    --resume RUN_DIR continues an earlier run (killed, interrupted) from its checkpoint."""
    started = time.monotonic()
    import os

    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")  # before TensorFlow loads: no CUDA noise
    if resume_dir is not None:
        changes = {
            "--config": config_path,
            "--out": out,
            "--fleet": n_fleet,
            "--board": board,
            "--seed": seed,
            "--run": run_name,
            "--set": sets,
            "--signing-key": signing_key,
        }
        cfg, run_dir = resumed(resume_dir, changes)
    elif config_path is None:
        raise click.ClickException("learn needs --config FILE (or --resume RUN_DIR)")
    else:
        cfg, run_dir = _new_run(config_path, out, sets, seed, n_fleet, board, signing_key, run_name)
    _learn_in(
        ctx,
        cfg,
        run_dir,
        resume_dir is not None,
        broker,
        embedded_broker,
        as_json,
        auth_opts,
        started,
    )


def _new_run(config_path, out, sets, seed, n_fleet, board, signing_key, run_name):
    """The config with the command line's overrides, and a run directory of its own."""
    from edge_rl.config import load_run_config

    overrides = _parse_sets(sets)
    if seed is not None:
        overrides["seed"] = seed
    if n_fleet is not None:
        overrides["fleet.actors"] = n_fleet
    if board is not None:
        overrides["fleet.board"] = board
    if signing_key is not None:
        overrides["signing_key"] = signing_key
    if run_name is not None:
        overrides["run"] = run_name
    try:
        cfg = load_run_config(config_path, overrides)
    except ValueError as e:
        raise click.ClickException(str(e)) from None
    run_dir = Path(
        out or f"runs/{cfg.env_id}-{cfg.algo}-s{cfg.seed}-{time.strftime('%Y%m%d-%H%M%S')}"
    )
    check_new_run_dir(run_dir)  # nothing of an earlier run is overwritten
    return cfg, run_dir


def _learn_in(ctx, cfg, run_dir, resume, broker, embedded_broker, as_json, auth_opts, started):
    from edge_rl.telemetry.progress import CurrentStderrHandler, claim_terminal, result_lines

    auth = cfg.transport.auth.merged(auth_from_options(auth_opts, "learner"))
    if broker is None and not auth.empty:
        raise click.ClickException("credentials are for --broker: the embedded one makes its own")
    auth = complete(auth, "learner", broker)
    if not resume:  # checked all: now the run directory (nothing is written before)
        import yaml

        run_dir.mkdir(parents=True, exist_ok=True)
        (run_dir / "config.yaml").write_text(yaml.safe_dump(_plain(dataclasses.asdict(cfg))))
    # On a terminal the live view owns it: native lines (TensorFlow's start-up, LiteRT's)
    # and INFO records go to learner.log only; warnings and errors print above the view.
    terminal = CurrentStderrHandler()
    terminal.setLevel(logging.WARNING if claim_terminal(run_dir / "learner.log") else 0)
    _setup_logging(ctx.obj["verbose"], run_dir / "learner.log", terminal)
    # SIGTERM (kill, systemd, a CI timeout) ends a run as Ctrl-C does: the learner writes a
    # checkpoint, tells the actors to stop and writes summary.json; then the fleet's
    # processes and the embedded broker are shut down (their own sessions: a terminal's
    # Ctrl-C reaches the learner only, which decides the order), not orphaned.
    from edge_rl.learner.durable import StopRequest  # (imports TensorFlow: after the claim)

    stop = StopRequest()
    stop.install()
    try:
        summary = _learn(cfg, run_dir, broker, embedded_broker, auth, stop=stop, resume=resume)
    except KeyboardInterrupt:  # before the loop runs, or a second signal: no summary.json
        click.echo(f"\ninterrupted: no summary; logs and metrics so far in {run_dir}", err=True)
        sys.exit(130)
    except BrokerError as e:  # no broker to be had: a clear error, not a traceback
        raise click.ClickException(str(e)) from None
    except ValueError as e:  # CheckpointError: another edge-rl, another config, finished
        raise click.ClickException(str(e)) from None
    if summary.get("interrupted"):
        click.echo(
            f"\ninterrupted at {summary['env_steps']} env steps: checkpoint and "
            f"summary.json in {run_dir}; continue with "
            f"`edge-rl learn --resume {run_dir}`",
            err=True,
        )
        sys.exit(128 + (stop.signum or signal.SIGINT))
    if as_json:
        click.echo(json.dumps(summary, indent=2))
    else:  # the full summary stays in summary.json
        click.echo("\n" + "\n".join(result_lines(summary, run_dir, time.monotonic() - started)))


def _plain(x):
    if isinstance(x, dict):
        return {k: _plain(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [_plain(v) for v in x]
    return x


def _learn(
    cfg,
    run_dir: Path,
    broker: str | None,
    embedded_kind: str = "auto",
    auth=None,
    stop=None,
    resume: bool = False,
) -> dict:
    """``auth``: the learner's credentials for ``broker``; an embedded broker makes a run's own.
    ``stop``: a durable.StopRequest; ``resume``: from run_dir's checkpoint."""
    from contextlib import ExitStack

    from edge_rl.boards import board_file
    from edge_rl.broker.config import BrokerAccounts
    from edge_rl.broker.embedded import EmbeddedBroker
    from edge_rl.learner.node import LearnerNode
    from edge_rl.sim.fleet import Fleet, fleet_ids
    from edge_rl.telemetry.progress import LiveView
    from edge_rl.transport.mqtt import mqtt_connect
    from edge_rl.wire.signing import Signer

    key = Path(cfg.signing_key) if cfg.signing_key else run_dir / "signing.key"
    try:
        signer = Signer.load_or_create(key)
    except ValueError as e:
        raise click.ClickException(str(e)) from None
    public_key = run_dir / "signing.pub"  # what the simulated fleet verifies with
    signer.write_public(public_key)
    log.info("policies signed by key %s (%s); public key %s", signer.key_id.hex(), key, public_key)
    actor_auth = None
    with ExitStack() as stack:
        if broker is None:  # loopback only; a password per actor and the learner, an ACL
            accounts = BrokerAccounts(
                fleet_ids(cfg.fleet.actors), root=cfg.transport.root, run=cfg.run
            )
            embedded = stack.enter_context(
                EmbeddedBroker(
                    kind=embedded_kind,
                    log_dir=run_dir,
                    max_packet_size=cfg.transport.max_packet_bytes,
                    accounts=accounts,
                )
            )
            broker, auth, actor_auth = embedded.url, embedded.auth("learner"), embedded.auth
            how = (
                f"authenticated, config {embedded.config_path}"
                if embedded.authenticated
                else ("UNAUTHENTICATED, loopback only")
            )
            log.info("embedded %s broker on %s (%s)", embedded.kind, broker, how)
        fleet = None
        if cfg.fleet.actors > 0:
            fleet = Fleet(
                cfg.fleet.actors,
                board_file(cfg.fleet.board),
                broker,
                cfg.env_id,
                policy_key=public_key,
                run=cfg.run,
                root=cfg.transport.root,
                seed=cfg.seed,
                log_dir=run_dir / "fleet",
                auth=actor_auth,
            )
            stack.enter_context(fleet)
        view = stack.enter_context(LiveView(cfg.total_env_steps))
        alive = fleet.alive if fleet else None
        connect = mqtt_connect(broker, auth)
        node = LearnerNode(
            cfg,
            connect,
            run_dir,
            signer=signer,
            fleet_alive=alive,
            view=view,
            stop=stop,
            resume=resume,
        )
        return node.run()


main.add_command(actor)
main.add_command(doctor)
main.add_command(fleet)
main.add_command(flash)
main.add_command(retire)
main.add_command(credentials)
main.add_command(cli_tools.eval_)
main.add_command(cli_tools.report)
main.add_command(cli_tools.keygen)


if __name__ == "__main__":
    main()
