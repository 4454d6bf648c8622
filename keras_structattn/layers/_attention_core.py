"""The one scaled dot-product attention of the library's layers.

Every multi-head layer attends through `scaled_dot_product_attention`. The
structure a mechanism adds reaches it as plain tensors: a boolean `allowed`
map (which query may attend which key, per head or for all heads), a Python
`scale` of the semantic logits, an additive float32 `bias` and an optional
`top_k`. Two paths with one meaning:

* explicit: float32 logits, `masked_softmax` (masked keys get exactly zero
  weight; a row without an allowed key gets zero weights, never NaN, never a
  uniform average), dropout on the weights. Keys and values may be shared by
  the batch (`[S, N, d]`, a dictionary), then the logits are laid out heads
  first, `[N, B, T, S]`, so that neither einsum transposes a `[.., T, S]`
  tensor; only the returned weights are transposed back.
* fused: `keras.ops.dot_product_attention`, the kernel Keras' own
  `MultiHeadAttention` uses (on JAX with a GPU, cuDNN flash attention under
  bfloat16 and float16), taken when neither the weights nor dropout are
  needed, there is no `top_k`, keys and values are batched and as wide as
  each other, and the layer computes in float32 (both backends) or, on JAX
  only, in bfloat16, or float16 on a GPU (`fused_dtype`). JAX's kernel
  accumulates the logits in float32, masks them with its own constant and
  takes the softmax in float32: the explicit path's meaning, up to
  rounding the `bias` to the compute dtype (the explicit path rounds the
  semantic logits likewise). There the bias is first clipped to
  `FUSED_BIAS_LIMIT` of that dtype, so that neither the cast nor cuDNN's
  additive mask constant can overflow. TensorFlow has no flash kernel (its
  fused op rounds the logits and the bias to the compute dtype and gains
  nothing), so its mixed precision stays on the explicit path. The kernel
  averages the values of a row without any allowed key, so such rows are
  zeroed afterwards, as zero weights would give.

See docs/attention_core.md.
"""

from typing import NamedTuple

import keras
from keras import ops

from keras_structattn.ops.dropout import dropout
from keras_structattn.ops.masked_softmax import MASKED_LOGIT
from keras_structattn.ops.masked_softmax import masked_softmax

# |bias| bound on the reduced-precision fused path, per compute dtype. JAX's
# cuDNN attention adds a boolean mask to the bias as -2**15 (float16) or
# -2**41 (bfloat16) in that dtype; a quarter of it keeps bias + mask finite
# (float16's largest value is 65504) and every masked logit at least half
# the constant below every allowed one, so masked keys still get zero
# weight. The float16 bound also keeps the cast of the bias finite on the
# XLA path. Biases of the library's layers are O(10): the clip only stops
# values no model means from becoming inf, NaN or an unmasked key.
FUSED_BIAS_LIMIT = {"float16": 2.0**13, "bfloat16": 2.0**39}


class LogitStructure(NamedTuple):
    """What a mechanism adds to the logits `scale * Q K^T / sqrt(d) + bias`.

    Attributes:
        allowed: None or boolean `[B, 1 or N, T, S]` (True = may attend).
        scale: a Python float multiplying the semantic logits.
        bias: None or float32, broadcastable to `[B, N, T, S]`.
        top_k: None, or keep only each row's `top_k` largest allowed logits
            (ties with the k-th are kept).
    """

    allowed: object = None
    scale: float = 1.0
    bias: object = None
    top_k: int = None


def and_masks(first, second):
    """Logical AND of two optional boolean masks (None = everything allowed)."""
    if first is None:
        return second
    if second is None:
        return first
    return ops.logical_and(first, second)


def keep_top_k(logits, allowed, k):
    """`allowed` narrowed to each row's `k` largest allowed logits."""
    if logits.shape[-1] is not None:
        k = min(k, logits.shape[-1])
    candidates = logits if allowed is None else ops.where(allowed, logits, MASKED_LOGIT)
    kth = ops.top_k(candidates, k)[0][..., k - 1 : k]
    return and_masks(allowed, ops.greater_equal(logits, kth))


