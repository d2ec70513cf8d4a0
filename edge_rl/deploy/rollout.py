"""A staged rollout's decisions, from the boards' reports alone (docs/fleet.md, Rollout;
docs/protocol.md §5.5). No clock and no network of its own: ``step`` is handed the time
and every board's latest report, and says what to send.

    rollout = Rollout(plan, Target(version, digest), reports, now)
    while rollout.outcome is None:
        for action in rollout.step(now, reports):   # Assign(board) | Revert(board, ...)
            ...                                      # the driver publishes each target

1. **Canary.** A share of the serving boards (``plan.canary``, at least one), drawn at
   random with ``seed`` (so that no board is always the first to take a policy; the same
   seed draws the same canaries), is assigned the new policy. Each must report serving it
   (its version and digest) and end ``min_episodes`` greedy episodes with it within
   ``window_s``.
2. **Health.** Aborted at once if any canary refuses a policy for what it is (its
   ``policies_failed`` grows: a signature, manifest or model that does not verify or
   load), or at the window's end if a canary has not shown its episodes. Once every canary
   has, the canaries' mean return is compared with the previous policy's (the mean of the
   serving boards' returns before the rollout): more than ``max_drop`` of its magnitude
   below it aborts.
3. **Waves.** The other boards, ``batch`` at a time, at most ``rate`` boards a second. A
   refusal on any board aborts. Every board must report the new policy within
   ``confirm_s`` of its assignment; one that does not leaves the rollout ``incomplete``
   (the policy proved healthy on the canaries: nothing is rolled back for a silent board).
4. **Rollback.** An abort sends every board assigned so far back to the policy it served
   before (which it holds), and waits up to ``confirm_s`` for each to report it.
"""

from __future__ import annotations

import math
import random
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Literal

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

    def __post_init__(self) -> None:
        if not 0 < self.canary <= 1:
            raise ValueError(f"canary share {self.canary} is not in (0, 1]")
        if self.window_s <= 0 or self.confirm_s <= 0 or self.rate <= 0:
            raise ValueError("window, confirm time and rate must be > 0")
        if self.min_episodes < 1 or self.batch < 1 or self.max_drop < 0:
            raise ValueError("min_episodes and batch must be >= 1, max_drop >= 0")


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
    baseline_return: float | None  # previous policy's mean return on the serving boards
    canary_return: float | None  # the canaries' mean return with the new policy


def serving_boards(reports: Mapping[str, BoardReport], run_id: str) -> list[str]:
    """Boards that serve a policy of run start ``run_id``: those a rollout updates."""
    return sorted(
        a
        for a, r in reports.items()
        if r.state == "serving" and r.run_id == run_id and r.digest and r.policy_version > 0
    )


def _mean(values: list[float]) -> float | None:
    return sum(values) / len(values) if values else None


class Rollout:
    def __init__(
        self,
        plan: RolloutPlan,
        target: Target,
        reports: Mapping[str, BoardReport],
        run_id: str,
        now: float,
        seed: int | None = None,
    ) -> None:
        """``seed``: the canaries' draw; ``None`` takes the first ids in sorted order."""
        self.plan = plan
        self.target = target
        self.boards = serving_boards(reports, run_id)
        if not self.boards:
            raise ValueError(f"no board serves run start {run_id!r}: nothing to roll out to")
        self.skipped = tuple(sorted(set(reports) - set(self.boards)))
        n = max(1, math.ceil(plan.canary * len(self.boards)))
        drawn = self.boards[:n] if seed is None else random.Random(seed).sample(self.boards, n)
        self.canaries = tuple(sorted(drawn))
        self.rest = [a for a in self.boards if a not in self.canaries]
        self.previous = {
            a: Target(reports[a].policy_version, reports[a].digest) for a in self.boards
        }
        self.failed_before = {a: reports[a].policies_failed for a in self.boards}
        returns = [reports[a].recent_return for a in self.boards]
        self.baseline = _mean([r for r in returns if r is not None])
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
            return self._abort(now, f"policy refused by {', '.join(failed)}")
        if self.phase == "canary":
            return self._canary(now, reports)
        if self.phase == "waves":
            return self._waves(now, reports)
        return self._rollback(now, reports)

    def _canary(self, now: float, reports: Mapping[str, BoardReport]) -> list[Action]:
        if not self.assigned:
            return self._assign(now, self.canaries)
        shown = [a for a in self.canaries if self._shown(reports.get(a))]
        if len(shown) < len(self.canaries):
            if now - self.started < self.plan.window_s:
                return []
            missing = sorted(set(self.canaries) - set(shown))
            return self._abort(
                now,
                f"no {self.plan.min_episodes} episodes with the new policy from "
                f"{', '.join(missing)} within {self.plan.window_s:g} s",
            )
        returns = [reports[a].recent_return for a in self.canaries]
        self.canary_return = _mean([r for r in returns if r is not None])
        if self.baseline is not None and self.canary_return is not None:
            floor = self.baseline - self.plan.max_drop * abs(self.baseline)
            if self.canary_return < floor:
                return self._abort(
                    now,
                    f"canary mean return {self.canary_return:.4g} below {floor:.4g} (previous "
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
        if not self.rest and set(self.assigned) <= on_new:
            self._finish("deployed", "every serving board serves the new policy", reports)
        elif not self.rest and now - max(self.assigned.values()) >= self.plan.confirm_s:
            late = sorted(set(self.assigned) - on_new)
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
        """Assigned boards that refused a policy for what it is since the rollout began."""
        return [
            a
            for a in sorted(self.assigned)
            if a in reports and reports[a].policies_failed > self.failed_before[a]
        ]

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
        )


def _serves(r: BoardReport, target: Target) -> bool:
    return r.policy_version == target.version and r.digest == target.digest
