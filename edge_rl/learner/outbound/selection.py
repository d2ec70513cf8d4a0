"""Model selection: score published policies greedily, deploy the best one at the end.

    selection = ModelSelection(every=2, episodes=10, seed=cfg.seed + 20_000)
    if selection.due(version): selection.score(published)     # exporter thread
    best = selection.better_than(last)                          # end of run: None = keep last

A policy is known by its version (unique in a run): after a restore, the broadcast's
current policy and the selection's copy of it are two records of one policy.

Like SB3's EvalCallback: the scoring episodes are not training env steps, and their seeds
are apart from the final evaluation's, so the final figure is not the one the choice was
made on. The int8 model is scored in LiteRT, as the actors run it.

In a run the scoring runs in the export worker's process (``worker``): the same episodes
with the same seeds (``runtime.evaluate.evaluate_kept``), off the learner's GIL, which the
scoring's ~500 invokes and vector-env steps per policy otherwise took from the updates,
and waited for. A worker that dies or hangs is replaced by scoring on the calling thread
for the rest of the run.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Mapping
from dataclasses import dataclass

from edge_rl.export.worker import ExportWorker, WorkerDied
from edge_rl.learner.outbound.packager import (
    PolicyPackager,
    Published,
    policies_state,
    version_of,
)
from edge_rl.runtime.evaluate import EvalResult, Evaluator, evaluate, evaluate_kept
from edge_rl.types import PartState

log = logging.getLogger(__name__)


TOP = 5  # policies kept for the end-of-run recheck (their models: kept in memory)


@dataclass(frozen=True)
class SelectionStats:
    scores: Mapping[int, float]  # policy version -> greedy return


class ModelSelection:
    def __init__(
        self,
        every: int,
        episodes: int,
        seed: int,
        recheck: int = 0,
        packager: PolicyPackager | None = None,
        worker: ExportWorker | None = None,
    ) -> None:
        """``recheck``: at the end, the TOP best-scoring policies and the last one are
        scored on this many more episodes (other seeds), and the best combined score wins:
        10 episodes let a policy that fails now and then pass for a 500 on CartPole.
        ``packager``: reopens the policies of a checkpoint (``load_state``). ``worker``:
        the process that scores (None: the calling thread)."""
        self.packager = packager
        self.worker = worker
        self.every = every
        self.episodes = episodes
        self.seed = seed
        self.recheck = recheck
        self.scores: dict[int, float] = {}  # policy version -> greedy return
        self.best: tuple[Published, float] | None = None
        self.top: list[tuple[Published, float]] = []  # the TOP best, best first
        self._lock = threading.Lock()
        # env id -> its scoring envs, made once (the exporter thread, then the recheck)
        self._evaluators: dict[str, Evaluator] = {}

    def due(self, version: int) -> bool:
        return bool(self.every) and version % self.every == 0

    def score(self, published: Published, cut: bool = True) -> float | None:
        """``published``'s greedy return, recorded; with ``cut``, None (nothing recorded)
        when it provably cannot enter the top list: once the list is full, scoring stops as
        soon as the mean cannot reach its last score (``Evaluator.run``'s ``stop_below``),
        so only policies that might be chosen are scored to the end."""
        with self._lock:
            full = cut and len(self.top) == TOP
            floor = self.top[-1][1] if full else None
        result = self._evaluate(published, self.episodes, self.seed, floor)
        v = published.bundle.manifest.policy_version
        if not result.complete:
            log.info("policy v%d cannot reach the top %d's %.1f: not scored further", v, TOP, floor)
            return None
        with self._lock:
            self.scores[v] = result.mean
            if self.best is None or result.mean >= self.best[1]:
                self.best = (published, result.mean)
            best = self.best[1]
            # Newest first among equals: later policies have trained longer.
            self.top = sorted([(published, result.mean), *self.top], key=lambda t: -t[1])[:TOP]
        log.info("policy v%d scores %.1f (best so far %.1f)", v, result.mean, best)
        return result.mean

    def better_than(self, last: Published) -> tuple[Published, float, float] | None:
        """``(best, its score, last's score)`` if an earlier policy beats ``last``; scores
        ``last`` first when it has not been scored yet."""
        if not self.every:
            return None
        v_last = last.bundle.manifest.policy_version
        score = self.scores.get(v_last)
        if score is None:
            score = self.score(last, cut=False)
        if self.recheck:
            return self._recheck(last)
        best, best_score = self.best  # set: the last one has been scored at least
        if version_of(best) == v_last or best_score <= score:
            return None
        return best, best_score, score

    def _recheck(self, last: Published) -> tuple[Published, float, float] | None:
        n, m = self.episodes, self.recheck
        combined: list[tuple[float, Published]] = []
        v_last = version_of(last)
        candidates = [p for p, _ in self.top if version_of(p) != v_last] + [last]
        for p in candidates:
            # seeds apart from both
            again = self._evaluate(p, m, self.seed + 7_919).mean
            first = self.scores[p.bundle.manifest.policy_version]
            combined.append(((first * n + again * m) / (n + m), p))
            log.info(
                "recheck v%d: %.1f, then %.1f on %d more episodes",
                p.bundle.manifest.policy_version,
                first,
                again,
                m,
            )
        best_score, best = max(combined, key=lambda t: t[0])  # ties: the first, the top one
        last_score = combined[-1][0]
        if version_of(best) == v_last or best_score <= last_score:
            return None
        return best, best_score, last_score

    def _evaluate(
        self, published: Published, episodes: int, seed: int, stop_below: float | None = None
    ) -> EvalResult:
        worker = self.worker
        if worker is not None:
            m = published.bundle.manifest
            args = (published.model, m.env_id, episodes, m, seed, stop_below)
            try:
                return worker.call(evaluate_kept, *args)
            except (WorkerDied, TimeoutError) as e:
                log.warning("scoring in the export worker failed (%s); scoring here from now", e)
                self.worker = None
        return evaluate_policy(published, episodes, seed, self._evaluators, stop_below)

    def close(self) -> None:
        """Close the scoring envs (the end of a run)."""
        with self._lock:
            evaluators, self._evaluators = list(self._evaluators.values()), {}
        for evaluator in evaluators:
            evaluator.close()

    def last_score(self) -> tuple[int, float] | None:
        """``(version, greedy return)`` of the newest policy scored, if any (the live view)."""
        with self._lock:
            if not self.scores:
                return None
            v = max(self.scores)
            return v, self.scores[v]

    def stats(self) -> SelectionStats:
        with self._lock:
            return SelectionStats(dict(self.scores))

    # --- durable runs (edge_rl/learner/durable.py) ----------------------------------------

    def state(self) -> PartState:
        with self._lock:
            kept = {version_of(p): p for p, _ in self.top}
            if self.best is not None:
                kept[version_of(self.best[0])] = self.best[0]
            policies = policies_state(kept.values())
            meta = {
                "scores": {str(v): s for v, s in self.scores.items()},
                "best": [version_of(self.best[0]), self.best[1]] if self.best else None,
                "top": [[version_of(p), s] for p, s in self.top],
                "policies": policies.json,
            }
        return PartState(meta, blobs=policies.blobs)

    def load_state(self, state: PartState) -> None:
        """``CodecError``: a saved policy is not signed by the run's key."""
        if self.packager is None:
            raise ValueError("a ModelSelection without a packager cannot reopen policies")
        s = state.json
        kept = self.packager.reopen(PartState(s["policies"], blobs=state.blobs))
        with self._lock:
            self.scores = {int(v): score for v, score in s["scores"].items()}
            self.best = (kept[s["best"][0]], s["best"][1]) if s["best"] else None
            self.top = [(kept[v], score) for v, score in s["top"]]


def evaluate_policy(
    published: Published,
    episodes: int,
    seed: int,
    evaluators: dict[str, Evaluator] | None = None,
    stop_below: float | None = None,
) -> EvalResult:
    """Greedy episodes of a published model in LiteRT, on the env its manifest names; on
    the envs kept in ``evaluators`` (by env id, made on first use) when given, there with
    ``Evaluator.run``'s ``stop_below``."""
    m = published.bundle.manifest
    if evaluators is None:
        return evaluate(published.model, m.env_id, episodes, manifest=m, seed=seed)
    evaluator = evaluators.setdefault(m.env_id, Evaluator(m.env_id))
    return evaluator.run(published.model, episodes, manifest=m, seed=seed, stop_below=stop_below)
