"""Visual grounding heads' losses and box selection (MUAN, Sec. III-B).

Yu, Cui, Yu, Tao and Tian, "Multimodal Unified Attention Networks for
Vision-and-Language Interactions", 2019, arXiv:1908.04107. The grounding
model scores every region proposal and regresses a refinement of its box
(Eq. 11); it is trained with a ranking loss and a regression loss (Eq. 14,
`L = L_rank + lambda * L_reg`, lambda = 0.5), "following the strategy" of
DDPN (Yu et al., 2018, arXiv:1805.03508). See docs/grounding.md.

* `rank_loss` (Eq. 12): the KL divergence from a target distribution over
  the proposals (built from the proposals' IoU with the ground-truth box:
  `keras_structattn.tasks.grounding.refcoco.grounding_targets`) to the softmax of the
  predicted scores.
* `regression_loss` (Eq. 13): smooth-L1 (Fast R-CNN's, beta 1) between the
  predicted and the target box deltas (`keras_structattn.ops.box_coding`),
  summed over the 4 coordinates and averaged over the regressed proposals.
* `RankLoss` and `BoxRegressionLoss`: the two as `keras.losses.Loss` for
  `model.compile(loss={"scores": RankLoss(), "box_deltas":
  BoxRegressionLoss()}, loss_weights={"scores": 1.0, "box_deltas": 0.5})`.
* `predict_boxes`: the top-scoring proposal's box refined by its deltas.

Everything is computed in float32, also under mixed precision.
"""

import keras
import numpy as np
from keras import ops

from keras_structattn.ops.box_coding import decode_box_deltas
from keras_structattn.ops.box_coding import encode_box_deltas_numpy

# Width of the regression loss's packed `y_true`: 4 target deltas, 1 weight.
PACKED_TARGET_SIZE = 5
# Denominator floor of the regression average (an example with no
# regressed proposal has loss 0, not 0 / 0).
_MIN_TOTAL_WEIGHT = 1e-12


def rank_loss(target_distribution, scores):
    """KL(target || softmax(scores)) for each example (MUAN Eq. 12).

    `sum_i p_i (log p_i - log q_i)` with `q = softmax(scores)` and
    `0 * log 0 = 0`. Padding proposals carry target 0 and a large negative
    score (the model sets it), so they add nothing. Eq. 12 writes a further
    factor `1/n` (n = 100 proposals), a constant left out here, as in the
    usual KL loss: see docs/grounding.md for how to reproduce it.

    Args:
        target_distribution: `[B, N]`, each row non-negative and summing
            to 1 (rows that do not sum to 1 are used as given).
        scores: ranking logits `[B, N]` (any float dtype).

    Returns:
        float32 `[B]`, the divergence of each example (>= 0).
    """
    p = ops.cast(target_distribution, "float32")
    log_q = ops.log_softmax(ops.cast(scores, "float32"), axis=-1)
    positive = ops.greater(p, 0.0)
    # log of a positive stand-in where p = 0, so that neither branch of the
    # `where` (nor its gradient) sees log 0.
    log_p = ops.log(ops.where(positive, p, 1.0))
    terms = ops.where(positive, p * (log_p - log_q), 0.0)
    return ops.sum(terms, axis=-1)


def smooth_l1(x, beta=1.0):
    """Fast R-CNN's smooth-L1 (Girshick, 2015, arXiv:1504.08083, Eq. 3):
    `0.5 x^2 / beta` where `|x| < beta`, else `|x| - 0.5 beta`, elementwise,
    float32."""
    x = ops.abs(ops.cast(x, "float32"))
    return ops.where(ops.less(x, beta), 0.5 * ops.square(x) / beta, x - 0.5 * beta)


def regression_loss(target_deltas, deltas, weights, beta=1.0):
    """Smooth-L1 box regression of each example (MUAN Eq. 13).

    `sum_i w_i sum_c smooth_l1(t*_ic - t_ic) / sum_i w_i`: the smooth-L1 of
    the 4 delta coordinates summed (as Fast R-CNN's `L_loc`), averaged over
    the proposals weighted by `w`. With `w` = 1 for every real proposal and
    0 for padding this is Eq. 13's `1/n sum_i`, every proposal regressed
    onto the ground-truth box (the paper's reading; docs/grounding.md).
    An example whose weights are all 0 has loss 0.

    Args:
        target_deltas: `[B, N, 4]` deltas of the ground-truth box relative
            to each proposal (`encode_box_deltas`).
        deltas: predicted deltas `[B, N, 4]`.
        weights: `[B, N]` non-negative weights (0 = not regressed).
        beta: the smooth-L1 transition point (1, Fast R-CNN's).

    Returns:
        float32 `[B]`.
    """
    difference = ops.cast(deltas, "float32") - ops.cast(target_deltas, "float32")
    per_region = ops.sum(smooth_l1(difference, beta), axis=-1)
    weights = ops.cast(weights, "float32")
    total = ops.maximum(ops.sum(weights, axis=-1), _MIN_TOTAL_WEIGHT)
    return ops.sum(weights * per_region, axis=-1) / total


