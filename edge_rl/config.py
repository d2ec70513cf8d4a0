"""Run configuration: frozen dataclasses, loaded from YAML with unknown keys rejected.

cfg = load_run_config("examples/cartpole_dqn.yaml")   # ValueError names the bad key
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import dacite
import yaml

from edge_rl.agents.dqn.config import DQNConfig  # plain dataclasses: no TensorFlow import
from edge_rl.agents.registry import ALGORITHMS, algorithm  # no TensorFlow either
from edge_rl.agents.sac.config import SACConfig
from edge_rl.agents.td3.config import TD3Config
from edge_rl.compress.config import CompressionConfig  # pure too
from edge_rl.telemetry.carbon import EnergyConfig
from edge_rl.transport.auth import BrokerAuth  # standard library only
from edge_rl.wire.policy import CODECS  # pure: no I/O
from edge_rl.wire.topics import DEFAULT_ROOT, DEFAULT_RUN, check_name  # pure: no MQTT

MQTT_MAX_PACKET = 268_435_455  # MQTT 3.1.1's remaining-length limit (~256 MB)
# Simulated boards `edge-rl learn` starts: a process each (~100 MB apiece), or many boards
# in each of fleet.procs processes (~0.5 MB a board at 250 a process; docs/scale.md).
MAX_ACTOR_PROCESSES = 64
MAX_GROUPED_BOARDS = 10_000


@dataclass(frozen=True)
class FleetConfig:
    actors: int = 4  # simulated boards started by `edge-rl learn` (0: none)
    board: str = "rpi4"  # firmware_configs/<board>.yaml
    # 0: each simulated board is an `edge-rl actor` process of its own (at most 64 boards);
    # P > 0: the boards run in P `edge-rl actors` processes (board i in process i mod P),
    # each board still its own actor (docs/fleet.md), up to MAX_GROUPED_BOARDS.
    procs: int = 0
    # With procs > 0: each board connects after a random delay of up to this many seconds,
    # so that a thousand boards do not CONNECT in one instant.
    start_spread_s: float = 0.0
    # Actors one run keeps state for (statuses, credit, sequence numbers); a status or a
    # batch from one more is refused and counted: invented ids must not grow the learner.
    max_actors: int = 10_000
    # Two live processes under one actor id: the newcomer is refused. A new process of an
    # id whose old one went offline (its last will) or silent owns the id after this long
    # (a restarted board waits this much before it is granted credit; docs/protocol.md §5.3).
    identity_window_s: float = 10.0
    # Credit in slices of at least this many env steps per actor while the learner frees
    # less than that for each (docs/protocol.md §6.2): an actor ships its batch when its
    # credit runs out, so the slice is the batch size. At most max_lag_transitions / (2 x
    # online actors) is used, which keeps the learner's lead; 1: even shares every round.
    min_grant: int = 32
    # Credit grants the learner publishes per second, over the whole fleet (0: no bound).
    # A grant that names a new session or refuses one is never held back; a larger grant
    # to an actor waits its turn, oldest first, and carries all its credit when it goes.
    # A few boards never reach the bound (each gets at most one grant per 50 ms round);
    # a thousand would otherwise cost ~10,000 messages/s (docs/scale.md).
    max_grants_per_s: float = 200.0
    # Statuses per second the fleet may send in all (0: no bound). The learner states a
    # status interval in its control message, online boards / this rate (rounded up to
    # 0.25 s), and each board reports at that interval when it is longer than its own
    # (docs/protocol.md §5): a thousand boards at one a second would be 1,000/s.
    max_statuses_per_s: float = 200.0

    def __post_init__(self) -> None:
        if not 1 <= self.min_grant <= 100_000:
            raise ValueError(f"fleet.min_grant must be in [1, 100000], got {self.min_grant}")
        if not 0.0 <= self.max_grants_per_s <= 1e6:
            raise ValueError(
                f"fleet.max_grants_per_s must be in [0, 1e6], got {self.max_grants_per_s}"
            )
        if not 0 <= self.procs <= 256:
            raise ValueError(f"fleet.procs must be in [0, 256], got {self.procs}")
        most = MAX_GROUPED_BOARDS if self.procs else MAX_ACTOR_PROCESSES
        if not 0 <= self.actors <= most:
            raise ValueError(
                f"fleet.actors must be in [0, {most}] with fleet.procs={self.procs}, "
                f"got {self.actors}"
            )
        if not 0.0 <= self.start_spread_s <= 3600.0:
            raise ValueError(
                f"fleet.start_spread_s must be in [0, 3600], got {self.start_spread_s}"
            )
        if not 0.0 <= self.max_statuses_per_s <= 1e6:
            raise ValueError(
                f"fleet.max_statuses_per_s must be in [0, 1e6], got {self.max_statuses_per_s}"
            )
        if not 1 <= self.max_actors <= 1_000_000:
            raise ValueError(f"fleet.max_actors must be in [1, 1e6], got {self.max_actors}")
        if not 0.0 <= self.identity_window_s <= 600.0:
            raise ValueError(
                f"fleet.identity_window_s must be in [0, 600], got {self.identity_window_s}"
            )


@dataclass(frozen=True)
class TransportConfig:
    root: str = DEFAULT_ROOT  # topics live under <root>/<run>/
    max_payload_bytes: int = 1_000_000  # larger transition batches are rejected
    ingest_queue: int = 2_000  # payloads buffered between paho's thread and ingest
    # Largest MQTT packet: the embedded broker's max_packet_size and what the learner's
    # client publishes at most (a policy bundle is one packet). Raise it for policies past
    # ~1.9 MB (a 3x2048 MLP: 8.5 MB int8, 34 MB fp32); an external broker needs the same
    # max_packet_size (host/mosquitto.conf), and each board its max_policy_bytes.
    max_packet_bytes: int = 2_000_000
    # The learner's credentials for an external broker (--broker; the embedded one makes its
    # own): ca_file, cert_file, key_file, username, password_file (mode 0600) or password_env
    # (a variable's name). Paths and names only: a password never goes in a config.
    # `edge-rl learn --ca-file/--cert/--key/--username/--password-file` override each field.
    auth: BrokerAuth = field(default_factory=BrokerAuth)

    def __post_init__(self) -> None:
        if self.max_payload_bytes < 1024 or self.ingest_queue < 1:
            raise ValueError("transport.max_payload_bytes >= 1024 and ingest_queue >= 1")
        if not self.max_payload_bytes + 1024 <= self.max_packet_bytes <= MQTT_MAX_PACKET:
            raise ValueError(
                f"transport.max_packet_bytes must be in [max_payload_bytes + 1024, "
                f"{MQTT_MAX_PACKET:,}] (MQTT's limit), got {self.max_packet_bytes:,}"
            )


@dataclass(frozen=True)
class ExportConfig:
    precision: str = "int8"  # int8 (full-integer) | fp16 | fp32
    every_updates: int = 500  # export + publish after this many gradient updates
    # Most of the run's wall time the exporter may be busy (exporting, publishing, scoring):
    # an export due beyond it waits until the share allows it. 1: no limit.
    max_busy_share: float = 0.1
    calibration_size: int = 1_000  # replay observations for int8 calibration
    parity_size: int = 1_000  # held-out replay observations for the parity check
    min_greedy_agreement: float = 0.9  # DQN: an export below this is not published
    # TD3: largest and mean |a_int8 - a_float| on held-out observations, in fractions of the
    # action half-range; an export above either is not published. The largest error comes
    # from a few observations outside the calibration range or at a tanh knee (Pendulum:
    # max 0.44-0.67 while the mean is 0.01-0.05), hence the loose default for the maximum.
    max_action_error: float = 0.75
    mean_action_error: float = 0.06
    # max_action_error applies to this quantile, over the held-out observations, of each
    # one's largest error: 1.0 is the maximum; 0.99 lets 1 % of observations (a dimension
    # flipped at a tanh knee) exceed it.
    action_error_quantile: float = 1.0
    # Compression of the model in the bundle. "blocks" also stores zero and circulant
    # blocks of the weight matrices compactly (edge_rl.wire.blocks): use it with
    # compression.method gst or iterative.
    codec: str = "zlib"
    # int8 weights: one scale per output unit of each Dense layer (the converter's
    # default) or one per layer: ~2 KB smaller for a 256-wide layer, coarser weights. Both
    # keep block-circulant kernels circulant in int8 (each row of a block-row holds the
    # same values, rotated, hence the same scale).
    per_channel: bool = True

    def __post_init__(self) -> None:
        if self.precision not in ("int8", "fp16", "fp32"):
            raise ValueError(f"export.precision must be int8, fp16 or fp32: {self.precision!r}")
        if self.every_updates < 1 or self.calibration_size < 10 or self.parity_size < 10:
            raise ValueError("export.every_updates >= 1, calibration/parity sizes >= 10")
        if not 0.0 <= self.min_greedy_agreement <= 1.0:
            raise ValueError("export.min_greedy_agreement must be in [0, 1]")
        if not 0.0 < self.max_busy_share <= 1.0:
            raise ValueError(f"export.max_busy_share must be in (0, 1]: {self.max_busy_share}")
        if self.max_action_error <= 0 or self.mean_action_error <= 0:
            raise ValueError("export.max_action_error and mean_action_error must be > 0")
        if not 0.5 <= self.action_error_quantile <= 1.0:
            raise ValueError(
                f"export.action_error_quantile must be in [0.5, 1]: {self.action_error_quantile}"
            )
        if self.codec not in CODECS:
            raise ValueError(f"export.codec must be one of {', '.join(CODECS)}: {self.codec!r}")


@dataclass(frozen=True)
class CheckpointConfig:
    """Durable runs (edge_rl/learner/checkpoint.py, docs/reliability.md): the learner writes
    RUN_DIR/checkpoint/ (networks, optimisers, replay, counters) on this schedule, at
    SIGTERM/SIGINT and at the end; `edge-rl learn --resume RUN_DIR` continues from it."""

    every_s: float = 60.0  # seconds of wall time between checkpoints (0: not by time)
    every_env_steps: int = 0  # env steps received between checkpoints (0: not by steps)

    def __post_init__(self) -> None:
        if self.every_s < 0 or self.every_env_steps < 0:
            raise ValueError("checkpoint.every_s and checkpoint.every_env_steps must be >= 0")


@dataclass(frozen=True)
class IngestConfig:
    """Per-step reward bounds for plausibility (learner/ingest/plausible.py, docs/security.md):
    a batch with a reward outside them is refused (``implausible_reward``)."""

    # Set both to bound rewards from the config: first of the rules (then the env's known
    # range, then the warm-up, then the generic max_abs_reward).
    reward_low: float | None = None
    reward_high: float | None = None
    # Env steps of a random policy on the learner host at start, for an env without a known
    # range, and for observation dimensions its space leaves unbounded; 0: none (the
    # generic max_abs_reward and max_abs_observation apply).
    warmup_steps: int = 2_000
    # The warm-up's range widened by this many times its width on each side: a trained
    # policy earns more per step than a random one (HalfCheetah: ~-1..1 random, 12-15 trained).
    warmup_margin: float = 10.0

    def __post_init__(self) -> None:
        if (self.reward_low is None) != (self.reward_high is None):
            raise ValueError("ingest.reward_low and ingest.reward_high: set both or neither")
        if self.reward_low is not None and not self.reward_low <= self.reward_high:
            raise ValueError("ingest.reward_low must be <= ingest.reward_high")
        if not 0 <= self.warmup_steps <= 1_000_000 or not self.warmup_margin >= 0:
            raise ValueError("ingest.warmup_steps in [0, 1e6] and ingest.warmup_margin >= 0")


@dataclass(frozen=True)
class QuarantineConfig:
    """When a board's data is so far off the fleet's that the learner isolates it
    (learner/fleet/quarantine.py, docs/security.md): its credit stops, its data is refused
    (``quarantined``) and, with ``evict``, its rows already in replay are dropped."""

    enabled: bool = True
    # Robust z-score (0.6745 × (x − median) / MAD over the judged boards) of a board's mean
    # reward per step or median episode return past which it is an outlier.
    max_z: float = 6.0
    # The MAD is at least this fraction of |median| (and 1e-3): boards that agree almost
    # exactly (CartPole's reward is always 1) must not turn noise into a large z.
    mad_floor: float = 0.1
    # A board's window is its last ``window_transitions`` transitions and last
    # ``window_episodes`` returns; it is judged once it has at least ``min_transitions`` (and
    # ``min_episodes`` for the return); a rule applies only with ``min_boards`` judged.
    window_transitions: int = 2_000
    window_episodes: int = 20
    min_transitions: int = 500
    min_episodes: int = 5
    min_boards: int = 3
    # The boards are compared on one stretch of the run: from the oldest start of a judged
    # board's window to now, at most this many env steps (of the whole fleet) back. A board
    # whose window is shorter is judged on all its data of that stretch, so a starved
    # board's older episodes meet the others' of the same time (docs/security.md).
    stretch_steps: int = 50_000
    # The stretch is cut into this many equal spans of the clock; in each, a board is set
    # against the fleet's median of the span, so no board weighs one span more than another.
    stretch_bins: int = 4
    # Refusals: a board with at least ``min_refused`` refused batches, more than this
    # fraction of all its batches (any board count: a refusal needs no fleet to compare).
    max_refused_share: float = 0.5
    min_refused: int = 10
    evict: bool = True  # drop a quarantined board's rows from replay

    def __post_init__(self) -> None:
        if not (self.max_z > 0 and self.mad_floor >= 0 and 0 < self.max_refused_share <= 1):
            raise ValueError("quarantine: max_z > 0, mad_floor >= 0, max_refused_share in (0, 1]")
        counts = (
            self.window_transitions,
            self.window_episodes,
            self.min_boards,
            self.min_refused,
            self.stretch_steps,
            self.stretch_bins,
        )
        if min(counts) < 1 or self.min_transitions > self.window_transitions:
            raise ValueError(
                "quarantine: windows, stretch_*, min_boards, min_refused >= 1; min <= window"
            )
        if self.min_episodes > self.window_episodes or self.min_transitions < 1:
            raise ValueError("quarantine: 1 <= min_transitions, min_episodes <= window_episodes")


@dataclass(frozen=True)
class ReplayConfig:
    """Demonstrations beside online replay (learner/demos.py, docs/demonstrations.md): rows an
    intervention acted on a board, and a Minari dataset loaded with ``demos:``."""

    # The share of each batch drawn from online replay while demonstrations exist; the
    # rest from them. None: 0.5, RLPD's symmetric sampling (Ball et al. 2023), as LeRobot
    # HIL-SERL's OnlineOfflineMixer. Without demonstrations every row is online.
    online_ratio: float | None = None
    demo_capacity: int = 100_000  # transitions the demonstration buffer holds
    # Gradient steps on the demonstrations alone before the fleet starts (TD3: TD3+BC,
    # td3.bc_alpha), then an export: the boards' first policy is the pretrained one.
    # Needs ``demos:``; they do not pay for online updates. 0: none.
    pretrain_updates: int = 0

    def __post_init__(self) -> None:
        if self.online_ratio is not None and not 0.0 <= self.online_ratio <= 1.0:
            raise ValueError(f"replay.online_ratio must be in [0, 1]: {self.online_ratio}")
        if self.demo_capacity < 1:
            raise ValueError("replay.demo_capacity must be >= 1")
        if not 0 <= self.pretrain_updates <= 10_000_000:
            n = self.pretrain_updates
            raise ValueError(f"replay.pretrain_updates must be in [0, 1e7]: {n}")


@dataclass(frozen=True)
class Pacing:
    """The run's budget and pacing, as fleet control reads them (``RunConfig.pacing``)."""

    total_env_steps: int
    learning_starts: int
    replay_ratio: float
    max_lag_transitions: int
    credit_timeout_s: float

    def updates_paid_by(self, env_steps: int) -> int:
        """Updates ``env_steps`` received transitions pay for at the replay ratio:
        ``replay_ratio × (env_steps − learning_starts)``, none before learning starts."""
        return int(self.replay_ratio * max(0, env_steps - self.learning_starts))

    def env_steps_paying_for(self, updates: int) -> int:
        """The fewest received transitions that pay for ``updates`` (the inverse)."""
        return self.learning_starts + math.ceil(updates / self.replay_ratio)


