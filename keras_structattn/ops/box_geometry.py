"""Relative box geometry and its sinusoidal embedding (Relation Networks).

MCAN+PA (Mao et al., 2022, "Positional Attention Guided Transformer-like
Architecture for Visual Question Answering", IEEE; Eqs. 13-14) builds the
positional attention map between two objects from their relative geometry,
as Relation Networks (Hu et al., 2018, arXiv:1711.11575) do. For query box
i and key box j, with centres `(x, y)` and sizes `(w, h)`:

    R_ij = (log(max(|x_i - x_j| / w_i, clip)),
            log(max(|y_i - y_j| / h_i, clip)),
            log(w_j / w_i),
            log(h_j / h_i))

then each of the 4 features is embedded with sines and cosines of
`scale * R / wavelength^(k / F)`, k = 0..F-1, F = dim / 8 (64 channels, 8
frequencies, wavelength 1000, scale 100 in both papers' code).

Conventions:

* **Size ratio sign.** The paper's Eq. 14 writes `log(w_j / w_i)` (key over
  query, `size_ratio="key_over_query"`, our default); the released code of
  both Relation Networks and MCAN+PA computes `log(w_i / w_j)`
  (`"query_over_key"`). The two differ by the sign of features 3 and 4.
* **Size offset.** The released code measures `w = x2 - x1 + 1` (a pixel
  convention) even on normalised boxes; `size_offset=1.0` reproduces it, the
  default 0 measures boxes as they are.
* **Channel order.** `"sin_cos"` (MCAN+PA's code): 32 sines, then 32
  cosines, each block feature-major (feature a, then frequency k).
  `"per_feature"` (Relation Networks' code): for each feature, its 8 sines
  then its 8 cosines. The two are a permutation of each other.
* **Boxes.** `[x1, y1, x2, y2]` with `x1 <= x2` and `y1 <= y2`, in any one
  unit (normalised or pixels: the features are invariant to translation and
  scale, except for the `size_offset` added to sizes). With
  `size_offset=0` the features divide by the query box's width and height
  and take the logs of every box's, so a real box must have a positive
  width and height; padding boxes are all-zero rows. Where the values are
  known (NumPy inputs, eager tensors) a box that breaks this raises a
  ValueError naming its index (`checks.box_values`); compiled code does
  not check.
* Sizes below `MIN_SIZE` are taken as `MIN_SIZE`, so padding (all-zero)
  boxes, and in compiled code zero-size or reversed boxes too, give large
  but finite features, never inf or NaN.
* **Centre offsets** `|x_i - x_j|` are computed from coordinate
  differences, `|(x1_i - x1_j) + (x2_i - x2_j)| / 2`, never from rounded
  centres, so nearby boxes keep float32's relative precision (see
  `_centre_offset`).

Everything here is float32, also under mixed precision: log-ratios times
100 reach hundreds of radians, where float16 keeps no fraction at all.
"""

from keras import ops

from keras_structattn import checks
from keras_structattn.ops.trig import sin_cos
from keras_structattn.ops.trig import tracing_for_xla

SIZE_RATIOS = ("key_over_query", "query_over_key")
ORDERINGS = ("sin_cos", "per_feature")
# The narrowest box size taken as it is (normalised units).
MIN_SIZE = 1e-6
# Relative-geometry features per pair.
NUM_GEOMETRY_FEATURES = 4
# Fewer rows than this in the pairwise projection are padded (see below).
_MIN_DOT_ROWS = 8


def _check_boxes(name, boxes):
    if len(boxes.shape) < 2 or boxes.shape[-1] != 4:
        raise ValueError(
            f"Argument `{name}` must be boxes [..., N, 4] as [x1, y1, x2, y2]. "
            f"Received: {name}.shape={tuple(boxes.shape)}"
        )


