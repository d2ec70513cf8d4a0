"""GST's phase plan and compression-ratio accounting (Lee et al. 2021). Pure Python.

A GST layer is block-circulant for the first ``s_shift`` of training and pruned after it::

    plan = GSTPlan(total_steps=1_000_000, s_shift=0.25, circulant_block_size=2,
                   method=TransitionMethod.BLOCK4_FRIENDLY_BLOCK2)
    for step in range(plan.total_steps):
        if plan.is_transition(step):   # once, at plan.shift_step (never when s_shift = 1)
            ... phase_change.transition(...) swaps each circulant layer for a masked Dense
        if plan.phase(step) is Phase.PRUNED:
            ... masks.apply(); the reward-aware schedule begins at plan.shift_step

``S_shift`` as implemented (the paper calls it a phase-shift parameter that controls when
the sparsity increase starts; we found no formula): the first update step of the pruned
phase is ``shift_step = round(s_shift * total_steps)`` (half up). Steps before it are
block-circulant, steps from it on are pruned, and pruning (the sparsity increase) starts
there. ``s_shift = 1`` (or any value that rounds to ``total_steps``) keeps the circulant
weights throughout; ``s_shift = 0`` prunes from the first step.

Compression ratio: the fraction of kernel entries not stored, ``1 - stored / dense``.
``compression_ratios`` gives it over the GST layers and over the whole network (dense first
and last layers included). Biases are not counted (see docs/gst.md).
"""

from __future__ import annotations

import enum
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import NamedTuple

# = circulant.BLOCK_SIZES (tested equal); not imported, because circulant.py imports Keras.
CIRCULANT_BLOCK_SIZES = (2, 4, 8)
FRIENDLY_GROUP = 4  # the "block-4" of the paper's block-4-friendly methods


class Phase(enum.Enum):
    CIRCULANT = "circulant"
    PRUNED = "pruned"


class TransitionMethod(enum.Enum):
    """The paper's three block-size transition methods; our reading in ``phase_change``."""

    PROJECTION = "projection"  # any pruning block size (default: the circulant one)
    BLOCK4_FRIENDLY_BLOCK2 = "block4_friendly_block2"  # circulant 2 -> 4x4 pruning groups
    BLOCK4_FRIENDLY_BLOCK4 = "block4_friendly_block4"  # circulant 4 -> 4x4 pruning groups


_FRIENDLY_CIRCULANT = {
    TransitionMethod.BLOCK4_FRIENDLY_BLOCK2: 2,
    TransitionMethod.BLOCK4_FRIENDLY_BLOCK4: 4,
}


def resolve_pruning_block_size(
    method: TransitionMethod, circulant_block_size: int, pruning_block_size: int | None = None
) -> int:
    """The pruned phase's block size ``b_p``; a ``ValueError`` for a combination that the
    method does not define (a friendly method needs its circulant size and groups of 4)."""
    if circulant_block_size not in CIRCULANT_BLOCK_SIZES:
        raise ValueError(
            f"circulant_block_size must be one of {CIRCULANT_BLOCK_SIZES}, "
            f"got {circulant_block_size!r}"
        )
    if method is TransitionMethod.PROJECTION:
        b_p = circulant_block_size if pruning_block_size is None else pruning_block_size
        if b_p < 1:
            raise ValueError(f"pruning_block_size must be >= 1, got {b_p!r}")
        return b_p
    needed = _FRIENDLY_CIRCULANT[method]
    if circulant_block_size != needed:
        raise ValueError(
            f"{method.value} needs circulant_block_size {needed}, got {circulant_block_size}"
        )
    if pruning_block_size not in (None, FRIENDLY_GROUP):
        raise ValueError(
            f"{method.value} prunes {FRIENDLY_GROUP}x{FRIENDLY_GROUP} groups, "
            f"got pruning_block_size {pruning_block_size!r}"
        )
    return FRIENDLY_GROUP


# --- compression accounting ---------------------------------------------------------------


@dataclass(frozen=True)
class DenseLayer:
    """A kernel that stays dense (GST keeps the first and last layers dense)."""

    in_dim: int
    out_dim: int

    def __post_init__(self) -> None:
        _check(self.in_dim >= 1 and self.out_dim >= 1, "dims must be >= 1", self)

    @property
    def stored(self) -> float:
        return float(self.in_dim * self.out_dim)


