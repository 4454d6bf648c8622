"""`Dropout`: `keras.layers.Dropout` with cheap random numbers."""

import keras

from keras_structattn.ops.dropout import dropout


@keras.saving.register_keras_serializable(package="keras_structattn")
class Dropout(keras.layers.Dropout):
    """`keras.layers.Dropout` drawing its masks with `ops.dropout.dropout`.

    The same arguments, configuration, seeding and semantics (each element
    dropped with probability `rate`, survivors scaled by `1 / (1 - rate)`,
    identity unless `training`); the random numbers come from XLA's
    Threefry bit generator, several times cheaper on the CPU than
    `keras.random.dropout`'s (`docs/performance.md`).

    Args:
        rate: the fraction of the inputs to drop, in [0, 1].
        noise_shape: None, or the mask's shape, broadcast over the inputs.
        seed: an int seed for the layer's `SeedGenerator`.

    Call arguments:
        inputs: a tensor of any rank.
        training: whether to drop (False: the inputs unchanged).

    Returns:
        A tensor like `inputs`.
    """

    def call(self, inputs, training=False):
        if training and self.rate > 0:
            return dropout(inputs, self.rate, noise_shape=self.noise_shape,
                           seed=self.seed_generator)
        return inputs
