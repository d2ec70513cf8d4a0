"""The board file's episode: section in a real ActorNode (docs/robots.md): a time limit in
seconds ending episodes of a real gymnasium env, read from the transitions the learner's
side decodes; success and failure from a real env's info, counted in the status; the
reset hook on a real Mosquitto: ``resetting`` on the wire and nothing sent while it runs,
and a hook past its timeout holding the board safe until released."""

from __future__ import annotations

import threading
import time
import uuid

import gymnasium as gym
import numpy as np

from edge_rl.actor.node import ActorNode, ActorOptions
from edge_rl.boards import BoardConfig, Episode, Safety
from edge_rl.transport.memory import MemoryBroker
from edge_rl.types import ControlMessage, CreditGrant
from edge_rl.wire.messages import decode_status, encode_control, encode_credit
from edge_rl.wire.topics import Topics
from edge_rl.wire.transitions import decode_transitions
from tests.harness import robot_envs
from tests.harness.waits import until, wait_for

RUN_ID = "episodes-start"


def run_board(board: BoardConfig, env: str, steps: int, public_key: str, run: str):
    """A board stepping ``steps`` under credit; ``(node, batches, statuses)``."""
    broker = MemoryBroker()
    topics = Topics("edge-rl", run)
    batches, statuses = [], []
    learner = broker.connect(
        "learner",
        subscriptions=[(topics.transitions("a0"), 1), (topics.status("a0"), 1)],
        on_message=lambda t, p: (batches if "transitions" in t else statuses).append(p),
    )
    learner.start()
    assert learner.wait_connected(5)
    opts = ActorOptions(
        "a0", env, "memory://", run=run, seed=3, max_env_steps=steps, policy_key=public_key
    )
    node = ActorNode(board, opts, connect=broker.connect)
    learner.publish(topics.control, encode_control(ControlMessage("running", RUN_ID)), retain=True)
    grant = encode_credit(CreditGrant(RUN_ID, node.session, steps))
    learner.publish(topics.credit("a0"), grant, retain=True)
    thread = threading.Thread(target=node.run, name="actor-under-test", daemon=True)
    thread.start()
    try:
        wait_for(lambda: not thread.is_alive(), 60, "the actor's steps, then its exit")
    finally:
        node.stop()
        thread.join(10)
        broker.close()
    rows = [decode_transitions(p, node.spec) for p in batches]
    return node, rows, [decode_status(p) for p in statuses]


def episode_lengths(ends: np.ndarray) -> list[int]:
    """Steps in each episode that ended, from the rows' end flags."""
    at = np.flatnonzero(ends) + 1
    return np.diff(np.concatenate([[0], at])).tolist()


def test_a_time_limit_in_seconds_truncates_episodes(policy_keys):
    hz, limit, steps = 50.0, 0.3, 150
    board = BoardConfig(
        board="test-board",
        batch_size=32,
        control_hz=hz,
        episode=Episode(time_limit_s=limit),
    )
    node, rows, _ = run_board(
        board, "tests.harness.robot_envs:pendulum", steps, str(policy_keys[1]), "time-limit"
    )
    terminated = np.concatenate([b.terminated for b in rows])
    truncated = np.concatenate([b.truncated for b in rows])
    assert len(truncated) == steps
    # Truncated, never terminated: gymnasium's TimeLimit, not the MDP's end.
    assert not terminated.any()
    lengths = episode_lengths(truncated)
    # At 50 Hz a 0.3 s episode holds at most 17 steps: those whose deadlines fall in the
    # 0.3 s after the reset and the period before it (a late first step), and the step
    # that finds the limit passed. The rate never bursts (a loaded machine's missed
    # periods only make it fewer); Pendulum's own limit is 200 steps.
    assert len(lengths) >= steps // 17
    assert max(lengths) <= limit * hz + 2, lengths
    env = robot_envs.MADE[-1]
    assert env.resets == len(lengths) + 1  # each end reset the env, and the first episode
    assert node.episodes == len(lengths)


