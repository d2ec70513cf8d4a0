"""``edge-rl deploy`` against eight real board processes (``sim/fleet.py``) serving a run on
a real Mosquitto (docs/fleet.md, Rollout):

(a) a properly signed policy of a random network stops at the canaries: every canary
    serves its previous policy again, and no other board ever loads it;
(b) a good policy then reaches every board, canaries first, and becomes the run's retained
    policy; ``edge-rl fleet-status`` (broker and run from ``EDGE_RL_*``) shows the run's
    state, its boards by state, what each serves and both deployments, as recorded;
(c) SIGINT to the ``edge-rl deploy`` process mid-rollout (Ctrl-C): it exits 130 within
    seconds, the targets it sent are cleared, the run's policy is not replaced, and each
    board keeps what it serves; the history records it ``interrupted``.
(d) a board that lies (valid status topic, its own id) decides nothing: a claimed return
    of -1e300 does not let a bad policy through, +1e300 and one refusal do not veto a good
    one, and a retained status of v2^53-1 does not stop the next deploy.
"""

from __future__ import annotations

import hashlib
import json
import signal
import subprocess
import sys
import threading
import time
import zlib
from pathlib import Path

import gymnasium as gym
import numpy as np
import pytest

from edge_rl.actor.exploration import greedy
from edge_rl.runtime.litert import TFLitePolicy
from edge_rl.sim.fleet import Fleet, fleet_ids
from edge_rl.types import ActorStatus, ControlMessage
from edge_rl.wire.messages import decode_status, encode_control
from edge_rl.wire.policy import decode_policy, encode_policy
from edge_rl.wire.topics import Topics
from tests.harness.attackers import LyingServer
from tests.harness.cartpole_policies import CARTPOLE, MODELS, policy_bundle
from tests.harness.paths import REPO
from tests.harness.waits import wait_for

RUN, RUN_ID = "rollout-e2e", "served-start"
N = 8
BOARD = """\
board: test-board
num_threads: 1
status_interval_s: 0.2
serving_status_interval_s: 1
"""
DEPLOY = (  # a short health window and quick waves: the whole test stays under a minute
    "--canary 0.25 --window 20 --min-episodes 3 --max-drop 0.1 --batch 3 --rate 6 --confirm 20"
).split()


class History:
    """Every status each board sent, from a subscriber on the run's status topics."""

    def __init__(self, client, topics: Topics) -> None:
        self.seen: dict[str, list[ActorStatus]] = {}
        self._lock = threading.Lock()
        client.on_message = self._on_message
        client.subscribe(topics.all_status, qos=1)

    def _on_message(self, _client, _userdata, message) -> None:
        if message.payload:
            status = decode_status(message.payload)
            with self._lock:
                self.seen.setdefault(status.actor_id, []).append(status)

    def latest(self) -> dict[str, ActorStatus]:
        with self._lock:
            return {a: s[-1] for a, s in self.seen.items()}

    def digests(self, actor_id: str) -> set[str]:
        with self._lock:
            return {s.policy_digest for s in self.seen.get(actor_id, [])} - {""}

    def wait_all(self, ids: list[str], check, timeout: float) -> dict[str, ActorStatus]:
        def there() -> bool:
            got = self.latest()
            return all(a in got and check(got[a]) for a in ids)

        wait_for(there, timeout, f"{ids} as checked", 0.1, detail=lambda: str(self.latest()))
        return self.latest()


def _greedy_returns(model: bytes, episodes: int = 5) -> list[float]:
    policy, env, out = TFLitePolicy(model), gym.make("CartPole-v1"), []
    for seed in range(episodes):
        obs, _ = env.reset(seed=seed)
        total, done = 0.0, False
        while not done:
            obs, reward, terminated, truncated, _ = env.step(greedy(policy(obs), CARTPOLE))
            total, done = total + float(reward), terminated or truncated
        out.append(total)
    return out


def test_the_test_policies_are_what_their_names_say():
    assert _greedy_returns(MODELS["good"].read_bytes()) == [500.0] * 5
    assert _greedy_returns(MODELS["good2"].read_bytes()) == [500.0] * 5
    assert np.mean(_greedy_returns(MODELS["random"].read_bytes())) < 100


