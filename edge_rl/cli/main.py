"""``edge-rl``: the command group. Each command is a module of this package:

learn (and --resume) | stop | deploy | fleet-status | fleet | credentials | flash | retire |
keygen | eval | report | record
on the learner host; actor | doctor on a board; actors (many simulated boards in one
process, started by fleet --procs).

Heavy imports happen inside each command: ``edge-rl actor`` on a board must never import
TensorFlow (the learner's parts are imported by ``learn`` only).
"""

from __future__ import annotations

import os

import click

from edge_rl.cli.actor import actor
from edge_rl.cli.actors import actors
from edge_rl.cli.common import GroupOptions
from edge_rl.cli.credentials import credentials
from edge_rl.cli.deploy import deploy
from edge_rl.cli.doctor import doctor
from edge_rl.cli.eval import eval_
from edge_rl.cli.flash import flash
from edge_rl.cli.fleet import fleet
from edge_rl.cli.fleet_status import fleet_status
from edge_rl.cli.keygen import keygen
from edge_rl.cli.learn import learn
from edge_rl.cli.profile import PROFILE_COMMANDS, default_map, resolve
from edge_rl.cli.record import record
from edge_rl.cli.report import report
from edge_rl.cli.retire import retire
from edge_rl.cli.stop import stop


@click.group()
@click.option("-v", "--verbose", is_flag=True, help="Debug logging.")
@click.option(
    "--profile",
    type=click.Path(dir_okay=False),
    help="The fleet's profile (YAML: broker, run, root, credentials, ...) for fleet, "
    "fleet-status, deploy, stop, actor and doctor; also EDGE_RL_PROFILE, else "
    "~/.config/edge-rl/profile.yaml if it exists. Flags, then EDGE_RL_<KEY> variables, "
    "win over it (docs/config.md, Profile).",
)
@click.version_option(package_name="edge-rl", prog_name="edge-rl", message="%(prog)s %(version)s")
@click.pass_context
def main(ctx: click.Context, verbose: bool, profile: str | None) -> None:
    """edge-rl: a host learner, int8 LiteRT actors on edge boards, MQTT in between."""
    # Only the fleet's commands read it: a bad profile never stops learn or keygen.
    values = resolve(profile, os.environ) if ctx.invoked_subcommand in PROFILE_COMMANDS else {}
    ctx.default_map = default_map(values, main.commands)
    ctx.obj = GroupOptions(verbose, values)


main.add_command(learn)
main.add_command(stop)
main.add_command(actor)
main.add_command(doctor)
main.add_command(fleet)
main.add_command(actors)
main.add_command(flash)
main.add_command(retire)
main.add_command(credentials)
main.add_command(eval_)
main.add_command(report)
main.add_command(keygen)
main.add_command(deploy)
main.add_command(fleet_status)
main.add_command(record)


if __name__ == "__main__":
    main()