def fused_dtype(compute_dtype):
    """Whether the fused kernel may run in `compute_dtype` here.

    float32 on every backend; on JAX also bfloat16, and float16 on a GPU:
    JAX's kernel keeps the logits and the softmax in float32 (module
    docstring), and asks for float16 x float16 -> float32 products, which
    XLA compiles on GPUs only (on a CPU, `jax.jit` raises "The precision
    'F16_F16_F32' is not supported by dot_general on CPU").
    """
    if compute_dtype == "float32":
        return True
    if compute_dtype not in FUSED_BIAS_LIMIT or keras.backend.backend() != "jax":
        return False
    if compute_dtype == "float16":
        import jax

        return jax.default_backend() == "gpu"
    return True


def scaled_dot_product_attention(
    query,
    key,
    value,
    structure,
    *,
    key_dim,
    dropout_layer,
    training,
    compute_dtype,
    need_weights,
    flash_attention=None,
):
    """Attention of projected heads under a `LogitStructure`.

    Args:
        query: `[B, T, N, key_dim]`.
        key, value: `[B, S, N, d]`, or `[S, N, d]` shared by the batch.
        structure: a `LogitStructure`; its `allowed` and `bias` are laid
            out `[B, 1 or N, T, S]` for shared keys too.
        key_dim: the per-head key size (the logits are divided by its root).
        dropout_layer: a `keras.layers.Dropout` for the weights, or None.
        training: the dropout switch.
        compute_dtype: the layer's compute dtype.
        need_weights: whether the caller needs the weights.
        flash_attention: passed to `keras.ops.dot_product_attention` on the
            fused path (None: the backend chooses). True demands that path
            (Keras MHA's `flash_attention=True`): a call that cannot take
            it raises a ValueError saying why.

    Returns:
        `(output [B, T, N, dv], weights [B, N, T, S] float32 or None)`.
    """
    scale = structure.scale / float(key_dim) ** 0.5
    allowed = structure.allowed
    dropping = dropout_layer is not None and dropout_layer.rate > 0.0 and bool(training)
    shared = len(key.shape) == 3
    unfused = [
        reason
        for reason, holds in (
            ("the attention weights are returned", need_weights),
            ("dropout is on", dropping),
            ("keys and values are shared by the batch", shared),
            ("top-k keeps only some logits", structure.top_k is not None),
            (f"the compute dtype is {compute_dtype}", not fused_dtype(compute_dtype)),
            # JAX's kernel wants values as wide as keys.
            ("values and keys differ in width", key.shape[-1] != value.shape[-1]),
        )
        if holds
    ]
    fused = not unfused
    if flash_attention and not fused:
        raise ValueError(
            "flash_attention=True needs the fused attention kernel, which this call "
            f"cannot take: {'; '.join(unfused)}."
        )
    if fused:
        bias = structure.bias
        if bias is not None and compute_dtype in FUSED_BIAS_LIMIT:
            limit = FUSED_BIAS_LIMIT[compute_dtype]
            bias = ops.clip(bias, -limit, limit)
        output = ops.dot_product_attention(
            query, key, value, bias=bias, mask=allowed, scale=scale,
            flash_attention=flash_attention,
        )
        if allowed is not None:
            # [B, 1 or N, T, S] -> [B, T, 1 or N, 1]
            has_key = ops.transpose(ops.any(allowed, axis=-1), (0, 2, 1))[..., None]
            output = ops.where(has_key, output, ops.zeros_like(output))
        return output, None
    query = ops.multiply(query, ops.cast(scale, query.dtype))
    if shared:
        logits = ops.einsum("btnk,snk->nbts", query, key)
        if allowed is not None:
            allowed = ops.transpose(allowed, (1, 0, 2, 3))
    else:
        logits = ops.einsum("bsnk,btnk->bnts", key, query)
    logits = ops.cast(logits, "float32")
    if structure.bias is not None:
        bias = structure.bias
        logits = logits + (ops.transpose(bias, (1, 0, 2, 3)) if shared else bias)
    if structure.top_k is not None:
        allowed = keep_top_k(logits, allowed, structure.top_k)
    weights = masked_softmax(logits, allowed)
    dropped = ops.cast(weights, compute_dtype)
    if dropping:
        # The MHA's own Dropout layer holds the rate and the seed generator
        # (so the layer's variables stay Keras MHA's); the mask comes from
        # the library's cheaper random numbers (docs/performance.md).
        dropped = dropout(dropped, dropout_layer.rate, seed=dropout_layer.seed_generator)
    if shared:
        output = ops.einsum("nbts,snv->btnv", dropped, value)
        weights = ops.transpose(weights, (1, 0, 2, 3))
    else:
        output = ops.einsum("bnts,bsnv->btnv", dropped, value)
    return output, weights
