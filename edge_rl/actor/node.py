"""The actor node: one board's loop. ``edge-rl actor`` and every simulated fleet member run this.

    node = ActorNode(board, ActorOptions(actor_id="pi-01", env="CartPole-v1", broker=url))
    # (or ActorNode(board, opts, connect=MemoryBroker().connect) in a unit test)
    node.run()      # until SIGTERM (node.stop()), a refused id, or max_env_steps

    loop:  control, status                  # read between two stints
           stint: policy = slot.current     # swapped in between two stints
                  explorer.plan(...)        # the stint's RNG draws, at once
                  per step: out = policy.runner(obs)     # LiteRT invoke
                            action = explorer.act(out, i)
                            action, acted = teleop(obs, action)   # board's teleop:, if any
                            action = shield.apply(action)  # the last step: bounds, rate
                            obs' = env.step(action)        # the row holds this action
                            batcher.append(row)
           batcher.take() -> spool -> MQTT  (by count or time; bounded while offline)
           transport.poll()                 # PUBACKs, grants, control (every POLL_S)

A stint is up to one batch of steps: it ends when the batch is full, the credit or
``max_env_steps`` is used up, or a status or the batch's flush is due. Everything that is
not the step itself (control, status, the policy read, RNG draws, converting and encoding
the batch, publishing) runs once per stint, so the loop runs close to the speed of a bare
``env.step(argmax(invoke(obs)))`` loop (docs/benchmarks.md). The loop serves its own MQTT
connection (``owner_io``, transport/mqtt.py): a publish writes to the socket at once, and
what came in is read by a poll between stints (at most every ``POLL_S``) and in every
wait, so no other thread takes the GIL from the loop for a publish or a PUBACK.

Control (``run_control``): the actor joins the run start the learner's retained
control names, and trains (``_loop``) only while it says ``running`` and its env-step count
is below the credit granted to this process (flow control; waiting, it ships what it has
batched so the learner can grant more). ``serving`` (the run is done), or ``paused`` on a
board whose ``on_pause`` is ``serve``, switches to ``_serve``: the policy held, greedily,
no transitions, a status every ``serving_status_interval_s``. ``stopped`` of its run idles
until a new run start. The process never ends on a control message: a flashed board
serves one run's result and joins the next without a restart.

Runtime breakdown (docs/protocol.md §5.1): ``self.clock`` splits this thread's wall time
since ``run()`` into env_step / inference / exploration / publish / emulation (simulated
boards only) / idle; they add up to its ``wall``. A stint reads the clock around each
step's inference, exploration and env step and charges them with one split lap; the
rest of its time (appending rows, the step's bookkeeping) is publish. The policy
slot's thread accounts policy_receive and model_load itself. Every status carries both.
"""

from __future__ import annotations

import logging
import secrets
import time
from collections import deque
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from edge_rl.actor.batching import Batcher, Spool
from edge_rl.actor.emulation import Throttle
from edge_rl.actor.episodes import EpisodeRules, ResetHook
from edge_rl.actor.exploration import Explorer, greedy
from edge_rl.actor.policy_slot import LoadedPolicy, PolicySlot
from edge_rl.actor.rate import Rate
from edge_rl.actor.run_control import RunControl
from edge_rl.actor.safety import Shield
from edge_rl.actor.serving import ServedReturns
from edge_rl.actor.shared_models import SharedModels
from edge_rl.actor.teleop import Teleop
from edge_rl.actor.watchdog import EStop, Watchdog, load_input
from edge_rl.boards import STOP_FLUSH_S, STOP_STATUS_S, BoardConfig
from edge_rl.envs import make_env
from edge_rl.specs import EnvSpec
from edge_rl.telemetry.breakdown import LapClock
from edge_rl.transport.base import Connect
from edge_rl.transport.mqtt import mqtt_connect
from edge_rl.types import ACTOR_LOOP_BUCKETS, ActorState, ActorStatus, TransitionBatch
from edge_rl.wire.envelope import MAGIC_POLICY
from edge_rl.wire.messages import encode_status
from edge_rl.wire.signing import Verifier
from edge_rl.wire.topics import DEFAULT_ROOT, DEFAULT_RUN, Topics
from edge_rl.wire.transitions import encode_transitions, rows_within

log = logging.getLogger(__name__)

# A board that may not step (no credit, paused, no learner yet) sleeps until its next
# status, unless a grant, a control or a loaded policy ends the sleep first; a spooled
# batch is retried this often meanwhile.
WAIT_TURN_S = 0.1
# The longest sleep of a board whose loop serves its own connection: a loaded policy
# cannot end that sleep (it is not news on the socket), so it is reported within this.
OWN_IO_TURN_S = 1.0
# The least time between two statuses (apart from the one on connect and the last one).
MIN_STATUS_GAP_S = 0.05
# How often the loop serves its transport between stints (training) or greedy steps
# (serving): a poll costs ~90 µs here, a 256-step stint ~3.5 ms.
POLL_S = 0.01
# A board with watchdogs and no control_hz: how often they are read, and the safe action
# given (docs/robots.md).
SAFE_PERIOD_S = 0.05
# At the board's exit, how long a cancelled reset hook may take to return before the
# board gives up closing the env under it.
RESET_HOOK_CLOSE_S = 1.0


