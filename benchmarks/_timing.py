"""Timing helpers shared by the layer benchmarks.

`make_steps` gives forward and forward+backward callables for a layer called
as `layer(x, x, **kwargs)` (self-attention), on the TensorFlow or the JAX
backend, with or without XLA; with JAX and XLA it also reads the compiled
forward+backward's peak memory. `paired_medians` times two steps alternately.
"""

import statistics
import time

import keras


def _make_tf_steps(layer, x, jit, kwargs):
    import tensorflow as tf

    @tf.function(jit_compile=jit)
    def forward(x):
        return layer(x, x, **kwargs)

    @tf.function(jit_compile=jit)
    def forward_backward(x):
        with tf.GradientTape() as tape:
            tape.watch(x)
            y = layer(x, x, **kwargs)
            loss = tf.reduce_sum(tf.cast(y, "float32") ** 2)
        return tape.gradient(loss, [x] + layer.trainable_variables)

    def block(out):
        out = out if isinstance(out, (list, tuple)) else [out]
        for t in out:
            getattr(t, "values", t).numpy()  # IndexedSlices for embeddings

    return (lambda: block(forward(x))), (lambda: block(forward_backward(x))), None


def _make_jax_steps(layer, x, jit, kwargs):
    import jax
    import jax.numpy as jnp

    trainable = [v.value for v in layer.trainable_variables]
    non_trainable = [v.value for v in layer.non_trainable_variables]

    def forward(trainable, x):
        y, _ = layer.stateless_call(trainable, non_trainable, x, x, **kwargs)
        return y

    def loss(trainable, x):
        return jnp.sum(forward(trainable, x).astype("float32") ** 2)

    grad = jax.grad(loss, argnums=(0, 1))
    memory = None
    if jit:
        compiled = jax.jit(grad).lower(trainable, x).compile()
        analysis = compiled.memory_analysis()
        if analysis is not None:
            memory = analysis.temp_size_in_bytes + analysis.output_size_in_bytes
        forward, grad = jax.jit(forward), compiled
    return (
        lambda: jax.block_until_ready(forward(trainable, x)),
        lambda: jax.block_until_ready(grad(trainable, x)),
        memory,
    )


def make_steps(layer, x, jit, **kwargs):
    """Returns (forward, forward+backward, peak bytes or None) callables.

    Forward+backward is the gradient of `sum(y**2)` with respect to `x` and
    every trainable weight. The layer must be built.
    """
    make = _make_jax_steps if keras.backend.backend() == "jax" else _make_tf_steps
    return make(layer, x, jit, kwargs)


def paired_medians(baseline, candidate, warmup, repeats):
    """Median ms of two steps timed alternately, run after run.

    Alternating cancels the drift of a shared machine's speed (other
    processes, clock changes) from the ratio of the two.
    """
    for _ in range(warmup):
        baseline()
        candidate()
    runs = ([], [])
    for _ in range(repeats):
        for step, out in ((baseline, runs[0]), (candidate, runs[1])):
            start = time.perf_counter()
            step()
            out.append(time.perf_counter() - start)
    return tuple(1e3 * statistics.median(r) for r in runs)
