"""Speed and memory of `GraphMultiHeadAttention` against `keras.layers.MultiHeadAttention`.

At the SA-M4C shape: self-attention over 182 tokens (20 question + 100
objects + 50 OCR + 12 decoder), hidden 768, 12 heads, batch 32. The graph
is built from random boxes by `textvqa_relations` (the SA-M4C sequence
mask, Kant et al., 2020, arXiv:2007.12146, Fig. 2b; see
docs/graph_attention.md). Keras MHA, the baseline, gets the same structure
as a boolean `[B, L, L]` attention mask (every edge that is not `BLOCKED`), i.e. the
M4C layer; the rows add the per-head relation masks (c = 3), the learned
relation bias (Eq. 5), the top-k baseline (k = 9) and the ReGAT-style bias
without masking. Each time is the median of `--repeats` runs after
`--warmup`, the baseline's runs alternating with the row's; peak memory is
XLA's for the compiled forward+backward (`KERAS_BACKEND=jax`). The last
lines time the graph building for one batch on the host (NumPy).

Usage:
    python benchmarks/graph_attention.py [--repeats 10] [--batch 32] [--jit both|on|off]
    KERAS_BACKEND=jax python benchmarks/graph_attention.py
"""

import os
import statistics
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

import keras  # noqa: E402
import numpy as np  # noqa: E402

from _timing import layer_arguments  # noqa: E402
from _timing import mha_baseline  # noqa: E402
from _timing import print_comparison  # noqa: E402
from _timing import print_setup  # noqa: E402

from keras_structattn.layers import GraphMultiHeadAttention  # noqa: E402
from keras_structattn.ops import relation_tables as rt  # noqa: E402
from keras_structattn.ops.spatial_graph import textvqa_relations  # noqa: E402

HEADS, HIDDEN = 12, 768
QUESTION, OBJECTS, OCR, DECODER = 20, 100, 50, 12
LENGTH = QUESTION + OBJECTS + OCR + DECODER


def random_boxes(rng, batch, count):
    corner = rng.random((batch, count, 2)) * 0.8
    size = rng.random((batch, count, 2)) * 0.3 + 0.01
    return np.concatenate([corner, np.minimum(corner + size, 1.0)], -1).astype("float32")


def random_textvqa_batch(rng, batch):
    """Masks with some padding in every part, as in real TextVQA batches."""
    def mask(count, low):
        lengths = rng.integers(low, count + 1, size=batch)
        return np.arange(count)[None, :] < lengths[:, None]

    return dict(
        question_mask=mask(QUESTION, 5),
        object_boxes=random_boxes(rng, batch, OBJECTS),
        object_mask=mask(OBJECTS, 30),
        ocr_boxes=random_boxes(rng, batch, OCR),
        ocr_mask=mask(OCR, 0),
        decoder_length=DECODER,
    )


VARIANTS = [
    ("graph c=3", dict()),
    ("graph c=3 + bias (Eq. 5)", dict(relation_bias=True)),
    ("graph c=3 + top-k 9", dict(top_k=9)),
    ("ReGAT bias, no masking", dict(graph_masking=False, relation_bias=True)),
]


def main(argv=None):
    args, jits = layer_arguments(__doc__.split("\n")[0], 32, argv)

    rng = np.random.default_rng(0)
    graph = random_textvqa_batch(rng, args.batch)
    relations = np.asarray(textvqa_relations(**graph), dtype="int32")
    x = keras.ops.convert_to_tensor(
        rng.normal(size=(args.batch, LENGTH, HIDDEN)).astype("float32")
    )
    relations_t = keras.ops.convert_to_tensor(relations)
    mask_t = keras.ops.convert_to_tensor(relations != rt.BLOCKED)

    print_setup(
        args, f"length={LENGTH} hidden={HIDDEN} heads={HEADS}",
        "same structure as a [B, L, L] attention mask",
    )
    key_dim = HIDDEN // HEADS
    print_comparison(
        x, jits, mha_baseline(HEADS, key_dim, mask_t),
        [(label,
          lambda kwargs=kwargs: GraphMultiHeadAttention(HEADS, key_dim, **kwargs),
          dict(relations=relations_t))
         for label, kwargs in VARIANTS],
        args.warmup, args.repeats,
    )

    times = []
    for _ in range(args.repeats):
        start = time.perf_counter()
        textvqa_relations(**random_textvqa_batch(rng, args.batch))
        times.append(time.perf_counter() - start)
    print(
        f"\ngraph building (textvqa_relations on the host, batch {args.batch}, "
        f"{OBJECTS + OCR} boxes): {1e3 * statistics.median(times):.1f} ms per batch"
    )


if __name__ == "__main__":
    main()
