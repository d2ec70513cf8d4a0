"""What both algorithms' update steps share: a step is applied only when it is finite.

A batch that passes every check at ingest can still, with a diverging critic, give a NaN
loss; applying its gradient would turn every weight into NaN and the policy with it. The
update steps apply a step only when ``all_finite`` and count the rest (``skipped``).
"""

from __future__ import annotations

import tensorflow as tf


def all_finite(loss: tf.Tensor, grads: list[tf.Tensor]) -> tf.Tensor:
    """True when the loss and every gradient are finite (a scalar bool tensor)."""
    checks = [tf.reduce_all(tf.math.is_finite(g)) for g in grads if g is not None]
    return tf.reduce_all(tf.stack([tf.math.is_finite(loss), *checks]))
