"""Reporting grounding predictions: accuracy next to the biggest-proposal
baseline, its table, and pictures of the ranked proposals."""

from keras_structattn.tasks import attention_maps
from keras_structattn.tasks.grounding.refcoco import biggest_boxes
from keras_structattn.tasks.grounding.refcoco import box_iou
from keras_structattn.tasks.grounding.refcoco import grounding_accuracy


def score_summary(predicted, referred, proposals, threshold=0.5):
    """The accuracy of predicted boxes next to the biggest-proposal baseline.

    Args:
        predicted: float `[E, 4]`, the predicted boxes of E expressions
            (normalised `x1, y1, x2, y2`).
        referred: float `[E, 4]`, their referred boxes.
        proposals: one `[N, 4]` array of region proposals per expression.
        threshold: a prediction is correct at an IoU above it.

    Returns:
        `(summary, correct)`: `{"expressions": E, "accuracy": %,
        "baseline": %}` and bool `[E]`.
    """
    accuracy, correct = grounding_accuracy(predicted, referred, threshold)
    baseline, _ = grounding_accuracy(biggest_boxes(proposals), referred, threshold)
    summary = {"expressions": len(predicted), "accuracy": 100.0 * float(accuracy),
               "baseline": 100.0 * float(baseline)}
    return summary, correct


def score_table(split, summary):
    """Text lines: a header, then the split's `score_summary` (%)."""
    return [f"{'split':10s} {'expressions':>11s} {'model':>9s} {'baseline':>9s}",
            f"{split:10s} {summary['expressions']:11d} {summary['accuracy']:9.2f} "
            f"{summary['baseline']:9.2f}"]


def draw_expression(image, record, proposals, probabilities, box):
    """An expression's proposals shaded by the model's ranking probability,
    the predicted box outlined in red and the referred box in green.

    Args:
        image: uint8 `[H, W, 3]`.
        record: its `RefExpression`.
        proposals: float `[N, 4]` normalised boxes (real proposals only).
        probabilities: float `[N]`, their ranking probabilities.
        box: float `[4]`, the predicted box (normalised).

    Returns:
        `(picture, iou)`: a `PIL.Image.Image` and the IoU of the predicted
        box with the referred one.
    """
    referred = record.normalized_box()
    iou = float(box_iou(box[None], referred[None])[0, 0])
    picture = attention_maps.draw_region_weights(
        image, proposals, probabilities,
        title=[record.sentence, f"IoU {iou:.2f} (red: predicted, green: referred)"],
        outlines=[(referred, attention_maps.TARGET_OUTLINE), (box, attention_maps.OUTLINE)])
    return picture, iou
