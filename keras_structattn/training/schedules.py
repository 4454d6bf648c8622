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


@keras.saving.register_keras_serializable(package="keras_structattn")
class StepWarmupDecay(keras.optimizers.schedules.LearningRateSchedule):
    """MCAN's step warm-up and step decay, by epochs.

    The schedule of MCAN's code (Yu et al., 2019, arXiv:1906.10770; code
    `MILVLG/mcan-vqa`, `WarmupOptimizer`): with `S = steps_per_epoch`,
    `W = warmup_epochs` and MCAN's 1-based update count `n`, the rate is
    `base * k / (W + 1)` for `(k - 1) S < n <= k S`, `k = 1..W` (base/4,
    2/4, 3/4 over the first three epochs), then `base`; `base` is multiplied
    by `decay_rate` at the start of each 0-based epoch in `decay_epochs`
    (epochs 10 and 12 of 13). Steps, not a linear ramp.

    Keras passes the 0-based `optimizer.iterations` `i`, so `n = i + 1` and
    the 0-based epoch of the update is `i // S` (MCAN drops the last
    incomplete batch, so every epoch has S updates).

    Args:
        base_learning_rate: the base rate (1e-4 for MCAN-small).
        steps_per_epoch: S, a positive int.
        warmup_epochs: W, a non-negative int (3).
        decay_epochs: 0-based epochs at whose start the rate is decayed,
            a sequence of ints (or a comma-separated string, as in hparams).
        decay_rate: the factor of each decay (0.2).

    Call arguments:
        step: the optimizer's 0-based iteration count (a scalar tensor).

    Returns:
        The float32 learning rate of that update.
    """

    def __init__(
        self,
        base_learning_rate,
        steps_per_epoch,
        warmup_epochs=3,
        decay_epochs=(10, 12),
        decay_rate=0.2,
    ):
        if isinstance(decay_epochs, str):
            decay_epochs = [int(e) for e in decay_epochs.split(",") if e.strip()]
        self.base_learning_rate = float(base_learning_rate)
        self.steps_per_epoch = int(steps_per_epoch)
        self.warmup_epochs = int(warmup_epochs)
        self.decay_epochs = tuple(sorted(int(e) for e in decay_epochs))
        self.decay_rate = float(decay_rate)
        if self.steps_per_epoch < 1:
            raise ValueError(
                f"Argument `steps_per_epoch` must be >= 1. Received: {steps_per_epoch!r}"
            )
        if self.warmup_epochs < 0 or any(e < 0 for e in self.decay_epochs):
            raise ValueError(
                "Arguments `warmup_epochs` and `decay_epochs` must be >= 0. Received: "
                f"warmup_epochs={warmup_epochs!r}, decay_epochs={decay_epochs!r}"
            )

    def __call__(self, step):
        epoch = ops.floor_divide(ops.cast(step, "int32"), self.steps_per_epoch)
        epoch = ops.cast(epoch, "float32")
        warmup = float(self.warmup_epochs)
        factor = ops.where(epoch < warmup, (epoch + 1.0) / (warmup + 1.0), 1.0)
        for decay_epoch in self.decay_epochs:
            factor = factor * ops.where(epoch >= float(decay_epoch), self.decay_rate, 1.0)
        return ops.cast(self.base_learning_rate * factor, "float32")

    def get_config(self):
        return dict(
            base_learning_rate=self.base_learning_rate,
            steps_per_epoch=self.steps_per_epoch,
            warmup_epochs=self.warmup_epochs,
            decay_epochs=list(self.decay_epochs),
            decay_rate=self.decay_rate,
        )


@keras.saving.register_keras_serializable(package="keras_structattn")
class LinearWarmupMultiStepDecay(keras.optimizers.schedules.LearningRateSchedule):
    """M4C's linear warm-up from a fraction of the rate, then step decay.

    The schedule of M4C's released code (Hu et al., 2020, arXiv:1911.06258;
    mmf's `warmup_factor`, `warmup_iterations`, `lr_steps`, `lr_ratio`):
    with `i` the 0-based iteration count, the factor is
    `warmup_factor * (1 - a) + a` with `a = i / warmup_steps` while
    `i <= warmup_steps`, then `decay_rate ** k` where `k` counts the
    `decay_steps` at or below `i` (`bisect_right`), as mmf's lambda.

    Args:
        base_learning_rate: the base rate (1e-4 for M4C).
        warmup_steps: a non-negative int (1000); 0 = no warm-up.
        warmup_factor: the factor at step 0 (0.2).
        decay_steps: iterations at which the rate is multiplied by
            `decay_rate`, a sequence of ints or a comma-separated string
            (14000, 19000).
        decay_rate: the factor of each decay (0.1).

    Call arguments:
        step: the optimizer's 0-based iteration count (a scalar tensor).

    Returns:
        The float32 learning rate of that update.
    """

    def __init__(self, base_learning_rate, warmup_steps=1000, warmup_factor=0.2,
                 decay_steps=(14000, 19000), decay_rate=0.1):
        if isinstance(decay_steps, str):
            decay_steps = [int(s) for s in decay_steps.split(",") if s.strip()]
        self.base_learning_rate = float(base_learning_rate)
        self.warmup_steps = int(warmup_steps)
        self.warmup_factor = float(warmup_factor)
        self.decay_steps = tuple(sorted(int(s) for s in decay_steps))
        self.decay_rate = float(decay_rate)
        if self.warmup_steps < 0 or any(s < 0 for s in self.decay_steps):
            raise ValueError(
                "Arguments `warmup_steps` and `decay_steps` must be >= 0. Received: "
                f"warmup_steps={warmup_steps!r}, decay_steps={decay_steps!r}"
            )

    def __call__(self, step):
        step = ops.cast(step, "float32")
        factor = ops.ones((), "float32")
        for decay_step in self.decay_steps:
            factor = factor * ops.where(step >= float(decay_step), self.decay_rate, 1.0)
        if self.warmup_steps:
            alpha = ops.minimum(step / float(self.warmup_steps), 1.0)
            warm = self.warmup_factor * (1.0 - alpha) + alpha
            factor = ops.where(step <= float(self.warmup_steps), warm, factor)
        return ops.cast(self.base_learning_rate * factor, "float32")

    def get_config(self):
        return dict(
            base_learning_rate=self.base_learning_rate,
            warmup_steps=self.warmup_steps,
            warmup_factor=self.warmup_factor,
            decay_steps=list(self.decay_steps),
            decay_rate=self.decay_rate,
        )