def _no_model(obs: np.ndarray) -> None:
    """The model's output while there is no policy: none (every action is random)."""
    return None


@dataclass(frozen=True)
class ActorOptions:
    actor_id: str
    env: str  # gymnasium id or "package.module:callable"
    broker: str  # mqtt://HOST:PORT
    root: str = DEFAULT_ROOT
    run: str = DEFAULT_RUN
    seed: int | None = None
    max_env_steps: int | None = None  # stop by itself after this many training steps (tests)
    policy_key: str | None = None  # learner's public key (PEM); default: the board file's
    emulate: bool = False  # apply the board file's emulation: a simulated board (the fleet) only


class ActorNode:
    def __init__(
        self,
        board: BoardConfig,
        opts: ActorOptions,
        connect: Connect | None = None,
        models: SharedModels | None = None,
    ) -> None:
        """``connect``: how to reach the broker (default: MQTT at ``opts.broker``).
        ``models``: the interpreters a board group's boards share (actor/group.py)."""
        self.board = board
        self.opts = opts
        self.topics = Topics(opts.root, opts.run)
        self._transitions_topic = self.topics.transitions(opts.actor_id)  # one per batch
        self.env = make_env(opts.env)
        self.spec = EnvSpec.from_gym(self.env.observation_space, self.env.action_space)
        self.rng = np.random.default_rng(opts.seed)
        self.explorer = Explorer(self.spec, self.rng)
        # A person or a teacher who may take over (board file's teleop:; actor/teleop.py).
        self.teleop = (
            Teleop.load(board.teleop, self.spec, board.teleop_args) if board.teleop else None
        )
        # Every action the env gets passes the shield last, whoever proposed it (an
        # override too: it calls shield.apply); rows carry the action it let through.
        self.shield = Shield(self.spec, board.safety)
        # The watchdogs (safety: in the board file): None without any, as on a simulated
        # board. With them, the loop reads them every period_s and gives the safe action.
        safety = board.safety
        self.estop = EStop(safety.estop_file, load_input(safety.estop_input))
        # A reset hook between episodes (episode: in the board file): it turns the
        # watchdogs on, since its failure holds the board safe as the e-stop does.
        episode = board.episode
        self.reset_hook = ResetHook(episode) if episode.reset_hook is not None else None
        self.resetting = False  # the hook runs: status "resetting"
        self._next_seed: int | None = None  # the seed of the next hook's env.reset()
        self.hold_failures = 0  # env.hold calls that raised (logged once)
        self.watchdog = (
            Watchdog(safety.stale_after_s, self.estop, time.monotonic())
            if safety.watchdogs or self.reset_hook is not None
            else None
        )
        self.period_s = 1.0 / board.control_hz if board.control_hz else SAFE_PERIOD_S
        # The board file's episode: a time limit, success and failure (actor/episodes.py).
        self.rules = EpisodeRules(board.episode)
        self.safe_reason = ""  # why the board is in its safe state; "" when it is not
        # control_hz: every env step at its period's deadline (None: as fast as it goes).
        # Its sleeps serve the transport (owner_io): what comes in is read while the loop
        # waits for a deadline, never by waiting inside a period.
        self.rate = Rate(board.control_hz, sleep=self._idle) if board.control_hz else None
        # New per process (see TransitionBatch); 53 bits: exact in JSON readers' doubles.
        self.session = secrets.randbits(53)
        key = opts.policy_key or board.policy_public_key
        if not key:
            raise ValueError(
                "an actor needs the learner's public key to verify policies: --policy-key "
                "FILE or policy_public_key in the board file (edge-rl keygen makes a pair)"
            )
        self.slot = PolicySlot(
            self.spec,
            Verifier.from_file(Path(key)),
            run=opts.run,
            num_threads=board.num_threads,
            max_model_bytes=board.max_policy_bytes,
            max_tensor_bytes=board.max_tensor_bytes,
            runtime=board.runtime,
            models=models,
            on_loaded=lambda: self.rc.nudge(),  # a waiting loop reports it (_wait_turn)
        )
        # A batch closed by count stays within max_batch_bytes, whatever the observation.
        rows = min(board.batch_size, rows_within(self.spec, board.max_batch_bytes))
        if rows < board.batch_size:
            log.info("batch_size %d capped at %d by max_batch_bytes", board.batch_size, rows)
        self.batcher = Batcher(opts.actor_id, self.session, rows, board.flush_interval_s)
        self.spool = Spool(board.spool_limit_bytes)
        self.throttle = Throttle(board.emulation.compute_slowdown if opts.emulate else 1.0)
        # run start, state and credit
        self.rc = RunControl(opts.actor_id, self.session, serve_paused=board.on_pause == "serve")
        self.served = ServedReturns()  # the version served and its greedy returns
        self.env_steps = self.episodes = self.transitions_sent = self.batches_sent = 0
        self.transitions_oversize = 0
        self.steps_per_s = 0.0
        self._reported_version = 0  # the policy version the last status named
        self._said: tuple[str, int] | None = None  # the state the last line said (_say)
        self._returns: deque[float] = deque(maxlen=20)
        self._obs: np.ndarray | None = None  # the env's current observation
        self._ep_return = 0.0  # the current episode's return so far
        self.clock = LapClock(ACTOR_LOOP_BUCKETS)  # restarted when run() begins
        connect = connect or mqtt_connect(opts.broker)
        self.transport = connect(
            f"actor-{opts.actor_id}",
            subscriptions=[
                (self.topics.policy, 1),
                (self.topics.control, 1),
                (self.topics.credit(opts.actor_id), 1),
                (self.topics.target(opts.actor_id), 1),
                (self.topics.welcome(opts.actor_id), 1),
                (self.topics.hello, 1),
            ],
            on_message=self._on_message,
            will=(self.topics.status(opts.actor_id), encode_status(self._status("offline"))),
            on_connect=self._on_connect,
            owner_io=True,  # served by this loop between stints: no GIL handoffs per batch
        )

    # --- network handlers: inside the loop's polls (or on the transport's thread) ------

    def _on_connect(self) -> None:
        """Announce this process, then say hello: the learner answers on this board's own
        topics (its welcome and credit), whichever broker node it reached and whatever that
        node retains (docs/protocol.md §2.1)."""
        self._publish_status("starting")
        self.transport.publish(
            self.topics.actor_hello(self.opts.actor_id), encode_status(self._status("starting"))
        )

    def _on_message(self, topic: str, payload: bytes) -> None:
        self._handle(topic, payload)
        self._heard_learner(topic)  # after: a control counts by the state it set

    def _handle(self, topic: str, payload: bytes) -> None:
        if topic == self.topics.policy:
            if payload:  # (empty: the learner cleared the retained policy)
                self.slot.offer(payload)  # verified and loaded on the slot's thread
        elif topic == self.topics.control:
            self.rc.on_control(payload)
        elif topic == self.topics.target(self.opts.actor_id):
            if payload:  # a rollout's step for this board (empty: cleared)
                self.slot.target(payload, self.board.max_policy_bytes + 128 * 1024)
        elif topic == self.topics.hello:  # the learner (re)connected: announce at once
            self.rc.on_control(payload)
            self._publish_status(self._state())
        elif topic == self.topics.welcome(self.opts.actor_id):
            self._on_welcome(payload)
        else:
            self.rc.on_credit(payload)

    def _heard_learner(self, topic: str) -> None:
        """Any message from the learner tells the watchdog it is there, but a ``paused``
        control (read once it is applied): that is what its last will says, which the
        broker sends for a learner that has died."""
        if self.watchdog is not None and topic != self.topics.target(self.opts.actor_id):
            if not (topic == self.topics.control and self.rc.state == "paused"):
                self.watchdog.heard(time.monotonic())

    def _on_welcome(self, payload: bytes) -> None:
        """The learner's answer to this board's hello: its control, or its policy."""
        if payload[:4] == MAGIC_POLICY:
            self.slot.offer(payload)
        else:  # a control message; anything else is counted there as undecodable
            self.rc.on_control(payload)

    def stop(self) -> None:
        """SIGTERM: the process ends (flush, final status ``stopped``)."""
        self.rc.stop()

    def _join(self, run_id: str) -> None:
        """A new run start: what this process did for an earlier one is no one's now. Counts
        start from zero (credit is per run start) and the policy slot waits for its policy."""
        if len(self.batcher):  # the open batch and the spool: stepped for the old run start
            self.batcher.take()
        self.batcher.run_id = run_id
        self.spool = Spool(self.board.spool_limit_bytes)
        self.env_steps = self.episodes = self.transitions_sent = self.batches_sent = 0
        self.transitions_oversize = 0
        self.rules.reset_counts()  # counted per run start, as episodes
        if self.teleop is not None:
            self.teleop.interventions = 0  # counted per run start, as env_steps
        self._returns.clear()
        self.slot.set_run(run_id)
        log.info("joined run %s (start %s)", self.opts.run, run_id)

    # --- the loop ---------------------------------------------------------------------

    def run(self) -> None:
        self.clock.restart()  # the breakdown's wall time starts here
        self.transport.start()
        self.slot.start()
        # A stop (SIGTERM) ends the wait; a board with watchdogs does not wait: its loop
        # gives the safe action (broker_lost) until the broker is there.
        deadline = time.monotonic() + (0 if self.watchdog is not None else 30)
        while not self.transport.wait_connected(0.1) and not self.rc.done:
            if time.monotonic() > deadline:
                log.warning("no broker at %s yet; still trying", self.opts.broker)
                break
        try:
            self._phases()
        finally:
            self._shutdown()

    def _phases(self) -> None:
        """Train or serve, as the run's control says, until the process ends."""
        while not self.rc.done:
            if self.rc.serves():
                self._serve()
                continue
            self._loop()  # until the control says serve, or the process ends
            limit = self.opts.max_env_steps
            if limit is not None and self.env_steps >= limit:
                return

    def _loop(self) -> None:
        lap = self.clock.lap  # each lap charges the time since the previous one
        lap("idle")  # connecting to the broker, starting the policy slot
        self._first_episode()
        lap("env_step")
        next_status, next_poll, rate_t, rate_steps = 0.0, 0.0, time.monotonic(), 0
        while not self.rc.done and not self.rc.serves():
            if (run_id := self.rc.take_join()) is not None:
                self._join(run_id)
                next_status = 0.0  # say so at once: the learner ignores other run starts
            now = time.monotonic()
            if (
                now >= next_status
                or self.rc.take_state_change()
                or self._new_policy_to_report(now - rate_t)
            ):
                self.steps_per_s = (self.env_steps - rate_steps) / max(now - rate_t, 1e-9)
                rate_t, rate_steps = now, self.env_steps
                self._publish_status(self._state())
                next_status = now + self.rc.status_every(self.board.status_interval_s)
            if self._watch(training=True):  # a watchdog: the safe action for one period
                lap("idle")
                self._ship(self.batcher.take())
                lap("publish")
                self._obs = self._safe_period(self._obs)
                continue
            if not self.rc.may_step(self.env_steps):  # paused, out of credit, no learner yet
                lap("idle")  # status, bookkeeping, and the last sleep
                self._ship(self.batcher.take())  # nothing sits in a batch while waiting
                lap("publish")
                self._wait(self._wait_turn(next_status - time.monotonic()))
                if self.rate is not None:  # a new schedule when stepping resumes
                    self.rate.restart()
                continue
            if self._obs is None:  # before an episode, the reset hook's turn: no step
                lap("idle")
                self._obs = self._reset_through_hook()
                lap("idle")
                continue
            lap("idle")  # control, status and loop bookkeeping since the last stint
            seconds = min(next_status, self.batcher.due()) - now
            if self.watchdog is not None:  # read again within one period
                seconds = min(seconds, self.period_s)
            self._stint(self._steps_allowed(), seconds)
            if self.batcher.ready():
                self._ship(self.batcher.take())
            if now >= next_poll:  # PUBACKs, grants, control: what came in meanwhile
                self.transport.poll()
                next_poll = now + POLL_S
            lap("publish")
            if self.opts.max_env_steps is not None and self.env_steps >= self.opts.max_env_steps:
                break

    # --- serving ----------------------------------------------------------------------

    def _serve(self) -> None:
        """Act greedily with the policy held, send no transitions, and report the version
        served and its return every ``serving_status_interval_s``, while the control says
        so. Steps taken here are not the run's: ``env_steps`` (the credit's count) stays."""
        lap = self.clock.lap
        lap("idle")
        self._ship(self.batcher.take())  # what training batched: the learner's, if it is there
        lap("publish")
        next_status, next_poll, obs, begun = 0.0, 0.0, None, False
        while self.rc.serves():
            now = time.monotonic()
            if now >= next_poll:  # the transport, every POLL_S: not on every step
                self.transport.poll()
                next_poll = now + POLL_S
            if now >= next_status:
                self._publish_status(self._state())
                next_status = now + self.rc.status_every(self.board.serving_status_interval_s)
            policy = self.slot.current  # the swap point, as in training
            if self._watch(training=False, has_policy=policy is not None):
                obs = self._safe_period(obs)
                lap("env_step")
                continue
            if policy is None:  # nothing to serve yet (its policy is on the way)
                self._wait(0.05)
                lap("idle")
                continue
            if not begun or policy.manifest.model_sha256 != self.served.digest:
                self.served.begin(policy.manifest.policy_version, policy.manifest.model_sha256)
                next_status = 0.0  # a rollout waits to hear which policy this board serves
                obs, begun = None, True
            if obs is None:  # a fresh episode: the reset hook's turn first, if there is one
                obs = self._new_episode()
                lap("env_step")
                if obs is None:  # the hook failed or was cut short: the watchdogs say so
                    continue
            obs = self._serve_step(policy, obs)

    # --- watchdogs and the safe state (docs/robots.md) ----------------------------------

    def _watch(self, *, training: bool, has_policy: bool = True) -> bool:
        """Read the watchdogs: whether this period goes to the safe action. A status says
        so at once on the way in and out (the way in may find no broker to take it)."""
        if self.watchdog is None:
            return False
        reason = self.watchdog.reason(
            time.monotonic(),
            training=training,
            has_policy=has_policy,
            connected=self.transport.connected,
        )
        if reason != self.safe_reason:
            if reason:
                log.warning("safe state: %s (on_stale %s)", reason, self.board.safety.on_stale)
            else:
                log.info("safe state left (%s cleared)", self.safe_reason)
            self.safe_reason = reason
            self._publish_status(self._state())
        return bool(reason)

    def _safe_period(self, obs: np.ndarray | None) -> np.ndarray | None:
        """One control period in the safe state: the shield's safe action (nothing for
        ``on_stale: stop``), then the transport served until the period ends. No row, no
        credit: these steps are not the policy's."""
        end = time.monotonic() + self.period_s
        action, _ = self.shield.safe(self.safe_reason)
        if action is not None and obs is None and self.reset_hook is not None:
            # Between episodes (a failed or cut-short reset): the env is not stepped or
            # reset; its next reset is the hook's, once the safe state has cleared.
            self._hold(action)
        elif action is not None:
            if obs is None:
                obs = self._reset_env()
            obs, _, terminated, truncated, _ = self.env.step(action)
            if terminated or truncated:
                obs = self._reset_env() if self.reset_hook is None else None
        self._idle(end - time.monotonic())
        if self.rate is not None:  # a new schedule when the policy acts again
            self.rate.restart()
        return obs

    def _serve_step(self, policy: LoadedPolicy, obs: np.ndarray) -> np.ndarray | None:
        lap = self.clock.lap
        if self.rate is not None:
            self.rate.tick()  # this step's deadline
        lap("idle")  # status and loop bookkeeping, the sleep to the deadline
        out = policy.runner(obs)
        compute = lap("inference")
        late = self.board.safety.inference_deadline_s
        if late is not None and compute > late:  # a late action is a wrong one
            action, _ = self.shield.safe("inference_late")
            if action is None:  # on_stale stop: no step
                return obs
        else:
            action, _ = self.shield.apply(greedy(out, self.spec))
        compute += lap("exploration")
        next_obs, reward, terminated, truncated, info = self.env.step(action)
        if self.rules.active:  # serving's episodes end by the same rules, uncounted
            terminated, truncated = self.rules.end(info, terminated, truncated, count=False)
        compute += lap("env_step")
        if self.throttle.factor:
            self.throttle.charge(compute)  # a slower board's inference + env step
            lap("emulation")
        ended = bool(terminated or truncated)
        self.served.step(float(reward), ended)
        if ended:  # a reset hook's turn is the serving loop's (None)
            next_obs = self._reset_env() if self.reset_hook is None else None
            lap("env_step")
        return next_obs

    # --- training stints -----------------------------------------------------------

    def _wait(self, seconds: float) -> None:
        """Up to ``seconds`` for news: serving the transport if this loop owns its I/O (a
        message ends the wait), else until a control, a grant or a stop comes in."""
        if self.transport.owner_io:
            self.transport.poll(seconds)
        else:
            self.rc.wait_news(seconds)

    def _wait_turn(self, to_status: float) -> float:
        """How long a board that may not step sleeps: until its next status is due (a
        waiting board costs no wake-ups in between), shorter while a batch is spooled
        (retried every ``WAIT_TURN_S``), a loaded policy is yet to be reported, or a
        watchdog is to be read (every period)."""
        turn = to_status
        if len(self.spool):
            turn = min(turn, WAIT_TURN_S)
        if self.slot.version != self._reported_version:
            turn = min(turn, max(MIN_STATUS_GAP_S, self.rc.status_interval_s))
        if self.transport.owner_io:
            turn = min(turn, OWN_IO_TURN_S)
        if self.watchdog is not None:  # read again within one period, waiting or not
            turn = min(turn, self.period_s)
        return max(turn, 0.0)

    def _idle(self, seconds: float) -> None:
        """Until ``seconds`` have passed, serving the transport (a message does not end it):
        the rate's sleep to a deadline, and the safe state's period."""
        end = time.monotonic() + seconds
        while (left := end - time.monotonic()) > 0:
            self._wait(left)

    def _steps_allowed(self) -> int:
        """Env steps the credit (and ``max_env_steps``) allow before control is read again."""
        n = self.rc.credit - self.env_steps
        if self.opts.max_env_steps is not None:
            n = min(n, self.opts.max_env_steps - self.env_steps)
        return n

    def _stint(self, n: int, seconds: float) -> None:
        """Up to ``n`` env steps under one read of the policy slot, into the open batch:
        fewer if the batch fills, or once ``seconds`` have passed (a status or the batch's
        flush is due). Control is read between stints, and the transport polled once
        ``POLL_S`` has passed, so a pause or a stop takes effect within ``POLL_S`` and one
        stint. Each step's inference, exploration and env step are timed on the loop's
        clock and charged with one split lap; the rest (the row's append and the step's
        bookkeeping) is publish. The throttle is charged once per step."""
        lap = self.clock.lap
        policy = self.slot.current  # one read: policies swap between two stints
        version = 0 if policy is None else policy.manifest.policy_version
        self._ship(self.batcher.open(version))  # a batch of the previous version
        n = min(n, self.batcher.room())
        lap("publish")
        self.explorer.plan(None if policy is None else policy.manifest.exploration, n)
        lap("exploration")
        # The bound __call__: calling the instance would look it up on every step.
        runner = _no_model if policy is None else policy.runner.__call__
        act, step, append = self.explorer.act, self.env.step, self.batcher.append
        teleop = self.teleop
        shield = self.shield.apply  # the last step before the env, for every action
        late = self.board.safety.inference_deadline_s  # None: no deadline
        charge = self.throttle.charge if self.throttle.factor else None
        tick = self.rate.tick if self.rate is not None else None
        ends = self.rules.end if self.rules.active else None  # time limit, success, failure
        now = self.clock.now
        obs = self._obs
        ep_return = self._ep_return
        inference = exploration = env_step = emulation = paced = 0.0
        stop_at = now() + seconds
        i = -1  # the last step's index: i + 1 steps taken
        for i in range(n):
            if tick is not None:  # sleep to this step's deadline (charged as idle)
                t = now()
                tick()
                paced += now() - t
            t0 = now()
            out = runner(obs)
            t1 = now()
            acted = False
            if late is not None and t1 - t0 > late:  # a late action is a wrong one
                action, _ = self.shield.safe("inference_late")
                if action is None:  # on_stale stop: this step is not taken
                    i -= 1
                    break
            else:
                action = act(out, i)
                if teleop is not None:  # an override replaces the policy's action (teleop.py)
                    action, acted = teleop(obs, action)
                # The shield last, for the override too: the row holds what the env got,
                # still marked an intervention when the shield changed the override.
                action, _ = shield(action)
            t2 = now()
            next_obs, reward, terminated, truncated, info = step(action)
            t3 = now()
            if ends is not None:  # the row says how the board's rules ended the episode
                terminated, truncated = ends(info, terminated, truncated)
            inference += t1 - t0
            exploration += t2 - t1
            env_step += t3 - t2
            if charge is not None:
                charge(t3 - t0)  # a slower board's inference + exploration + env step
                emulation += now() - t3
            append((obs, action, reward, next_obs, terminated, truncated, acted))
            ep_return += reward
            if terminated or truncated:
                env_step += self._episode_end(float(ep_return))
                obs, ep_return = self._obs, 0.0
                if obs is None:  # the reset hook's turn: the stint ends here
                    break
            else:
                obs = next_obs
            if t3 >= stop_at:
                break
        self._obs = obs
        self._ep_return = ep_return
        self.env_steps += i + 1
        self.clock.lap_split(
            {
                "inference": inference,
                "exploration": exploration,
                "env_step": env_step,
                "emulation": emulation,
                "idle": paced,
            },
            rest="publish",
        )

    def _episode_end(self, ep_return: float) -> float:
        """Count the episode and reset the env (into ``_obs``); returns the reset's time.
        With a reset hook, ``_obs`` is None: the loop gives the hook its turn."""
        self.episodes += 1
        self._returns.append(ep_return)
        if self.reset_hook is not None:
            self._obs = None
            return 0.0
        t0 = self.clock.now()
        self._obs = self._reset_env()
        return self.clock.now() - t0

    def _first_episode(self) -> None:
        """The env reset as training starts; with a reset hook, the hook's turn comes
        first, once the board may step (``_loop``)."""
        if self.reset_hook is None:
            self._obs = self._reset_env(self.opts.seed)
        else:
            self._obs = None
            self._next_seed = self.opts.seed

    def _new_episode(self) -> np.ndarray | None:
        """The env reset for a new episode: through the reset hook if there is one."""
        return self._reset_env() if self.reset_hook is None else self._reset_through_hook()

    def _reset_through_hook(self) -> np.ndarray | None:
        """The reset hook's turn before an episode (docs/robots.md): the observation to
        start from, or None (the hook failed, passed its timeout, or the e-stop or a stop
        cut it short; the board's watchdogs take it from there).

        While the hook runs on its own thread, this loop takes no env step and spends no
        credit; it serves the transport, reports ``resetting`` (at once, then every status
        interval), and watches the e-stop and the stop. The shield's safe action is put on
        the actuator first, through the env's optional ``hold(action)``."""
        hook = self.reset_hook
        assert hook is not None and self.watchdog is not None
        self._ship(self.batcher.take())  # the last episode's rows go before "resetting"
        if hook.running:  # an earlier hook ignored its cancel: never two at one robot
            self._reset_failed("reset_timeout", "an earlier reset hook still runs")
            return None
        self._hold(self.shield.safe(None)[0])
        seed, self._next_seed = self._next_seed, None
        hook.start(self.env, seed, time.monotonic())
        self.resetting = True
        log.info("resetting: the reset hook runs (at most %.1f s)", hook.timeout_s)
        self._publish_status("resetting")
        next_status = time.monotonic() + self.rc.status_every(self.board.status_interval_s)
        try:
            while not (outcome := hook.outcome(time.monotonic())):
                if self.rc.done or self.estop.engaged():  # wait no longer; tell the hook
                    hook.cancel()
                    return None  # the e-stop: the watchdog says so; a new reset once released
                now = time.monotonic()
                if now >= next_status:
                    self._publish_status("resetting")
                    next_status = now + self.rc.status_every(self.board.status_interval_s)
                self._wait(max(0.0, min(self.period_s, hook.deadline - now, next_status - now)))
        finally:
            self.resetting = False
        if outcome != "done":
            hook.cancel()
            self._reset_failed(outcome, hook.error or f"still running after {hook.timeout_s} s")
            return None
        self.shield.reset()
        self.rules.begin()
        if self.rate is not None:  # a new schedule: the reset's time is no missed period
            self.rate.restart()
        self._publish_status(self._state())
        return hook.obs

    def _reset_failed(self, reason: str, detail: str) -> None:
        """The board holds its safe state, as under the e-stop, until released on the
        board: the robot may be anywhere after a failed reset, and a person may be at it."""
        log.error(
            "%s (%s): safe state until released on the board%s",
            reason,
            detail,
            " (remove the estop file)" if self.estop.file is not None else " (restart)",
        )
        assert self.watchdog is not None
        self.watchdog.latch(reason)

    def _hold(self, action: object) -> None:
        """The safe action on the actuator between episodes, if the env can take one
        without a step (its optional ``hold(action)``), and no reset hook runs beside it."""
        hold = getattr(self.env, "hold", None)
        if action is None or hold is None or (self.reset_hook and self.reset_hook.running):
            return
        try:
            hold(action)
        except Exception as e:  # noqa: BLE001 (the board stays safe; the env's own fault)
            self.hold_failures += 1
            if self.hold_failures == 1:  # once: the safe state may call it every period
                log.warning("env.hold failed: %s: %s", type(e).__name__, e)

    def _reset_env(self, seed: int | None = None) -> np.ndarray:
        """A new episode: the env reset, the shield's rate from rest, the time limit's
        clock from now."""
        obs, _ = self.env.reset() if seed is None else self.env.reset(seed=seed)
        self.shield.reset()
        self.rules.begin()
        return obs

    def _new_policy_to_report(self, since_status: float) -> bool:
        """A policy loaded since the last status, which was at least the smallest status
        interval ago, and the learner's status interval if it states one (docs/protocol.md
        §5, *How often*): it is reported now."""
        gap = max(MIN_STATUS_GAP_S, self.rc.status_interval_s)
        return self.slot.version != self._reported_version and since_status >= gap

    def _state(self) -> ActorState:
        if self.safe_reason and not self.rc.done:
            return "safe"
        if self.resetting and not self.rc.done:
            return "resetting"
        return self.rc.status_state(self.env_steps)

    def _ship(self, batch: TransitionBatch | None) -> None:
        if batch is not None:
            payload = encode_transitions(batch)
            if len(payload) > self.board.max_batch_bytes:
                self.transitions_oversize += len(batch)  # counted; the learner sees the seq gap
                if self.transitions_oversize == len(batch):
                    log.warning("batch of %d bytes > max_batch_bytes: dropped", len(payload))
            else:
                self.spool.push(payload, len(batch))
        if len(self.spool):
            before = len(self.spool)
            self.transitions_sent += self.spool.drain(self._publish_transitions)
            self.batches_sent += before - len(self.spool)

    def _publish_transitions(self, payload: bytes) -> bool:
        return self.transport.publish(self._transitions_topic, payload, qos=1)

    def _shutdown(self) -> None:
        """Flush what is batched and spooled (bounded wait), say goodbye, disconnect."""
        lap = self.clock.lap
        lap("idle")
        if self.rc.state == "refused":  # another process owns the id: leave its status be
            self.slot.stop()
            self.transport.stop()
            self._close_env()
            return
        self._ship(self.batcher.take())
        lap("publish")
        deadline = time.monotonic() + STOP_FLUSH_S
        while len(self.spool) and time.monotonic() < deadline:
            self._wait(0.05)
            lap("idle")
            self._ship(None)
            lap("publish")
        self._publish_status("stopped", wait=STOP_STATUS_S)  # its breakdown ends at the last lap
        self.slot.stop()
        self.transport.stop()
        self._close_env()
        log.info(
            "actor %s done: %d env steps, %d transitions sent, %d dropped",
            self.opts.actor_id,
            self.env_steps,
            self.transitions_sent,
            self.spool.dropped_transitions,
        )

    def _close_env(self) -> None:
        """``env.close()``, but not beside a reset hook that still runs (it ignored its
        cancel): the board does not touch the env under it; the process's end frees it."""
        if self.reset_hook is not None and not self.reset_hook.wait(RESET_HOOK_CLOSE_S):
            log.warning("a reset hook still runs: env.close() not called")
            return
        self.env.close()

    # --- status -----------------------------------------------------------------------

    def _say(self, status: ActorStatus) -> None:
        """One log line per change of what this board does (its terminal, for ``edge-rl
        actor``): the run's state as it sees it, and the policy it serves. A board out of
        credit for a moment says ``paused`` in its status but still runs: no line."""
        said = (self.rc.state, status.policy_version if status.state == "serving" else 0)
        if said == self._said:
            return
        self._said = said
        o = self.opts
        lines = {
            "waiting": f"waiting for run {o.run!r} on {o.broker}: no learner has started it",
            "running": f"running: training for run {o.run!r} (start {self.rc.run_id})",
            "paused": f"paused: run {o.run!r}'s learner is away; holding policy "
            f"v{status.policy_version}",
            "serving": f"serving policy v{status.policy_version} of run {o.run!r}"
            if status.policy_version
            else f"serving: run {o.run!r} is done; no policy held yet",
            "stopped": f"stopped: run {o.run!r} ended; waiting for its next start",
            "refused": "refused: another live board has this id",
        }
        log.info("%s: %s", o.actor_id, lines.get(self.rc.state, self.rc.state))

    def _status(self, state: ActorState) -> ActorStatus:
        return ActorStatus(
            actor_id=self.opts.actor_id,
            state=state,
            board=self.board.board,
            runtime=self.slot.current.runner.runtime if self.slot.current else "",
            policy_version=self.slot.version,
            env_steps=self.env_steps,
            episodes=self.episodes,
            transitions_sent=self.transitions_sent,
            batches_sent=self.batches_sent,
            batches_dropped=self.spool.dropped_batches,
            policies_rejected=sum(self.slot.rejected.values()),
            control_rejected=self.rc.rejected,
            transitions_oversize=self.transitions_oversize,
            transitions_dropped=self.spool.dropped_transitions,
            env_steps_per_s=round(self.steps_per_s, 1),
            recent_return=self._recent_return(state),
            time_unix=time.time(),
            breakdown=self._breakdown(),
            run_id=self.rc.run_id or "",
            session=self.session,
            policy_digest=self.slot.digest,
            served_episodes=self.served.episodes if state == "serving" else 0,
            policies_failed=self.slot.failed,
            interventions=self.teleop.interventions if self.teleop else 0,
            safety={k: n for k, n in self.shield.counts.items() if n},
            safe_reason=self.safe_reason if state == "safe" else "",
            control_periods=self.rate.periods if self.rate else 0,
            deadline_misses=self.rate.misses if self.rate else 0,
            jitter_p50_ms=self.rate.jitter_ms(50) if self.rate else 0.0,
            jitter_p99_ms=self.rate.jitter_ms(99) if self.rate else 0.0,
            episodes_succeeded=self.rules.succeeded,
            episodes_failed=self.rules.failed,
        )

    def _recent_return(self, state: ActorState) -> float | None:
        """Serving: the greedy return of the version served; else the training return."""
        if state == "serving":
            return self.served.recent_return
        return float(np.mean(self._returns)) if self._returns else None

    def _breakdown(self) -> dict[str, float]:
        """The loop's buckets (adding up to ``wall``) and the policy slot thread's work;
        none before the loop's first lap (the last will, the status on connect)."""
        loop = self.clock.totals()
        if loop["wall"] == 0.0:
            return {}
        return {
            **loop,
            "policy_receive": round(self.slot.receive_seconds, 6),
            "model_load": round(self.slot.load_seconds, 6),
        }

    def _publish_status(self, state: ActorState, wait: float = 0.0) -> None:
        status = self._status(state)
        self._say(status)
        # A new policy is reported at once, not at the next period: the learner sees
        # its fan-out finish (benchmarks/control_plane.py) within a stint.
        self._reported_version = status.policy_version
        payload = encode_status(status)
        self.transport.publish(
            self.topics.status(self.opts.actor_id), payload, qos=1, retain=True, wait=wait
        )
