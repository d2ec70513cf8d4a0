"""Several gradient steps per compiled call: one replay batch, split into minibatches.

A call's batch holds ``k = updates_per_call`` minibatches of ``b`` rows, drawn at once by
one replay gather; step ``i`` of the call trains on rows ``[i * b, (i + 1) * b)``. The
batch keeps its ``k * b`` rows even when a call takes fewer steps (the replay ratio owes
fewer): the compiled update then sees one shape, and XLA compiles it once.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np
import tensorflow as tf

from edge_rl.types import ReplaySample


def check_steps(batch: ReplaySample, per_call: int, steps: int | None) -> int:
    """The steps a call takes (``per_call`` when None); ValueError when ``batch`` does not
    split into ``per_call`` minibatches or ``steps`` is not in ``[1, per_call]``."""
    n = int(np.shape(batch.reward)[0])
    if n == 0 or n % per_call:
        raise ValueError(
            f"batch of {n} does not split into updates_per_call={per_call} minibatches"
        )
    steps = per_call if steps is None else int(steps)
    if not 1 <= steps <= per_call:
        raise ValueError(f"steps must be in [1, updates_per_call={per_call}], got {steps}")
    return steps


def split_minibatches(columns: Sequence[tf.Tensor], per_call: int) -> list[tf.Tensor]:
    """Each ``[k * b, ...]`` column as ``[k, b, ...]``: minibatch i is ``column[i]``."""
    return [tf.reshape(x, tf.concat([[per_call, -1], tf.shape(x)[1:]], axis=0)) for x in columns]


def compile_calls(
    train: Callable[..., tf.Tensor], signature: Sequence[tf.TensorSpec], rows: int
) -> None:
    """Have XLA compile ``train`` for calls of ``rows`` rows now, by a call of zero steps.

    ``signature`` is ``train``'s input signature: batch columns whose leading dimension is
    None, then the scalar step count. With zero steps the loop body never runs, so no
    variable changes; XLA keys its compiled program by the input shapes, so the calls that
    follow with ``rows`` rows reuse it instead of compiling in the first update.
    """
    columns = [
        tf.zeros([rows if d is None else d for d in spec.shape], spec.dtype)
        for spec in signature[:-1]
    ]
    train(*columns, tf.constant(0, signature[-1].dtype))


def mean_over_steps(
    step: Callable[..., tuple[tf.Tensor, tf.Tensor]],
    columns: Sequence[tf.Tensor],
    per_call: int,
    steps: tf.Tensor,
) -> tuple[tf.Tensor, tf.Tensor]:
    """Inside a traced update: ``step(*minibatch_i)`` for ``i`` in ``[0, steps)``, in order,
    on the call's batch ``columns`` (``[k * b, ...]`` each, ``k = per_call``); the means over
    those steps of its two scalar outputs (a loss and a mean Q).

    A tf.while_loop on a tensor condition: its trace does not grow with k (~3 s instead
    of ~25 s at k = 16 for TD3, benchmarks/td3_learner.py), and XLA compiles it once for
    every step count. Not ``for i in tf.range(steps)``: XLA needs a Range's limit at
    compile time, so that form compiles the whole update again for every step count a
    call asks for.
    """

    minibatches = split_minibatches(columns, per_call)  # [k, b, ...] each

    def body(i: tf.Tensor, loss_sum: tf.Tensor, q_sum: tf.Tensor) -> tuple[tf.Tensor, ...]:
        loss, mean_q = step(*(x[i] for x in minibatches))
        return i + 1, loss_sum + loss, q_sum + mean_q

    start = (tf.constant(0), tf.constant(0.0), tf.constant(0.0))
    _, loss_sum, q_sum = tf.while_loop(lambda i, *_: i < steps, body, start)
    n = tf.cast(steps, tf.float32)
    return loss_sum / n, q_sum / n