def _bundle_file(tmp_path: Path, quality: str, signer) -> Path:
    """The policy as another run made it: its own run, run start and version."""
    bundle = policy_bundle(MODELS[quality].read_bytes(), run="lab", run_id="lab-1", version=40)
    path = tmp_path / f"{quality}.bundle"
    path.write_bytes(encode_policy(bundle, signer))
    return path


def _end_of_run(learner, topics: Topics, run: str, signer, tmp_path: Path) -> Path:
    """What a finished run leaves on the broker: its deployed policy (v3) retained, and
    control "serving". Returns the board file the fleet starts with."""
    first = encode_policy(
        policy_bundle(MODELS["good"].read_bytes(), run=run, run_id=RUN_ID, version=3), signer
    )
    serving = encode_control(ControlMessage("serving", RUN_ID))
    for topic, payload in ((topics.policy, first), (topics.control, serving)):
        learner.publish(topic, payload, qos=1, retain=True).wait_for_publish(5)
    board = tmp_path / "board.yaml"
    board.write_text(BOARD)
    return board


def _deploy(cli, url: str, bundle: Path, key: Path, pub: Path) -> tuple[int, dict, float]:
    t0 = time.monotonic()
    args = ["deploy", str(bundle), "--broker", url, "--run", RUN, "--signing-key", str(key)]
    done = cli(*args, "--bundle-key", str(pub), *DEPLOY, "--json", timeout=120)
    assert done.returncode in (0, 2, 3), done.stderr
    return done.returncode, json.loads(done.stdout), time.monotonic() - t0