def check_box_values(name, boxes, size_offset):
    """The box contract of the geometry (module docstring), where the
    values of `boxes` are known: ordered corners, and with `size_offset=0`
    a positive size for every box but all-zero padding rows."""
    checks.box_values(name, boxes, normalised=False, positive_size=size_offset == 0)


def check_geometry_options(size_ratio, size_offset, clip):
    """Validates the options of `relative_geometry` (raises ValueError)."""
    checks.one_of("size_ratio", size_ratio, SIZE_RATIOS)
    number = isinstance(size_offset, (int, float)) and not isinstance(size_offset, bool)
    if not number or size_offset < 0:
        raise ValueError(
            "Argument `size_offset` must be a number >= 0 (0 for boxes measured as "
            f"they are, 1 for the released code's pixel convention). Received: {size_offset!r}"
        )
    checks.positive_float("clip", clip)


def check_embedding_options(dim, wavelength, scale, ordering):
    """Validates the options of `geometry_embedding` (raises ValueError)."""
    if isinstance(dim, bool) or not isinstance(dim, int) or dim < 8 or dim % 8:
        raise ValueError(
            "Argument `dim` (the geometry embedding width) must be a positive multiple "
            f"of 8 (4 features x sin and cos x frequencies). Received: {dim!r}"
        )
    checks.positive_float("wavelength", wavelength)
    checks.positive_float("scale", scale)
    checks.one_of("ordering", ordering, ORDERINGS)


def _log_sizes(boxes, size_offset):
    """`(log w, log h)`, each float32 `[..., N]`."""
    x1, y1, x2, y2 = (boxes[..., i] for i in range(4))
    width = ops.maximum(x2 - x1 + size_offset, MIN_SIZE)
    height = ops.maximum(y2 - y1 + size_offset, MIN_SIZE)
    return ops.log(width), ops.log(height)


def _centre_offset(query_boxes, key_boxes, axis):
    """`|c_i - c_j|` along x (`axis=0`) or y (`axis=1`), float32 `[..., Nq, Nk]`.

    Computed as `|(x1_i - x1_j) + (x2_i - x2_j)| / 2`, not from the centres:
    a float32 centre `(x1 + x2) / 2` near 0.5 is rounded by ~3e-8, which is
    a relative error of ~3e-4 in the offset of boxes 1e-4 apart, and 100
    times that (the top frequency's scale) in the embedding's angles. The
    coordinate differences of nearby boxes are exact (Sterbenz), so the
    offset keeps float32's relative precision.
    """
    first = query_boxes[..., :, None, axis] - key_boxes[..., None, :, axis]
    second = query_boxes[..., :, None, axis + 2] - key_boxes[..., None, :, axis + 2]
    return ops.abs(first + second) * 0.5


def _offset_features(query_boxes, key_boxes, size_offset, clip, axis=-1):
    """Features 1 and 2: `log(max(|dc| / size_i, clip))`, float32
    `[..., Nq, Nk, 2]` (stacked on `axis`).

    Computed as `log(max(|dc|, clip * size_i)) - log(size_i)`: the same
    number for a positive size, without a division.
    """
    features = []
    for coordinate, q_log_size in enumerate(_log_sizes(query_boxes, size_offset)):
        offset = _centre_offset(query_boxes, key_boxes, coordinate)
        floor = clip * ops.exp(q_log_size)[..., :, None]
        features.append(ops.log(ops.maximum(offset, floor)) - q_log_size[..., :, None])
    return ops.stack(features, axis=axis)