class Walk(gym.Env):
    """A real gymnasium env: a walk driven by the action, reporting success at x >= 1 and
    a fall at x <= -1 in its info, and never ending an episode by itself."""

    observation_space = gym.spaces.Box(-10, 10, (1,), np.float32)
    action_space = gym.spaces.Box(-1, 1, (1,), np.float32)

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.x = 0.0
        return np.array([self.x], np.float32), {}

    def step(self, action):
        self.x += 0.3 * float(np.asarray(action).reshape(-1)[0])
        info = {"is_success": self.x >= 1.0, "fell": self.x <= -1.0}
        return np.array([self.x], np.float32), 0.0, False, False, info


def walk() -> Walk:
    return Walk()


def test_success_and_failure_in_info_end_and_count_episodes(policy_keys):
    steps = 600
    board = BoardConfig(
        board="test-board",
        batch_size=64,
        episode=Episode(success_key="is_success", failure_key="fell"),
    )
    node, rows, statuses = run_board(
        board, f"{__name__}:walk", steps, str(policy_keys[1]), "outcomes"
    )
    terminated = np.concatenate([b.terminated for b in rows])
    truncated = np.concatenate([b.truncated for b in rows])
    x = np.concatenate([b.next_obs for b in rows]).reshape(-1)
    assert len(x) == steps and not truncated.any()
    # Every row past a bound ended its episode as terminated, and no other row did.
    assert np.array_equal(terminated, (x >= 1.0) | (x <= -1.0))
    succeeded, failed = int((terminated & (x >= 1.0)).sum()), int((terminated & (x <= -1.0)).sum())
    assert succeeded > 0 and failed > 0
    last = statuses[-1]  # the board's own count, on the wire, against the rows
    assert (last.episodes_succeeded, last.episodes_failed) == (succeeded, failed)
    assert last.episodes == succeeded + failed == node.episodes


# --- the reset hook: a real ActorNode on a real Mosquitto --------------------------------

OPEN = threading.Event()  # gate_hook returns at once while set
BLOCKED = threading.Event()  # gate_hook is waiting at the closed gate
RELEASE = threading.Event()  # hang_hook returns once set (it ignores its cancel)
HOOKED: list[object] = []  # the env each hook call got


def gate_hook(env, cancel) -> None:
    """A person resetting the robot: done at once while OPEN, else until it opens."""
    HOOKED.append(env)
    deadline = time.monotonic() + 60  # a test never leaves a thread behind for long
    while not OPEN.is_set() and not cancel.is_set() and time.monotonic() < deadline:
        BLOCKED.set()
        OPEN.wait(0.005)  # back at once when it opens, to look at cancel too
    BLOCKED.clear()


def hang_hook(env, cancel) -> None:
    """A hook that hangs, deaf to its cancel, until the test releases it (bounded)."""
    HOOKED.append(env)
    RELEASE.wait(60)


class Wire:
    """What a learner would see of one board, in arrival order: ("status", ActorStatus)
    and ("rows", TransitionBatch), off a real broker through the codecs."""

    def __init__(self, client, topics: Topics, actor: str, spec_of) -> None:
        self.seen: list[tuple[str, object]] = []
        self._spec_of = spec_of
        self._lock = threading.Lock()
        client.on_message = self._on
        client.subscribe(topics.status(actor), qos=1)
        client.subscribe(topics.transitions(actor), qos=1)

    def _on(self, _c, _u, msg) -> None:
        if "transitions" in msg.topic:
            item = ("rows", decode_transitions(msg.payload, self._spec_of()))
        else:
            item = ("status", decode_status(msg.payload))
        with self._lock:
            self.seen.append(item)

    def items(self) -> list[tuple[str, object]]:
        with self._lock:
            return list(self.seen)

    def rows(self) -> int:
        return sum(len(x) for k, x in self.items() if k == "rows")

    def states(self) -> list[str]:
        return [x.state for k, x in self.items() if k == "status"]


