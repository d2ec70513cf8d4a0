"""What ``edge-rl deploy`` measures and counts itself, rather than take from the boards
(rollout.py's ``Evidence``; docs/fleet.md, Rollout).

    measured = measure(bundle, episodes=10, seed=0)      # Measured, or None (logged)
    version = next_version(retained, reports, run_id)    # the run's own counter, plus one

A board's status is only what it says. The deployer's own figures are the greedy return of
a policy in LiteRT on the env (the same ``runtime/evaluate.py`` the learner scores with),
and the run's newest version, from the run's retained policy: signed by the learner's key
(the key the boards trust), so no board can write it.
"""

from __future__ import annotations

import logging
import statistics
from collections.abc import Mapping

from edge_rl.deploy.rollout import BoardReport, Measured, serving_boards
from edge_rl.types import PolicyBundle
from edge_rl.wire.envelope import CodecError
from edge_rl.wire.policy import decompress_model

log = logging.getLogger(__name__)

MAX_MODEL_BYTES = 16_000_000  # the largest board limit (rpi5)
MAX_VERSION = 2**53 - 1  # a version is a count in [1, 2^53) (protocol §4.2)


def measure(bundle: PolicyBundle, episodes: int, seed: int = 10_000) -> Measured | None:
    """``episodes`` greedy episodes of ``bundle``'s model in LiteRT on its manifest's env;
    None (logged) when there are none to run or the env or model cannot be run here (a
    ``module:callable`` env that needs its hardware): the boards' reports decide then."""
    if episodes <= 0:
        return None
    from edge_rl.runtime.evaluate import evaluate  # LiteRT and the env: only when measuring

    m = bundle.manifest
    try:
        model = decompress_model(bundle.payload, m.codec, MAX_MODEL_BYTES)
        result = evaluate(model, m.env_id, episodes, manifest=m, seed=seed)
    except (CodecError, ValueError, RuntimeError, ImportError) as e:
        log.warning(
            "cannot measure v%d on %s here (%s): boards' reports decide",
            m.policy_version,
            m.env_id,
            e,
        )
        return None
    return Measured(m.model_sha256, tuple(float(r) for r in result.returns))


def next_version(
    retained: PolicyBundle | None, reports: Mapping[str, BoardReport], run_id: str
) -> int:
    """One above the run's newest version: its retained policy's, when that is of run
    start ``run_id``; else the median of what its serving boards report (no one board
    moves a median). Never from the statuses of another run, never past 2^53 - 1."""
    if retained is not None and retained.manifest.run_id == run_id:
        newest = retained.manifest.policy_version
    else:
        versions = [reports[a].policy_version for a in serving_boards(reports, run_id)]
        newest = int(statistics.median_low(versions)) if versions else 0
    if newest >= MAX_VERSION:
        raise ValueError(f"the run's newest policy is v{newest}: no version is left above it")
    return newest + 1
