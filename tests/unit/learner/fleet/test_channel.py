"""The control channel (``ControlChannel``): a new message goes out retained, a final one
waits for the broker's acknowledgement, and one the transport refused goes out again."""

from __future__ import annotations

from edge_rl.learner.fleet.channel import FINAL_ACK_WAIT_S, HEARTBEAT_S, ControlChannel
from edge_rl.wire.messages import decode_control
from edge_rl.wire.topics import Topics

TOPICS = Topics("edge-rl", "channel")


class Sent(list):
    refuse = False

    def __call__(self, topic: str, payload: bytes, retain: bool = False, wait: float = 0.0):
        if self.refuse:
            return False
        self.append((topic, decode_control(payload).state, retain, wait))
        return True


def test_messages_out_once_final_ones_waited_for():
    sent = Sent()
    channel = ControlChannel(TOPICS, sent, "c-start")
    assert not channel.announce(TOPICS.hello)  # nothing to say before the first control
    assert channel.update("running", "", 0.0)
    channel.send()
    assert not channel.update("running", "", 0.0)  # the same message: not new
    assert channel.update("running", "", 0.25) and channel.stated_interval() == 0.25
    channel.send()
    assert channel.update("serving", "", 0.25) and channel.state == "serving"
    channel.send()
    channel.republish()  # on the transport's thread: no wait
    assert sent == [
        (TOPICS.control, "running", True, 0.0),
        (TOPICS.control, "running", True, 0.0),
        (TOPICS.control, "serving", True, FINAL_ACK_WAIT_S),
        (TOPICS.control, "serving", True, 0.0),
    ]
    channel.welcome("pi")
    assert channel.announce(TOPICS.hello)
    assert sent[-2:] == [(TOPICS.welcome("pi"), "serving", False, 0.0)] + [
        (TOPICS.hello, "serving", False, 0.0)
    ]


def test_a_refused_message_is_counted_and_resent():
    sent = Sent()
    channel = ControlChannel(TOPICS, sent, "c-start")
    channel.update("paused", "interrupted", 0.0)
    sent.refuse = True
    channel.send()
    assert channel.unsent == 1 and sent == []
    sent.refuse = False
    channel.resend()
    channel.resend()  # sent: not again
    assert [s[1] for s in sent] == ["paused"]


def test_a_running_control_beats_every_heartbeat_or_stated_interval_and_a_paused_never():
    sent, now = Sent(), [100.0]
    channel = ControlChannel(TOPICS, sent, "c-start", clock=lambda: now[0])
    channel.heartbeat()  # nothing to repeat before the first control
    assert channel.update("running", "", 0.0)
    channel.send()
    for k in range(1, 8):  # rounds of a quarter heartbeat
        now[0] = 100.0 + k * HEARTBEAT_S / 4
        channel.heartbeat()
    assert len(sent) == 2  # at 100.0, and one heartbeat later
    assert channel.update("running", "", 2.0)  # a fleet asked for statuses every 2 s
    channel.send()  # at 100.4375
    for t in (101.0, 102.0, 102.4):  # under 2 s since: not yet
        now[0] = t
        channel.heartbeat()
    assert len(sent) == 3
    now[0] = 102.5  # 2.06 s since the last
    channel.heartbeat()
    assert len(sent) == 4
    assert channel.update("paused", "", 2.0)  # the learner away says so once, no beat
    channel.send()
    now[0] = 200.0
    channel.heartbeat()
    assert [s[1] for s in sent] == ["running"] * 4 + ["paused"]