def relative_geometry(
    query_boxes,
    key_boxes=None,
    size_ratio="key_over_query",
    size_offset=0.0,
    clip=1e-3,
):
    """The 4 relative-geometry features of every (query box, key box) pair.

    Args:
        query_boxes: `[..., Nq, 4]` boxes `[x1, y1, x2, y2]` (normalised or
            pixels; the features are invariant to translation and scale),
            `x1 <= x2`, `y1 <= y2`, and with `size_offset=0` a positive
            width and height unless all-zero (padding); checked where the
            values are known.
        key_boxes: `[..., Nk, 4]`, or None for `query_boxes`.
        size_ratio: `"key_over_query"` (the paper's `log(w_j / w_i)`) or
            `"query_over_key"` (the released code's `log(w_i / w_j)`).
        size_offset: added to every width and height (1 = the released
            code's `x2 - x1 + 1`).
        clip: the floor of `|dx| / w_i` and `|dy| / h_i` before the log
            (1e-3 in both papers' code).

    Returns:
        float32 `[..., Nq, Nk, 4]`: `(log max(|dx|/w_i, clip), log max(|dy|/
        h_i, clip), log w ratio, log h ratio)`.
    """
    check_geometry_options(size_ratio, size_offset, clip)
    query_boxes = ops.cast(ops.convert_to_tensor(query_boxes), "float32")
    key_boxes = query_boxes if key_boxes is None else ops.cast(
        ops.convert_to_tensor(key_boxes), "float32"
    )
    _check_boxes("query_boxes", query_boxes)
    _check_boxes("key_boxes", key_boxes)
    check_box_values("query_boxes", query_boxes, size_offset)
    if key_boxes is not query_boxes:
        check_box_values("key_boxes", key_boxes, size_offset)
    offsets = _offset_features(query_boxes, key_boxes, size_offset, clip)
    qlw, qlh = _log_sizes(query_boxes, size_offset)
    klw, klh = _log_sizes(key_boxes, size_offset)
    sign = 1.0 if size_ratio == "key_over_query" else -1.0
    ratios = [
        sign * (k[..., None, :] - q[..., :, None]) for q, k in ((qlw, klw), (qlh, klh))
    ]
    return ops.concatenate([offsets, ops.stack(ratios, axis=-1)], axis=-1)


def frequencies(dim, wavelength=1000.0, scale=100.0):
    """The `dim / 8` angular rates `scale / wavelength^(k / (dim / 8))`.

    Returns:
        a Python list of floats (k = 0 first).
    """
    num = dim // (2 * NUM_GEOMETRY_FEATURES)
    return [scale / wavelength ** (k / num) for k in range(num)]


def geometry_embedding(geometry, dim=64, wavelength=1000.0, scale=100.0, ordering="sin_cos"):
    """Sinusoidal embedding of relative geometry (Relation Networks).

    Args:
        geometry: float `[..., 4]` features (`relative_geometry`).
        dim: the embedding width, a multiple of 8: `dim / 8` frequencies
            for each of the 4 features, with a sine and a cosine each.
        wavelength, scale: the angle of feature value g at frequency k is
            `scale * g / wavelength^(k / (dim / 8))`.
        ordering: `"sin_cos"` (all sines, then all cosines; within each,
            feature-major) or `"per_feature"` (for each feature, its sines
            then its cosines).

    Returns:
        float32 `[..., dim]`.
    """
    check_embedding_options(dim, wavelength, scale, ordering)
    geometry = ops.cast(ops.convert_to_tensor(geometry), "float32")
    if geometry.shape[-1] != NUM_GEOMETRY_FEATURES:
        raise ValueError(
            "Argument `geometry` must end with the 4 relative-geometry features. "
            f"Received: geometry.shape={tuple(geometry.shape)}"
        )
    rates = ops.convert_to_tensor(frequencies(dim, wavelength, scale), "float32")
    angles = geometry[..., :, None] * rates  # [..., 4, F]
    sines, cosines = sin_cos(angles)
    shape = tuple(ops.shape(geometry)[:-1]) + (dim,)
    if ordering == "sin_cos":
        return ops.reshape(ops.stack([sines, cosines], axis=-3), shape)
    return ops.reshape(ops.stack([sines, cosines], axis=-2), shape)


