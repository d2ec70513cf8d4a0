"""Quarantine: per-board statistics, and the rule that isolates a board whose data is far
off the fleet's.

    watch = BoardWatch(cfg.quarantine, max_boards=cfg.fleet.max_actors)
    watch.accepted("pi-01", reward, returns, version)  # ingest thread: a batch in replay
    watch.refused("pi-01")                     # ingest thread: a batch of its topic refused
    for verdict in watch.judge(env_steps):     # ingest thread: new quarantines (logged once)
        replay.evict(verdict.actor)
    watch.is_quarantined("pi-01")              # any thread: ingest refuses, credit stops

Plausibility (ingest/plausible.py) bounds each transition by what the env can produce; a
compromised board can still send data inside those bounds that no honest board of the
fleet produces (every reward at the bound's edge, episodes that end at once). The boards
of one run act with the same policies in the same env, so their figures over the same
stretch of the run agree up to noise. The rule, with ``QuarantineConfig``'s figures:

* every batch and episode return is tagged with the fleet's clock when it arrived (the
  transitions the watch has taken from all boards before it: the learner's env steps) and
  the policy version it was acted under;
* a board's window is its last ``window_transitions`` transitions and its last
  ``window_episodes`` returns; it is judged once it has ``min_transitions``
  (``min_episodes``) of them;
* the judged boards are compared on one stretch of the run: from the oldest start of
  their windows (at most ``stretch_steps`` back) to now, like with like: a span of it is
  compared only among the boards' data acted under one policy version (the manifest sets
  a version's exploration, so like exploration too). Early in training the versions and
  their exploration change fast; a board whose data came under a newer, less exploring
  policy was compared with boards still on older ones, and an honest board was
  quarantined at z 7.1. Each board's figure is over all its
  data of that stretch: its mean reward per step, and its median return (while a fleet
  learns, one long episode among short ones moved an honest board's mean return to a z of
  4.4 against its fleet). A board starved of credit has a window reaching further back,
  into weaker policies; the others are then judged on that stretch too, not on their
  newer data alone;
* with at least ``min_boards`` judged boards, each figure's robust z-score is
  ``0.6745 × (x − median) / max(MAD, mad_floor × |median|, noise, 1e-3)`` over the judged
  boards not in quarantine, ``noise`` being what the figures' own noise gives (the spread
  of a board's differences over the spans; for the return, also a median's of its
  returns); ``|z| > max_z`` on either figure quarantines the board (both ways: a board far
  below the fleet is as suspect as one above it);
* a board with ``min_refused`` refused batches or more, more than ``max_refused_share`` of
  all its batches, is quarantined whatever the fleet's size.

A board keeps its window and, older than that, what arrived in the last ``stretch_steps``
of the clock: all boards together hold at most ``stretch_steps`` entries beyond their
windows. Quarantine is for the rest of the run start: a resumed learner lifts every one
(``release``) unless the operator keeps them (``--keep-quarantine``; ``--release ID`` lifts
one); the board is told why (fleet control sends it a ``paused`` control with ``reason``).
Every access holds ``_lock``: the ingest thread writes, fleet control and the meter read.
"""

from __future__ import annotations

import logging
import threading
from collections import deque
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, replace
from typing import NamedTuple, TypeVar

import numpy as np

from edge_rl.config import QuarantineConfig

log = logging.getLogger(__name__)

Z_SCALE = 0.6745  # the normal's 75th percentile: a MAD-based z matches a std-based one
MIN_SCALE = 1e-3
SPAN_SPREAD = 1.2533  # √(π/2): a median's spread over its draws', the MAD's scale of noise
T = TypeVar("T")


def robust_z(values: Mapping[str, float], mad_floor: float, noise: float = 0.0) -> dict[str, float]:
    """Each value's robust z-score against the median and MAD of all of them; the MAD is at
    least ``mad_floor`` × |median|, ``noise`` (what the values' own noise would make it) and
    1e-3, so that near-equal values give small scores."""
    if not values:
        return {}
    xs = np.fromiter(values.values(), float, len(values))
    median = float(np.median(xs))
    mad = float(np.median(np.abs(xs - median)))
    scale = max(mad, mad_floor * abs(median), noise, MIN_SCALE)
    return {k: Z_SCALE * (v - median) / scale for k, v in values.items()}


