"""A run directory: every file name in it, in one place.

    run = RunDir(Path("runs/cartpole"))
    run.summary, run.publishes, run.checkpoint, run.signing_key_for(cfg.signing_key) ...

What a learner run leaves (README.md's run-directory table says what each holds):

    config.yaml       the run's config, as loaded        (edge-rl learn)
    learner.log       the learner's log
    metrics.csv, tb/  one row per second; TensorBoard scalars
    publishes.jsonl   one line per policy published
    policy.tflite     the last published model, and its manifest.json
    policy.bundle     that policy as published: signed, what any board verifies offline
    summary.json      the run's summary; an interrupted one resumed: summary.N.json
    breakdown.csv     the runtime breakdown, long format
    checkpoint/       the last checkpoint (checkpoint.old/, checkpoint.tmp/ while written)
    fleet/            the simulated fleet's logs
    deployments.jsonl one line per edge-rl deploy of its bundle (deploy/history.py)
    grants.json       the credit granted to each actor, as ceilings (bounds data on --resume)
    signing.key/.pub  the run's own policy signing key, unless the config names one
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class RunDir:
    path: Path

    def __post_init__(self) -> None:
        object.__setattr__(self, "path", Path(self.path))

    def mkdir(self) -> None:
        self.path.mkdir(parents=True, exist_ok=True)

    @property
    def config(self) -> Path:
        return self.path / "config.yaml"

    @property
    def log(self) -> Path:
        return self.path / "learner.log"

    @property
    def metrics(self) -> Path:
        return self.path / "metrics.csv"

    @property
    def tensorboard(self) -> Path:
        return self.path / "tb"

    @property
    def publishes(self) -> Path:
        return self.path / "publishes.jsonl"

    @property
    def policy(self) -> Path:
        return self.path / "policy.tflite"

    @property
    def manifest(self) -> Path:
        return self.path / "manifest.json"

    @property
    def bundle(self) -> Path:
        """The last published policy bundle as sent (``ERLP``, signed): at the end of a run,
        the deployed policy, which a board verifies with the run's public key."""
        return self.path / "policy.bundle"

    @property
    def summary(self) -> Path:
        return self.path / "summary.json"

    def earlier_summary(self, n: int) -> Path:
        """Where the ``n``-th interrupted start's summary goes when the run is resumed."""
        return self.path / f"summary.{n}.json"

    @property
    def breakdown(self) -> Path:
        return self.path / "breakdown.csv"

    @property
    def checkpoint(self) -> Path:
        return self.path / "checkpoint"

    @property
    def checkpoint_old(self) -> Path:
        """The previous checkpoint, while the next one is renamed into place."""
        return self.path / "checkpoint.old"

    @property
    def checkpoint_tmp(self) -> Path:
        """A checkpoint being written."""
        return self.path / "checkpoint.tmp"

    @property
    def grants(self) -> Path:
        """The credit each actor was granted, as ceilings: what bounds its data after a
        ``--resume`` too (learner/fleet/credit.py)."""
        return self.path / "grants.json"

    @property
    def deployments(self) -> Path:
        """One line per ``edge-rl deploy`` of this directory's bundle (deploy/history.py)."""
        return self.path / "deployments.jsonl"

    @property
    def fleet_logs(self) -> Path:
        return self.path / "fleet"

    @property
    def signing_key(self) -> Path:
        """The run's own signing key (PEM), made if missing."""
        return self.path / "signing.key"

    @property
    def signing_public_key(self) -> Path:
        """Its public half: what the simulated fleet verifies with."""
        return self.path / "signing.pub"

    def signing_key_for(self, configured: str | None) -> Path:
        """The key that signs the run's policies: the configured one (``RunConfig.signing_key``),
        else the run's own."""
        return Path(configured) if configured else self.signing_key

    def earlier_run(self) -> tuple[Path, ...]:
        """What an earlier run leaves: a fresh run into this directory would truncate or
        mix with it."""
        return (
            self.checkpoint,
            self.checkpoint_old,
            self.metrics,
            self.summary,
            self.publishes,
        )
