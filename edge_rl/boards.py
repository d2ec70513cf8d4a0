"""Board files: what one kind of edge board runs with, and what one deployed board is.

The shipped ones are package data, ``edge_rl/firmware_configs/<board>.yaml`` (the
repository's top-level ``firmware_configs/`` points there), so ``--board rpi4`` resolves
from a wheel install too. A board file made by ``edge-rl flash`` adds an ``actor:``
section (this board's id, run, env, broker): ``edge-rl actor --config FILE`` needs nothing else.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

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


# A bound, a rate or an action in a board file's ``safety:``: one number for every action
# dimension, or one per dimension.
Numbers = float | list[float]
STALE_ACTIONS = ("hold", "zero", "stop")  # on_stale's named safe actions (or an action)
NONFINITE_ACTIONS = ("hold", "zero")  # what a NaN/inf action becomes (or an action)


def _numbers(v: Numbers | None) -> tuple[float, ...] | None:
    if v is None:
        return None
    values = (v,) if isinstance(v, (int, float)) else tuple(v)
    if not values or any(isinstance(x, bool) or not math.isfinite(x) for x in values):
        raise ValueError(f"safety: {v!r} must be finite numbers")
    return tuple(float(x) for x in values)


@dataclass(frozen=True)
class Safety:
    """The board's safety shield and watchdogs (``safety:`` in the board file;
    actor/safety.py, docs/robots.md).

    Every action the board gives its env passes the shield last: an action with a NaN or
    inf (or a discrete index out of range) becomes ``nonfinite``'s action, then it is
    clipped to ``[action_low, action_high]`` (default: the env's action space), then each
    dimension moves at most ``max_delta`` from the action applied before (default: no
    limit). Each number is one for every dimension or a list of one per dimension.

    ``stale_after_s`` turns the watchdogs on: no verified policy, the learner silent
    (no control, credit or policy) or the broker lost for that long, an inference over
    ``inference_deadline_s``, or a local emergency stop, and the board applies
    ``on_stale``: ``hold`` (the last action applied), ``zero``, ``stop`` (the env is not
    stepped) or an action, through the same shield (actor/watchdog.py). The emergency
    stop: while ``estop_file`` exists (relative to the board file's directory; SIGUSR2
    creates it), or while ``estop_input`` returns true.
    """

    action_low: Numbers | None = None
    action_high: Numbers | None = None
    max_delta: Numbers | None = None
    nonfinite: str | Numbers = "hold"
    stale_after_s: float | None = None  # None: no watchdog (a simulated board's default)
    on_stale: str | Numbers = "hold"
    inference_deadline_s: float | None = None  # None: no deadline
    estop_file: str | None = None
    estop_input: str | None = None  # "package.module:callable": true while the stop is pressed

    def __post_init__(self) -> None:
        for name in ("action_low", "action_high", "max_delta"):
            object.__setattr__(self, name, _numbers(getattr(self, name)))
        if self.max_delta is not None and min(self.max_delta) <= 0:
            raise ValueError("safety.max_delta must be positive")
        for name, named in (("nonfinite", NONFINITE_ACTIONS), ("on_stale", STALE_ACTIONS)):
            v = getattr(self, name)
            if isinstance(v, str):
                if v not in named:
                    raise ValueError(f"safety.{name} must be one of {named} or an action: {v!r}")
            else:
                object.__setattr__(self, name, _numbers(v))
        for name in ("stale_after_s", "inference_deadline_s"):
            v = getattr(self, name)
            if v is not None and not 0.001 <= v <= 3600:
                raise ValueError(f"safety.{name} must be in [0.001, 3600] s")

    @property
    def watchdogs(self) -> bool:
        """Whether the board runs its watchdogs: a stale bound, a deadline or an e-stop."""
        given = (self.stale_after_s, self.inference_deadline_s, self.estop_file, self.estop_input)
        return any(v is not None for v in given)


@dataclass(frozen=True)
class Episode:
    """When an episode ends besides the env's own say, and what runs between two
    (``episode:`` in the board file; actor/episodes.py, docs/robots.md).

    ``time_limit_s``: an episode that has run this long on the board's monotonic clock
    ends as *truncated* (gymnasium's ``TimeLimit``: the learner bootstraps from the last
    observation). ``success_key`` / ``failure_key``: the env's ``info`` keys whose true
    value ends the episode as *terminated*, counted as a success or a failure.
    ``reset_hook``: ``package.module:callable`` called as ``hook(env, cancel)`` before each
    episode's ``env.reset()`` (a person may be putting the robot back); the two must end
    within ``reset_timeout_s``, or the board goes to its safe state (docs/robots.md).
    """

    time_limit_s: float | None = None  # None: the env's own limits only
    success_key: str | None = None
    failure_key: str | None = None
    reset_hook: str | None = None  # "package.module:callable"; None: env.reset() alone
    reset_timeout_s: float = 60.0

    def __post_init__(self) -> None:
        if self.time_limit_s is not None and not 0.01 <= self.time_limit_s <= 86_400:
            raise ValueError(
                f"episode.time_limit_s must be in [0.01, 86400] s: {self.time_limit_s}"
            )
        if not 0.01 <= self.reset_timeout_s <= 3600:
            raise ValueError(
                f"episode.reset_timeout_s must be in [0.01, 3600] s: {self.reset_timeout_s}"
            )
        if self.reset_hook is not None and ":" not in self.reset_hook:
            raise ValueError(
                f"episode.reset_hook must be package.module:callable: {self.reset_hook!r}"
            )
        for name in ("success_key", "failure_key"):
            v = getattr(self, name)
            if v is not None and not v.strip():
                raise ValueError(f"episode.{name} must not be empty")
        if self.success_key is not None and self.success_key == self.failure_key:
            raise ValueError("episode.success_key and failure_key must differ")


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
    # The control loop's rate: one env step per period, at its deadline (None: as fast as
    # the env steps). The watchdogs act within one period (0.05 s without a rate).
    control_hz: float | None = None
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
    # An intervention source (actor/teleop.py): a `module:callable` made once with the env's
    # spec and `teleop_args`, then asked each step for an action to take instead of the
    # policy's (a person at a gamepad, a scripted teacher). None: the policy always acts.
    teleop: str | None = None
    teleop_args: dict[str, Any] = field(default_factory=dict)
    safety: Safety = field(default_factory=Safety)  # the shield and watchdogs (docs/robots.md)
    # When an episode ends besides the env's own say (a time limit, success, failure),
    # and the reset hook that runs before each one (docs/robots.md).
    episode: Episode = field(default_factory=Episode)

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
        if self.control_hz is not None and not 0.1 <= self.control_hz <= 10_000:
            raise ValueError(f"control_hz must be in [0.1, 10000]: {self.control_hz}")
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
    safety = board.safety
    if safety.estop_file is not None:  # an absolute path stays as it is
        safety = replace(safety, estop_file=str(path.parent / safety.estop_file))
    return replace(
        board,
        auth=board.auth.relative_to(path.parent),
        policy_public_key=key,
        safety=safety,
    )
