"""``edge-rl learn``: train (a learner, an embedded broker unless --broker, a simulated
fleet), or ``--resume RUN_DIR`` an earlier run.

The command parses its flags, checks the run directory, sets up logging and the terminal,
then calls ``edge_rl.learner.run.run_learner``; its errors become click's messages here.
TensorFlow is imported only after the terminal is claimed (its start-up lines go to
learner.log) and never when ``--help`` or a bad flag ends the command first.
"""

from __future__ import annotations

import dataclasses
import logging
import os
import shlex
import signal
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from edge_rl.agents.registry import ALGORITHMS  # the table only: no TensorFlow
from edge_rl.broker.embedded import BrokerError  # standard library only
from edge_rl.cli import preflight
from edge_rl.cli.common import (
    USER_ERRORS,
    AuthOptions,
    auth_from_options,
    auth_options,
    complete,
    one_line,
    runnable_prog,
    setup_logging,
)
from edge_rl.cli.run_dir import check_new_run_dir, resumed
from edge_rl.config import RunConfig
from edge_rl.learner.run_dir import RunDir
from edge_rl.telemetry.logs import strict_json
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
    demos: str | None = None

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
            "--demos": self.demos,
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
            "demos": self.demos,
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


def _config_epilog() -> str:
    """What ``learn --help`` ends with: the config's keys and sections (docs/config.md)."""
    fields = dataclasses.fields(RunConfig)
    sections = [f.name for f in fields if dataclasses.is_dataclass(f.default_factory)]
    keys = [f.name for f in fields if f.name not in sections]
    return (
        f"Config keys: {', '.join(keys)}. Sections: {', '.join(sections)} "
        f"(docs/config.md). Algorithms (algo: in the config): {', '.join(ALGORITHMS)}."
    )


@click.command(epilog=_config_epilog())
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
@click.option(
    "--set",
    "sets",
    multiple=True,
    metavar="KEY=VALUE",
    help="Override a config key, dotted for a section (dqn.batch_size=32); every key, its "
    "default and range: docs/config.md.",
)
@click.option(
    "--signing-key",
    type=click.Path(dir_okay=False),
    help="Policy signing key (PEM, from `edge-rl keygen`; its .pub is what boards trust). "
    "Default: RUN_DIR/signing.key, made for the run.",
)
@click.option(
    "--demos",
    metavar="PATH|ID",
    help="A Minari dataset (its directory, or an id under MINARI_DATASETS_PATH) to load into "
    "the demonstration buffer (overrides demos:).",
)
@click.option("--json", "as_json", is_flag=True, help="End by printing summary.json in full.")
@click.option(
    "--keep-quarantine",
    is_flag=True,
    help="With --resume: keep the boards quarantined before (default: every one is lifted).",
)
@click.option(
    "--release",
    multiple=True,
    metavar="ID",
    help="With --resume --keep-quarantine: lift the quarantine of this board (repeatable).",
)
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
    demos: str | None,
    as_json: bool,
    keep_quarantine: bool,
    release: tuple[str, ...],
    auth_opts: AuthOptions,
) -> None:
    """Train: a learner, an embedded broker unless --broker, and a simulated fleet.

    --resume RUN_DIR continues an earlier run (killed, interrupted) from its checkpoint.

    The config (--config FILE, e.g. examples/cartpole_dqn.yaml) is YAML: every key, its
    default and range are in docs/config.md (below, its keys and sections).

    TensorBoard: the run's scalars are in RUN_DIR/tb; open them with
    `tensorboard --logdir RUN_DIR/tb` (from edge-rl's venv: it has tensorboard)."""
    started = time.monotonic()
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")  # before TensorFlow loads: no CUDA noise
    flags = _ConfigFlags(
        config_path, out, n_fleet, fleet_procs, board, seed, run_name, sets, signing_key, demos
    )
    if (keep_quarantine or release) and resume_dir is None:
        raise click.UsageError("--keep-quarantine and --release go with --resume RUN_DIR")
    if release and not keep_quarantine:
        raise click.UsageError("--release ID needs --keep-quarantine (else every one is lifted)")
    if resume_dir is not None:
        cfg, run_dir = resumed(resume_dir, flags.given())
    elif config_path is None:
        raise click.ClickException("learn needs --config FILE (or --resume RUN_DIR)")
    else:
        cfg, run_dir = _new_run(config_path, flags)
    auth = _learner_auth(cfg, broker, auth_opts)
    # Before anything is written or started, and before TensorFlow: the env, the paths, the
    # key and the broker (cli/preflight.py). A run directory exists only once they pass.
    preflight.check_env(cfg.env_id)
    if resume_dir is None:
        preflight.check_out(run_dir)
    preflight.check_signing_key(cfg.signing_key)
    if broker is not None:
        preflight.check_broker(broker, auth)
    preflight.make_run_dir(run_dir)
    stop = _claim_terminal_and_log(ctx.obj.verbose, run_dir)
    # (imports TensorFlow: after the claim)
    from edge_rl.learner.run import LearnOptions, run_learner

    options = LearnOptions(
        broker=broker,
        embedded_broker=embedded_broker,
        auth=auth,
        resume=resume_dir is not None,
        stop=stop,
        keep_quarantine=keep_quarantine,
        release=tuple(release),
    )
    begun = time.time()
    try:
        summary = run_learner(cfg, run_dir, options)
    except KeyboardInterrupt:  # before the loop runs, or a second signal
        written = RunDir(run_dir).summary
        if written.exists() and written.stat().st_mtime >= begun:  # in the shutdown after it
            click.echo(f"\ninterrupted while shutting down: {written} was written", err=True)
        else:
            click.echo(f"\ninterrupted: no summary; logs and metrics so far in {run_dir}", err=True)
        sys.exit(130)
    except BrokerError as e:  # no broker to be had: a clear error, not a traceback
        raise click.ClickException(str(e)) from None
    except USER_ERRORS as e:  # a bad key or checkpoint (ValueError), the broker gone since
        raise click.ClickException(one_line(e)) from None
    _end(summary, run_dir, stop, as_json, started)


def _new_run(config_path: str, flags: _ConfigFlags) -> tuple[RunConfig, Path]:
    """The config with the command line's overrides, and a run directory of its own."""
    from edge_rl.config import load_run_config

    try:
        cfg = load_run_config(config_path, flags.overrides())
    except ValueError as e:
        raise click.ClickException(str(e)) from None
    if cfg.demos:  # refused before anything is made: another env's spaces, no such dataset
        from edge_rl.learner.datasets import check_dataset

        try:
            check_dataset(cfg.demos, cfg.env_id)
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

    if as_json:  # the whole summary, an interrupted run's too (stdout; its exit status says)
        click.echo(strict_json(summary, indent=2))
    if summary.get("interrupted"):
        click.echo(
            f"\ninterrupted at {summary['env_steps']} env steps: checkpoint and "
            f"{RunDir(run_dir).summary.name} in {run_dir}; continue with "
            f"`{runnable_prog()} learn --resume {shlex.quote(str(run_dir))}`",
            err=True,
        )
        sys.exit(128 + (stop.signum or signal.SIGINT))
    if not as_json:  # the full summary stays in summary.json
        lines = result_lines(summary, run_dir, time.monotonic() - started, runnable_prog())
        click.echo("\n" + "\n".join(lines))