def embedding_index(dim, ordering):
    """Where channel (feature a, sin/cos s, frequency k) sits in the embedding.

    Returns:
        a function `(a, s, k) -> channel`, s = 0 for the sine and 1 for the
        cosine; used to read embedding-sized weights in either ordering.
    """
    num = dim // (2 * NUM_GEOMETRY_FEATURES)
    if ordering == "sin_cos":
        return lambda a, s, k: (s * NUM_GEOMETRY_FEATURES + a) * num + k
    return lambda a, s, k: (a * 2 + s) * num + k


def geometry_logits(
    query_boxes,
    key_boxes,
    kernel,
    bias=None,
    wavelength=1000.0,
    scale=100.0,
    ordering="sin_cos",
    size_ratio="key_over_query",
    size_offset=0.0,
    clip=1e-3,
):
    """Per-head geometry logits `E(R_ij) . kernel[:, h] + bias[h]`.

    Equal to projecting `geometry_embedding(relative_geometry(...))` with
    `kernel`, computed so that the `[B, Nq, Nk, dim]` embedding is never
    built whole:

    * The size-ratio features are differences `log s_j - log s_i`, so by
      `sin(b - a) = sin b cos a - cos b sin a` (and the cosine likewise)
      their half of the projection is a product of per-box terms: an
      attention-like `[Nq, 2F] x [2F, heads Nk]` product per image, with
      sines of `B N F` angles instead of `B Nq Nk F`.
    * Only the two centre-offset features (not separable: they hold
      `|x_i - x_j|`) are embedded per pair, as one `[dim / 2, B Nq Nk]`
      matrix projected by a single `[heads, dim / 2]` matmul.

    Layout is most of the speed under XLA on CPU. Every large tensor here is
    laid out so that XLA's fused loops walk it, and the tensors they read,
    in memory order: pairs last and flat, features and channels first. A
    layout that needs a transpose (e.g. embedding per image, `[B, dim / 2,
    Nq Nk]`, which XLA turns into one big matmul by moving the batch axis)
    makes the fused sine loop compute every element's position by integer
    division and read its input element by element, 2-3x slower.

    The angle-sum form differs from sines of the differences by float32
    rounding of the per-box angles (about 1e-7 of `scale |log size|`).

    Args:
        query_boxes: `[B, Nq, 4]` boxes `[x1, y1, x2, y2]`, as in
            `relative_geometry`.
        key_boxes: `[B, Nk, 4]` boxes.
        kernel: `[dim, heads]` weights, rows in the embedding's `ordering`.
        bias: None or `[heads]`.
        wavelength, scale, ordering: as in `geometry_embedding`.
        size_ratio, size_offset, clip: as in `relative_geometry`.

    Returns:
        float32 `[B, heads, Nq, Nk]`.
    """
    dim = kernel.shape[0]
    check_embedding_options(dim, wavelength, scale, ordering)
    check_geometry_options(size_ratio, size_offset, clip)
    query_boxes = ops.cast(ops.convert_to_tensor(query_boxes), "float32")
    key_boxes = ops.cast(ops.convert_to_tensor(key_boxes), "float32")
    for name, boxes in (("query_boxes", query_boxes), ("key_boxes", key_boxes)):
        _check_boxes(name, boxes)
        if len(boxes.shape) != 3:
            raise ValueError(
                f"Argument `{name}` must be [B, N, 4] here. Received: {name}.shape="
                f"{tuple(boxes.shape)}"
            )
        check_box_values(name, boxes, size_offset)
    rates = frequencies(dim, wavelength, scale)
    kernel = ops.cast(kernel, "float32")
    # [4 features, 2 (sin, cos), F, heads], whatever the ordering.
    if ordering == "sin_cos":
        weights = ops.transpose(ops.reshape(kernel, (2, 4, len(rates), kernel.shape[-1])),
                                (1, 0, 2, 3))
    else:
        weights = ops.reshape(kernel, (4, 2, len(rates), kernel.shape[-1]))
    logits = _offset_logits(query_boxes, key_boxes, weights[:2], rates, size_offset, clip)
    logits = logits + _size_ratio_logits(
        query_boxes, key_boxes, weights[2:], rates, size_ratio, size_offset
    )
    if bias is not None:
        logits = logits + ops.cast(bias, "float32")[:, None, None]
    return logits


