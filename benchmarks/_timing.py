"""Timing helpers shared by the layer benchmarks.

`make_steps` gives forward and forward+backward callables for a layer called
as `layer(x, x, **kwargs)` (self-attention), on the TensorFlow or the JAX
backend, with or without XLA; with JAX and XLA it also reads the compiled
forward+backward's peak memory. `paired_medians` times two steps alternately.
`layer_arguments`, `print_setup` and `mha_baseline` are the command line,
the first line and the Keras MHA row of the layer benchmarks.
`jax_training_step` compiles a whole model's training step (the model
benchmarks, whose command line is `model_step_arguments`).
"""

import argparse
import statistics
import sys
import time

import keras


def layer_arguments(description, batch, argv=None, add_arguments=None):
    """Parses the layer benchmarks' command line.

    Args:
        description: the `--help` line.
        batch: the default `--batch`.
        argv: the arguments (None: `sys.argv`).
        add_arguments: None, or `add_arguments(parser)` adding the
            benchmark's own arguments.

    Returns:
        `(args, jits)`: the parsed `--repeats`, `--warmup`, `--batch` and
        `--jit` (and the benchmark's own), and the jit settings to run, e.g.
        `(False, True)` for `--jit both`.
    """
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--repeats", type=int, default=10)
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument("--batch", type=int, default=batch)
    parser.add_argument("--jit", choices=("both", "on", "off"), default="both")
    if add_arguments is not None:
        add_arguments(parser)
    args = parser.parse_args(argv)
    return args, {"both": (False, True), "on": (True,), "off": (False,)}[args.jit]


def print_setup(args, shape, baseline):
    """The first line of a layer benchmark: the backend, batch and `shape`
    (e.g. "length=115 hidden=768 heads=8"), the timing, and what the Keras
    MHA baseline gets (`baseline`, after "with the ")."""
    print(
        f"backend={keras.backend.backend()}  batch={args.batch} {shape}  median of "
        f"{args.repeats} after {args.warmup} warm-up runs; ratios against "
        f"keras.layers.MultiHeadAttention with the {baseline}"
    )


def mha_baseline(num_heads, key_dim, mask):
    """The baseline row of `print_comparison`: Keras MHA given `mask` as its
    attention mask."""
    return (
        "keras MHA + mask",
        lambda: keras.layers.MultiHeadAttention(num_heads, key_dim),
        dict(attention_mask=mask),
    )


def _split_kwargs(kwargs):
    """(tensor kwargs, other kwargs): tensors become arguments of the
    compiled steps, so that XLA cannot constant-fold work that depends on
    them only (e.g. a geometry map computed from fixed boxes)."""
    tensors = {k: v for k, v in kwargs.items() if hasattr(v, "shape")}
    return tensors, {k: v for k, v in kwargs.items() if k not in tensors}


def _make_tf_steps(layer, x, jit, kwargs):
    import tensorflow as tf

    tensors, static = _split_kwargs(kwargs)

    @tf.function(jit_compile=jit)
    def forward(x, tensors):
        return layer(x, x, **tensors, **static)

    @tf.function(jit_compile=jit)
    def forward_backward(x, tensors):
        with tf.GradientTape() as tape:
            tape.watch(x)
            y = layer(x, x, **tensors, **static)
            loss = tf.reduce_sum(tf.cast(y, "float32") ** 2)
        return tape.gradient(loss, [x] + layer.trainable_variables)

    def block(out):
        out = out if isinstance(out, (list, tuple)) else [out]
        for t in out:
            getattr(t, "values", t).numpy()  # IndexedSlices for embeddings

    return (
        (lambda: block(forward(x, tensors))),
        (lambda: block(forward_backward(x, tensors))),
        None,
    )


