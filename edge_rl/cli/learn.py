"""``edge-rl learn``: train (a learner, an embedded broker unless --broker, a simulated
fleet), or ``--resume RUN_DIR`` an earlier run.

The command parses its flags, checks the run directory, sets up logging and the terminal,
then calls ``edge_rl.learner.run.run_learner``; its errors become click's messages here.
TensorFlow is imported only after the terminal is claimed (its start-up lines go to
learner.log) and never when ``--help`` or a bad flag ends the command first.
"""

from __future__ import annotations

import json
import logging
import os
import signal
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from edge_rl.agents.registry import ALGORITHMS  # the table only: no TensorFlow
from edge_rl.broker.embedded import BrokerError  # standard library only
from edge_rl.cli.common import (
    AuthOptions,
    auth_from_options,
    auth_options,
    complete,
    setup_logging,
)
from edge_rl.cli.run_dir import check_new_run_dir, resumed
from edge_rl.config import RunConfig
from edge_rl.learner.run_dir import RunDir
from edge_rl.transport.auth import BrokerAuth

if TYPE_CHECKING:
    from edge_rl.learner.durable import StopRequest


@dataclass(frozen=True)
class _ConfigFlags:
    """The flags that make or change a run's config (``--resume`` takes none of them)."""

    config_path: str | None
    out: str | None
    n_fleet: int | None
    fleet_procs: int | None
    board: str | None
    seed: int | None
    run_name: str | None
    sets: tuple[str, ...]
    signing_key: str | None

    def given(self) -> dict[str, object]:
        """Each flag by its name on the command line."""
        return {
            "--config": self.config_path,
            "--out": self.out,
            "--fleet": self.n_fleet,
            "--fleet-procs": self.fleet_procs,
            "--board": self.board,
            "--seed": self.seed,
            "--run": self.run_name,
            "--set": self.sets,
            "--signing-key": self.signing_key,
        }

    def overrides(self) -> dict[str, Any]:
        """The config keys they set: ``--set KEY=VALUE``s, then the named flags over them."""
        out = _parse_sets(self.sets)
        named = {
            "seed": self.seed,
            "fleet.actors": self.n_fleet,
            "fleet.procs": self.fleet_procs,
            "fleet.board": self.board,
            "signing_key": self.signing_key,
            "run": self.run_name,
        }
        out.update({k: v for k, v in named.items() if v is not None})
        return out


def _parse_sets(sets: tuple[str, ...]) -> dict[str, Any]:
    import yaml

    out = {}
    for item in sets:
        key, eq, value = item.partition("=")
        if not eq or not key:
            raise click.BadParameter(f"--set takes KEY=VALUE, got {item!r}")
        out[key] = yaml.safe_load(value)
    return out


@click.command(epilog=f"Algorithms (algo: in the config): {', '.join(ALGORITHMS)}.")
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
@click.option(
    "--broker",
    help="mqtt[s]://HOST:PORT of an existing broker, or URL,URL,... of the nodes of a "
    "clustered one, tried in turn (default: embedded).",
)
@click.option(
    "--embedded-broker",
    type=click.Choice(["auto", "mosquitto", "amqtt"]),
    default="auto",
    show_default=True,
    help="Without --broker: Mosquitto if installed (auto), else the Python broker amqtt.",
)
@click.option("--fleet", "n_fleet", type=int, help="Simulated actors to start (overrides config).")
@click.option(
    "--fleet-procs",
    type=int,
    help="Run the simulated boards in this many processes (fleet.procs; 0: one per board).",
)
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
    ctx: click.Context,
    config_path: str | None,
    resume_dir: str | None,
    out: str | None,
    broker: str | None,
    embedded_broker: str,
    n_fleet: int | None,
    fleet_procs: int | None,
    board: str | None,
    seed: int | None,
    run_name: str | None,
    sets: tuple[str, ...],
    signing_key: str | None,
    as_json: bool,
    auth_opts: AuthOptions,
) -> None:
    """Train: a learner, an embedded broker unless --broker, and a simulated fleet.

    --resume RUN_DIR continues an earlier run (killed, interrupted) from its checkpoint."""
    started = time.monotonic()
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")  # before TensorFlow loads: no CUDA noise
    flags = _ConfigFlags(
        config_path, out, n_fleet, fleet_procs, board, seed, run_name, sets, signing_key
    )
    if resume_dir is not None:
        cfg, run_dir = resumed(resume_dir, flags.given())
    elif config_path is None:
        raise click.ClickException("learn needs --config FILE (or --resume RUN_DIR)")
    else:
        cfg, run_dir = _new_run(config_path, flags)
    auth = _learner_auth(cfg, broker, auth_opts)
    run_dir.mkdir(parents=True, exist_ok=True)  # checked all: nothing was written before
    stop = _claim_terminal_and_log(ctx.obj.verbose, run_dir)
    # (imports TensorFlow: after the claim)
    from edge_rl.learner.run import LearnOptions, run_learner

    options = LearnOptions(
        broker=broker,
        embedded_broker=embedded_broker,
        auth=auth,
        resume=resume_dir is not None,
        stop=stop,
    )
    try:
        summary = run_learner(cfg, run_dir, options)
    except KeyboardInterrupt:  # before the loop runs, or a second signal: no summary.json
        click.echo(f"\ninterrupted: no summary; logs and metrics so far in {run_dir}", err=True)
        sys.exit(130)
    except BrokerError as e:  # no broker to be had: a clear error, not a traceback
        raise click.ClickException(str(e)) from None
    except ValueError as e:  # a bad signing key; CheckpointError: another edge-rl or config
        raise click.ClickException(str(e)) from None
    _end(summary, run_dir, stop, as_json, started)


