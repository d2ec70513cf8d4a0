"""Typed records that cross a boundary: the wire, a queue, a thread. Numpy only.

Nothing here knows how it is encoded; ``edge_rl.wire`` does that.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal, NamedTuple, Protocol

import numpy as np

from edge_rl.specs import EnvSpec

ActorState = Literal[
    "starting", "running", "paused", "serving", "stopped", "safe", "resetting", "offline"
]
# The learner's control (docs/protocol.md §5.4): train, hold (the learner is away), serve the
# run's result, or the run is over (an operator ended it).
RunState = Literal["running", "paused", "serving", "stopped"]

# Runtime breakdown of an actor (docs/protocol.md §5.1): seconds since ActorNode.run began.
# The control loop's buckets partition its wall time, so they add up to "wall"; the policy
# loader's run on the PolicySlot thread, alongside the loop, and are reported apart.
ACTOR_LOOP_BUCKETS = ("env_step", "inference", "exploration", "publish", "emulation", "idle")
ACTOR_LOADER_BUCKETS = ("policy_receive", "model_load")
BREAKDOWN_KEYS = frozenset((*ACTOR_LOOP_BUCKETS, *ACTOR_LOADER_BUCKETS, "wall"))

# The safety shield's counts (docs/protocol.md §5.6): what it changed an action for, and
# why a watchdog gave the env the safe action instead of the policy's.
SHIELD_REASONS = ("nonfinite", "clipped", "rate_limited")
SAFE_REASONS = (
    "no_policy",
    "learner_silent",
    "broker_lost",
    "inference_late",
    "estop",
    "reset_failed",  # the episode's reset hook raised (docs/robots.md): held until released
    "reset_timeout",  # ... or passed its reset_timeout_s
)
SAFETY_KEYS = frozenset((*SHIELD_REASONS, *SAFE_REASONS))


@dataclass(frozen=True)
class TransitionBatch:
    """``n`` consecutive transitions from one actor, all acted under one policy version.

    ``session`` is random per actor process start, so that a restarted actor whose
    ``seq`` begins again at 0 is not mistaken for a duplicate (the learner dedups on
    ``(actor_id, session, seq)``; MQTT QoS 1 is at-least-once).
    """

    actor_id: str
    session: int
    seq: int
    policy_version: int
    obs: np.ndarray  # [n, *obs_shape] float32
    action: np.ndarray  # [n] int64 (discrete) or [n, *action_shape] float32
    reward: np.ndarray  # [n] float32
    next_obs: np.ndarray  # [n, *obs_shape] float32
    terminated: np.ndarray  # [n] bool: the MDP ended, do not bootstrap
    truncated: np.ndarray  # [n] bool: cut by a time limit, bootstrap from next_obs
    run_id: str = ""  # the run start the actor stepped for (the control message's run_id)
    # [n] bool: the action was an intervention's (a person or a teacher took over, the
    # board's ``teleop:``), not the policy's; None: no row was.
    intervention: np.ndarray | None = None

    ARRAYS = ("obs", "action", "reward", "next_obs", "terminated", "truncated", "intervention")

    def __len__(self) -> int:
        return int(self.reward.shape[0])

    @property
    def interventions(self) -> np.ndarray:
        """[n] bool: which rows an intervention acted (all False when none did)."""
        if self.intervention is None:
            return np.zeros(len(self), bool)
        return np.asarray(self.intervention, bool)


@dataclass(frozen=True)
class QuantParams:
    """Affine quantization of one model tensor: ``real = scale * (q - zero_point)``.

    ``dtype`` is the tensor's storage type; for a float tensor scale is 0.
    """

    dtype: str
    scale: float = 0.0
    zero_point: int = 0


@dataclass(frozen=True)
class PolicyManifest:
    """Everything an actor needs to trust, load and run one published model."""

    policy_version: int  # monotonic across learner restarts
    algo: str  # "dqn" | "td3" | "sac"
    env_id: str
    env_spec: EnvSpec
    precision: str  # "int8" | "fp16" | "fp32"
    input_quant: QuantParams
    output_quant: QuantParams
    # The model takes the raw observation (float32) and normalises it itself, in float,
    # as (obs - obs_mean) / obs_std before its int8 layers (see edge_rl.export.tflite).
    # Recorded here for inspection; an actor does not apply them.
    obs_mean: tuple[float, ...]
    obs_std: tuple[float, ...]
    exploration: dict[str, float]  # dqn: {"epsilon": e}
    learner_step: int
    model_sha256: str  # of the uncompressed .tflite bytes
    model_size: int  # bytes of the uncompressed .tflite
    codec: str  # compression of the model bytes in the bundle: "zlib" | "none"
    # What the model outputs: "q_values" (DQN: act with argmax) or "action" (TD3, SAC).
    output_kind: str = "q_values"
    run: str = ""  # the run name (a topic level)
    run_id: str = ""  # the learner's run start it was published in (RunIdentity)
    created_unix: float = 0.0
    extra: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class PolicyBundle:
    """A manifest and the (compressed) model bytes it describes."""

    manifest: PolicyManifest
    payload: bytes  # model bytes compressed with manifest.codec


@dataclass(frozen=True)
class ActorStatus:
    """What an actor says about itself (retained; the last will says ``offline``)."""

    actor_id: str
    state: ActorState
    board: str = ""
    runtime: str = ""
    policy_version: int = 0
    env_steps: int = 0
    episodes: int = 0
    transitions_sent: int = 0
    batches_sent: int = 0
    batches_dropped: int = 0
    policies_rejected: int = 0
    control_rejected: int = 0  # control messages that failed to decode
    transitions_oversize: int = 0  # in batches over the board's max_batch_bytes: not sent
    transitions_dropped: int = 0  # in batches the full spool dropped (oldest first): not sent
    env_steps_per_s: float = 0.0
    recent_return: float | None = None
    time_unix: float = 0.0
    # Seconds per bucket (keys in BREAKDOWN_KEYS); empty from actors that predate it.
    breakdown: dict[str, float] = field(default_factory=dict)
    run_id: str = ""  # the run start the actor takes part in; "" before it saw a control
    session: int = 0  # the actor's session (TransitionBatch.session): one per process and run
    policy_digest: str = ""  # model_sha256 of the policy loaded; "" = none
    served_episodes: int = 0  # episodes ended greedily with the policy served (serving only)
    policies_failed: int = 0  # policies refused for what they are: not stale, not another run's
    interventions: int = 0  # env steps an intervention acted (teleop:), of env_steps (v5)
    # v5: the safety shield's counts by reason (SAFETY_KEYS; zero counts left out), and
    # while the state is ``safe`` the watchdog's reason (SAFE_REASONS), else "".
    safety: dict[str, int] = field(default_factory=dict)
    safe_reason: str = ""
    # v5, a board with a control_hz: steps taken at a deadline, periods with no step started
    # (deadline misses), and how late steps started (ms, percentiles of the recent ones).
    control_periods: int = 0
    deadline_misses: int = 0
    jitter_p50_ms: float = 0.0
    jitter_p99_ms: float = 0.0
    # v5, a board file's episode: success_key / failure_key: training episodes of this run
    # start that the env's info ended as a success or a failure (of ``episodes``).
    episodes_succeeded: int = 0
    episodes_failed: int = 0


@dataclass(frozen=True)
class ControlMessage:
    """The run's state, from the learner to every actor (retained): one small message
    whatever the fleet's size. Credit goes to each actor on its own topic (CreditGrant).
    ``serving`` and ``stopped`` are final for a run start: no other state follows them.

    ``run_id`` names this start of the run (RunIdentity): an actor takes part in the run
    start of the newest control message, and drops what it held of an earlier one.

    ``status_interval_s`` is the least time between two periodic statuses the learner asks
    of every board (0: the board's own), so that the fleet's statuses stay under a rate.
    """

    state: RunState
    run_id: str = ""
    reason: str = ""
    status_interval_s: float = 0.0


@dataclass(frozen=True)
class CreditGrant:
    """Env-step credit for one actor process, on ``<base>/actors/<id>/credit`` (retained).

    Flow control: the process whose session is ``session`` may step while its env-step
    count (since it joined run ``run_id``) is below ``credit``. A process of the same id in
    ``refused`` is a duplicate of a live one: it stops (docs/protocol.md §5.3).
    """

    run_id: str
    session: int
    credit: int
    refused: tuple[int, ...] = ()


@dataclass(frozen=True)
class PolicyTarget:
    """The policy one board is to serve, on ``<base>/actors/<id>/target`` (retained): a
    staged rollout's step (docs/protocol.md §5.5). ``bundle`` is a signed policy bundle
    (``ERLP``) to verify and load; empty, it names a policy the board holds by its
    ``policy_version`` and ``model_sha256`` (the one it served before: a rollback)."""

    run_id: str
    policy_version: int
    model_sha256: str
    rollout: str = ""  # the rollout's name, for logs
    bundle: bytes = b""


class ReplaySample(NamedTuple):
    obs: np.ndarray  # [B, *obs_shape] float32
    action: np.ndarray  # [B] int64 or [B, *action_shape] float32
    reward: np.ndarray  # [B] float32
    next_obs: np.ndarray  # [B, *obs_shape] float32
    terminated: np.ndarray  # [B] float32, 1.0 where the episode ended in a terminal state


@dataclass(frozen=True)
class PartState:
    """What one stateful part of the learner puts into a checkpoint and takes back from it
    (the ``Saveable`` of DeepMind Acme, ``acme.core.Saveable``): JSON-able counters, named
    numpy arrays, and named byte strings stored as they are (policy bundles as sent)."""

    json: Any
    arrays: dict[str, np.ndarray] = field(default_factory=dict)
    blobs: dict[str, bytes] = field(default_factory=dict)


class Saveable(Protocol):
    """A part that owns its checkpointed state."""

    def state(self) -> PartState: ...

    def load_state(self, state: PartState) -> None: ...
