"""Model selection: score published policies greedily, deploy the best one at the end.

    selection = ModelSelection(every=2, episodes=10, seed=cfg.seed + 20_000)
    if selection.due(version): selection.score(published)     # exporter thread
    best = selection.better_than(last)                          # end of run: None = keep last

Like SB3's EvalCallback: the scoring episodes are not training env steps, and their seeds
are apart from the final evaluation's, so the final figure is not the one the choice was
made on. The int8 model is scored in LiteRT, as the actors run it.
"""

from __future__ import annotations

import logging
import threading

from edge_rl.edge.evaluate import EvalResult, evaluate
from edge_rl.nodes.publisher import Published

log = logging.getLogger(__name__)


class ModelSelection:
    def __init__(self, every: int, episodes: int, seed: int) -> None:
        self.every, self.episodes, self.seed = every, episodes, seed
        self.scores: dict[int, float] = {}  # policy version -> greedy return
        self.best: tuple[Published, float] | None = None
        self._lock = threading.Lock()

    def due(self, version: int) -> bool:
        return bool(self.every) and version % self.every == 0

    def score(self, published: Published) -> float:
        result = evaluate_policy(published, self.episodes, self.seed)
        v = published.bundle.manifest.policy_version
        with self._lock:
            self.scores[v] = result.mean
            if self.best is None or result.mean >= self.best[1]:
                self.best = (published, result.mean)
            best = self.best[1]
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
            score = self.score(last)
        best, best_score = self.best  # set: the last one has been scored at least
        if best is last or best_score <= score:
            return None
        return best, best_score, score


def evaluate_policy(published: Published, episodes: int, seed: int) -> EvalResult:
    """Greedy episodes of a published model in LiteRT, on the env its manifest names."""
    m = published.bundle.manifest
    return evaluate(published.model, m.env_id, episodes, manifest=m, seed=seed)
