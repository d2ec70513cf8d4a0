"""XLA's persistent compilation cache: a learner's compiled update, kept on disk across runs.

    directory = use_xla_cache()   # before TensorFlow's first op in the process

XLA compiling the TD3 update takes ~4 CPU-s (the DQN one ~2) on every start of a learner,
though the program only changes with the network sizes, batch, steps per call and the
TensorFlow build. TensorFlow keys each compiled program by a fingerprint of its HLO and
device and, with ``--tf_xla_persistent_cache_directory``, writes it to that directory and
loads it on the next run instead of compiling (~1 MB-2 MB a program): the compile of a
learner started again with the same settings costs well under 1 CPU-s.

TensorFlow reads ``TF_XLA_FLAGS`` once per process, when it runs its first op (a
variable made, a tensor converted): the call must come before that (a later one changes
nothing; ``LearnerNode`` makes it first thing). The directory is
``$EDGE_RL_XLA_CACHE`` (default ``~/.cache/edge-rl/xla``), one subdirectory per TensorFlow
version; ``EDGE_RL_XLA_CACHE=off`` (or empty) turns the cache off. A flag already in
``TF_XLA_FLAGS`` naming a directory is left as it is.
"""

from __future__ import annotations

import logging
import os
from pathlib import Path

log = logging.getLogger(__name__)

ENV = "EDGE_RL_XLA_CACHE"
FLAG = "--tf_xla_persistent_cache_directory"
DEFAULT = Path("~/.cache/edge-rl/xla")


def cache_root() -> Path | None:
    """Where the cache lives: ``$EDGE_RL_XLA_CACHE``, the default, or None when off."""
    value = os.environ.get(ENV)
    if value is None:
        return DEFAULT.expanduser()
    if value.strip().lower() in ("", "off", "0", "none"):
        return None
    return Path(value).expanduser()


def use_xla_cache(root: Path | None = None) -> Path | None:
    """Point XLA's persistent cache at ``root`` (default ``cache_root()``) / this
    TensorFlow's version; the directory used, or None (off, already set elsewhere, or the
    directory cannot be made: the learner then compiles as without a cache)."""
    flags = os.environ.get("TF_XLA_FLAGS", "")
    if FLAG in flags:
        return None
    root = root if root is not None else cache_root()
    if root is None:
        return None
    import tensorflow as tf

    directory = root / f"tf-{tf.__version__}"
    try:
        directory.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        log.warning("XLA compile cache off: cannot make %s (%s)", directory, e)
        return None
    os.environ["TF_XLA_FLAGS"] = f"{flags} {FLAG}={directory}".strip()
    return directory
