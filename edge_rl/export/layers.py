"""The exporter's one custom Keras layer, in a module of its own: the export worker
(convert.py) registers it before it deserialises a model, without importing tflite.py.
"""

from __future__ import annotations

import keras
import numpy as np


@keras.saving.register_keras_serializable(package="edge_rl")
class Affine(keras.layers.Layer):
    """``y = x * scale + offset`` per feature, optionally clipped to ``[low, high]``.

    Constants, not weights: they trace into float MUL / ADD (/ MAXIMUM / MINIMUM) ops, and
    travel to the export worker in the layer's config (float32 values as Python floats).
    """

    def __init__(
        self,
        scale: np.ndarray,
        offset: np.ndarray,
        clip: tuple[np.ndarray, np.ndarray] | None = None,
        **kwargs,
    ) -> None:
        super().__init__(**kwargs)
        self.scale = np.asarray(scale, np.float32)  # [features]
        self.offset = np.asarray(offset, np.float32)  # [features]
        self.clip = None if clip is None else tuple(np.asarray(c, np.float32) for c in clip)

    def call(self, x):
        y = x * self.scale + self.offset
        if self.clip is not None:
            y = keras.ops.minimum(keras.ops.maximum(y, self.clip[0]), self.clip[1])
        return y

    def get_config(self) -> dict:
        return {
            **super().get_config(),
            "scale": self.scale.tolist(),
            "offset": self.offset.tolist(),
            "clip": None if self.clip is None else [c.tolist() for c in self.clip],
        }