@dataclass(frozen=True)
class RunConfig:
    env_id: str
    algo: str = "dqn"  # a name in agents/registry.py; its section is the field of that name
    run: str = DEFAULT_RUN  # topic level under transport.root; one run per name on a broker
    seed: int = 0
    # The Ed25519 key (PEM) that signs every policy, made (mode 0600) if the file is missing;
    # its public half, beside it as .pub, is what each board verifies with. None: a key of
    # the run's own in <run dir>/signing.key (the simulated fleet is handed its .pub).
    signing_key: str | None = None

    # Budget and pacing, all counted in transitions received from the fleet.
    total_env_steps: int = 50_000
    learning_starts: int = 1_000
    replay_capacity: int = 100_000
    replay_ratio: float = 0.5  # gradient updates per transition received
    # Flow control: the fleet may run at most this many transitions ahead of what the
    # updates done so far have paid for at the replay ratio (see ``edge_rl.learner.fleet``).
    max_lag_transitions: int = 1_000
    # Credit an actor was granted, stepped and sent, but that has not arrived after this
    # long is written off and granted again (a broker restart loses in-flight batches);
    # what an actor reports dropped is written off at once.
    credit_timeout_s: float = 5.0
    max_policy_lag: int | None = None  # reject batches acted this many versions ago
    # Largest |observation| and |reward| a batch may hold (else rejected, "out_of_bounds"):
    # finite is not enough, one reward of 3e38 poisons every TD target it reaches.
    # The last resort: plausibility (``ingest:``, IngestConfig) bounds rewards tighter.
    max_abs_observation: float = 1e6
    max_abs_reward: float = 1e6
    eval_episodes: int = 10  # final evaluation of the deployed model (LiteRT, greedy)
    # Model selection, like SB3's EvalCallback: every `select_every`-th published policy is
    # scored greedily in LiteRT on the learner's own env (`select_episodes` episodes, not
    # training env steps); at the end the best-scoring one is redeployed if the last one
    # scores lower. DQN's greedy return can swing from 500 to 90 within a few thousand
    # steps on CartPole. 0 turns selection off.
    select_every: int = 0
    select_episodes: int = 5
    # At the end, the 5 best-scoring policies and the last are scored on this many more
    # episodes (other seeds) and the best combined score is deployed; 0: no recheck.
    select_recheck: int = 0
    # A Minari dataset loaded into the demonstration buffer at start: a dataset id (under
    # MINARI_DATASETS_PATH) or a dataset's directory; its spaces must be the env's.
    demos: str | None = None

    # A section per algorithm of agents/registry.py, named as it is (test_registry.py checks).
    dqn: DQNConfig = field(default_factory=DQNConfig)
    td3: TD3Config = field(default_factory=TD3Config)
    sac: SACConfig = field(default_factory=SACConfig)
    fleet: FleetConfig = field(default_factory=FleetConfig)
    transport: TransportConfig = field(default_factory=TransportConfig)
    export: ExportConfig = field(default_factory=ExportConfig)
    compression: CompressionConfig = field(default_factory=CompressionConfig)
    energy: EnergyConfig = field(default_factory=EnergyConfig)
    checkpoint: CheckpointConfig = field(default_factory=CheckpointConfig)
    ingest: IngestConfig = field(default_factory=IngestConfig)
    quarantine: QuarantineConfig = field(default_factory=QuarantineConfig)
    replay: ReplayConfig = field(default_factory=ReplayConfig)

    def __post_init__(self) -> None:
        entry = algorithm(self.algo)  # ValueError naming the known algorithms
        if self.replay.pretrain_updates and not entry.pretrains:
            able = ", ".join(a.name for a in ALGORITHMS.values() if a.pretrains)
            raise ValueError(
                f"replay.pretrain_updates: {self.algo} has no pretraining loss; "
                f"algos that do: {able}"
            )
        if self.replay.pretrain_updates and not self.demos:
            raise ValueError("replay.pretrain_updates needs demos: (a dataset to pretrain on)")
        check_name("run name", self.run)  # one topic level: at load, not once a fleet runs
        for level in self.transport.root.split("/"):
            check_name("transport.root level", level)
        if self.total_env_steps < 1 or self.learning_starts < 0 or self.replay_capacity < 1:
            raise ValueError("total_env_steps >= 1, learning_starts >= 0, replay_capacity >= 1")
        if not 0 < self.replay_ratio <= 64:
            raise ValueError(f"replay_ratio must be in (0, 64], got {self.replay_ratio}")
        if not 0.5 <= self.credit_timeout_s <= 3600:
            raise ValueError(
                f"credit_timeout_s must be in [0.5, 3600], got {self.credit_timeout_s}"
            )
        if self.max_lag_transitions < 1 or self.eval_episodes < 1:
            raise ValueError("max_lag_transitions >= 1 and eval_episodes >= 1")
        if self.select_every < 0 or self.select_episodes < 1 or self.select_recheck < 0:
            raise ValueError("select_every >= 0, select_episodes >= 1, select_recheck >= 0")
        if not (self.max_abs_observation > 0 and self.max_abs_reward > 0):
            raise ValueError("max_abs_observation and max_abs_reward must be > 0")

    @property
    def pacing(self) -> Pacing:
        return Pacing(
            self.total_env_steps,
            self.learning_starts,
            self.replay_ratio,
            self.max_lag_transitions,
            self.credit_timeout_s,
        )

    def updates_paid_by(self, env_steps: int) -> int:
        """Updates ``env_steps`` received transitions pay for (``Pacing.updates_paid_by``)."""
        return self.pacing.updates_paid_by(env_steps)

    def env_steps_paying_for(self, updates: int) -> int:
        """The fewest received transitions that pay for ``updates`` (the inverse)."""
        return self.pacing.env_steps_paying_for(updates)

    @property
    def total_updates(self) -> int:
        """The learner's update budget, pretraining included: what compression schedules
        are fractions of."""
        return max(1, self.updates_paid_by(self.total_env_steps) + self.replay.pretrain_updates)


def run_config_from_dict(data: dict[str, Any]) -> RunConfig:
    try:
        return dacite.from_dict(RunConfig, data, config=dacite.Config(strict=True, cast=[tuple]))
    except dacite.DaciteError as e:
        raise ValueError(f"bad run config: {e}") from None


def load_run_config(path: str | Path, overrides: dict[str, Any] | None = None) -> RunConfig:
    """Load YAML; ``overrides`` are dotted keys (``{"dqn.learning_rate": 1e-3}``)."""
    path = Path(path)
    data = yaml.safe_load(path.read_text()) or {}
    if not isinstance(data, dict):
        raise ValueError(f"{path}: the top level must be a mapping")
    for dotted, value in (overrides or {}).items():
        node = data
        *parents, leaf = dotted.split(".")
        for p in parents:
            node = node.setdefault(p, {})
        node[leaf] = value
    try:
        return run_config_from_dict(data)
    except ValueError as e:
        raise ValueError(f"{path}: {e}") from None
