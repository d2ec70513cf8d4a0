"""``edge-rl deploy RUN_DIR|POLICY_BUNDLE``: a staged rollout of a policy to a run's serving
fleet: canaries first, their health from their own greedy episodes, then the rest at a
bounded rate, or every canary back to its previous policy (docs/fleet.md, Rollout).

It writes policies and targets, which the broker's ACL grants the learner alone: it logs in
with the learner's credentials, and it refuses a run that is not ``serving`` (its learner
done). The policy is re-signed with ``--signing-key``, the key the boards trust. The
canaries are drawn at random; the seed is printed, and ``--seed`` draws the same again.
Ctrl-C or SIGTERM clears the targets sent so far; ``--clear`` clears every board's target
(what an interrupted rollout left) and rolls nothing out.
"""

from __future__ import annotations

import dataclasses
import hashlib
import signal
import time
from pathlib import Path
from typing import TYPE_CHECKING

import click

from edge_rl.cli.common import (
    AuthOptions,
    auth_from_options,
    auth_options,
    complete,
    one_line,
    quiet_transport,
    setup_logging,
)
from edge_rl.deploy.history import DeployRecord, append, history_file, new_id
from edge_rl.telemetry.logs import strict_json
from edge_rl.wire.topics import DEFAULT_ROOT, DEFAULT_RUN

if TYPE_CHECKING:
    from edge_rl.deploy.rollout_run import RolloutRun

_PLAN = {  # option -> (RolloutPlan field, type, help)
    "--canary": ("canary", float, "Share of the serving boards that take the policy first."),
    "--window": ("window_s", float, "Seconds the canaries have to show their health."),
    "--min-episodes": ("min_episodes", int, "Greedy episodes each canary must end with it."),
    "--max-drop": (
        "max_drop",
        float,
        "Abort when the canaries' mean return is below the previous policy's by more than "
        "this share of its magnitude.",
    ),
    "--batch": ("batch", int, "Boards per wave after the canaries."),
    "--rate": ("rate", float, "Boards per second at most after the canaries."),
    "--confirm": ("confirm_s", float, "Seconds for a board to report the policy it was sent."),
    "--eval-episodes": (
        "eval_episodes",
        int,
        "Greedy episodes the deploy tool runs itself in LiteRT, of the new policy and of the "
        "run's retained one: the health check's figures (0: the boards' median report).",
    ),
}


def _plan_options(command):
    from edge_rl.deploy.rollout import RolloutPlan

    defaults = RolloutPlan()
    for flag, (name, kind, text) in reversed(_PLAN.items()):
        option = click.option(
            flag, name, type=kind, default=getattr(defaults, name), show_default=True, help=text
        )
        command = option(command)
    return command


