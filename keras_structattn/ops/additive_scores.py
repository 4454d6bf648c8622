"""Scores of additive (Bahdanau / Up-Down) attention without storing the tanh.

The Up-Down scorer (Anderson et al., CVPR 2018, arXiv:1707.07998, Eq. 3;
Eq. 23 of the supplementary of Yang et al., arXiv:2103.03493) is

    e[b, t, n] = w . tanh(q[b, t] + k[b, n]) + c

with `q = W_h h` the projected queries and `k = W_v v` the projected keys.
Written with Keras layers it materialises the `[B, T, N, a]` tanh, and
autodiff keeps it for the backward pass. For BUTD+CATT's cross-sample
branch (N = K = 1000 dictionary entries, a = 512, inside the recurrent
loop) that is 100 MB a word: the step is bound by memory, not by
arithmetic (docs/performance.md).

`additive_scores` computes the same scores with a hand-written gradient
that recomputes the tanh instead of storing it. With `u = tanh(q + k)`
and the upstream gradient `g[b, t, n]`:

    dq[b, t]  = w * (sum_n g - sum_n g u^2)
    dk[b, n]  = w * (sum_t g - sum_t g u^2)      (summed over b too for
                                                  keys shared by the batch)
    dw        = sum_{b, t, n} g u
    dc        = sum g

so under XLA the forward pass and each reduction are one fused loop over
`q` and `k` (a few hundred KB) that never writes the big tensor. Without
XLA (TensorFlow running op by op) every expression would be written out
anyway, and the plain formulation with its stored tanh is faster: it is
used there. Both paths compute the same function (tested against a NumPy
loop and each other, values and gradients: tests/ops/test_additive_scores.py).
"""

from keras import ops

from keras_structattn.ops.trig import tracing_for_xla


def _shared_keys(keys):
    return len(keys.shape) == 2


def _keys_beside_queries(keys):
    """`keys` as `[B|1, 1, N, a]`, to add to queries `[B, T, 1, a]`."""
    return keys[None, None] if _shared_keys(keys) else keys[:, None]


def _fused_scores(query, keys, kernel, bias):
    """The XLA path: float32 throughout, tanh recomputed in the backward
    pass (`ops.custom_gradient` is `jax.custom_gradient` or
    `tf.custom_gradient`)."""
    dtypes = [x.dtype for x in (query, keys, kernel, bias)]
    shared = _shared_keys(keys)

    @ops.custom_gradient
    def scores(query, keys, kernel, bias):
        def tanh_sum():
            return ops.tanh(query[:, :, None, :] + _keys_beside_queries(keys))

        out = ops.sum(tanh_sum() * kernel, axis=-1) + bias

        def grad(*args, upstream=None):
            if upstream is None:
                (upstream,) = args
            upstream = ops.cast(upstream, "float32")
            g = upstream[..., None]  # [B, T, N, 1]
            u = tanh_sum()
            d_query = kernel * ops.sum(g * (1.0 - u * u), axis=2)
            if shared:
                # Summed over the batch and the steps: in an [N, B * T, a]
                # layout that is a reduction over the middle axis, which
                # XLA's CPU compilers vectorise far better than one over
                # the two outer axes of [B, T, N, a] (5x on JAX 0.10).
                flat_query = ops.reshape(query, (-1, query.shape[-1]))
                u = ops.tanh(keys[:, None, :] + flat_query[None])  # [N, B*T, a]
                g = ops.transpose(ops.reshape(upstream, (-1, keys.shape[0])))[..., None]
            gu = g * u  # [N, B*T, a] shared, else [B, T, N, a]: axis 1 is summed
            d_keys = kernel * ops.sum(g - gu * u, axis=1)
            d_kernel = ops.sum(gu, axis=tuple(range(len(gu.shape) - 1)))
            d_bias = ops.sum(upstream)
            return tuple(
                ops.cast(d, dtype) for d, dtype in
                zip((d_query, d_keys, d_kernel, d_bias), dtypes))

        return out, grad

    return scores(*(ops.cast(x, "float32") for x in (query, keys, kernel, bias)))


def additive_scores(query, keys, kernel, bias=None):
    """`w . tanh(q + k) + c` for every query and key.

    Args:
        query: `[B, T, a]` projected queries.
        keys: `[B, N, a]` projected keys, or `[N, a]` shared by the batch
            (a dictionary).
        kernel: the scorer's weights `w`, `[a]` or `[a, 1]`.
        bias: its scalar bias `c` (shape `[]` or `[1]`), or None.

    Returns:
        float32 scores `[B, T, N]`. Under XLA (JAX, or TensorFlow tracing
        with `jit_compile=True`) they are computed in float32 with a
        gradient that recomputes the tanh; otherwise in the inputs' dtype
        (the tanh kept for autodiff) and cast to float32.
    """
    kernel = ops.reshape(kernel, (-1,))
    if bias is None:
        bias = ops.zeros((), dtype=kernel.dtype)
    bias = ops.reshape(bias, ())
    if tracing_for_xla():
        return _fused_scores(query, keys, kernel, bias)
    hidden = ops.tanh(query[:, :, None, :] + _keys_beside_queries(keys))
    kernel, bias = ops.cast(kernel, hidden.dtype), ops.cast(bias, hidden.dtype)
    return ops.cast(ops.matmul(hidden, kernel[:, None])[..., 0] + bias, "float32")
