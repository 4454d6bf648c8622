"""Losses for sequence models with padding."""

import math

import keras
from keras import ops

from keras_structattn.decoding.tokens import PAD_ID


def _sum_over_replicas(value):
    """`value` summed over the replicas of a TensorFlow `tf.distribute`
    strategy when called in one of its replica contexts, else `value`.

    Keras' TensorFlow trainer sums the replicas' gradients and expects each
    replica's loss to be its share of the global loss (it divides its own
    mean reductions by the replica count). A token mean must then divide
    each replica's sum by the real tokens of all replicas: the summed
    gradient is that of the global token mean, however unevenly the tokens
    fall (and `train_on_batch`, which hands every replica the whole batch,
    gets the mean over `num_replicas` copies of it, which is the same). JAX
    (`keras.distribution`) computes on global arrays and needs nothing.
    """
    if keras.backend.backend() != "tensorflow":
        return value
    import tensorflow as tf

    context = tf.distribute.get_replica_context()
    if context is None or context.num_replicas_in_sync == 1:
        return value
    return context.all_reduce(tf.distribute.ReduceOp.SUM, value)


@keras.saving.register_keras_serializable(package="keras_structattn")
class PaddedCrossEntropy(keras.losses.Loss):
    """Label-smoothed cross-entropy averaged over the non-padding tokens.

    tensor2tensor's `padded_cross_entropy` with `smoothing_cross_entropy`:
    the target distribution puts `1 - label_smoothing` on the true token and
    spreads `label_smoothing` evenly over the other `V - 1` tokens; the
    entropy of that distribution is subtracted, so a perfect model scores 0.
    Targets equal to `pad_id` are ignored, and the batch's loss is the sum
    over real tokens divided by their number (not by the padded size): rows
    of padding only change nothing. Under a TensorFlow `tf.distribute`
    strategy the number is that of all replicas, so that the replicas'
    losses add up to the global batch's (docs/distributed.md).

    Args:
        label_smoothing: in [0, 1).
        pad_id: the padding id (0 in tensor2tensor).
        name: the loss name.
        **kwargs: `keras.losses.Loss` arguments; `reduction` defaults to
            `"sum"`, which makes the result the mean over real tokens.

    Call arguments:
        y_true: int target ids `[B, T]`.
        y_pred: logits `[B, T, V]` (any float dtype; computed in float32).

    Returns:
        The loss: the mean over the batch's non-padding tokens (a scalar
        with the default reduction).
    """

    def __init__(
        self, label_smoothing=0.1, pad_id=PAD_ID, name="padded_cross_entropy", **kwargs
    ):
        kwargs.setdefault("reduction", "sum")
        super().__init__(name=name, **kwargs)
        if not 0.0 <= label_smoothing < 1.0:
            raise ValueError(
                "Argument `label_smoothing` must be in [0, 1). "
                f"Received: {label_smoothing!r}"
            )
        self.label_smoothing = float(label_smoothing)
        self.pad_id = int(pad_id)

    def call(self, y_true, y_pred):
        logits = ops.cast(y_pred, "float32")
        vocab = logits.shape[-1]
        targets = ops.cast(y_true, "int32")
        log_probs = ops.log_softmax(logits, axis=-1)
        confidence = 1.0 - self.label_smoothing
        low = self.label_smoothing / (vocab - 1)
        true_log_prob = ops.take_along_axis(
            log_probs, ops.expand_dims(targets, -1), axis=-1
        )[..., 0]
        # sum_v q_v log p_v with q = low everywhere but `confidence` at the
        # target: low * sum_v log p_v + (confidence - low) * log p_target.
        cross = -(
            low * ops.sum(log_probs, axis=-1)
            + (confidence - low) * true_log_prob
        )
        normalising = -(
            confidence * math.log(confidence)
            + (vocab - 1) * low * math.log(low + 1e-20)
        ) if self.label_smoothing > 0 else 0.0
        weights = ops.cast(ops.not_equal(targets, self.pad_id), "float32")
        total = ops.maximum(_sum_over_replicas(ops.sum(weights)), 1.0)
        # With reduction "sum", this is the mean over real tokens (of all
        # replicas under a `tf.distribute` strategy, see `_sum_over_replicas`).
        return (cross - normalising) * weights / total

    def get_config(self):
        config = super().get_config()
        config.update(label_smoothing=self.label_smoothing, pad_id=self.pad_id)
        return config


