"""Normalisation layers of the MCAN family (MCAN, MUAN, MCAN+PA).

`StdLayerNormalization` is the LayerNorm of the released code of that family
(MCAN's and openvqa's `LayerNorm`; docs/gated_attention.md), which differs
from `keras.layers.LayerNormalization`: it divides by the *unbiased* standard
deviation plus eps (eps outside the square root).
"""

import keras
from keras import ops

from keras_structattn import checks


@keras.saving.register_keras_serializable(package="keras_structattn")
class StdLayerNormalization(keras.layers.Layer):
    """Layer norm of the MCAN family (the MCAN, openvqa and MUAN codes).

    `gamma * (x - mean) / (std + epsilon) + beta` over the last axis, with the
    *unbiased* (N - 1) standard deviation and epsilon added to the std, not
    inside the square root; computed in float32. Keras's
    `LayerNormalization` uses the biased variance inside the root. The
    variance is clamped at 1e-24 before the root, which changes no output
    (epsilon dominates there) but keeps gradients finite for constant rows.

    Args:
        epsilon: added to the standard deviation (1e-6 in the MCAN family).
        **kwargs: `keras.layers.Layer` arguments (`name`, `dtype`, ...).

    Call arguments:
        inputs: `[..., d]`.

    Returns:
        The normalised `[..., d]`, in the compute dtype.
    """

    def __init__(self, epsilon=1e-6, **kwargs):
        super().__init__(**kwargs)
        self.epsilon = checks.positive_float("layer_norm_epsilon", epsilon)

    def build(self, input_shape):
        dim = input_shape[-1]
        if dim is None or dim < 2:
            raise ValueError(
                "StdLayerNormalization needs a known last axis of size >= 2 (unbiased "
                f"std). Received: input_shape={tuple(input_shape)}"
            )
        self.gamma = self.add_weight(name="gamma", shape=(dim,), initializer="ones")
        self.beta = self.add_weight(name="beta", shape=(dim,), initializer="zeros")

    def call(self, x):
        x32 = ops.cast(x, "float32")
        centred = x32 - ops.mean(x32, axis=-1, keepdims=True)
        dim = x32.shape[-1]
        variance = ops.sum(ops.square(centred), axis=-1, keepdims=True) / (dim - 1)
        std = ops.sqrt(ops.maximum(variance, 1e-24))
        y = ops.cast(self.gamma, "float32") * centred / (std + self.epsilon)
        return ops.cast(y + ops.cast(self.beta, "float32"), self.compute_dtype)

    def compute_output_shape(self, input_shape):
        return input_shape

    def get_config(self):
        config = super().get_config()
        config.update(epsilon=self.epsilon)
        return config