@pytest.mark.slow
def test_a_bad_policy_stops_at_the_canaries_and_a_good_one_reaches_every_board(
    mosquitto, mqtt_client_factory, policy_keys, cli, tmp_path, monkeypatch
):
    t_start = time.monotonic()
    signer, pub = policy_keys
    key = pub.with_suffix(".key")
    topics, url, ids = Topics("edge-rl", RUN), mosquitto.url, fleet_ids(N, "ro")
    learner = mqtt_client_factory(mosquitto)
    history = History(mqtt_client_factory(mosquitto), topics)
    board = _end_of_run(learner, topics, RUN, signer, tmp_path)
    fleet = Fleet(N, board, url, "CartPole-v1", policy_key=pub, run=RUN, id_prefix="ro")
    try:
        with fleet:
            before = history.wait_all(
                ids,
                lambda s: s.state == "serving" and s.policy_version == 3 and s.recent_return,
                timeout=60,
            )
            t_serving = time.monotonic()
            old = before[ids[0]].policy_digest
            assert {s.policy_digest for s in before.values()} == {old}

            # (a) a random network, properly signed: stopped at the canaries
            bad = _bundle_file(tmp_path, "random", signer)
            code, out, bad_s = _deploy(cli, url, bad, key, pub)
            assert code == 2 and out["result"] == "aborted", out
            assert "below" in out["reason"] and out["canary_return"] < 100
            canaries = out["canaries"]
            assert len(canaries) == 3 and out["assigned"] == canaries  # at least three
            assert isinstance(out["seed"], int)  # drawn at random, printed to draw again
            assert out["rolled_back"] == canaries and out["unconfirmed"] == []
            now = history.latest()
            for a in ids:
                assert now[a].policy_version == 3 and now[a].policy_digest == old, a
            for a in canaries:  # each canary did serve it, then went back
                assert history.digests(a) == {old, out["digest"]}, a
                # served_episodes restarts with each policy served, the rollback's too
                # (docs/protocol.md §5.5): back on the old digest, it counts from 0 again.
                seen = [s for s in history.seen[a] if s.policy_digest]
                i = next(k for k, s in enumerate(seen) if s.policy_digest == out["digest"])
                j = next(k for k in range(i, len(seen)) if seen[k].policy_digest == old)
                assert seen[i - 1].served_episodes >= 3, seen[i - 1]  # before: many
                assert seen[j].served_episodes < seen[i - 1].served_episodes, seen[j]
            for a in set(ids) - set(canaries):
                assert history.digests(a) == {old}, a  # never loaded
                assert now[a].policies_failed == 0
            after_bad = {a: now[a].policies_rejected for a in ids}

            # (b) a good policy: every board
            good = _bundle_file(tmp_path, "good2", signer)
            code, out2, good_s = _deploy(cli, url, good, key, pub)
            assert code == 0 and out2["result"] == "deployed", out2
            assert sorted(out2["serving_new"]) == ids and out2["canary_return"] == 500.0
            new = out2["digest"]
            # One above what the fleet serves: the aborted policy's number, another digest.
            assert new not in (old, out["digest"]) and out2["version"] == out["version"] == 4
            final = history.wait_all(ids, lambda s: s.policy_digest == new, timeout=10)
            assert all(s.policy_version == 4 and s.state == "serving" for s in final.values())
            retained = _retained(mqtt_client_factory(mosquitto), topics.policy)
            manifest = decode_policy(retained, signer.verifier()).manifest
            assert (manifest.policy_version, manifest.model_sha256) == (4, new)
            assert manifest.run == RUN and manifest.run_id == RUN_ID
            assert manifest.extra["deployed_from"] == {
                "run": "lab",
                "run_id": "lab-1",
                "policy_version": 40,
            }
            assert zlib.decompress(decode_policy(retained, signer.verifier()).payload) == (
                MODELS["good2"].read_bytes()
            )

            cleared = cli("deploy", "--clear", "--broker", url, "--run", RUN, timeout=60)
            assert cleared.returncode == 0, cleared.stderr
            assert cleared.stdout.strip() == f"targets cleared: {N} boards ({', '.join(ids)})"

            # The one view, its broker and run from the profile's variables: the run's
            # state, boards by state, what they serve, each board, and both deployments.
            monkeypatch.setenv("EDGE_RL_BROKER", url)
            monkeypatch.setenv("EDGE_RL_RUN", RUN)
            listing = cli("fleet-status", "--wait", "1", "--run-dir", str(tmp_path))
            assert listing.returncode == 0, listing.stderr
            lines = listing.stdout.splitlines()
            assert lines[0] == f"run {RUN!r}: serving (start {RUN_ID}); {N} boards: {N} serving"
            rows = [line.split() for line in lines[2 : 2 + N]]
            assert [r[0] for r in rows] == ids and lines[2 + N] == "", listing.stdout
            assert all(r[1:4] == ["serving", "4", new[:12]] for r in rows), listing.stdout
            assert lines[3 + N] == f"served: v4 {new[:12]} on {N} boards"
            assert lines[5 + N] == "last 2 deployments:", listing.stdout
            assert out["id"] in lines[6 + N] and " aborted: " in lines[6 + N], lines[6 + N]
            assert out2["id"] in lines[7 + N] and " deployed: " in lines[7 + N], lines[7 + N]
            view = json.loads(cli("fleet-status", "--wait", "1", "--json").stdout)
            assert view["by_state"] == {"serving": N} and view["deployments"] == []
            assert view["served"] == [{"version": 4, "digest": new, "boards": N}]
            records = [json.loads(x) for x in (tmp_path / "deployments.jsonl").open()]
            assert [r["id"] for r in records] == [out["id"], out2["id"]]
            assert [r["outcome"] for r in records] == ["aborted", "deployed"]
            for r, o, b in ((records[0], out, bad), (records[1], out2, good)):
                assert r["canaries"] == o["canaries"] and r["digest"] == o["digest"]
                assert r["source_sha256"] == hashlib.sha256(b.read_bytes()).hexdigest()
                assert r["version"] == 4 and r["run_id"] == RUN_ID and r["seed"] == o["seed"]
            assert records[1]["serving_new"] == N and records[0]["rolled_back"] == len(
                out["canaries"]
            )
    finally:
        for topic in (topics.policy, topics.control):
            learner.publish(topic, b"", qos=1, retain=True).wait_for_publish(5)
    total = time.monotonic() - t_start
    print(  # the numbers docs/fleet.md quotes
        f"\nrollout e2e: fleet serving after {t_serving - t_start:.1f} s; bad policy: "
        f"command {bad_s:.1f} s, rollout {out['seconds']} s; good policy: command "
        f"{good_s:.1f} s, rollout {out2['seconds']} s; {total:.1f} s in all; "
        f"canary returns: bad {out['canary_return']}, good {out2['canary_return']}, before "
        f"{out['baseline_return']}; policies_rejected after the bad one {after_bad}"
    )


