"""The run-of-three task: a toy contrast between regular and area attention.

A sequence of random tokens, with several copies of token 0, is positive iff
three of the zeros are adjacent (a *run*). Without positional embeddings,
one layer of regular attention sees the tokens as a set and cannot beat the
~0.53 that counting zeros gives; area attention's spans are adjacent by
construction, so it attends to the run as one area (`recipes.area_demo`,
benchmarks/area_demo_seeds.py).
"""

import numpy as np


def make_dataset(num, length=24, vocab=8, seed=0):
    """The run-of-three task's examples, classes balanced.

    Every sequence holds 3 to 6 zeros, three of them adjacent in positives
    only, so counting zeros does not solve the task.

    Args:
        num: the number of sequences.
        length: the tokens per sequence.
        vocab: the vocabulary size (token 0 and `vocab - 1` others).
        seed: the NumPy generator's seed (same seed, same data).

    Returns:
        `(tokens [num, length], labels [num])`, both int32.
    """
    rng = np.random.default_rng(seed)
    tokens = np.empty((num, length), dtype="int32")
    labels = rng.integers(0, 2, size=num).astype("int32")
    for i in range(num):
        while True:
            seq = rng.integers(1, vocab, size=length)
            zeros = rng.integers(3, 7)
            if labels[i]:
                start = rng.integers(0, length - 2)
                seq[start : start + 3] = 0
                zeros -= 3
            seq[rng.choice(length, size=zeros, replace=False)] = 0
            if has_run(seq) == bool(labels[i]):
                break
        tokens[i] = seq
    return tokens, labels


def has_run(seq):
    """Whether the 1-D token array `seq` holds three adjacent zeros."""
    zero = seq == 0
    return bool(np.any(zero[:-2] & zero[1:-1] & zero[2:]))


def build_model(max_area_width, length=24, vocab=8, dim=32, heads=2, seed=0, positions=False):
    """A small classifier of the task: embedding, area self-attention, pooling.

    Args:
        max_area_width: the attention's widest area (1: regular attention).
        length, vocab: the task's sequence length and vocabulary size.
        dim, heads: the embedding width and the attention heads.
        seed: the attention layer's seed.
        positions: add learned positional embeddings (with them regular
            attention learns the task too, slowly).

    Returns:
        An uncompiled `keras.Model` from int32 tokens `[batch, length]` to
        logits `[batch, 1]`.
    """
    import keras

    from keras_structattn.layers import MultiHeadAreaAttention

    tokens = keras.Input((length,), dtype="int32")
    x = keras.layers.Embedding(vocab, dim)(tokens)
    if positions:
        x = x + keras.layers.Embedding(length, dim)(keras.ops.arange(length))
    attended = MultiHeadAreaAttention(num_heads=heads, key_dim=dim // heads,
                                      max_area_width=max_area_width, seed=seed,
                                      name="area_attention")(x, x)
    x = keras.layers.LayerNormalization()(x + attended)
    x = keras.layers.Dense(64, activation="relu")(x)
    x = keras.layers.GlobalMaxPooling1D()(x)
    logits = keras.layers.Dense(1)(x)
    return keras.Model(tokens, logits)
