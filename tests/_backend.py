"""Backend dispatch for tests: gradients and jit compilation.

Tests stay backend-agnostic by calling these helpers, which use the native
autodiff / compiler of `keras.backend.backend()` (TensorFlow: GradientTape and
`tf.function(jit_compile=True)`; JAX: `jax.grad` and `jax.jit`). Other
backends skip.
"""

import numpy as np
import pytest
from keras import backend
from keras import ops


def gradients(fn, *args):
    """Gradients of the scalar `fn(*args)` w.r.t. every argument (NumPy)."""
    name = backend.backend()
    if name == "tensorflow":
        import tensorflow as tf

        xs = [tf.constant(a) for a in args]
        with tf.GradientTape() as tape:
            for x in xs:
                tape.watch(x)
            y = fn(*xs)
        grads = tape.gradient(y, xs)
        return [
            np.zeros(np.shape(a)) if g is None else np.asarray(g) for a, g in zip(args, grads)
        ]
    if name == "jax":
        import jax
        import jax.numpy as jnp

        # Compiled: eager JAX would compile every primitive of the forward
        # and backward passes one by one.
        grad_fn = jax.jit(jax.grad(fn, argnums=tuple(range(len(args)))))
        return [np.asarray(g) for g in grad_fn(*[jnp.asarray(a) for a in args])]
    pytest.skip(f"no gradient helper for backend {name!r}")


def jit(fn):
    """Compiles `fn` (of tensors, returning tensors) with the backend's jit."""
    name = backend.backend()
    if name == "tensorflow":
        import tensorflow as tf

        return tf.function(fn, jit_compile=True)
    if name == "jax":
        import jax

        return jax.jit(fn)
    pytest.skip(f"no jit helper for backend {name!r}")


def to_numpy(x, dtype="float64"):
    """Backend tensor (float of any width, bfloat16 included) to NumPy.

    Booleans stay booleans; other tensors go through float32 and become
    `dtype`.
    """
    if backend.standardize_dtype(x.dtype) == "bool":
        return np.asarray(ops.convert_to_numpy(x))
    out = np.asarray(ops.convert_to_numpy(ops.cast(x, "float32")))
    return out.astype(dtype)


def compiled_on_jax(fn):
    """`jax.jit(fn)` on JAX, `fn` itself elsewhere.

    JAX compiles every primitive separately when run eagerly, once per new
    shape, which makes large or many-shaped cases slow to test; one jit
    compile per case is several times cheaper. Other backends run eagerly.
    (Eager JAX is covered by the other tests, and jit == eager is tested.)
    """
    if backend.backend() == "jax":
        import jax

        return jax.jit(fn)
    return fn


def compiles_per_shape():
    """True where eager ops compile for every new input shape (JAX).

    Property tests then draw memory layouts from a fixed pool instead of
    the whole space, so that compiled kernels are reused across examples;
    the whole space is explored on the other backends.
    """
    return backend.backend() == "jax"