def mean_of_batches(batches: Sequence[tuple[int, float]]) -> float:
    """The mean reward per step of (transitions, sum of rewards) batches."""
    return sum(s for _, s in batches) / max(1, sum(n for n, _ in batches))


def median_of(values: Sequence[float]) -> float:
    return float(np.median(values))


class Aligned(NamedTuple):
    """The boards' figures on a common stretch: ``figures`` (what the z-score is of),
    ``own`` (each board's median over its spans of its figure: what it sent) and ``level``
    (the fleet's: the median over the spans of the boards' median)."""

    figures: dict[str, float]
    own: dict[str, float]
    level: float
    noise: float  # the MAD the figures' own noise gives an honest fleet (0: one span)


NOTHING = Aligned({}, {}, 0.0, 0.0)


def median_noise(values: Sequence[float]) -> float:
    """How far the median of ``values`` strays by chance, as the MAD of such medians over
    boards would show it: 0.6745 × the median's standard error, the larger of a normal's
    estimate, 1.2533 × std / √n (late in a CartPole run honest episodes return anything
    from 10 to 500, half of them or more at one end: their MAD is then 0, so the standard
    deviation), and the data's own (``quantile_noise``)."""
    if len(values) < 2:
        return 0.0
    normal = Z_SCALE * SPAN_SPREAD * float(np.std(values)) / len(values) ** 0.5
    return max(normal, quantile_noise(values))


def quantile_noise(values: Sequence[float]) -> float:
    """How far the median of ``values`` strays by chance (× 0.6745, as ``median_noise``),
    read from their own quantiles, free of any assumption on their distribution's shape:
    a median of n draws lands between the quantiles 0.5 ± 0.5 / √n about two times in
    three (its rank strays by about √n / 2, a binomial's), so half the gap between them
    is its standard error. Early in training the returns of one policy version can be two
    clusters (the pole falls at once, or is held for a while): a median of a few sits in
    either, and the normal's estimate, blind to the gap between them, is too small."""
    if len(values) < 2:
        return 0.0
    q = min(0.5, 0.5 / len(values) ** 0.5)
    low, high = np.quantile(np.asarray(values, float), [0.5 - q, 0.5 + q])
    return Z_SCALE * float(high - low) / 2


def aligned_figures(
    samples: Mapping[str, Iterable[tuple[int | tuple[int, int], T]]],
    since: int,
    now: int,
    bins: int,
    figure: Callable[[list[T]], float],
    min_boards: int,
) -> Aligned:
    """Each board's figure on the stretch of the clock from ``since`` to ``now``, span by
    span against the fleet. A sample is tagged with its clock, or (clock, policy version):
    a span is then cut by version too, and a board meets only the data of its version.
    The stretch is cut into equal spans, as many as ``bins`` and as
    few as needed for every board to meet ``min_boards`` boards (itself included) in one of
    them (one span: each board's figure over the whole stretch). In each such span, a board
    differs from the fleet by its ``figure`` of the span's (clock, sample)s minus the median
    of theirs. A board's figure is the fleet's level (the median over the spans of those
    medians) plus its median difference: a board that sent more in one span than in another
    weighs no span more than the fleet does.

    ``noise``: how far an honest board's figure strays by chance, from how its differences
    spread over the spans: 1.2533 × their MAD (the spread of one span's), the median over
    the boards with two spans or more; not divided by √spans: a median of two to four
    spans that share the fleet's medians is not that much steadier. With four boards the
    fleet's MAD alone is itself noise: three boards that agree by chance make a fourth
    one's ordinary spread look like an outlier (an honest Pendulum run, seed 4, at z 6.5)."""
    tagged = {a: [(_tag(c), x) for c, x in entries] for a, entries in samples.items()}
    kept = {a: [(c, x) for c, x in entries if c[0] >= since] for a, entries in tagged.items()}
    kept = {a: entries for a, entries in kept.items() if entries}
    # By version where every board meets min_boards of its version; else by the clock
    # alone: a board that tags its data with a version no other board acts under (an old
    # one, an unknown one) must not escape the rule, nor stop it for the whole fleet.
    unversioned = {a: [((c, 0), x) for (c, _), x in entries] for a, entries in kept.items()}
    for cells in (kept, unversioned):
        for k in range(bins, 0, -1):
            aligned = _span_figures(cells, since, now, k, figure, min_boards)
            if len(aligned.figures) == len(cells):
                return aligned
    return NOTHING


