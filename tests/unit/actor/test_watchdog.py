"""The watchdogs' decisions (actor/watchdog.py), table-driven on a clock the test sets,
and the e-stop's inputs: a file, SIGUSR2 and a callable."""

from __future__ import annotations

import os
import signal

import pytest

from edge_rl.actor.watchdog import EStop, Watchdog, load_input

STALE = 1.0


@pytest.mark.parametrize(
    ("since_heard", "training", "has_policy", "connected", "reason"),
    [
        (0.5, True, True, True, ""),  # training, the learner heard lately
        (1.5, True, True, True, "learner_silent"),
        (0.5, True, True, False, "broker_lost"),
        (1.5, True, False, False, "broker_lost"),  # the broker first: it says more
        (0.5, True, False, True, ""),  # no policy yet while training: rule 1's random actions
        (9.0, False, True, False, ""),  # serving needs no network
        (0.0, False, False, True, "no_policy"),  # serving with nothing to serve
    ],
)
def test_the_watchdogs_decide_by_the_table(since_heard, training, has_policy, connected, reason):
    dog = Watchdog(STALE, EStop(), now=100.0)
    dog.heard(100.0)
    got = dog.reason(
        100.0 + since_heard, training=training, has_policy=has_policy, connected=connected
    )
    assert got == reason


def test_without_a_stale_bound_only_the_estop_and_policy_count():
    dog = Watchdog(None, EStop(), now=0.0)
    assert dog.reason(1e6, training=True, has_policy=True, connected=False) == ""


def test_the_estop_comes_first_and_holds_whatever_the_network(tmp_path):
    estop = EStop(str(tmp_path / "estop"))
    dog = Watchdog(STALE, estop, now=0.0)
    estop.engage()
    assert (tmp_path / "estop").exists()
    for t in (0.1, 10.0, 1000.0):
        dog.heard(t)  # the learner speaks: no release
        assert dog.reason(t, training=True, has_policy=True, connected=True) == "estop"
    (tmp_path / "estop").unlink()  # released on the board
    assert dog.reason(1000.0, training=True, has_policy=True, connected=True) == ""


def test_sigusr2_engages_the_estop(tmp_path):
    previous = signal.getsignal(signal.SIGUSR2)
    estop = EStop(str(tmp_path / "estop"))
    try:
        estop.install_signal()
        assert not estop.engaged()
        os.kill(os.getpid(), signal.SIGUSR2)
        assert estop.engaged() and (tmp_path / "estop").exists()
    finally:
        signal.signal(signal.SIGUSR2, previous)


def test_without_a_file_a_signal_s_stop_holds_until_the_process_ends():
    estop = EStop()
    estop.engage()
    assert estop.engaged()


pressed = [False]


def button() -> bool:
    """A stand-in for a GPIO pin read: ``tests.unit.actor.test_watchdog:button``."""
    return pressed[0]


def test_an_input_callable_stops_while_it_reads_true():
    estop = EStop(pressed=load_input("tests.unit.actor.test_watchdog:button"))
    assert not estop.engaged()
    pressed[0] = True
    try:
        assert estop.engaged()
    finally:
        pressed[0] = False
    with pytest.raises(ValueError, match="estop_input"):
        load_input("no.such.module:x")