def regression_targets_numpy(boxes, target_box, weights):
    """The packed `y_true` of `BoxRegressionLoss`, in NumPy.

    Args:
        boxes: proposals `[..., N, 4]`, normalised `[x1, y1, x2, y2]`.
        target_box: the ground-truth box `[..., 4]` (one per example).
        weights: `[..., N]` regression weights (e.g. the region mask as
            float: every real proposal, Eq. 13).

    Returns:
        float32 `[..., N, 5]`: the deltas `[dx, dy, dw, dh]` moving each
        proposal onto `target_box`, then the weight. Padding rows (weight
        0) get finite deltas, ignored by the loss.
    """
    boxes = np.asarray(boxes, dtype=np.float64)
    target_box = np.asarray(target_box, dtype=np.float64)
    weights = np.asarray(weights, dtype=np.float32)
    if weights.shape != boxes.shape[:-1]:
        raise ValueError(
            "Argument `weights` must have the shape of `boxes` without its last axis. "
            f"Received: weights.shape={weights.shape}, boxes.shape={boxes.shape}"
        )
    deltas = encode_box_deltas_numpy(boxes, target_box[..., None, :])
    return np.concatenate([deltas, weights[..., None]], axis=-1)


@keras.saving.register_keras_serializable(package="keras_structattn")
class RankLoss(keras.losses.Loss):
    """`rank_loss` as a Keras loss (the grounding model's `"scores"`).

    Args:
        name: the loss name.
        **kwargs: `keras.losses.Loss` arguments (the default reduction
            `"sum_over_batch_size"` averages the examples).

    Call arguments:
        y_true: the target distribution `[B, N]`.
        y_pred: the ranking logits `[B, N]`.

    Returns:
        The KL divergence, averaged over the batch.
    """

    def __init__(self, name="rank_loss", **kwargs):
        super().__init__(name=name, **kwargs)

    def call(self, y_true, y_pred):
        return rank_loss(y_true, y_pred)


@keras.saving.register_keras_serializable(package="keras_structattn")
class BoxRegressionLoss(keras.losses.Loss):
    """`regression_loss` as a Keras loss (the model's `"box_deltas"`).

    `y_true` packs the targets and the weights: `[B, N, 5]` =
    `[dx*, dy*, dw*, dh*, weight]` (`regression_targets_numpy`), since a
    Keras loss takes one target tensor.

    Args:
        beta: the smooth-L1 transition point.
        name: the loss name.
        **kwargs: `keras.losses.Loss` arguments.

    Call arguments:
        y_true: `[B, N, 5]` as above.
        y_pred: predicted deltas `[B, N, 4]`.

    Returns:
        The weighted smooth-L1, averaged over the batch.
    """

    def __init__(self, beta=1.0, name="box_regression_loss", **kwargs):
        super().__init__(name=name, **kwargs)
        if isinstance(beta, bool) or not isinstance(beta, (int, float)) or not beta > 0:
            raise ValueError(f"Argument `beta` must be a positive number. Received: beta={beta!r}")
        self.beta = float(beta)

    def call(self, y_true, y_pred):
        if y_true.shape[-1] != PACKED_TARGET_SIZE:
            raise ValueError(
                "BoxRegressionLoss takes y_true [B, N, 5] = [dx, dy, dw, dh, weight]. "
                f"Received: y_true.shape={tuple(y_true.shape)}"
            )
        return regression_loss(y_true[..., :4], y_pred, y_true[..., 4], self.beta)

    def get_config(self):
        config = super().get_config()
        config.update(beta=self.beta)
        return config


def predict_boxes(scores, box_deltas, boxes):
    """The predicted box: the top-scoring proposal's box moved by its
    deltas and clipped to the image (MUAN Fig. 7's yellow box).

    Args:
        scores: ranking logits `[B, N]` (padding proposals very negative).
        box_deltas: `[B, N, 4]` predicted deltas.
        boxes: the proposals `[B, N, 4]`, normalised `[x1, y1, x2, y2]`.

    Returns:
        `(predicted [B, 4] float32 clipped to [0, 1], index [B] int32)`:
        the refined box and the chosen proposal (its unrefined box is
        `boxes[b, index[b]]`). Ties go to the lowest index.
    """
    index = ops.cast(ops.argmax(ops.cast(scores, "float32"), axis=-1), "int32")
    gather = ops.expand_dims(ops.expand_dims(index, -1), -1)
    chosen_box = ops.take_along_axis(ops.cast(boxes, "float32"), gather, axis=1)[:, 0]
    chosen_deltas = ops.take_along_axis(ops.cast(box_deltas, "float32"), gather, axis=1)[:, 0]
    return ops.clip(decode_box_deltas(chosen_box, chosen_deltas), 0.0, 1.0), index
