"""``edge-rl deploy RUN_DIR|POLICY_BUNDLE``: a staged rollout of a policy to a run's serving
fleet: canaries first, their health from their own greedy episodes, then the rest at a
bounded rate, or every canary back to its previous policy (docs/fleet.md, Rollout).

It writes policies and targets, which the broker's ACL grants the learner alone: it logs in
with the learner's credentials, and it refuses a run that is not ``serving`` (its learner
done). The policy is re-signed with ``--signing-key``, the key the boards trust.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import click

from edge_rl.cli.common import (
    AuthOptions,
    auth_from_options,
    auth_options,
    complete,
    setup_logging,
)
from edge_rl.wire.topics import DEFAULT_ROOT, DEFAULT_RUN

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
@click.argument("source", type=click.Path(exists=True, path_type=Path))
@click.option("--broker", required=True, help="mqtt[s]://HOST:PORT of the fleet's broker.")
@click.option("--run", default=DEFAULT_RUN, show_default=True, help="The run the fleet serves.")
@click.option("--root", default=DEFAULT_ROOT, show_default=True, help="The topic root.")
@click.option(
    "--signing-key",
    required=True,
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    help="The private key whose public key the boards trust (learn --signing-key).",
)
@click.option(
    "--bundle-key",
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    help="Public key that signed SOURCE [default: RUN_DIR/signing.pub if there, else "
    "--signing-key's].",
)
@_plan_options
@click.option("--json", "as_json", is_flag=True, help="Print the outcome as JSON.")
@auth_options("The learner's directory of `edge-rl credentials` (DIR/learner).")
@click.pass_context
def deploy(
    ctx: click.Context,
    source: Path,
    broker: str,
    run: str,
    root: str,
    signing_key: Path,
    bundle_key: Path | None,
    as_json: bool,
    auth_opts: AuthOptions,
    **plan: float,
) -> None:
    """Roll a run's deployed policy (RUN_DIR/policy.bundle) or a bundle file out to the
    boards serving --run: canaries, health check, then waves, or a rollback. Exit status 0
    when every serving board serves it, 2 when it was rolled back, 3 when incomplete."""
    from edge_rl.deploy.rollout import RolloutPlan
    from edge_rl.deploy.rollout_run import NotServing, run_rollout, source_bundle
    from edge_rl.transport.mqtt import mqtt_connect
    from edge_rl.wire.envelope import CodecError
    from edge_rl.wire.signing import Signer, Verifier
    from edge_rl.wire.topics import Topics

    setup_logging(ctx.obj.verbose)
    auth = complete(auth_from_options(auth_opts, "learner"), "learner", broker)
    try:
        signer = Signer.load_or_create(signing_key)
        key = bundle_key or _default_bundle_key(source)
        verifier = Verifier.from_file(key) if key else signer.verifier()
        payload = source_bundle(source).read_bytes()
        result = run_rollout(
            mqtt_connect(broker, auth),
            Topics(root, run),
            payload,
            verifier,
            signer,
            RolloutPlan(**plan),
        )
    except (ConnectionError, NotServing, CodecError, ValueError, OSError) as e:
        raise click.ClickException(str(e)) from None
    out = result.outcome
    if as_json:
        record = {"version": result.target.version, "digest": result.target.digest}
        record |= {"run_id": result.run_id, "seconds": round(result.seconds, 2)}
        click.echo(json.dumps(record | dataclasses.asdict(out), indent=2))
    else:
        click.echo(
            f"v{result.target.version} {result.target.digest[:12]}: {out.result}: {out.reason}"
        )
        click.echo(
            f"  canaries {', '.join(out.canaries)}; boards sent it: {len(out.assigned)}, "
            f"serving it: {len(out.serving_new)}, rolled back: {len(out.rolled_back)}, "
            f"unconfirmed: {len(out.unconfirmed)}, skipped: {len(out.skipped)}"
        )
        click.echo(
            f"  return: previous {out.baseline_return}, canaries {out.canary_return}; "
            f"{result.seconds:.1f} s"
        )
    ctx.exit({"deployed": 0, "aborted": 2, "incomplete": 3}[out.result])


def _default_bundle_key(source: Path) -> Path | None:
    """A run directory's own public key, if it has one."""
    from edge_rl.learner.run_dir import RunDir

    pub = RunDir(source).signing_public_key if source.is_dir() else None
    return pub if pub is not None and pub.is_file() else None