def _new_run(config_path: str, flags: _ConfigFlags) -> tuple[RunConfig, Path]:
    """The config with the command line's overrides, and a run directory of its own."""
    from edge_rl.config import load_run_config

    try:
        cfg = load_run_config(config_path, flags.overrides())
    except ValueError as e:
        raise click.ClickException(str(e)) from None
    run_dir = Path(
        flags.out or f"runs/{cfg.env_id}-{cfg.algo}-s{cfg.seed}-{time.strftime('%Y%m%d-%H%M%S')}"
    )
    check_new_run_dir(run_dir)  # nothing of an earlier run is overwritten
    return cfg, run_dir


def _learner_auth(cfg: RunConfig, broker: str | None, opts: AuthOptions) -> BrokerAuth:
    """The config's credentials with the command line's over them, checked against --broker."""
    auth = cfg.transport.auth.merged(auth_from_options(opts, "learner"))
    if broker is None and not auth.empty:
        raise click.ClickException("credentials are for --broker: the embedded one makes its own")
    return complete(auth, "learner", broker)


def _claim_terminal_and_log(verbose: bool, run_dir: Path) -> StopRequest:
    """Logging to run_dir/learner.log and the terminal; the signal handler that stops a run.
    Returns the installed ``StopRequest``."""
    from edge_rl.telemetry.progress import CurrentStderrHandler, claim_terminal

    # On a terminal the live view owns it: native lines (TensorFlow's start-up, LiteRT's)
    # and INFO records go to learner.log only; warnings and errors print above the view.
    terminal = CurrentStderrHandler()
    log_file = RunDir(run_dir).log
    terminal.setLevel(logging.WARNING if claim_terminal(log_file) else 0)
    setup_logging(verbose, log_file, terminal)
    # SIGTERM (kill, systemd, a CI timeout) ends a run as Ctrl-C does: the learner writes a
    # checkpoint, tells the actors to stop and writes summary.json; then the fleet's
    # processes and the embedded broker are shut down (their own sessions: a terminal's
    # Ctrl-C reaches the learner only, which decides the order), not orphaned.
    from edge_rl.learner.durable import StopRequest  # (imports TensorFlow: after the claim)

    stop = StopRequest()
    stop.install()
    return stop


def _end(
    summary: dict[str, Any], run_dir: Path, stop: StopRequest, as_json: bool, started: float
) -> None:
    """The run's last lines: where an interrupted run is and how to go on (exit status
    128 + the signal), the whole summary (``--json``), or the short result."""
    from edge_rl.telemetry.progress import result_lines

    if summary.get("interrupted"):
        click.echo(
            f"\ninterrupted at {summary['env_steps']} env steps: checkpoint and "
            f"{RunDir(run_dir).summary.name} in {run_dir}; continue with "
            f"`edge-rl learn --resume {run_dir}`",
            err=True,
        )
        sys.exit(128 + (stop.signum or signal.SIGINT))
    if as_json:
        click.echo(json.dumps(summary, indent=2))
    else:  # the full summary stays in summary.json
        click.echo("\n" + "\n".join(result_lines(summary, run_dir, time.monotonic() - started)))