def test_ctrl_c_mid_rollout_clears_the_targets_sent_and_each_board_keeps_what_it_serves(
    mosquitto, mqtt_client_factory, policy_keys, tmp_path
):
    signer, pub = policy_keys
    run, n = "rollout-sigint", 4
    topics, url, ids = Topics("edge-rl", run), mosquitto.url, fleet_ids(n, "rs")
    learner = mqtt_client_factory(mosquitto)
    history = History(mqtt_client_factory(mosquitto), topics)
    board = _end_of_run(learner, topics, run, signer, tmp_path)
    good = _bundle_file(tmp_path, "good2", signer)
    # Half the boards are canaries, and their health window stays open for minutes.
    plan = "--canary 0.5 --window 300 --min-episodes 100000 --confirm 300 --seed 1".split()
    argv = [sys.executable, "-m", "edge_rl.cli", "deploy", str(good), "--broker", url]
    argv += ["--run", run, "--signing-key", str(pub.with_suffix(".key")), "--bundle-key"]
    fleet = Fleet(n, board, url, "CartPole-v1", policy_key=pub, run=run, id_prefix="rs")
    try:
        with fleet:
            before = history.wait_all(
                ids, lambda s: s.state == "serving" and s.policy_version == 3, timeout=60
            )
            old = before[ids[0]].policy_digest
            proc = subprocess.Popen(
                [*argv, str(pub), *plan],
                cwd=REPO,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
            )
            try:
                # Mid-rollout: both canaries serve the new policy, the others the old one.
                mid = history.wait_all(ids, lambda s: s.policy_version in (3, 4), timeout=30)
                wait_for(
                    lambda: sum(s.policy_version == 4 for s in history.latest().values()) >= 2,
                    30,
                    "two canaries serving v4",
                    0.1,
                    detail=lambda: str(history.latest()),
                )
                mid = history.latest()
                canaries = sorted(a for a, s in mid.items() if s.policy_version == 4)
                sent = _retained_targets(mqtt_client_factory(mosquitto), topics, ids)
                assert sorted(sent) == canaries  # each canary's target, retained
                assert proc.poll() is None, proc.communicate()
                t0 = time.monotonic()
                proc.send_signal(signal.SIGINT)  # by its PID, as a terminal's Ctrl-C
                _, err = proc.communicate(timeout=30)
                stopped_s = time.monotonic() - t0
            finally:
                if proc.poll() is None:
                    proc.kill()
                    proc.wait(10)
            assert proc.returncode == 130, err
            assert "interrupted: the targets sent are cleared" in err
            (record,) = [json.loads(x) for x in (tmp_path / "deployments.jsonl").open()]
            assert record["outcome"] == "interrupted" and "signal 2" in record["reason"]
            assert record["source"] == str(good) and record["run"] == run
            assert stopped_s < 10, stopped_s  # bounded: clearing waits 5 s a target at most
            assert _retained_targets(mqtt_client_factory(mosquitto), topics, ids) == {}
            retained = _retained(mqtt_client_factory(mosquitto), topics.policy)
            manifest = decode_policy(retained, signer.verifier()).manifest
            assert (manifest.policy_version, manifest.model_sha256) == (3, old)
            # Each board keeps what it serves: statuses made after the signal say so.
            t_signal = time.time()
            after = history.wait_all(ids, lambda s: s.time_unix > t_signal + 1, timeout=15)
            for a in ids:
                assert after[a].state == "serving", a
                assert after[a].policy_version == (4 if a in canaries else 3), a
                assert after[a].policy_digest == mid[a].policy_digest, a
    finally:
        for topic in (topics.policy, topics.control):
            learner.publish(topic, b"", qos=1, retain=True).wait_for_publish(5)
    print(f"\nctrl-c mid-rollout: deploy exited {stopped_s:.2f} s after SIGINT")