def _tag(c: int | tuple[int, int]) -> tuple[int, int]:
    """(clock, version) of a sample's tag (a bare clock: version 0)."""
    return c if isinstance(c, tuple) else (c, 0)


def _span_figures(
    samples: Mapping[str, list[tuple[tuple[int, int], T]]],
    since: int,
    now: int,
    bins: int,
    figure: Callable[[list[T]], float],
    min_boards: int,
) -> Aligned:
    """``aligned_figures`` with the stretch cut into ``bins`` spans."""
    width = max(1, now - since)
    spans: dict[tuple[int, int], dict[str, list[T]]] = {}  # (span, version) -> board -> xs
    for actor, entries in samples.items():
        for (clock, version), x in entries:
            span = min(bins - 1, (clock - since) * bins // width)
            spans.setdefault((span, version), {}).setdefault(actor, []).append(x)
    levels: list[float] = []
    diffs: dict[str, list[float]] = {}
    own: dict[str, list[float]] = {}
    for boards in spans.values():
        if len(boards) < min_boards:
            continue
        figures = {a: figure(xs) for a, xs in boards.items()}
        levels.append(median_of(list(figures.values())))
        for actor, f in figures.items():
            diffs.setdefault(actor, []).append(f - levels[-1])
            own.setdefault(actor, []).append(f)
    if not levels:
        return NOTHING
    level = median_of(levels)
    spreads = [
        SPAN_SPREAD * median_of(np.abs(np.subtract(d, median_of(d))))
        for d in diffs.values()
        if len(d) > 1
    ]
    return Aligned(
        {a: level + median_of(d) for a, d in diffs.items()},
        {a: median_of(f) for a, f in own.items()},
        level,
        median_of(spreads) if spreads else 0.0,
    )


@dataclass(frozen=True)
class Verdict:
    """Why a board was quarantined: ``rule`` is ``reward`` (mean reward per step),
    ``return`` (median episode return) or ``refused`` (share of refused batches)."""

    actor: str
    rule: str
    value: float  # the board's figure over the stretch (its median over the spans)
    fleet: float  # the fleet's level over the stretch (for ``refused``: the threshold)
    z: float  # robust z-score of its aligned figure (for ``refused``: 0)
    env_steps: int  # of the run, when it was quarantined
    rows_evicted: int = 0
    since: int = 0  # the env step the compared stretch began at (``value`` is over it)


def _finding(v: Verdict) -> str:
    """What the rule found, in words (the log's and the board's reason)."""
    if v.rule == "refused":
        return f"{v.value:.0%} of its batches refused (more than {v.fleet:.0%})"
    return (
        f"its {v.rule} {v.value:.4g} is off the fleet's {v.fleet:.4g} (z {v.z:.1f}, over the "
        f"data since env step {v.since})"
    )


@dataclass(frozen=True)
class BoardFigures:
    """One board as the rule sees it (the summary's ``boards``)."""

    transitions: int  # taken into replay, in all
    batches: int  # taken
    refused: int  # batches of its topic refused
    window: int  # transitions in the reward window
    mean_reward: float | None
    std_reward: float | None
    returns: int  # episode returns in the return window
    mean_return: float | None
    median_return: float | None
    std_return: float | None
    peak_z: float  # the largest |z| the rule gave it so far (how close it came)


@dataclass(frozen=True)
class QuarantineStats:
    quarantined: Mapping[str, Verdict]
    boards: Mapping[str, BoardFigures]


class _Board:
    """A board's data by the clock it arrived at: (clock, n, sum, sum of squares) per batch
    and (clock, return) per episode, oldest first; its window and what is newer than the
    stretch's limit."""

    def __init__(self, window_transitions: int, window_episodes: int) -> None:
        self.window_transitions = window_transitions
        self.window_episodes = window_episodes
        # (clock, n, sum, sum of squares, policy version) per batch; (clock, return,
        # version) per episode
        self.batches: deque[tuple[int, int, float, float, int]] = deque()
        self.kept = 0  # transitions in ``batches``
        self.returns: deque[tuple[int, float, int]] = deque()
        self.transitions = 0
        self.taken = 0
        self.refused = 0
        self.peak_z = 0.0
        # The policy version the board's open episode began under (None: none open, or
        # not known): an episode acted under two versions is not compared.
        self.open_version: int | None = None
        self.last_version = 0  # the newest version its batches named
        self.monotonic = True  # its versions never went down (an honest board's do not)

    def add(
        self,
        clock: int,
        reward: np.ndarray,
        returns: Iterable[float],
        version: int = 0,
        ends_open: bool | None = None,
    ) -> None:
        r = reward.astype(np.float64)
        self.batches.append((clock, len(r), float(r.sum()), float(np.square(r).sum()), version))
        self.kept += len(r)
        ended = [float(x) for x in returns]
        # Only while the board's versions have only grown, as an honest board's do: one
        # that names an older version after a newer one gains no exemption again.
        self.monotonic &= version >= self.last_version
        self.last_version = max(self.last_version, version)
        carried = self.open_version is not None and self.open_version < version
        if ended and carried and self.monotonic:
            ended = ended[1:]  # begun under an older one
        self.returns.extend((clock, x, version) for x in ended)
        if ends_open is not None:  # the open episode began in this batch, or goes on
            begun_here = bool(returns) or self.open_version is None
            self.open_version = (
                (version if begun_here else self.open_version) if ends_open else None
            )
        self.transitions += len(r)
        self.taken += 1

    def expire(self, before: int) -> None:
        """Drop the entries that arrived before ``before`` and are outside the window."""
        while self.batches and self.batches[0][0] < before:
            if self.kept - self.batches[0][1] < self.window_transitions:
                break
            self.kept -= self.batches.popleft()[1]
        while len(self.returns) > self.window_episodes and self.returns[0][0] < before:
            self.returns.popleft()

    def window(self) -> tuple[int, int]:
        """(transitions, clock it starts at) of the reward window: the newest batches that
        hold ``window_transitions`` (all of them if fewer)."""
        n, start = 0, 0
        for clock, k, _, _, _ in reversed(self.batches):
            n, start = n + k, clock
            if n >= self.window_transitions:
                break
        return n, start

    def recent_returns(self) -> list[tuple[int, float]]:
        return [(c, r) for c, r, _ in list(self.returns)[-self.window_episodes :]]

    def return_samples(self) -> list[tuple[tuple[int, int], float]]:
        """((clock, version), return) per episode kept."""
        return [((c, v), r) for c, r, v in self.returns]

    def rewards_since(self, since: int) -> tuple[int, float, float]:
        """(n, sum, sum of squares) of the rewards that arrived at ``since`` or later."""
        n, total, sq = 0, 0.0, 0.0
        for clock, k, s, q, _ in reversed(self.batches):
            if clock < since:
                break
            n, total, sq = n + k, total + s, sq + q
        return n, total, sq

    def batch_sums(self) -> list[tuple[tuple[int, int], tuple[int, float]]]:
        """((clock, version), (transitions, sum of rewards)) per batch kept."""
        return [((clock, v), (n, s)) for clock, n, s, _, v in self.batches]

    def figures(self) -> BoardFigures:
        """The board's own window (the summary's figures)."""
        _, start = self.window()
        n, total, sq = self.rewards_since(start) if self.batches else (0, 0.0, 0.0)
        mean = total / n if n else None
        std = max(0.0, sq / n - mean**2) ** 0.5 if mean is not None else None
        rets = np.array([r for _, r in self.recent_returns()], float)
        return BoardFigures(
            self.transitions,
            self.taken,
            self.refused,
            n,
            mean,
            std,
            len(rets),
            float(rets.mean()) if len(rets) else None,
            float(np.median(rets)) if len(rets) else None,
            float(rets.std()) if len(rets) else None,
            self.peak_z,
        )

    def state(self) -> dict:
        return {
            "batches": [list(b) for b in self.batches],
            "returns": [list(r) for r in self.returns],
            "counts": [self.transitions, self.taken, self.refused],
            "peak_z": self.peak_z,
        }

    @classmethod
    def from_state(cls, state: Mapping, window_transitions: int, window_episodes: int) -> _Board:
        board = cls(window_transitions, window_episodes)
        # A checkpoint without clocks (batches of three, bare returns): all at clock 0;
        # without versions (batches of four, returns of two): all under version 0.
        for entry in state["batches"]:
            entry = list(entry) if len(entry) != 3 else [0, *entry]
            clock, n, s, q, v = entry if len(entry) == 5 else (*entry, 0)
            board.batches.append((int(clock), int(n), float(s), float(q), int(v)))
            board.kept += int(n)
        for entry in state["returns"]:
            entry = list(entry) if isinstance(entry, list | tuple) else [0, entry]
            clock, r, v = entry if len(entry) == 3 else (*entry, 0)
            board.returns.append((int(clock), float(r), int(v)))
        board.transitions, board.taken, board.refused = (int(c) for c in state["counts"])
        board.peak_z = float(state.get("peak_z", 0.0))
        return board


class BoardWatch:
    def __init__(self, cfg: QuarantineConfig, max_boards: int = 10_000, every_s: float = 1.0):
        """``max_boards``: at most this many boards have figures kept (fleet.max_actors).
        ``every_s``: ``judge`` applies the rule at most this often (by the caller's clock)."""
        self.cfg = cfg
        self.max_boards = max_boards
        self.every_s = every_s
        self._lock = threading.Lock()
        self._boards: dict[str, _Board] = {}
        self._quarantined: dict[str, Verdict] = {}
        self._last_judged: float | None = None
        self._clock = 0  # transitions taken from all boards: the run's env steps

    # --- ingest thread -----------------------------------------------------------------

    def accepted(
        self,
        actor: str,
        reward: np.ndarray,
        returns: Iterable[float],
        version: int = 0,
        ends_open: bool | None = None,
    ) -> None:
        """A batch of ``actor`` went into replay, acted under policy ``version``;
        ``returns`` of the episodes it ended; ``ends_open``: whether its last step left an
        episode open (None: not known). An episode begun under one version and ended under
        another is left out of the return rule: a board short of credit waits mid-episode
        while the policy improves, and its stitched episodes returned more than the
        fleet's of the same version (honest sim-03 and sim-00 were quarantined so, at
        z 6.3 and 7.5, starved boards early in training)."""
        with self._lock:
            board = self._board(actor)
            if board is not None:
                board.add(self._clock, reward, returns, version, ends_open)
                board.expire(self._clock - self.cfg.stretch_steps)
            self._clock += len(reward)

    def refused(self, actor: str | None) -> None:
        """A batch on ``actor``'s topic was refused (by a reason the board is to blame for)."""
        if actor is None:
            return
        with self._lock:
            board = self._board(actor)
            if board is not None:
                board.refused += 1

    def judge(self, env_steps: int, now: float) -> list[Verdict]:
        """The rule, at most every ``every_s`` of ``now``: the boards it newly quarantines,
        each logged once."""
        if not self.cfg.enabled:
            return []
        if self._last_judged is not None and now - self._last_judged < self.every_s:
            return []
        self._last_judged = now
        with self._lock:
            found = self._verdicts(env_steps)
            for v in found:
                self._quarantined[v.actor] = v
        for v in found:
            log.warning(
                "board %s quarantined at %d env steps: %s; its credit stops and its data is "
                "refused",
                v.actor,
                v.env_steps,
                _finding(v),
            )
        return found

    def evicted(self, actor: str, rows: int) -> None:
        """``rows`` of ``actor``'s were dropped from replay."""
        with self._lock:
            v = self._quarantined.get(actor)
            if v is not None:
                self._quarantined[actor] = replace(v, rows_evicted=v.rows_evicted + rows)

    def release(self, actors: Iterable[str] | None = None) -> list[str]:
        """Lift the quarantine of ``actors`` (None: of every board), on an operator's word
        (``edge-rl learn --resume --release ID``) or at a new start of the run; each board
        released is judged afresh, from its next batch. The boards released, sorted."""
        with self._lock:
            chosen = set(self._quarantined) if actors is None else set(actors)
            freed = sorted(chosen & set(self._quarantined))
            for actor in freed:
                del self._quarantined[actor]
                self._boards.pop(actor, None)
        for actor in freed:
            log.warning("board %s released from quarantine: judged afresh", actor)
        return freed

    # --- any thread ----------------------------------------------------------------------

    def reason(self, actor: str) -> str:
        """Why ``actor`` is in quarantine, as the board is told it; "" if it is not."""
        with self._lock:
            v = self._quarantined.get(actor)
        if v is None:
            return ""
        return (
            f"quarantined at {v.env_steps} env steps: {_finding(v)}; no credit, its data refused "
            "until an operator releases it (edge-rl learn --resume RUN_DIR --release ID)"
        )

    def is_quarantined(self, actor: str) -> bool:
        with self._lock:
            return actor in self._quarantined

    def quarantined(self) -> dict[str, Verdict]:
        with self._lock:
            return dict(self._quarantined)

    def stats(self) -> QuarantineStats:
        with self._lock:
            return QuarantineStats(
                dict(self._quarantined), {a: b.figures() for a, b in self._boards.items()}
            )

    # --- the rule (holds _lock) ---------------------------------------------------------

    def _verdicts(self, env_steps: int) -> list[Verdict]:
        cfg = self.cfg
        found: dict[str, Verdict] = {}
        free = {a: b for a, b in self._boards.items() if a not in self._quarantined}
        for actor, board in free.items():
            board.expire(self._clock - cfg.stretch_steps)
            batches = board.taken + board.refused
            if board.refused >= cfg.min_refused and board.refused > cfg.max_refused_share * batches:
                share = board.refused / batches
                found[actor] = Verdict(
                    actor, "refused", share, cfg.max_refused_share, 0.0, env_steps
                )
        for rule, (since, aligned) in (
            ("reward", self._mean_rewards(free)),
            ("return", self._median_returns(free)),
        ):
            if len(aligned.figures) < cfg.min_boards:
                continue
            for actor, z in robust_z(aligned.figures, cfg.mad_floor, aligned.noise).items():
                board = self._boards[actor]
                board.peak_z = max(board.peak_z, abs(z))
                if abs(z) > cfg.max_z and actor not in found:
                    value = aligned.own[actor]
                    v = Verdict(actor, rule, value, aligned.level, z, env_steps, since=since)
                    found[actor] = v
        return list(found.values())

    def _stretch(self, starts: Iterable[int]) -> int:
        """Where the compared stretch begins: the oldest of the judged boards' window
        starts, at most ``stretch_steps`` back."""
        return max(min(starts), self._clock - self.cfg.stretch_steps)

    def _mean_rewards(self, boards: Mapping[str, _Board]) -> tuple[int, Aligned]:
        """Each judged board's mean reward per step over the common stretch."""
        windows = {a: b.window() for a, b in boards.items()}
        judged = [a for a, w in windows.items() if w[0] >= self.cfg.min_transitions]
        if not judged:
            return 0, NOTHING
        since = self._stretch(windows[a][1] for a in judged)
        samples = {a: boards[a].batch_sums() for a in judged}
        return since, self._aligned(samples, since, mean_of_batches)

    def _median_returns(self, boards: Mapping[str, _Board]) -> tuple[int, Aligned]:
        """Each judged board's median return over the common stretch."""
        windows = {a: b.recent_returns() for a, b in boards.items()}
        judged = [a for a, w in windows.items() if len(w) >= self.cfg.min_episodes]
        if not judged:
            return 0, NOTHING
        since = self._stretch(windows[a][0][0] for a in judged)
        samples = {a: boards[a].return_samples() for a in judged}
        aligned = self._aligned(samples, since, median_of)
        own = [median_noise([r for (c, _), r in samples[a] if c >= since]) for a in aligned.figures]
        if own:
            aligned = aligned._replace(noise=max(aligned.noise, median_of(own)))
        return since, aligned

    def _aligned(
        self,
        samples: Mapping[str, Iterable[tuple[int, T]]],
        since: int,
        figure: Callable[[list[T]], float],
    ) -> Aligned:
        cfg = self.cfg
        return aligned_figures(
            samples, since, self._clock, cfg.stretch_bins, figure, cfg.min_boards
        )

    def _board(self, actor: str) -> _Board | None:  # holds _lock
        board = self._boards.get(actor)
        if board is None and len(self._boards) < self.max_boards:
            cfg = self.cfg
            board = _Board(cfg.window_transitions, cfg.window_episodes)
            self._boards[actor] = board
        return board

    # --- durable runs: the checkpoint's "quarantine" part ------------------------------

    def state(self) -> dict:
        with self._lock:
            return {
                "clock": self._clock,
                "boards": {a: b.state() for a, b in self._boards.items()},
                "quarantined": {a: asdict(v) for a, v in self._quarantined.items()},
            }

    def load_state(self, state: Mapping) -> None:
        with self._lock:
            cfg = self.cfg
            default = sum(int(b["counts"][0]) for b in state["boards"].values())
            self._clock = int(state.get("clock", default))
            self._boards = {
                a: _Board.from_state(b, cfg.window_transitions, cfg.window_episodes)
                for a, b in state["boards"].items()
            }
            self._quarantined = {a: Verdict(**v) for a, v in state["quarantined"].items()}