@dataclass(frozen=True)
class CirculantLayer:
    """A block-circulant kernel: one length-b vector per b x b block, ``1 - 1/b`` saved.

    ``sparsity`` is the fraction of circulant blocks pruned; our GST never prunes in the
    circulant phase (0), the field lets the accounting express a scheme that does.
    """

    in_dim: int
    out_dim: int
    block_size: int
    sparsity: float = 0.0

    def __post_init__(self) -> None:
        b = self.block_size
        _check(b in CIRCULANT_BLOCK_SIZES, f"block_size must be in {CIRCULANT_BLOCK_SIZES}", b)
        _check(self.in_dim >= 1 and self.out_dim >= 1, "dims must be >= 1", self)
        _check(self.in_dim % b == 0 and self.out_dim % b == 0, "dims must divide by b", self)
        _check(0.0 <= self.sparsity < 1.0, "sparsity must be in [0, 1)", self.sparsity)

    @property
    def stored(self) -> float:
        return self.in_dim * self.out_dim / self.block_size * (1.0 - self.sparsity)


@dataclass(frozen=True)
class PrunedLayer:
    """A masked dense kernel; ``sparsity`` is its mask's fraction of zeros."""

    in_dim: int
    out_dim: int
    sparsity: float

    def __post_init__(self) -> None:
        _check(self.in_dim >= 1 and self.out_dim >= 1, "dims must be >= 1", self)
        _check(0.0 <= self.sparsity < 1.0, "sparsity must be in [0, 1)", self.sparsity)

    @property
    def stored(self) -> float:
        return self.in_dim * self.out_dim * (1.0 - self.sparsity)


LayerParams = DenseLayer | CirculantLayer | PrunedLayer


class CompressionRatios(NamedTuple):
    gst_layers: float | None  # over circulant and pruned kernels; None if there are none
    network: float  # over every kernel, the dense first and last layers included
    gst_fraction: float  # share of the network's kernel entries in GST layers


def compression_ratios(layers: Sequence[LayerParams]) -> CompressionRatios:
    """``1 - stored / dense`` kernel entries, over the GST layers and over all ``layers``."""
    if not layers:
        raise ValueError("compression_ratios needs at least one layer")
    dense = [float(layer.in_dim * layer.out_dim) for layer in layers]
    stored = [layer.stored for layer in layers]
    gst = [i for i, layer in enumerate(layers) if not isinstance(layer, DenseLayer)]
    gst_dense = sum(dense[i] for i in gst)
    gst_ratio = 1.0 - sum(stored[i] for i in gst) / gst_dense if gst else None
    return CompressionRatios(gst_ratio, 1.0 - sum(stored) / sum(dense), gst_dense / sum(dense))


# --- the plan -----------------------------------------------------------------------------


@dataclass(frozen=True)
class GSTPlan:
    # Length of training in update steps (the learner's 0-based step counter).
    total_steps: int
    # The paper's S_shift: fraction of training spent block-circulant (see module docstring).
    s_shift: float
    # Block sizes and the paper's block-size transition method (``phase_change``).
    circulant_block_size: int = 4
    method: TransitionMethod = TransitionMethod.PROJECTION
    pruning_block_size: int | None = None  # None: set by the method; resolved on construction

    def __post_init__(self) -> None:
        _check(self.total_steps >= 1, "total_steps must be >= 1", self.total_steps)
        _check(0.0 <= self.s_shift <= 1.0, "s_shift must be in [0, 1]", self.s_shift)
        _check(isinstance(self.method, TransitionMethod), "unknown method", self.method)
        b_p = resolve_pruning_block_size(
            self.method, self.circulant_block_size, self.pruning_block_size
        )
        object.__setattr__(self, "pruning_block_size", b_p)  # frozen: set once, here

    @property
    def shift_step(self) -> int | None:
        """First update step of the pruned phase; None when training ends before it."""
        step = math.floor(self.s_shift * self.total_steps + 0.5)
        return step if step < self.total_steps else None

    def phase(self, step: int) -> Phase:
        _check(step >= 0, "step must be >= 0", step)
        shift = self.shift_step
        return Phase.PRUNED if shift is not None and step >= shift else Phase.CIRCULANT

    def is_transition(self, step: int) -> bool:
        """True at the one step where circulant layers become pruned (before its update)."""
        return self.phase(step) is Phase.PRUNED and step == self.shift_step

    def layer(self, in_dim: int, out_dim: int, step: int, sparsity: float) -> LayerParams:
        """A GST layer's accounting record at ``step``; ``sparsity`` is its mask's (pruned
        phase only; the circulant phase prunes nothing)."""
        if self.phase(step) is Phase.CIRCULANT:
            return CirculantLayer(in_dim, out_dim, self.circulant_block_size)
        return PrunedLayer(in_dim, out_dim, sparsity)


def _check(ok: bool, message: str, value: object) -> None:
    if not ok:
        raise ValueError(f"GST plan: {message}, got {value!r}")
