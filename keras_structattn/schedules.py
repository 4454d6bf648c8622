"""Learning-rate schedules."""

import keras
from keras import ops


@keras.saving.register_keras_serializable(package="keras_structattn")
class WarmupRsqrtDecay(keras.optimizers.schedules.LearningRateSchedule):
    """tensor2tensor's `constant*linear_warmup*rsqrt_decay*rsqrt_hidden_size`.

    `lr(step) = constant * min(1, step / warmup) / sqrt(max(step, warmup))
    / sqrt(hidden_size)`: a linear warm-up to the peak
    `constant / sqrt(warmup * hidden_size)`, then decay as `1/sqrt(step)`.
    Steps count from 1 (Keras passes the 0-based iteration count).

    Args:
        constant: t2t's `learning_rate_constant` (2.0 for the Transformer).
        warmup_steps: `learning_rate_warmup_steps`.
        hidden_size: the model width.

    Call arguments:
        step: the optimizer's 0-based iteration count (a scalar tensor).

    Returns:
        The float32 learning rate at that step.
    """

    def __init__(self, constant, warmup_steps, hidden_size):
        if warmup_steps < 1:
            raise ValueError(
                f"Argument `warmup_steps` must be >= 1. Received: {warmup_steps!r}"
            )
        if hidden_size < 1:
            raise ValueError(
                f"Argument `hidden_size` must be >= 1. Received: {hidden_size!r}"
            )
        self.constant = float(constant)
        self.warmup_steps = int(warmup_steps)
        self.hidden_size = int(hidden_size)

    def __call__(self, step):
        step = ops.cast(step, "float32") + 1.0
        warmup = float(self.warmup_steps)
        rate = ops.minimum(1.0, step / warmup) * ops.rsqrt(ops.maximum(step, warmup))
        return self.constant * rate * self.hidden_size**-0.5

    def get_config(self):
        return dict(
            constant=self.constant,
            warmup_steps=self.warmup_steps,
            hidden_size=self.hidden_size,
        )
