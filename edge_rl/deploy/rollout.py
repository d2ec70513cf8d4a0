"""A staged rollout's decisions, from the deployer's own measurements and the boards'
reports (docs/fleet.md, Rollout; docs/protocol.md §5.5). No clock and no network of its
own: ``step`` is handed the time and every board's latest report, and says what to send.

    rollout = Rollout(plan, Target(version, digest), reports, run_id, now, seed, evidence)
    while rollout.outcome is None:
        for action in rollout.step(now, reports):   # Assign(board) | Revert(board, ...)
            ...                                      # the driver publishes each target

A board's report is only what it says (a board with valid credentials may lie), so no
single board passes or vetoes a rollout: the health figures are the deployer's own greedy
episodes of the previous and the new policy in LiteRT (``Evidence``, evidence.py) when it
has them, else the median of the boards' reports, each clamped to the env's return range
first; a refusal aborts only when more than half the boards assigned refuse. A board whose
report disagrees with what the deployer measured, claims a version above the run's own, or
refuses alone, is flagged in the outcome (``flagged``: board -> why).

1. **Canary.** A share of the serving boards (``plan.canary``, at least three, or all if
   fewer), drawn at random with ``seed`` (so that no board is always the first to take a
   policy; the same seed draws the same canaries), is assigned the new policy. Each should
   report serving it (its version and digest) and end ``min_episodes`` greedy episodes
   with it within ``window_s``.
2. **Health.** Aborted at once if more than half the boards assigned refuse the policy for
   what it is (their ``policies_failed`` grows: a signature, manifest or model that does
   not verify or load), or at the window's end if at most half the canaries have shown
   their episodes. Once every canary has (or more than half, at the window's end), the new
   policy's return is compared with the previous one's: the deployer's measurements, else
   the median of the canaries' and of the serving boards' clamped reports; more than
   ``max_drop`` of its magnitude below it aborts.
3. **Waves.** The other boards, ``batch`` at a time, at most ``rate`` boards a second.
   Refusals by more than half the boards assigned abort. Every board but those that
   refused must report the new policy within ``confirm_s`` of its assignment; one that
   does not leaves the rollout ``incomplete`` (the policy proved healthy on the canaries:
   nothing is rolled back for a silent board).
4. **Rollback.** An abort sends every board assigned so far back to the policy it served
   before (which it holds), and waits up to ``confirm_s`` for each to report it.
"""

from __future__ import annotations

import math
import random
import statistics
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Literal

from edge_rl.learner.fleet.figures import GENERIC_LIMITS, StatusLimits

Phase = Literal["canary", "waves", "rollback", "done"]
Result = Literal["deployed", "aborted", "incomplete"]


@dataclass(frozen=True)
class BoardReport:
    """What a board's latest status says, as a rollout reads it; ``seen``: when it came,
    on the caller's clock."""

    actor_id: str
    state: str
    run_id: str
    policy_version: int
    digest: str
    recent_return: float | None
    served_episodes: int
    policies_failed: int
    seen: float


@dataclass(frozen=True)
class Target:
    """A policy by its version and model digest (the manifest's ``model_sha256``)."""

    version: int
    digest: str


@dataclass(frozen=True)
class RolloutPlan:
    canary: float = 0.25  # share of the serving boards that take the policy first
    window_s: float = 60.0  # the canaries' health window
    min_episodes: int = 3  # greedy episodes each canary must end with the new policy
    max_drop: float = 0.1  # abort below previous mean return - max_drop * |previous|
    batch: int = 4  # boards per wave after the canaries
    rate: float = 2.0  # boards per second at most, after the canaries
    confirm_s: float = 30.0  # for a board to report the policy it was sent
    eval_episodes: int = 10  # the deployer's own greedy episodes of each policy (0: none)

    def __post_init__(self) -> None:
        if not 0 < self.canary <= 1:
            raise ValueError(f"canary share {self.canary} is not in (0, 1]")
        if self.window_s <= 0 or self.confirm_s <= 0 or self.rate <= 0:
            raise ValueError("window, confirm time and rate must be > 0")
        if self.min_episodes < 1 or self.batch < 1 or self.max_drop < 0:
            raise ValueError("min_episodes and batch must be >= 1, max_drop >= 0")
        if self.eval_episodes < 0:
            raise ValueError("eval_episodes must be >= 0")