def _offset_logits(query_boxes, key_boxes, weights, rates, size_offset, clip):
    """The centre-offset half of `geometry_logits`: `[B, heads, Nq, Nk]`.

    `weights` is `[2 features, 2 (sin, cos), F, heads]`. Under XLA the pairs
    of the whole batch form one flat axis (see `geometry_logits`); run op by
    op, each image's sines and cosines (`[dim / 4, Nq Nk]` each) are
    projected by batched matmuls, which give the logits without the
    transpose the flat layout needs (a separate pass there, fused for free
    under XLA).
    """
    num, heads = len(rates), weights.shape[-1]
    flat = tracing_for_xla()
    offsets = _offset_features(query_boxes, key_boxes, size_offset, clip, axis=0 if flat else 1)
    shape = ops.shape(offsets)  # [2, B, Nq, Nk] flat, else [B, 2, Nq, Nk]
    batch, q_len, k_len = shape[1 if flat else 0], shape[2], shape[3]
    rates = ops.reshape(ops.convert_to_tensor(rates, "float32"), (num, 1))
    if flat:
        angles = ops.reshape(offsets, (2, 1, -1)) * rates  # [2 features, F, pairs]
        embedded = ops.reshape(ops.stack(sin_cos(angles), axis=1), (4 * num, -1))
        projection = ops.transpose(ops.reshape(weights, (4 * num, heads)))
        if heads < _MIN_DOT_ROWS:
            # XLA's CPU dot is 2x slower with a single row than with 8 (one
            # geometry map shared by all heads): compute copies, keep one.
            projection = ops.tile(projection, (_MIN_DOT_ROWS // heads + 1, 1))
        logits = ops.matmul(projection, embedded)[:heads]  # [heads, pairs]
        logits = ops.reshape(logits, (heads, batch, q_len, k_len))
        return ops.transpose(logits, (1, 0, 2, 3))
    # Op by op, sines and cosines are projected apart: stacking them would
    # copy the whole embedding once more.
    angles = ops.reshape(offsets, (batch, 2, 1, -1)) * rates  # [B, 2, F, Nq Nk]
    logits = 0.0
    for part, values in enumerate(sin_cos(angles)):
        projection = ops.transpose(ops.reshape(weights[:, part], (2 * num, heads)))
        values = ops.reshape(values, (batch, 2 * num, -1))
        logits = logits + ops.matmul(projection, values)  # [B, heads, Nq Nk]
    return ops.reshape(logits, (batch, heads, q_len, k_len))


def _size_ratio_logits(query_boxes, key_boxes, weights, rates, size_ratio, size_offset):
    """The size-ratio half of `geometry_logits`: `[B, heads, Nq, Nk]`.

    With per-box angles `t = sign * rate * log size`, each frequency's
    `w_sin sin(t_j - t_i) + w_cos cos(t_j - t_i)` is
    `cos t_i (w_sin sin t_j + w_cos cos t_j) + sin t_i (w_cos sin t_j -
    w_sin cos t_j)`: per-query terms `[B, Nq, 4F]` (both features) times
    per-key terms, one matmul per image: `[B, 4F, heads Nk]` under XLA (one
    plain matmul per image; XLA fuses the transpose that follows), `[B,
    heads, 4F, Nk]` op by op (a batched matmul straight to the logits).
    `weights` is `[2 features, 2 (sin, cos), F, heads]`.
    """
    heads = weights.shape[-1]
    flat = tracing_for_xla()
    sign = 1.0 if size_ratio == "key_over_query" else -1.0
    rates = ops.convert_to_tensor(rates, "float32")
    qlw, qlh = _log_sizes(query_boxes, size_offset)
    klw, klh = _log_sizes(key_boxes, size_offset)
    query_terms, key_terms = [], []
    # Key angles [B, F, 1, Nk] against weights [1, F, heads, 1] (flat), or
    # [B, 1, F, Nk] against [1, heads, F, 1].
    key_rates = rates[:, None, None] if flat else rates[None, :, None]
    for feature, (q_log, k_log) in enumerate(((qlw, klw), (qlh, klh))):
        q_sin, q_cos = sin_cos(sign * q_log[..., None] * rates)  # [B, Nq, F]
        k_sin, k_cos = sin_cos(sign * k_log[:, None, None, :] * key_rates)
        w_sin, w_cos = (weights[feature, s] for s in (0, 1))  # [F, heads]
        if not flat:
            w_sin, w_cos = ops.transpose(w_sin), ops.transpose(w_cos)
        w_sin, w_cos = w_sin[None, :, :, None], w_cos[None, :, :, None]
        query_terms += [q_cos, q_sin]
        key_terms += [k_sin * w_sin + k_cos * w_cos, k_sin * w_cos - k_cos * w_sin]
    query_terms = ops.concatenate(query_terms, axis=-1)  # [B, Nq, 4F]
    if not flat:  # [B, 1, Nq, 4F] x [B, heads, 4F, Nk]
        return ops.matmul(query_terms[:, None], ops.concatenate(key_terms, axis=2))
    key_terms = ops.concatenate(key_terms, axis=1)  # [B, 4F, heads, Nk]
    shape = ops.shape(key_terms)
    logits = ops.matmul(query_terms, ops.reshape(key_terms, (shape[0], shape[1], -1)))
    out = ops.shape(logits)  # [B, Nq, heads Nk]; a batch of 1 broadcasts
    logits = ops.reshape(logits, (out[0], out[1], heads, shape[3]))
    return ops.transpose(logits, (0, 2, 1, 3))


def box_position_features(boxes, image_size=None):
    """The 5-d box feature of MCAN+PA's PMA: `[x1/W, y1/H, x2/W, y2/H, area]`.

    Args:
        boxes: `[..., N, 4]` boxes `[x1, y1, x2, y2]`, in pixels when
            `image_size` is given, else already normalised to [0, 1];
            `x1 <= x2`, `y1 <= y2` (zero sizes allowed: nothing divides by
            them).
        image_size: None, or the image's `(width, height)`: a pair, or a
            tensor `[..., 2]` (one per image, broadcast over the boxes).

    Returns:
        float32 `[..., N, 5]`; the area is `(x2 - x1)(y2 - y1) / (W H)`, so
        all-zero padding rows stay all zero.

    Raises:
        ValueError: where the values are known, for a box (other than an
            all-zero row) with `x2 < x1`, `y2 < y1`, or a normalised
            coordinate outside [0, 1]. Compiled code does not check.
    """
    boxes = ops.cast(ops.convert_to_tensor(boxes), "float32")
    _check_boxes("boxes", boxes)
    if image_size is not None:
        size = ops.cast(ops.convert_to_tensor(image_size), "float32")
        if size.shape[-1] != 2:
            raise ValueError(
                "Argument `image_size` must be (width, height) or [..., 2]. "
                f"Received: image_size.shape={tuple(size.shape)}"
            )
        size = ops.expand_dims(size, -2)  # over the boxes
        boxes = boxes / ops.concatenate([size, size], axis=-1)
        checks.box_values("boxes / image_size", boxes)
    else:
        checks.box_values(
            "boxes", boxes, advice=" Or pass `image_size=(width, height)`."
        )
    area = (boxes[..., 2] - boxes[..., 0]) * (boxes[..., 3] - boxes[..., 1])
    return ops.concatenate([boxes, area[..., None]], axis=-1)

