"""Box regression deltas: the Faster R-CNN parameterisation of a box
relative to a reference box (a region proposal).

Girshick, "Fast R-CNN", 2015 (arXiv:1504.08083), Ren et al., "Faster
R-CNN", 2015 (arXiv:1506.01497, Eq. 2). For a reference box with centre
`(cx, cy)` and size `(w, h)` and a target box `(cx*, cy*, w*, h*)`:

    dx = (cx* - cx) / w        dy = (cy* - cy) / h
    dw = log(w* / w)           dh = log(h* / h)

and decoding inverts it: `cx' = cx + dx * w`, `w' = w * exp(dw)`, ...
MUAN's grounding head regresses each proposal's box this way (Yu et al.,
2019, arXiv:1908.04107, Eqs. 11 and 13; docs/grounding.md).

Conventions:

* Boxes are `[..., 4]` as `[x1, y1, x2, y2]` in normalised image
  coordinates (0 to 1), with no pixel offset (`w = x2 - x1`, not
  `x2 - x1 + 1`). No per-coordinate scaling of the deltas (the
  `(0.1, 0.1, 0.2, 0.2)` standard deviations of some detectors): the
  deltas are the plain ones above.
* Widths and heights below `MIN_SIZE` are taken as `MIN_SIZE`, so a
  zero-size or padding (all-zero) box gives large but finite deltas, never
  inf or NaN. Such boxes should carry a zero regression weight.
* Decoding clips `dw` and `dh` at `MAX_LOG_RATIO = log(1 / MIN_SIZE)`
  (the largest ratio of two normalised sizes), so `exp` cannot overflow
  and `decode(encode(b, t)) == t` for every pair of boxes inside the image.

The keras.ops functions compute in float32 (also under mixed precision);
the NumPy ones compute in float64 and return float32, for targets built in
a data pipeline.
"""

import math

import numpy as np
from keras import ops

# Narrowest width or height taken as it is (normalised units).
MIN_SIZE = 1e-6
# Largest |dw|, |dh| decoded: the log-ratio of a full-image box to MIN_SIZE.
MAX_LOG_RATIO = math.log(1.0 / MIN_SIZE)


def _check_last_axis(name, shape):
    if len(shape) < 1 or shape[-1] != 4:
        raise ValueError(
            f"Argument `{name}` must have a last axis of 4 ([x1, y1, x2, y2] for boxes, "
            f"[dx, dy, dw, dh] for deltas). Received: {name}.shape={tuple(shape)}"
        )


def _centres_and_sizes(boxes, xp):
    x1, y1, x2, y2 = (boxes[..., i] for i in range(4))
    width = xp.maximum(x2 - x1, MIN_SIZE)
    height = xp.maximum(y2 - y1, MIN_SIZE)
    return (x1 + x2) * 0.5, (y1 + y2) * 0.5, width, height


# The coding itself, written once for `xp` = `keras.ops` (the float32
# tensors of a model) and `xp` = NumPy (the float64 arrays of a data
# pipeline): both spell the functions used here alike.


def _encode(boxes, target_boxes, xp):
    cx, cy, w, h = _centres_and_sizes(boxes, xp)
    tcx, tcy, tw, th = _centres_and_sizes(target_boxes, xp)
    return xp.stack([(tcx - cx) / w, (tcy - cy) / h, xp.log(tw / w), xp.log(th / h)], axis=-1)


def _decode(boxes, deltas, xp):
    cx, cy, w, h = _centres_and_sizes(boxes, xp)
    dw = xp.clip(deltas[..., 2], -MAX_LOG_RATIO, MAX_LOG_RATIO)
    dh = xp.clip(deltas[..., 3], -MAX_LOG_RATIO, MAX_LOG_RATIO)
    new_cx = cx + deltas[..., 0] * w
    new_cy = cy + deltas[..., 1] * h
    half_w = 0.5 * w * xp.exp(dw)
    half_h = 0.5 * h * xp.exp(dh)
    return xp.stack([new_cx - half_w, new_cy - half_h, new_cx + half_w, new_cy + half_h], axis=-1)


def encode_box_deltas(boxes, target_boxes):
    """Deltas that move `boxes` onto `target_boxes` (module docstring).

    Args:
        boxes: reference boxes `[..., 4]`, `[x1, y1, x2, y2]`.
        target_boxes: target boxes broadcastable to `boxes` (e.g. one
            ground-truth box `[B, 1, 4]` for all proposals `[B, N, 4]`).

    Returns:
        float32 deltas `[..., 4]` as `[dx, dy, dw, dh]`.
    """
    boxes = ops.cast(boxes, "float32")
    target_boxes = ops.cast(target_boxes, "float32")
    _check_last_axis("boxes", boxes.shape)
    _check_last_axis("target_boxes", target_boxes.shape)
    return _encode(boxes, target_boxes, ops)


def decode_box_deltas(boxes, deltas):
    """Applies `deltas` to `boxes` (the inverse of `encode_box_deltas`).

    Args:
        boxes: reference boxes `[..., 4]`, `[x1, y1, x2, y2]`.
        deltas: `[..., 4]` as `[dx, dy, dw, dh]`, broadcastable to `boxes`.

    Returns:
        float32 boxes `[..., 4]`, `[x1, y1, x2, y2]`, not clipped to the
        image (see `keras_structattn.tasks.grounding.heads.predict_boxes`).
    """
    boxes = ops.cast(boxes, "float32")
    deltas = ops.cast(deltas, "float32")
    _check_last_axis("boxes", boxes.shape)
    _check_last_axis("deltas", deltas.shape)
    return _decode(boxes, deltas, ops)


def encode_box_deltas_numpy(boxes, target_boxes):
    """NumPy `encode_box_deltas` (float64 inside, float32 out).

    Args:
        boxes: array-like `[..., 4]`, `[x1, y1, x2, y2]`.
        target_boxes: array-like broadcastable to `boxes`.

    Returns:
        float32 array `[..., 4]` of `[dx, dy, dw, dh]`.
    """
    boxes = np.asarray(boxes, dtype=np.float64)
    target_boxes = np.asarray(target_boxes, dtype=np.float64)
    _check_last_axis("boxes", boxes.shape)
    _check_last_axis("target_boxes", target_boxes.shape)
    return _encode(boxes, target_boxes, np).astype(np.float32)


def decode_box_deltas_numpy(boxes, deltas):
    """NumPy `decode_box_deltas` (float64 inside, float32 out).

    Args:
        boxes: array-like `[..., 4]`, `[x1, y1, x2, y2]`.
        deltas: array-like `[..., 4]` broadcastable to `boxes`.

    Returns:
        float32 array `[..., 4]` of `[x1, y1, x2, y2]`.
    """
    boxes = np.asarray(boxes, dtype=np.float64)
    deltas = np.asarray(deltas, dtype=np.float64)
    _check_last_axis("boxes", boxes.shape)
    _check_last_axis("deltas", deltas.shape)
    return _decode(boxes, deltas, np).astype(np.float32)
