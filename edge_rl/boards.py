"""Board files: what one kind of edge board runs with, and what one deployed board is.

The shipped ones are package data, ``edge_rl/firmware_configs/<board>.yaml`` (the
repository's top-level ``firmware_configs/`` points there), so ``--board rpi4`` resolves
from a wheel install too. A board file made by ``edge-rl flash`` adds an ``actor:``
section (this board's id, run, env, broker): ``edge-rl actor --config FILE`` needs nothing else.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from pathlib import Path

import dacite
import yaml

from edge_rl.transport.auth import BrokerAuth
from edge_rl.wire.topics import DEFAULT_ROOT, check_name


@dataclass(frozen=True)
class Emulation:
    """How a *simulated* board on the host is slowed to behave like the real one.

    Applied only to an actor told it is simulated (``ActorOptions.emulate``, set for the
    fleet's members); a real board runs at its own speed whatever this says. The actor
    sleeps ``compute_slowdown - 1`` times the time it spent in ``invoke`` and ``env.step``,
    so a host that is k× faster than the board runs k× slower in emulation. See
    docs/fleet.md for how the factors were chosen.
    """

    compute_slowdown: float = 1.0

    def __post_init__(self) -> None:
        if not 1.0 <= self.compute_slowdown <= 100.0:
            raise ValueError(f"compute_slowdown must be in [1, 100], got {self.compute_slowdown}")


@dataclass(frozen=True)
class Power:
    """Whole-board electrical power, for the fleet's energy estimate (edge_rl.telemetry.energy).

    ``idle_w``: booted, nothing running. ``busy_w``: all cores under a CPU stress test, so an
    actor's busy seconds are charged at an upper bound (one actor uses one core; see
    docs/fleet.md). ``source`` says where the figures come from: a URL, or "measured: ...".
    """

    idle_w: float
    busy_w: float
    source: str

    def __post_init__(self) -> None:
        if not 0.0 < self.idle_w <= self.busy_w <= 1000.0:
            raise ValueError(
                f"power needs 0 < idle_w <= busy_w <= 1000 W, got {self.idle_w}, {self.busy_w}"
            )
        if not self.source.strip():
            raise ValueError("power.source must say where the figures come from")


@dataclass(frozen=True)
class ActorSection:
    """A deployed board's own settings (written by ``edge-rl flash``): the defaults of
    ``edge-rl actor --id/--run/--env/--broker/--root``, which override them."""

    id: str
    run: str
    env: str
    broker: str
    root: str = DEFAULT_ROOT

    def __post_init__(self) -> None:
        for name in ("env", "broker"):
            if not getattr(self, name).strip():
                raise ValueError(f"actor.{name} must not be empty")
        check_name("actor.id", self.id)  # topic levels: MQTT's and NATS' rules (wire/topics)
        check_name("actor.run", self.run)
        for level in self.root.split("/"):
            check_name("actor.root level", level)


@dataclass(frozen=True)
class BoardConfig:
    board: str
    runtime: str = "ai_edge_litert"  # or "tflite_runtime" (falls back automatically)
    num_threads: int = 1  # LiteRT interpreter threads
    batch_size: int = 256  # transitions per published batch (capped by max_batch_bytes)...
    flush_interval_s: float = 0.5  # ...or fewer, when this much time has passed
    spool_limit_bytes: int = 4_000_000  # outbound batches kept while disconnected
    # Largest encoded batch published; keep it under the learner's transport.max_payload_bytes
    # and the broker's limit (an oversize QoS 1 publish gets the client disconnected).
    max_batch_bytes: int = 1_000_000
    status_interval_s: float = 1.0
    # While the learner is away (control "paused"): "idle" (hold the policy, do not act) or
    # "serve" (act greedily with it, sending nothing). A paused run's policy is not one
    # its learner evaluated and deployed, hence idle unless the board's owner says so.
    on_pause: str = "idle"
    # Time between statuses while serving (control "serving", or "paused" with on_pause
    # serve): a served fleet reports its policy version and return, and costs the broker little.
    serving_status_interval_s: float = 10.0
    max_policy_bytes: int = 8_000_000  # largest decompressed model accepted
    # Most memory a model's tensors may declare (weights and activations), checked before
    # the interpreter allocates any: a small file can declare gigabytes.
    max_tensor_bytes: int = 64_000_000
    # The learner's public key (PEM file on the board): every policy is verified with it.
    # `edge-rl actor --policy-key FILE` overrides it; an actor without one does not start.
    # A relative path is taken from the board file's directory.
    policy_public_key: str | None = None
    emulation: Emulation = field(default_factory=Emulation)
    power: Power | None = None  # no figures: the fleet's energy leaves this board out
    # How the board logs in to the broker (transport/auth.py): ca_file, cert_file, key_file,
    # username (default: the actor id), password_file or password_env. Relative paths are
    # taken from the board file's directory. `edge-rl actor` options override each field.
    auth: BrokerAuth = field(default_factory=BrokerAuth)
    actor: ActorSection | None = None  # a deployed board's id, run, env, broker

    def __post_init__(self) -> None:
        if self.runtime not in ("ai_edge_litert", "tflite_runtime"):
            raise ValueError(f"runtime must be ai_edge_litert or tflite_runtime: {self.runtime!r}")
        names = ("num_threads", "batch_size", "spool_limit_bytes", "max_batch_bytes")
        for name in (*names, "max_policy_bytes", "max_tensor_bytes"):
            if getattr(self, name) <= 0:
                raise ValueError(f"{name} must be positive")
        if not 0.01 <= self.flush_interval_s <= 60 or not 0.05 <= self.status_interval_s <= 600:
            raise ValueError("flush_interval_s in [0.01, 60], status_interval_s in [0.05, 600]")
        if not 1.0 <= self.serving_status_interval_s <= 3600:
            raise ValueError("serving_status_interval_s must be in [1, 3600]")
        if self.on_pause not in ("idle", "serve"):
            raise ValueError(f"on_pause must be idle or serve: {self.on_pause!r}")


BOARDS_DIR = Path(__file__).resolve().parent / "firmware_configs"

# What every board promises when told to stop (SIGTERM): at most STOP_FLUSH_S sending what
# it has batched and spooled, then at most STOP_STATUS_S for its ``stopped`` status
# (actor/node.py). Whoever stops boards waits longer than that before a kill (sim/fleet.py).
STOP_FLUSH_S = 10.0
STOP_STATUS_S = 5.0


def board_file(board: str) -> Path:
    """``rpi4`` -> the shipped ``edge_rl/firmware_configs/rpi4.yaml``; a path stays as it is."""
    p = Path(board)
    if p.suffix in (".yaml", ".yml"):
        return p
    return BOARDS_DIR / f"{board}.yaml"


def known_boards() -> list[str]:
    return sorted(p.stem for p in BOARDS_DIR.glob("*.yaml"))


def load_board(path: str | Path) -> BoardConfig:
    """Load a board file; unknown keys are an error (a typo must not pass silently)."""
    path = Path(path)
    if not path.exists():
        raise FileNotFoundError(
            f"board file {path} not found; known boards: {known_boards()} (in {BOARDS_DIR})"
        )
    data = yaml.safe_load(path.read_text()) or {}
    try:
        board = dacite.from_dict(BoardConfig, data, config=dacite.Config(strict=True))
    except (dacite.DaciteError, ValueError) as e:
        raise ValueError(f"{path}: {e}") from None
    key = board.policy_public_key
    key = str(path.parent / key) if key is not None else None  # an absolute key stays as it is
    return replace(board, auth=board.auth.relative_to(path.parent), policy_public_key=key)
