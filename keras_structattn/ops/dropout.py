"""Dropout with cheap random numbers: the same Bernoulli masks, fewer cycles.

`keras.random.dropout` draws one uniform float per element. On the CPU its
random numbers cost more than the arithmetic they gate:

* on JAX it calls `jax.random.bernoulli`, whose Threefry-2x32 rounds JAX
  writes out as ordinary HLO operations: 180-200 ms for the 15M elements of
  one MCAN-small feed-forward activation (batch 64 x 114 tokens x 2048) on
  a 2-core Xeon, against 16-20 ms for the multiply it gates;
* on TensorFlow under XLA (`jit_compile=True`) its `auto_select` algorithm
  became 3.6 s for the same tensor (240 ns an element); with `philox`
  it is 100 ms, with `threefry` 30 ms.

XLA's own `RngBitGenerator` with the Threefry algorithm, asked for raw
32-bit words, costs 30-37 ms on both backends (measured 2026-11-27,
`docs/performance.md`). So `dropout` draws one uint32 word an element from
it (Philox without XLA on TensorFlow, whose kernel has no Threefry) and
keeps the element where the word is at least `round(rate * 2**32)`: each
element is dropped independently with probability `rate` (to within
2**-33), survivors are scaled by `1 / (1 - rate)`, exactly the semantics of
`keras.random.dropout`; only the stream of random numbers differs. The
seed is an int or a `keras.random.SeedGenerator`, as Keras' own.
"""

from keras import backend
from keras import ops

# Keras' seed drawing (an int or a SeedGenerator -> a backend seed tensor).
# We pin `keras<4`, so importing it from `keras.src` is safe.
from keras.src.random.seed_generator import draw_seed

from keras_structattn.ops.trig import tracing_for_xla


def _seed_tensor(seed):
    """A seed tensor as given, else Keras' draw from an int, a generator
    or None."""
    return seed if hasattr(seed, "shape") else draw_seed(seed)


def _jax_bits(shape, seed):
    import jax
    import jax.numpy as jnp

    seed = _seed_tensor(seed)
    # Threefry's 128-bit state: the 64-bit key (the seed) and a counter of 0.
    key = jnp.concatenate([jnp.asarray(seed, "uint32"), jnp.zeros((2,), "uint32")])
    _, bits = jax.lax.rng_bit_generator(
        key, tuple(shape), dtype=jnp.uint32,
        algorithm=jax.lax.RandomAlgorithm.RNG_THREE_FRY)
    return bits


def _tensorflow_bits(shape, seed):
    import tensorflow as tf

    seed = _seed_tensor(seed)
    if seed.dtype != tf.int32:  # XLA wants int32 seeds (Keras does the same)
        seed = tf.cast(tf.math.floormod(seed, tf.int32.max - 1), tf.int32)
    # TensorFlow's CPU kernel has no Threefry; its Philox is fast without XLA.
    algorithm = "threefry" if tracing_for_xla() else "philox"
    return tf.random.stateless_uniform(
        shape, seed, minval=None, maxval=None, dtype=tf.uint32, alg=algorithm)


def random_bits(shape, seed=None):
    """Uniform random 32-bit words.

    Args:
        shape: the output shape (ints; on TensorFlow a dimension may be a
            scalar tensor).
        seed: an int, a `keras.random.SeedGenerator` (advanced by the call),
            a backend seed tensor of 2 integers, or None (Keras' global
            generator).

    Returns:
        A uint32 tensor of `shape` (int64 on backends without uint32).
    """
    name = backend.backend()
    if name == "jax":
        return _jax_bits(shape, seed)
    if name == "tensorflow":
        return _tensorflow_bits(shape, seed)
    # Other backends: Keras' integers (a portable fallback, not the fast path).
    from keras import random

    return random.randint(shape, 0, 2**32, dtype="int64", seed=seed)


def keep_mask(shape, rate, seed=None):
    """A boolean mask, each element True with probability `1 - rate`.

    Args:
        shape: the mask's shape.
        rate: the probability of False, in [0, 1].
        seed: as `random_bits`.

    Returns:
        A bool tensor of `shape`.
    """
    threshold = min(int(round(float(rate) * 2**32)), 2**32 - 1)
    bits = random_bits(shape, seed)
    return ops.greater_equal(bits, ops.convert_to_tensor(threshold, bits.dtype))


def _noise_shape(inputs, noise_shape):
    """`noise_shape` with its None entries (and a missing one) filled in
    from the input's shape."""
    shape = ops.shape(inputs)
    if noise_shape is None:
        return shape
    return tuple(shape[i] if dim is None else dim for i, dim in enumerate(noise_shape))


def dropout(inputs, rate, noise_shape=None, seed=None):
    """`keras.random.dropout` with cheap random numbers (module docstring).

    Args:
        inputs: a float tensor.
        rate: the probability of dropping an element, in [0, 1] (a Python
            number: a rate of 0 returns `inputs` unchanged).
        noise_shape: None, or the shape of the mask, broadcast over
            `inputs` (None entries take the input's size).
        seed: an int, a `keras.random.SeedGenerator` or None.

    Returns:
        `inputs` with each element (each mask cell) zeroed with probability
        `rate` and the rest scaled by `1 / (1 - rate)`.
    """
    if rate == 0.0:
        return inputs
    if rate >= 1.0:
        return ops.zeros_like(inputs)
    keep = keep_mask(_noise_shape(inputs, noise_shape), rate, seed)
    scaled = ops.multiply(inputs, ops.cast(1.0 / (1.0 - rate), inputs.dtype))
    return ops.where(keep, scaled, ops.zeros_like(inputs))