def start_board(mosquitto, mqtt_client_factory, grant_run, policy_keys, episode, safety=None):
    run = f"ep-{uuid.uuid4().hex[:8]}"
    topics = Topics("edge-rl", run)
    client = mqtt_client_factory(mosquitto)
    board = BoardConfig(
        board="test-robot",
        batch_size=16,
        flush_interval_s=0.1,
        status_interval_s=0.2,
        control_hz=50.0,
        episode=episode,
        safety=safety or Safety(),
    )
    opts = ActorOptions(
        "r0",
        "tests.harness.robot_envs:pendulum",
        mosquitto.url,
        run=run,
        seed=1,
        policy_key=str(policy_keys[1]),
    )
    node = ActorNode(board, opts)
    wire = Wire(client, topics, "r0", lambda: node.spec)
    grant_run(client, topics, "r0", node.session)
    thread = threading.Thread(target=node.run, name="actor-under-test", daemon=True)
    thread.start()
    return node, robot_envs.MADE[-1], wire, thread


def stop_board(node, thread) -> None:
    node.stop()
    thread.join(30)
    assert not thread.is_alive()


def test_while_the_reset_hook_runs_the_board_says_resetting_and_sends_nothing(
    mosquitto, mqtt_client_factory, grant_run, policy_keys
):
    HOOKED.clear()
    OPEN.set()
    episode = Episode(time_limit_s=0.3, reset_hook=f"{__name__}:gate_hook", reset_timeout_s=600.0)
    node, env, wire, thread = start_board(
        mosquitto, mqtt_client_factory, grant_run, policy_keys, episode
    )
    try:
        wait_for(lambda: wire.rows() >= 40, 60, "40 transitions over several episodes")
        OPEN.clear()  # the next reset waits for its person
        wait_for(BLOCKED.is_set, 30, "the hook waiting at the closed gate", 0.005)
        wait_for(
            lambda: wire.states()[-1:] == ["resetting"], 30, "the resetting status on the wire"
        )
        steps, rows, stepped = node.env_steps, wire.rows(), len(env.received)
        # A second and more: five flush intervals and status intervals, fifty periods.
        assert not until(lambda: wire.rows() > rows or len(env.received) > stepped, 1.5)
        assert node.env_steps == steps and node._state() == "resetting"
        during = [x for k, x in wire.items() if k == "status"][-3:]
        assert [s.state for s in during] == ["resetting"] * 3  # periodic, all resetting
        assert {s.env_steps for s in during} == {steps}  # no step: no credit spent
        OPEN.set()
        wait_for(lambda: wire.rows() > rows + 16, 30, "transitions again after the reset")
    finally:
        OPEN.set()
        stop_board(node, thread)
    assert all(e is env for e in HOOKED) and len(HOOKED) >= 3  # before every episode
    # On the wire: between a resetting status and the next other status, no transitions;
    # the rows before each resetting window end an episode (truncated: the time limit).
    window, last_rows, windows = False, None, 0
    for kind, x in wire.items():
        if kind == "rows":
            assert not window, "a transition batch arrived while the board was resetting"
            last_rows = x
        elif x.state == "resetting" and not window:
            window, windows = True, windows + 1
            if last_rows is not None:
                assert last_rows.truncated[-1] or last_rows.terminated[-1]
        elif x.state != "resetting":
            window = False
    assert windows >= 3