@click.command()
@click.argument("source", required=False, type=click.Path(exists=True, path_type=Path))
@click.option("--broker", required=True, help="mqtt[s]://HOST:PORT of the fleet's broker.")
@click.option("--run", default=DEFAULT_RUN, show_default=True, help="The run the fleet serves.")
@click.option("--root", default=DEFAULT_ROOT, show_default=True, help="The topic root.")
@click.option(
    "--signing-key",
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    help="The private key whose public key the boards trust (learn --signing-key); "
    "required with SOURCE.",
)
@click.option(
    "--bundle-key",
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    help="Public key that signed SOURCE [default: RUN_DIR/signing.pub if there, else "
    "--signing-key's].",
)
@_plan_options
@click.option(
    "--seed", type=int, help="Seed of the canaries' draw [default: a random one, printed]."
)
@click.option(
    "--clear",
    is_flag=True,
    help="Only clear every board's target (left by an interrupted rollout); no SOURCE.",
)
@click.option("--json", "as_json", is_flag=True, help="Print the outcome as JSON.")
@auth_options("The learner's directory of `edge-rl credentials` (DIR/learner).")
@click.pass_context
def deploy(
    ctx: click.Context,
    source: Path | None,
    broker: str,
    run: str,
    root: str,
    signing_key: Path | None,
    bundle_key: Path | None,
    seed: int | None,
    clear: bool,
    as_json: bool,
    auth_opts: AuthOptions,
    **plan: float,
) -> None:
    """Roll a run's deployed policy (RUN_DIR/policy.bundle) or a bundle file out to the
    boards serving --run: canaries, health check, then waves, or a rollback. Exit status 0
    when every serving board serves it, 2 when it was rolled back, 3 when incomplete,
    130 (143) when interrupted by Ctrl-C (SIGTERM): the targets sent are cleared; 1 on an
    error, before anything is sent (the broker, the login, a run not serving, a policy of
    another env)."""
    from edge_rl.deploy.rollout import RolloutPlan
    from edge_rl.deploy.rollout_run import NotServing, clear_targets, run_rollout, source_bundle
    from edge_rl.transport.mqtt import mqtt_connect
    from edge_rl.wire.envelope import CodecError
    from edge_rl.wire.signing import Signer, Verifier
    from edge_rl.wire.topics import Topics

    setup_logging(ctx.obj.verbose)
    quiet_transport(ctx.obj.verbose)
    auth = complete(auth_from_options(auth_opts, "learner"), "learner", broker)
    if clear:
        if source is not None:
            raise click.UsageError("--clear rolls nothing out: give no SOURCE")
        try:
            boards = clear_targets(mqtt_connect(broker, auth), Topics(root, run))
        except (ConnectionError, ValueError) as e:
            raise click.ClickException(str(e)) from None
        click.echo(f"targets cleared: {len(boards)} boards ({', '.join(boards)})")
        return
    if source is None or signing_key is None:
        raise click.UsageError("give SOURCE and --signing-key (or --clear)")
    previous = {n: signal.signal(n, _interrupt) for n in (signal.SIGINT, signal.SIGTERM)}
    started = History(source, run)
    try:
        signer = Signer.load_or_create(signing_key)
        key = bundle_key or _default_bundle_key(source)
        verifier = Verifier.from_file(key) if key else signer.verifier()
        bundle_path = source_bundle(source)
        payload = bundle_path.read_bytes()
        started.source_bytes(bundle_path, payload)
        result = run_rollout(
            mqtt_connect(broker, auth),
            Topics(root, run),
            payload,
            verifier,
            signer,
            RolloutPlan(**plan),
            seed=seed,
        )
    except (ConnectionError, NotServing, CodecError, ValueError, OSError) as e:
        raise click.ClickException(one_line(e)) from None
    except _Interrupted as e:
        started.interrupted(f"interrupted by signal {e.signum}: the targets sent are cleared")
        click.echo("interrupted: the targets sent are cleared", err=True)
        ctx.exit(128 + e.signum)
    finally:
        for n, handler in previous.items():
            signal.signal(n, handler)
    out = result.outcome
    record = started.ended(result)
    if as_json:
        shown = {"version": result.target.version, "digest": result.target.digest}
        shown |= {"run_id": result.run_id, "seconds": round(result.seconds, 2)}
        shown |= {"seed": result.seed, "id": record.id, "history": str(started.path)}
        click.echo(strict_json(shown | dataclasses.asdict(out), indent=2))
    else:
        click.echo(
            f"v{result.target.version} {result.target.digest[:12]}: {out.result}: {out.reason}"
        )
        click.echo(f"  deployment {record.id}, recorded in {started.path}")
        click.echo(
            f"  canaries {', '.join(out.canaries)} (--seed {result.seed}); "
            f"boards sent it: {len(out.assigned)}, "
            f"serving it: {len(out.serving_new)}, rolled back: {len(out.rolled_back)}, "
            f"unconfirmed: {len(out.unconfirmed)}, skipped: {len(out.skipped)}"
        )
        click.echo(
            f"  return: previous {out.baseline_return}, canaries {out.canary_return} "
            f"(measured: previous {out.measured_baseline}, new {out.measured_candidate}); "
            f"{result.seconds:.1f} s"
        )
        for board, why in out.flagged.items():
            click.echo(f"  flagged {board}: {why}")
    ctx.exit({"deployed": 0, "aborted": 2, "incomplete": 3}[out.result])


class History:
    """This deploy's line in the run's deployment history (deploy/history.py): what it
    rolled out and how it ended, interrupted too."""

    def __init__(self, source: Path, run: str) -> None:
        self.path = history_file(source)
        self.id = new_id()
        self.run = run
        self.source = str(source)
        self.sha256 = ""

    def source_bytes(self, path: Path, payload: bytes) -> None:
        self.source = str(path)
        self.sha256 = hashlib.sha256(payload).hexdigest()

    def ended(self, result: RolloutRun) -> DeployRecord:
        out = result.outcome
        return self._write(
            DeployRecord(
                self.id,
                time.time(),
                self.run,
                result.run_id,
                self.source,
                self.sha256,
                result.target.version,
                result.target.digest,
                out.result,
                out.reason,
                out.canaries,
                len(out.serving_new),
                len(out.rolled_back),
                len(out.unconfirmed),
                result.seed,
                round(result.seconds, 2),
            )
        )

    def interrupted(self, reason: str) -> None:
        args = (self.source, self.sha256, 0, "", "interrupted", reason)
        self._write(DeployRecord(self.id, time.time(), self.run, "", *args))

    def _write(self, record: DeployRecord) -> DeployRecord:
        try:
            append(self.path, record)
        except OSError as e:  # the rollout happened: say so, and that it went unrecorded
            click.echo(
                f"warning: deployment {record.id} not recorded in {self.path}: {e}", err=True
            )
        return record


class _Interrupted(KeyboardInterrupt):
    """Ctrl-C or SIGTERM during a rollout; ``signum``: which."""

    def __init__(self, signum: int) -> None:
        super().__init__(signum)
        self.signum = signum


def _interrupt(signum: int, _frame: object) -> None:
    raise _Interrupted(signum)


def _default_bundle_key(source: Path) -> Path | None:
    """A run directory's own public key, if it has one."""
    from edge_rl.learner.run_dir import RunDir

    pub = RunDir(source).signing_public_key if source.is_dir() else None
    return pub if pub is not None and pub.is_file() else None
