"""One network's compression over a run: GST or iterative pruning, for the learner node.

    comp = Compressor(cfg.compression, network, total_updates)   # before the first trace
    agent.constraint = comp.constraint                  # applied in the compiled update
    for each update call:
        metrics = agent.update(batch)
        comp.on_updates(agent.updates)                  # transition, mask updates (eager)
    for each finished fleet episode:
        comp.observe_return(episode_return)             # GST's reward-aware controller
    comp.ratios().network, comp.summary()               # what the learner logs

The compressed layers are every trainable Dense kernel except the first and the last (GST
keeps the layers that read the observation and write the action dense, as the paper does).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

import keras
import numpy as np

from edge_rl.compress.circulant import expand_circulant, project_to_block_circulant
from edge_rl.compress.config import CompressionConfig
from edge_rl.compress.controller import RewardAwareController, RewardAwareSchedule
from edge_rl.compress.kernels import KernelConstraint
from edge_rl.compress.phase_change import transition
from edge_rl.compress.plan import (
    CirculantLayer,
    CompressionRatios,
    DenseLayer,
    GSTPlan,
    LayerParams,
    PrunedLayer,
    compression_ratios,
)
from edge_rl.compress.schedule import PolynomialSchedule, Schedule

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Layer:
    name: str
    in_dim: int
    out_dim: int
    compressed: bool


def compressible_layers(network: keras.Model) -> list[keras.layers.Dense]:
    """Trainable Dense layers in order (a frozen layer, like TD3's rescale, is not stored
    as a matrix in the exported model)."""
    return [
        layer
        for layer in network.layers
        if isinstance(layer, keras.layers.Dense) and layer.trainable
    ]


class Compressor:
    def __init__(self, config: CompressionConfig, network: keras.Model, total_updates: int):
        if config.method == "none":
            raise ValueError("Compressor needs compression.method gst or iterative")
        dense = compressible_layers(network)
        if len(dense) < 3:
            raise ValueError(
                f"{network.name}: compression keeps the first and last layers dense and needs "
                f"at least one layer between them (two hidden layers), got {len(dense)} layers"
            )
        self.config = config
        self.total_updates = max(1, int(total_updates))
        self.layers = [
            Layer(d.name, *d.kernel.shape, compressed=0 < i < len(dense) - 1)
            for i, d in enumerate(dense)
        ]
        kernels = [d.kernel for d, rec in zip(dense, self.layers, strict=True) if rec.compressed]
        gst = config.method == "gst"
        self.plan = (
            GSTPlan(
                self.total_updates,
                config.s_shift,
                config.block_size,
                config.transition_method,
                config.pruning_block_size,
            )
            if gst
            else None
        )
        # Raises ValueError for a kernel whose dims the blocks do not divide.
        self.constraint = KernelConstraint(
            kernels, config.block_size if gst else None, config.pruning_block
        )
        self.controller: RewardAwareController | None = None
        self.schedule: Schedule
        if self.plan is not None:
            self.controller = RewardAwareController(config.controller)
            shift = self.plan.shift_step
            begin = self.total_updates if shift is None else shift
            self.schedule = RewardAwareSchedule(self.controller, begin, config.prune_every)
            self._init_circulant()
        else:
            self.schedule = _polynomial(config, self.total_updates)
        self.step = 0
        self._ratio_sum = 0.0  # sum over update steps of the network ratio in force
        self.transition_step: int | None = None
        self.transition_shift: float | None = None
        self.mask_updates = 0
        self._ratios: CompressionRatios | None = None  # cached until the masks change
        self.decisions: list[dict[str, Any]] = []  # the controller's, for the run summary

    # --- driven by the learner ----------------------------------------------------------

    @property
    def circulant(self) -> bool:
        return bool(self.constraint.circulant.numpy())

    def on_updates(self, step: int) -> None:
        """Account steps ``(self.step, step]``, then transition and prune as they fell due."""
        if step <= self.step:
            return
        self._ratio_sum += self.ratios().network * (step - self.step)
        previous, self.step = self.step, step
        shift = self.plan.shift_step if self.plan is not None else None
        if self.circulant and shift is not None and step >= shift:
            self._transition()
        due = [self.schedule(s) for s in range(previous + 1, step + 1)]
        due = [d for d in due if d.should_prune]
        if due:
            self.constraint.masked.update(due[-1].target_sparsity)
            self.mask_updates += 1
            self._ratios = None

    def observe_return(self, episode_return: float) -> None:
        """GST only, after the transition: a finished episode's return for the controller."""
        if self.controller is None or self.circulant or not np.isfinite(episode_return):
            return
        decision = self.controller.observe(float(episode_return))
        if decision is not None:
            self.decisions.append(
                {
                    "update": self.step,
                    "action": decision.action.value,
                    "target_sparsity": round(decision.target_sparsity, 4),
                    "window_mean": round(decision.window_mean, 2),
                }
            )
            log.info(
                "GST controller: %s -> target sparsity %.2f (window %.1f, best %.1f)",
                decision.action.value,
                decision.target_sparsity,
                decision.window_mean,
                decision.best_mean,
            )

    # --- what is logged -----------------------------------------------------------------

    def sparsities(self) -> list[float]:
        """Fraction of each compressed kernel masked out."""
        return [1.0 - float(np.mean(m.numpy())) for m in self.constraint.masked.masks]

    def ratios(self) -> CompressionRatios:
        if self._ratios is None:
            self._ratios = self._count()
        return self._ratios

    def _count(self) -> CompressionRatios:
        records: list[LayerParams] = []
        sparsity = iter(self.sparsities())
        for layer in self.layers:
            if not layer.compressed:
                records.append(DenseLayer(layer.in_dim, layer.out_dim))
            elif self.circulant:
                records.append(CirculantLayer(layer.in_dim, layer.out_dim, self.config.block_size))
            else:
                records.append(PrunedLayer(layer.in_dim, layer.out_dim, next(sparsity)))
        return compression_ratios(records)

    def average_ratio(self) -> float:
        """The paper's headline: the network ratio averaged over the update steps so far."""
        return self._ratio_sum / self.step if self.step else self.ratios().network

    def summary(self) -> dict[str, Any]:
        r = self.ratios()
        return {
            "method": self.config.method,
            "block_size": self.config.block_size,
            "pruning_block_size": self.config.pruning_block,
            "compressed_layers": [layer.name for layer in self.layers if layer.compressed],
            "gst_fraction": round(r.gst_fraction, 4),
            "average_ratio": round(self.average_ratio(), 4),
            "final_ratio": round(r.network, 4),
            "final_ratio_compressed_layers": r.gst_layers and round(r.gst_layers, 4),
            "final_sparsity": [round(s, 4) for s in self.sparsities()],
            "phase": "circulant" if self.circulant else "pruned",
            "transition_step": self.transition_step,
            "transition_relative_shift": self.transition_shift,
            "mask_updates": self.mask_updates,
            "controller_decisions": self.decisions,
            "updates": self.step,
        }

    # --- durable runs (edge_rl/learner/durable.py) -----------------------------------------

    def state(self) -> tuple[dict[str, np.ndarray], dict[str, Any]]:
        """The masks and the circulant flag (arrays), and the schedule's and controller's
        place (JSON-able); the kernels themselves are the network's, saved with it."""
        arrays = {f"mask/{i}": m.numpy() for i, m in enumerate(self.constraint.masked.masks)}
        arrays["circulant"] = np.asarray(self.constraint.circulant.numpy())
        meta = {
            "step": self.step,
            "ratio_sum": self._ratio_sum,
            "mask_updates": self.mask_updates,
            "transition_step": self.transition_step,
            "transition_shift": self.transition_shift,
            "decisions": self.decisions,
            "controller": self.controller.state() if self.controller is not None else None,
        }
        return arrays, meta

    def load_state(self, arrays: dict[str, np.ndarray], meta: dict[str, Any]) -> None:
        for i, mask in enumerate(self.constraint.masked.masks):
            mask.assign(arrays[f"mask/{i}"])
        self.constraint.circulant.assign(bool(arrays["circulant"]))
        self.step = int(meta["step"])
        self._ratio_sum = float(meta["ratio_sum"])
        self.mask_updates = int(meta["mask_updates"])
        self.decisions = list(meta["decisions"])
        self.transition_step = meta["transition_step"]
        self.transition_shift = meta["transition_shift"]
        if self.controller is not None:
            self.controller.load_state(meta["controller"])
        self._ratios = None

    # --- internals ------------------------------------------------------------------------

    def _init_circulant(self) -> None:
        """Start block-circulant: keep row 0 of each block (= the vector c, see circulant.py),
        so the expanded kernel has the entry distribution of the dense initialiser (a
        projection would shrink its variance by b)."""
        b = self.config.block_size
        for kernel in self.constraint.kernels:
            w = kernel.numpy()
            p, q = w.shape[0] // b, w.shape[1] // b
            vectors = w.reshape(p, b, q, b)[:, 0, :, :]  # [p, i=0, q, j] -> [p, q, b]
            kernel.assign(expand_circulant(vectors, b))

    def _transition(self) -> None:
        """Circulant -> pruned (``phase_change``), at the first call at or past shift_step."""
        assert self.plan is not None and self.controller is not None
        b = self.config.block_size
        shifts = []
        for kernel, mask in zip(self.constraint.kernels, self.constraint.masked.masks, strict=True):
            vectors = project_to_block_circulant(kernel.numpy(), b)  # [in/b, out/b, b]
            t = transition(
                vectors,
                self.plan.method,
                self.plan.pruning_block_size,
                initial_sparsity=self.controller.target_sparsity,
            )
            kernel.assign(t.kernel * t.mask)
            mask.assign(t.mask)
            shifts.append(t.relative_shift)
        self.constraint.circulant.assign(False)
        self._ratios = None
        self.transition_step = self.step
        self.transition_shift = round(float(np.mean(shifts)), 4)
        log.info(
            "GST transition at update %d: %s, %.0f %% of %dx%d blocks pruned, relative shift %.3f",
            self.step,
            self.plan.method.value,
            100 * self.controller.target_sparsity,
            self.plan.pruning_block_size,
            self.plan.pruning_block_size,
            self.transition_shift,
        )


def _polynomial(config: CompressionConfig, total: int) -> PolynomialSchedule:
    """Zhu & Gupta's schedule over [begin, end] of the budget, on the prune_every grid."""
    f = config.prune_every
    begin = round(config.begin * total)
    n = max(1, round((config.end - config.begin) * total / f))
    return PolynomialSchedule(0.0, config.final_sparsity, begin, begin + n * f, f)