MIN_CANARIES = 3  # the median of three reports holds against one board that lies


@dataclass(frozen=True)
class Measured:
    """A policy's greedy returns as the deployer measured them itself (LiteRT, the env)."""

    digest: str  # the policy's model_sha256
    returns: tuple[float, ...]

    @property
    def mean(self) -> float:
        return sum(self.returns) / len(self.returns)


@dataclass(frozen=True)
class Evidence:
    """What the deployer trusts: the env's return range (each board's report is clamped to
    it), its own measurements of the previous and the new policy, and the run's own
    version counter (a board claiming a version above it serves no policy of the run)."""

    limits: StatusLimits = GENERIC_LIMITS
    baseline: Measured | None = None  # the policy the run serves (its retained policy)
    candidate: Measured | None = None  # the policy rolled out
    version_ceiling: int | None = None  # the run's newest version; None: not known


@dataclass(frozen=True)
class Assign:
    """Send ``actor_id`` the new policy."""

    actor_id: str


@dataclass(frozen=True)
class Revert:
    """Send ``actor_id`` back to the policy it served before, which it holds."""

    actor_id: str
    to: Target


Action = Assign | Revert


@dataclass(frozen=True)
class Outcome:
    result: Result
    reason: str
    canaries: tuple[str, ...]
    assigned: tuple[str, ...]  # every board sent the new policy
    serving_new: tuple[str, ...]  # boards that reported it (deployed: all)
    rolled_back: tuple[str, ...]  # boards that reported their previous policy again
    unconfirmed: tuple[str, ...]  # boards that never reported what they were sent
    skipped: tuple[str, ...]  # boards not serving the run when it began
    baseline_return: float | None  # previous policy's return: measured, else boards' median
    canary_return: float | None  # the canaries' median reported return with the new policy
    measured_baseline: float | None = None  # the deployer's own mean greedy return of each
    measured_candidate: float | None = None
    flagged: dict[str, str] = field(default_factory=dict)  # board -> why its word is doubted


def serving_boards(
    reports: Mapping[str, BoardReport], run_id: str, ceiling: int | None = None
) -> list[str]:
    """Boards that serve a policy of run start ``run_id`` (of a version the run has made,
    when its newest, ``ceiling``, is known): those a rollout updates."""
    return sorted(
        a
        for a, r in reports.items()
        if r.state == "serving"
        and r.run_id == run_id
        and r.digest
        and 0 < r.policy_version <= (ceiling if ceiling is not None else r.policy_version)
    )


def _median(values: list[float]) -> float | None:
    return statistics.median(values) if values else None