def _retained_targets(client, topics: Topics, ids: list[str]) -> dict[str, bytes]:
    """Each board's retained target, from a new subscriber (bounded wait)."""
    got: dict[str, bytes] = {}
    client.on_message = lambda _c, _u, m: got.__setitem__(topics.actor_of(m.topic), m.payload)
    subacks: list[int] = []
    client.on_subscribe = lambda _c, _u, mid, _codes, _p: subacks.append(mid)
    for a in ids:
        client.subscribe(topics.target(a), qos=1)
    # The broker answers a connection's SUBSCRIBEs in order, each SUBACK followed by that
    # subscription's retained messages: once the SUBACK of one more (of a topic nothing is
    # retained on) is in, every target retained has come.
    client.subscribe(topics.target(ids[0]) + "/none", qos=1)
    wait_for(lambda: len(subacks) == len(ids) + 1, 5, "the SUBACKs of the targets")
    return {a: p for a, p in got.items() if p}


def _retained(client, topic: str) -> bytes:
    got: list[bytes] = []
    client.on_message = lambda _c, _u, m: got.append(m.payload)
    client.subscribe(topic, qos=1)
    wait_for(lambda: bool(got), 5, f"a retained message on {topic}")
    return got[-1]


@pytest.mark.slow
def test_a_lying_board_neither_passes_a_bad_policy_nor_vetoes_a_good_one(
    mosquitto, mqtt_client_factory, policy_keys, cli, tmp_path
):
    """The rollout attacks of issue 32, against four real boards: each failed before the
    deployer measured the policies itself and numbered them by the run's own counter."""
    signer, pub = policy_keys
    key = pub.with_suffix(".key")
    run, n = "rollout-liar", 4
    topics, url, ids = Topics("edge-rl", run), mosquitto.url, fleet_ids(n, "rl")
    learner = mqtt_client_factory(mosquitto)
    history = History(mqtt_client_factory(mosquitto), topics)
    board = _end_of_run(learner, topics, run, signer, tmp_path)
    fleet = Fleet(n, board, url, "CartPole-v1", policy_key=pub, run=run, id_prefix="rl")
    args = ["--broker", url, "--run", run, "--signing-key", str(key), "--bundle-key", str(pub)]

    def deploy(quality: str) -> tuple[int, dict]:
        bundle = _bundle_file(tmp_path, quality, signer)
        done = cli("deploy", str(bundle), *args, *DEPLOY, "--json", timeout=180)
        assert done.returncode in (0, 2, 3), done.stderr
        return done.returncode, json.loads(done.stdout)

    try:
        with fleet:
            before = history.wait_all(
                ids, lambda s: s.state == "serving" and s.policy_version == 3, timeout=60
            )
            old = (3, before[ids[0]].policy_digest)

            # (1) it claims -1e300 for the policy served: a bad policy is still stopped
            liar = LyingServer(mqtt_client_factory(mosquitto), topics, RUN_ID, "liar", old, -1e300)
            code, out = deploy("random")
            assert code == 2 and out["result"] == "aborted", out
            assert out["measured_candidate"] < 100 and out["measured_baseline"] == 500.0
            assert "liar" in out["flagged"]
            assert all(history.latest()[a].policy_version == 3 for a in ids)

            # (2) it claims 1e300, and refuses the new policy when sent it: no veto
            liar.serving, liar.claim, liar.refuse_on_target = old, 1e300, 1
            liar.say()
            code, out = deploy("good2")
            assert code == 0 and out["result"] == "deployed", out
            assert set(ids) <= set(out["serving_new"]) and out["version"] == 4
            if "liar" in out["assigned"]:
                assert out["flagged"]["liar"] == "refused a policy the other boards took"
            history.wait_all(ids, lambda s: s.policy_version == 4, timeout=10)

            # (3) a retained status of v2^53-1, and the liar gone: the next deploy numbers
            # its policy by the run's retained policy (v4), not by any board's word
            liar.serving, liar.claim = (2**53 - 1, "c" * 64), 500.0
            liar.say()
            liar.client.disconnect()
            code, out = deploy("good")
            assert code == 0 and out["result"] == "deployed", out
            assert out["version"] == 5 and "liar" in out["skipped"]
            history.wait_all(ids, lambda s: s.policy_version == 5, timeout=10)
    finally:
        for topic in (topics.policy, topics.control, topics.status("liar")):
            learner.publish(topic, b"", qos=1, retain=True).wait_for_publish(5)
