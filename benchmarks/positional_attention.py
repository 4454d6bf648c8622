"""Speed and memory of `PositionalMultiHeadAttention` against `keras.layers.MultiHeadAttention`.

At the MCAN shape of object self-attention (POA): 100 boxes, hidden 512,
8 heads (d_h = 64), batch 64, a key padding mask (10..100 real boxes per
image) given to every layer. Rows: POA as in the paper (per-head geometry
weights, Eq. 8 fusion), as released (one shared ReLU weight added), with the
Relation Networks fusion, and position vectors (the PWA / PMA kind) at the
same shape. One more row, "POA, pairwise embedding", is the straightforward
formulation kept here only for comparison: it embeds every pair's 4
geometry features into the `[B, N, N, 64]` tensor and projects it, where the
layer builds only the two centre-offset features per pair (half the size)
and gets the size-ratio half from per-box terms (`ops.box_geometry.
geometry_logits`). The position-vector rows are PMA-like (different
positions for every example, `[B, N, d]`) and PWA-like (word positions,
the same for every sentence, given once as `[1, N, d]`). Target: at most
1.5x Keras MHA. Each time is the median
of `--repeats` runs after `--warmup`, the baseline's runs alternating with
the row's; peak memory is XLA's for the compiled forward+backward
(`KERAS_BACKEND=jax`). Boxes and position vectors are arguments of the
compiled steps (not constants XLA could fold).

Usage:
    python benchmarks/positional_attention.py [--repeats 10] [--batch 64] [--jit both|on|off]
        [--only "POA paper (Eq. 8"]  (one row, e.g. with --repeats 31: the
        ratios of single runs vary by +-0.1 on a busy 2-core machine)
    KERAS_BACKEND=jax python benchmarks/positional_attention.py
"""

import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

import numpy as np  # noqa: E402
from keras import ops  # noqa: E402

from _timing import layer_arguments  # noqa: E402
from _timing import mha_baseline  # noqa: E402
from _timing import print_comparison  # noqa: E402
from _timing import print_setup  # noqa: E402

from keras_structattn.layers.positional_attention import PositionalMultiHeadAttention  # noqa: E402
from keras_structattn.layers.positional_attention import positional_object_attention  # noqa: E402
from keras_structattn.layers.positional_attention import positional_word_attention  # noqa: E402
from keras_structattn.ops import box_geometry  # noqa: E402

HEADS, HIDDEN, BOXES = 8, 512, 100


class PairwiseEmbeddingAttention(PositionalMultiHeadAttention):
    """POA computing the geometry map the straightforward way (comparison only)."""

    def _positional_logits(self, query_pos, key_pos):
        g = self._geometry
        geometry = box_geometry.relative_geometry(
            query_pos, key_pos, g["size_ratio"], g["box_size_offset"], g["geometry_clip"]
        )
        embedded = box_geometry.geometry_embedding(
            geometry, g["geometry_dim"], g["geometry_wavelength"], g["geometry_scale"],
            g["geometry_ordering"],
        )
        logits = ops.einsum("bijd,dh->bhij", embedded, self.geometry_kernel)
        return logits + self.geometry_bias[:, None, None]


def random_boxes(rng, batch):
    corner = rng.uniform(0.0, 0.7, (batch, BOXES, 2))
    size = rng.uniform(0.02, 0.3, (batch, BOXES, 2))
    return np.concatenate([corner, np.minimum(corner + size, 1.0)], -1).astype("float32")


def main(argv=None):
    args, jits = layer_arguments(
        __doc__.split("\n")[0], 64, argv,
        lambda parser: parser.add_argument(
            "--only", default="", help="time only the rows whose label contains this text"
        ),
    )

    rng = np.random.default_rng(0)
    x = ops.convert_to_tensor(rng.normal(size=(args.batch, BOXES, HIDDEN)).astype("float32"))
    real = rng.integers(10, BOXES + 1, size=(args.batch, 1))
    mask = ops.convert_to_tensor((np.arange(BOXES)[None] < real)[:, None, :])
    boxes = ops.convert_to_tensor(random_boxes(rng, args.batch))
    positions = ops.convert_to_tensor(
        rng.normal(size=(args.batch, BOXES, HIDDEN)).astype("float32")
    )

    print_setup(
        args, f"boxes={BOXES} hidden={HIDDEN} heads={HEADS}",
        "same key padding mask (target <= 1.5)",
    )
    key_dim = HIDDEN // HEADS
    with_boxes = dict(attention_mask=mask, query_boxes=boxes)
    rows = [
        ("POA paper (Eq. 8, per head)",
         lambda: positional_object_attention(HEADS, key_dim), with_boxes),
        ("POA released (shared, add)",
         lambda: positional_object_attention(HEADS, key_dim, variant="released"), with_boxes),
        ("POA relation_network",
         lambda: positional_object_attention(HEADS, key_dim, variant="relation_network"),
         with_boxes),
        ("POA, pairwise embedding",
         lambda: PairwiseEmbeddingAttention(HEADS, key_dim, position_type="boxes"), with_boxes),
        ("POA paper, remat_geometry",
         lambda: positional_object_attention(HEADS, key_dim, remat_geometry=True), with_boxes),
        ("position vectors [B, N, d]",
         lambda: positional_word_attention(HEADS, key_dim),
         dict(attention_mask=mask, query_positions=positions)),
        ("position vectors [1, N, d]",
         lambda: positional_word_attention(HEADS, key_dim),
         dict(attention_mask=mask, query_positions=positions[:1])),
    ]
    rows = [row for row in rows if args.only in row[0]]
    print_comparison(x, jits, mha_baseline(HEADS, key_dim, mask), rows, args.warmup, args.repeats)


if __name__ == "__main__":
    main()