@keras.saving.register_keras_serializable(package="keras_structattn")
class PaddedAccuracy(keras.metrics.Mean):
    """Token accuracy of the argmax over the non-padding targets.

    Args:
        pad_id: the padding id; targets equal to it are not counted.
        name: the metric name.
        **kwargs: `keras.metrics.Mean` arguments.

    Call arguments (`update_state`):
        y_true: int target ids `[B, T]`.
        y_pred: logits or probabilities `[B, T, V]`.
        sample_weight: ignored; the weights are the non-padding targets.

    Returns:
        `result()`: the fraction of non-padding targets whose argmax is
        right, over everything seen since the last reset.
    """

    def __init__(self, pad_id=PAD_ID, name="accuracy", **kwargs):
        super().__init__(name=name, **kwargs)
        self.pad_id = int(pad_id)

    def update_state(self, y_true, y_pred, sample_weight=None):
        targets = ops.cast(y_true, "int32")
        predicted = ops.cast(ops.argmax(y_pred, axis=-1), "int32")
        weights = ops.cast(ops.not_equal(targets, self.pad_id), "float32")
        correct = ops.cast(ops.equal(targets, predicted), "float32")
        return super().update_state(correct, sample_weight=weights)

    def get_config(self):
        config = super().get_config()
        config.update(pad_id=self.pad_id)
        return config


@keras.saving.register_keras_serializable(package="keras_structattn")
class SoftTargetBinaryCrossEntropy(keras.losses.Loss):
    """Binary cross-entropy from logits against soft targets, summed over
    the answers (VQA).

    MCAN's loss (Yu et al., 2019, arXiv:1906.10770; MCAN+PA, Mao et al.,
    2022, Eq. 4): each answer is a binary classifier whose target is the
    answer's soft score in [0, 1] (`min(1, 0.3 * matching humans)`):

        l = sum_a -(s_a log sigmoid(z_a) + (1 - s_a) log(1 - sigmoid(z_a)))

    computed stably from logits in float32. The MCAN code sums `l` over the
    batch as well; here, with the default reduction, it is averaged over
    the batch. Under Adam the two differ only through Adam's epsilon (the
    update is invariant to a constant scale of the loss), so the learning
    rate keeps its meaning; with the mean it is per example, whatever the
    batch size (docs/vqa.md).

    Args:
        name: the loss name.
        **kwargs: `keras.losses.Loss` arguments (`reduction` defaults to
            `"sum_over_batch_size"`, the mean over the batch; `"sum"` is
            MCAN's sum over the batch).

    Call arguments:
        y_true: soft targets `[B, num_answers]` in [0, 1].
        y_pred: logits `[B, num_answers]` (any float dtype; float32 inside).

    Returns:
        The loss (a scalar with a reducing reduction; `[B]` sums over the
        answers with `reduction=None`).
    """

    def __init__(self, name="soft_target_binary_cross_entropy", **kwargs):
        super().__init__(name=name, **kwargs)

    def call(self, y_true, y_pred):
        logits = ops.cast(y_pred, "float32")
        targets = ops.cast(y_true, "float32")
        # max(z, 0) - z s + log(1 + exp(-|z|)): no overflow for any z.
        per_answer = (
            ops.relu(logits) - logits * targets + ops.log1p(ops.exp(-ops.abs(logits)))
        )
        return ops.sum(per_answer, axis=-1)


def soft_accuracy(y_true, y_pred):
    """The soft score of the top answer: MCAN's training accuracy, a proxy
    of the VQA accuracy over the answer vocabulary (a `compile` metric).

    Args:
        y_true: soft targets `[B, num_answers]` in [0, 1].
        y_pred: logits or scores `[B, num_answers]`.

    Returns:
        `[B]`, each question's target score of its top answer.
    """
    top = ops.argmax(y_pred, axis=-1)
    return ops.take_along_axis(y_true, ops.expand_dims(top, -1), axis=-1)[:, 0]