def test_a_reset_hook_past_its_timeout_holds_the_board_safe_until_released(
    tmp_path, mosquitto, mqtt_client_factory, grant_run, policy_keys
):
    HOOKED.clear()
    RELEASE.clear()
    estop = tmp_path / "estop"
    episode = Episode(reset_hook=f"{__name__}:hang_hook", reset_timeout_s=0.5)
    safety = Safety(on_stale="zero", estop_file=str(estop))
    node, env, wire, thread = start_board(
        mosquitto, mqtt_client_factory, grant_run, policy_keys, episode, safety
    )
    try:
        wait_for(lambda: "safe" in wire.states(), 30, "the safe status after the timeout")
        safe = next(x for k, x in wire.items() if k == "status" and x.state == "safe")
        assert safe.safe_reason == "reset_timeout"
        states = wire.states()
        assert "resetting" in states[: states.index("safe")]  # it said resetting first
        assert estop.exists()  # held as the e-stop is: released on the board
        # The hung hook holds the env: not stepped, not reset, while it is safe.
        assert not until(lambda: len(env.received) > 0 or env.resets > 0, 1.0)
        assert wire.rows() == 0 and node.env_steps == 0
        assert node._state() == "safe"  # nothing from the network releases it
        RELEASE.set()  # the hook returns (cancelled: the board does not reset after it)
        wait_for(lambda: not node.reset_hook.running, 30, "the hung hook's end")
        assert env.resets == 0 and node._state() == "safe"
        estop.unlink()  # a person releases it: the hook runs again, then the episode
        wait_for(lambda: wire.rows() >= 16, 30, "transitions once released")
    finally:
        RELEASE.set()
        stop_board(node, thread)
    assert len(HOOKED) == 2 and env.resets == 1
    # The board had its "stopped" acknowledged by the broker; the test's subscriber gets it
    # a moment later.
    last = lambda: [x.state for k, x in wire.items() if k == "status"][-1]  # noqa: E731
    wait_for(lambda: last() == "stopped", 10, "the board's last status: stopped", 0.05)


def failing_hook(env, cancel) -> None:
    HOOKED.append(env)
    raise RuntimeError("the gripper did not open")


def test_a_reset_hook_that_raises_holds_the_board_safe_until_a_restart(
    mosquitto, mqtt_client_factory, grant_run, policy_keys
):
    """No estop_file: the board's own stop is a signal's, held until the process ends."""
    HOOKED.clear()
    episode = Episode(reset_hook=f"{__name__}:failing_hook", reset_timeout_s=30.0)
    node, env, wire, thread = start_board(
        mosquitto, mqtt_client_factory, grant_run, policy_keys, episode
    )
    try:
        wait_for(lambda: "safe" in wire.states(), 30, "the safe status after the failure")
        safe = next(x for k, x in wire.items() if k == "status" and x.state == "safe")
        assert safe.safe_reason == "reset_failed"
        # Held: no second hook, no step, no reset, whatever the learner says meanwhile.
        grant_run(mqtt_client_factory(mosquitto), node.topics, "r0", node.session)
        assert not until(lambda: len(HOOKED) > 1 or len(env.received) > 0 or env.resets, 1.0)
        assert node._state() == "safe" and wire.rows() == 0
    finally:
        stop_board(node, thread)
    wait_for(lambda: wire.states()[-1] == "stopped", 10, "the board's last status", 0.05)


def test_the_estop_cuts_a_reset_hook_short_and_the_hook_runs_again_once_released(
    tmp_path, mosquitto, mqtt_client_factory, grant_run, policy_keys
):
    HOOKED.clear()
    OPEN.clear()
    estop = tmp_path / "estop"
    episode = Episode(reset_hook=f"{__name__}:gate_hook", reset_timeout_s=600.0)
    safety = Safety(on_stale="zero", estop_file=str(estop))
    node, env, wire, thread = start_board(
        mosquitto, mqtt_client_factory, grant_run, policy_keys, episode, safety
    )
    try:
        wait_for(lambda: wire.states()[-1:] == ["resetting"], 30, "resetting on the wire")
        cancel_seen = len(HOOKED)
        node.estop.engage()  # what SIGUSR2 does: writes the file
        wait_for(lambda: "safe" in wire.states(), 30, "the safe status under the e-stop")
        safe = next(x for k, x in wire.items() if k == "status" and x.state == "safe")
        assert safe.safe_reason == "estop"  # the person's stop, not a reset failure
        wait_for(lambda: not node.reset_hook.running, 10, "the cancelled hook's end")
        assert env.resets == 0 and len(env.received) == 0 and len(HOOKED) == cancel_seen
        OPEN.set()
        estop.unlink()  # released on the board: the hook's turn again, then the episode
        wait_for(lambda: wire.rows() >= 16, 30, "transitions once released")
    finally:
        OPEN.set()
        stop_board(node, thread)
    assert len(HOOKED) == 2 and env.resets == 1