def _make_jax_steps(layer, x, jit, kwargs):
    import jax
    import jax.numpy as jnp

    tensors, static = _split_kwargs(kwargs)
    trainable = [v.value for v in layer.trainable_variables]
    non_trainable = [v.value for v in layer.non_trainable_variables]

    def forward(trainable, x, tensors):
        y, _ = layer.stateless_call(trainable, non_trainable, x, x, **tensors, **static)
        return y

    def loss(trainable, x, tensors):
        return jnp.sum(forward(trainable, x, tensors).astype("float32") ** 2)

    grad = jax.grad(loss, argnums=(0, 1))
    memory = None
    if jit:
        compiled = jax.jit(grad).lower(trainable, x, tensors).compile()
        analysis = compiled.memory_analysis()
        if analysis is not None:
            memory = analysis.temp_size_in_bytes + analysis.output_size_in_bytes
        forward, grad = jax.jit(forward), compiled
    return (
        lambda: jax.block_until_ready(forward(trainable, x, tensors)),
        lambda: jax.block_until_ready(grad(trainable, x, tensors)),
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


def print_comparison(x, jits, baseline, variants, warmup, repeats, label_width=28):
    """Prints a table of paired medians: a baseline layer, then variants.

    Args:
        x: the input (self-attention: `layer(x, x, **kwargs)`).
        jits: the jit settings to run, e.g. `(False, True)`.
        baseline: `(label, make_layer, call_kwargs)`; `make_layer()` builds
            a fresh layer.
        variants: a list of `(label, make_layer, call_kwargs)`.
    """
    header = (
        f"{'configuration':{label_width}s} {'jit':>3s} {'fwd ms':>8s} {'x MHA':>6s} "
        f"{'fwd+bwd ms':>10s} {'x MHA':>6s} {'peak MiB':>9s} {'x MHA':>6s}"
    )
    for jit in jits:
        print("\n" + header)
        print("-" * len(header))
        rows = []
        base = None
        for index, (label, make_layer, kwargs) in enumerate([baseline] + list(variants)):
            keras.utils.set_random_seed(0)
            layer = make_layer()
            layer(x, x, **kwargs)  # build
            steps = make_steps(layer, x, jit, **kwargs)
            if index == 0:
                base = steps
                fwd = fwd_base = paired_medians(steps[0], steps[0], warmup, repeats)[0]
                both = both_base = paired_medians(steps[1], steps[1], warmup, repeats)[0]
            else:
                fwd_base, fwd = paired_medians(base[0], steps[0], warmup, repeats)
                both_base, both = paired_medians(base[1], steps[1], warmup, repeats)
            rows.append((label, fwd_base, fwd, both_base, both, steps[2]))
        for label, fwd_base, fwd, both_base, both, memory in rows:
            mem = f"{memory / 2**20:9.1f}" if memory else f"{'n/a':>9s}"
            mem_ratio = f"{memory / base[2]:6.2f}" if memory and base[2] else f"{'':6s}"
            print(
                f"{label:{label_width}s} {'on' if jit else 'off':>3s} {fwd:8.2f} "
                f"{fwd / fwd_base:6.2f} {both:10.2f} {both / both_base:6.2f} {mem} {mem_ratio}",
                flush=True,
            )


def model_step_arguments(description):
    """Parses the model benchmarks' `--repeats` (3) and `--warmup` (1);
    exits with an error unless the backend is JAX (`jax_training_step`
    compiles with `jax.jit`)."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--warmup", type=int, default=1)
    args = parser.parse_args()
    if keras.backend.backend() != "jax":
        sys.exit("error: run with KERAS_BACKEND=jax (the step is compiled with jax.jit)")
    return args


def jax_training_step(model, loss, inputs, targets):
    """A model's training step (loss and gradients of every trainable
    weight; no optimizer update) compiled with `jax.jit`.

    Args:
        model: a built Keras model (JAX backend).
        loss: `loss(targets, logits)`.
        inputs, targets: one batch.

    Returns:
        `(step, cost)`: `step()` runs the compiled step and waits for it;
        `cost` holds XLA's `flops` of the step (None if not reported) and
        its peak `memory` bytes (temporaries + outputs; None if not
        reported).
    """
    import jax

    trainable = [v.value for v in model.trainable_variables]
    non_trainable = [v.value for v in model.non_trainable_variables]

    def loss_fn(trainable, inputs, targets):
        logits, _ = model.stateless_call(trainable, non_trainable, inputs, training=True)
        return loss(targets, logits)

    compiled = jax.jit(jax.value_and_grad(loss_fn)).lower(trainable, inputs, targets).compile()
    analysis = compiled.cost_analysis()
    if isinstance(analysis, list):  # older JAX: one dict per computation
        analysis = analysis[0]
    memory = compiled.memory_analysis()
    cost = {
        "flops": (analysis or {}).get("flops"),
        "memory": None if memory is None
        else memory.temp_size_in_bytes + memory.output_size_in_bytes,
    }
    return (lambda: jax.block_until_ready(compiled(trainable, inputs, targets))), cost
