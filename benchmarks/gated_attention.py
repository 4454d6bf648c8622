"""Speed and memory of `GatedMultiHeadAttention` against `keras.layers.MultiHeadAttention`.

At the MUAN shape: self-attention over 115 tokens (15 question tokens with
the [ans] token + 100 image regions), hidden 768, 8 heads (d_h = d_g = 96),
batch 64, with a key padding mask (random question and region counts), as
in the UA block. Keras MHA, the baseline, gets the same mask; the rows are
the MUAN gate per head with weights shared across heads (the default), per
head with each head's own weights, one full-width gate for all heads, and
`qk_gate=False` (the cost of this layer's explicit attention path alone).
Target: at most 1.15x Keras MHA. Each time is the median of `--repeats`
runs after `--warmup`, the baseline's runs alternating with the row's; peak
memory is XLA's for the compiled forward+backward (`KERAS_BACKEND=jax`).

Usage:
    python benchmarks/gated_attention.py [--repeats 10] [--batch 64] [--jit both|on|off]
    KERAS_BACKEND=jax python benchmarks/gated_attention.py
"""

import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

import keras  # noqa: E402
import numpy as np  # noqa: E402

from _timing import layer_arguments  # noqa: E402
from _timing import mha_baseline  # noqa: E402
from _timing import print_comparison  # noqa: E402
from _timing import print_setup  # noqa: E402

from keras_structattn.layers.gated_attention import GatedMultiHeadAttention  # noqa: E402

HEADS, HIDDEN = 8, 768
QUESTION, REGIONS = 15, 100
LENGTH = QUESTION + REGIONS

VARIANTS = [
    ("gate per head, shared", dict()),
    ("gate per head, own weights", dict(share_gate_weights_across_heads=False)),
    ("gate full width", dict(gate_per_head=False)),
    ("qk_gate=False", dict(qk_gate=False)),
]


def random_key_mask(rng, batch):
    """[B, 1, L]: real question tokens (>= 4) then real regions (>= 10)."""
    question = np.arange(QUESTION)[None] < rng.integers(4, QUESTION + 1, size=(batch, 1))
    regions = np.arange(REGIONS)[None] < rng.integers(10, REGIONS + 1, size=(batch, 1))
    return np.concatenate([question, regions], axis=1)[:, None, :]


def main(argv=None):
    args, jits = layer_arguments(__doc__.split("\n")[0], 64, argv)

    rng = np.random.default_rng(0)
    x = keras.ops.convert_to_tensor(
        rng.normal(size=(args.batch, LENGTH, HIDDEN)).astype("float32")
    )
    mask = keras.ops.convert_to_tensor(random_key_mask(rng, args.batch))

    print_setup(
        args, f"length={LENGTH} hidden={HIDDEN} heads={HEADS}",
        "same key padding mask (target <= 1.15)",
    )
    key_dim = HIDDEN // HEADS
    print_comparison(
        x, jits, mha_baseline(HEADS, key_dim, mask),
        [(label,
          lambda kwargs=kwargs: GatedMultiHeadAttention(HEADS, key_dim, **kwargs),
          dict(attention_mask=mask))
         for label, kwargs in VARIANTS],
        args.warmup, args.repeats,
    )


if __name__ == "__main__":
    main()