class Rollout:
    def __init__(
        self,
        plan: RolloutPlan,
        target: Target,
        reports: Mapping[str, BoardReport],
        run_id: str,
        now: float,
        seed: int | None = None,
        evidence: Evidence | None = None,
    ) -> None:
        """``seed``: the canaries' draw; ``None`` takes the first ids in sorted order.
        ``evidence``: what the deployer measured itself (default: nothing but generic
        bounds on what boards say)."""
        self.plan = plan
        self.target = target
        self.evidence = ev = evidence or Evidence()
        self.flagged: dict[str, str] = {}
        self.boards = serving_boards(reports, run_id, ev.version_ceiling)
        for a in sorted(set(serving_boards(reports, run_id)) - set(self.boards)):
            v = reports[a].policy_version
            self.flagged[a] = f"claims v{v}, above the run's newest v{ev.version_ceiling}"
        if not self.boards:
            raise ValueError(f"no board serves run start {run_id!r}: nothing to roll out to")
        self.skipped = tuple(sorted(set(reports) - set(self.boards)))
        n = max(min(MIN_CANARIES, len(self.boards)), math.ceil(plan.canary * len(self.boards)))
        drawn = self.boards[:n] if seed is None else random.Random(seed).sample(self.boards, n)
        self.canaries = tuple(sorted(drawn))
        self.rest = [a for a in self.boards if a not in self.canaries]
        self.previous = {
            a: Target(reports[a].policy_version, reports[a].digest) for a in self.boards
        }
        self.failed_before = {a: reports[a].policies_failed for a in self.boards}
        self.refused: set[str] = set()  # assigned boards whose policies_failed grew
        claimed = {a: self._claim(reports[a]) for a in self.boards}
        self.reported_baseline = _median([r for r in claimed.values() if r is not None])
        if ev.baseline is not None:
            self.baseline: float | None = ev.baseline.mean
            on_it = {a: c for a, c in claimed.items() if reports[a].digest == ev.baseline.digest}
            self._flag_disagreeing(on_it, ev.baseline, "previous policy")
        else:
            self.baseline = self.reported_baseline
        self.phase: Phase = "canary"
        self.started = now
        self.assigned: dict[str, float] = {}  # board -> when it was sent the policy
        self.next_wave = now
        self.canary_return: float | None = None
        self.outcome: Outcome | None = None
        self._abort_reason = ""
        self._rollback_started = 0.0

    # --- one step ---------------------------------------------------------------------

    def step(self, now: float, reports: Mapping[str, BoardReport]) -> list[Action]:
        """What to send now, given every board's latest report."""
        if self.phase == "done":
            return []
        if self.phase != "rollback" and (failed := self._refusals(reports)):
            return self._abort(
                now, f"policy refused by {', '.join(failed)} of {len(self.assigned)} assigned"
            )
        if self.phase == "canary":
            return self._canary(now, reports)
        if self.phase == "waves":
            return self._waves(now, reports)
        return self._rollback(now, reports)

    def _canary(self, now: float, reports: Mapping[str, BoardReport]) -> list[Action]:
        if not self.assigned:
            return self._assign(now, self.canaries)
        expected = [a for a in self.canaries if a not in self.refused]
        shown = [a for a in expected if self._shown(reports.get(a))]
        if len(shown) < len(expected):
            if now - self.started < self.plan.window_s:
                return []
            missing = sorted(set(expected) - set(shown))
            if 2 * len(shown) <= len(self.canaries):  # no majority of the canaries showed it
                return self._abort(
                    now,
                    f"no {self.plan.min_episodes} episodes with the new policy from "
                    f"{', '.join(missing)} within {self.plan.window_s:g} s",
                )
            for a in missing:
                self.flagged.setdefault(a, f"showed no episodes within {self.plan.window_s:g} s")
        claimed = {a: self._claim(reports[a]) for a in shown}
        self.canary_return = _median([r for r in claimed.values() if r is not None])
        health = self.canary_return
        if (measured := self.evidence.candidate) is not None:
            health = measured.mean
            self._flag_disagreeing(claimed, measured, "new policy")
        if self.baseline is not None and health is not None:
            floor = self.baseline - self.plan.max_drop * abs(self.baseline)
            if health < floor:
                source = "measured" if measured is not None else "canaries' median"
                return self._abort(
                    now,
                    f"new policy's return {health:.4g} ({source}) below {floor:.4g} (previous "
                    f"policy {self.baseline:.4g}, max drop {self.plan.max_drop:g})",
                )
        self.phase = "waves"
        return self._waves(now, reports)

    def _waves(self, now: float, reports: Mapping[str, BoardReport]) -> list[Action]:
        actions: list[Action] = []
        if self.rest and now >= self.next_wave:
            wave, self.rest = self.rest[: self.plan.batch], self.rest[self.plan.batch :]
            self.next_wave = now + len(wave) / self.plan.rate
            actions = self._assign(now, wave)
        on_new = self._on(reports, self.target)
        owed = set(self.assigned) - self.refused  # a board that refused it is flagged instead
        if not self.rest and owed <= on_new:
            self._finish("deployed", "every serving board serves the new policy", reports)
        elif not self.rest and now - max(self.assigned.values()) >= self.plan.confirm_s:
            late = sorted(owed - on_new)
            self._finish("incomplete", f"not confirmed: {', '.join(late)}", reports)
        return actions

    def _rollback(self, now: float, reports: Mapping[str, BoardReport]) -> list[Action]:
        back = {a for a in self.assigned if self._on_previous(reports.get(a), a)}
        if back >= set(self.assigned) or now - self._rollback_started >= self.plan.confirm_s:
            self._finish("aborted", self._abort_reason, reports)
        return []

    # --- helpers ----------------------------------------------------------------------

    def _assign(self, now: float, boards: list[str] | tuple[str, ...]) -> list[Action]:
        for a in boards:
            self.assigned[a] = now
        return [Assign(a) for a in boards]

    def _abort(self, now: float, reason: str) -> list[Action]:
        self.phase = "rollback"
        self._abort_reason = reason
        self._rollback_started = now
        self.rest = []
        return [Revert(a, self.previous[a]) for a in sorted(self.assigned)]

    def _refusals(self, reports: Mapping[str, BoardReport]) -> list[str]:
        """The assigned boards that refused a policy for what it is since the rollout
        began, if they are more than half of those assigned (else none: each is flagged)."""
        for a in self.assigned:
            if a in reports and reports[a].policies_failed > self.failed_before[a]:
                self.refused.add(a)
        if 2 * len(self.refused) > len(self.assigned):
            return sorted(self.refused)
        for a in self.refused:
            self.flagged.setdefault(a, "refused a policy the other boards took")
        return []

    def _claim(self, r: BoardReport) -> float | None:
        """A board's reported return, clamped to the env's return range."""
        if r.recent_return is None:
            return None
        return self.evidence.limits.clamp_return(r.recent_return)

    def _flag_disagreeing(
        self, claimed: Mapping[str, float | None], measured: Measured, what: str
    ) -> None:
        """Flag the boards serving ``measured``'s policy whose (clamped) return lies outside
        the deployer's own episodes of it, widened by ``max_drop`` of its mean or 5 % of
        the env's return range, whichever is wider."""
        lim = self.evidence.limits
        tol = max(
            self.plan.max_drop * abs(measured.mean), 0.05 * (lim.return_high - lim.return_low)
        )
        low, high = min(measured.returns) - tol, max(measured.returns) + tol
        for a, ret in claimed.items():
            if ret is not None and not low <= ret <= high:
                self.flagged.setdefault(
                    a, f"reports {ret:.4g} for the {what}, measured {measured.mean:.4g}"
                )

    def _shown(self, r: BoardReport | None) -> bool:
        """A canary that serves the new policy and ended enough episodes with it."""
        return (
            r is not None
            and _serves(r, self.target)
            and r.served_episodes >= self.plan.min_episodes
            and r.recent_return is not None
        )

    def _on(self, reports: Mapping[str, BoardReport], target: Target) -> set[str]:
        return {a for a, r in reports.items() if _serves(r, target)}

    def _on_previous(self, r: BoardReport | None, actor_id: str) -> bool:
        return r is not None and _serves(r, self.previous[actor_id])

    def _finish(self, result: Result, reason: str, reports: Mapping[str, BoardReport]) -> None:
        on_new = self._on(reports, self.target)
        back = {a for a in self.assigned if self._on_previous(reports.get(a), a)}
        confirmed = back if result == "aborted" else on_new
        self.phase = "done"
        self.outcome = Outcome(
            result=result,
            reason=reason,
            canaries=self.canaries,
            assigned=tuple(sorted(self.assigned)),
            serving_new=tuple(sorted(on_new & set(self.boards))),
            rolled_back=tuple(sorted(back)) if result == "aborted" else (),
            unconfirmed=tuple(sorted(set(self.assigned) - confirmed)),
            skipped=self.skipped,
            baseline_return=self.baseline,
            canary_return=self.canary_return,
            measured_baseline=self.evidence.baseline.mean if self.evidence.baseline else None,
            measured_candidate=self.evidence.candidate.mean if self.evidence.candidate else None,
            flagged=dict(sorted(self.flagged.items())),
        )


def _serves(r: BoardReport, target: Target) -> bool:
    return r.policy_version == target.version and r.digest == target.digest
