"""``edge-rl keygen KEY_FILE``: a policy signing key pair."""

from __future__ import annotations

from pathlib import Path

import click


@click.command()
@click.argument("key_file", type=click.Path(dir_okay=False))
def keygen(key_file: str) -> None:
    """Make a policy signing key pair: KEY_FILE (private, mode 0600) and the public key
    beside it, KEY_FILE with its suffix replaced by .pub (learner.key -> learner.pub).

    The learner signs with it (`edge-rl learn --signing-key KEY_FILE`); every board gets the
    .pub (`edge-rl actor --policy-key`, or `policy_public_key` in its board file).
    An existing key is never overwritten.
    """
    from edge_rl.wire.signing import Signer

    path = Path(key_file)
    public = path.with_suffix(".pub")
    for p in (path, public):
        if p.exists():
            raise click.ClickException(f"{p} exists: a signing key is never overwritten")
    signer = Signer.generate()
    signer.write_private(path)
    signer.write_public(public)
    click.echo(f"private key {path} (mode 0600), public key {public}, key id {signer.key_id.hex()}")
