"""Typed records that cross a boundary: the wire, a queue, a thread. Numpy only.

Nothing here knows how it is encoded; ``edge_rl.transport.codec`` does that.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np

from edge_rl.specs import EnvSpec

ActorState = Literal["starting", "running", "paused", "stopped", "offline"]
RunState = Literal["running", "paused", "stopped"]

# Runtime breakdown of an actor (docs/protocol.md §5.1): seconds since ActorNode.run began.
# The control loop's buckets partition its wall time, so they add up to "wall"; the policy
# loader's run on the PolicySlot thread, alongside the loop, and are reported apart.
ACTOR_LOOP_BUCKETS = ("env_step", "inference", "exploration", "publish", "emulation", "idle")
ACTOR_LOADER_BUCKETS = ("policy_receive", "model_load")
BREAKDOWN_KEYS = frozenset((*ACTOR_LOOP_BUCKETS, *ACTOR_LOADER_BUCKETS, "wall"))


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

    ARRAYS = ("obs", "action", "reward", "next_obs", "terminated", "truncated")

    def __len__(self) -> int:
        return int(self.reward.shape[0])


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
    algo: str  # "dqn" | "td3"
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
    # What the model outputs: "q_values" (DQN: act with argmax) or "action" (TD3).
    output_kind: str = "q_values"
    run_id: str = ""
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


@dataclass(frozen=True)
class ControlMessage:
    """Run state and env-step credit from the learner to every actor (retained).

    Credit is flow control: an actor may step while its own env-step count is below
    ``credits[actor_id]`` (``default_credit`` if it is not listed yet; no limit if both are
    None). The learner grants credit as its updates keep up with the replay ratio, so the
    env-step budget is not spent on stale policies while it trains.
    """

    state: RunState
    credits: dict[str, int] = field(default_factory=dict)
    default_credit: int | None = None
    reason: str = ""

    def credit_for(self, actor_id: str) -> int | None:
        return self.credits.get(actor_id, self.default_credit)
