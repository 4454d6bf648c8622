"""Scaled dot-product attention over projected heads, with a logit bias.

Shared by the layers built on `keras.layers.MultiHeadAttention` that change
only the logits (a scale and an additive float32 bias) or the projected
queries and keys. Two paths with one meaning:

* explicit: float32 logits, `masked_softmax` (rows without an allowed key
  get zero weights), dropout on the weights;
* fused: `keras.ops.dot_product_attention`, the kernel Keras MHA itself uses
  (faster under XLA), taken when neither the weights nor dropout are needed
  and the layer computes in float32. The kernel averages the values of a row
  without any allowed key, so such rows are zeroed afterwards, as zero
  weights would give.
"""

from keras import ops

from keras_structattn.ops.masked_softmax import masked_softmax


def attend(
    layer,
    query,
    key,
    value,
    allowed,
    training,
    need_weights=True,
    logit_scale=1.0,
    logit_bias=None,
):
    """Attention of projected `[B, T, N, d]` heads of a MHA subclass.

    The logits are `logit_scale * (Q K^T / sqrt(key_dim)) + logit_bias`.

    Args:
        layer: the `keras.layers.MultiHeadAttention` (sub)class instance
            whose einsum equations, dropout and dtypes are used.
        query, key, value: projected `[B, T, N, key_dim]`, `[B, S, N,
            key_dim]`, `[B, S, N, value_dim]`.
        allowed: None or boolean `[B, 1 or N, T, S]` (True = may attend).
        training: the dropout switch.
        need_weights: whether the caller needs the attention weights (the
            fused kernel does not give them).
        logit_scale: a Python float multiplying the semantic logits.
        logit_bias: None or float32, broadcastable to `[B, N, T, S]`.

    Returns:
        `(output [B, T, N, value_dim], weights [B, N, T, S] float32 or None)`.
    """
    scale = layer._inverse_sqrt_key_dim * logit_scale
    dropout = layer._dropout > 0.0 and training
    fused = (
        not need_weights
        and not dropout
        and layer.compute_dtype == "float32"
        # JAX's kernel wants values as wide as keys.
        and layer._value_dim == layer._key_dim
    )
    if fused:
        output = ops.dot_product_attention(
            query, key, value, bias=logit_bias, mask=allowed, scale=scale
        )
        if allowed is not None:
            # [B, 1 or N, T, S] -> [B, T, 1 or N, 1]
            has_key = ops.transpose(ops.any(allowed, axis=-1), (0, 2, 1))[..., None]
            output = ops.where(has_key, output, ops.zeros_like(output))
        return output, None
    query = ops.multiply(query, ops.cast(scale, query.dtype))
    logits = ops.cast(ops.einsum(layer._dot_product_equation, key, query), "float32")
    if logit_bias is not None:
        logits = logits + logit_bias
    weights = masked_softmax(logits, allowed)
    dropped = layer._dropout_layer(ops.cast(weights, layer.compute_dtype), training=training)
    output = ops.einsum(layer._combine_equation, dropped, value)
    return output, weights


def allowed_from_mask(attention_mask):
    """`[B, T, S]` Keras attention mask -> boolean `[B, 1, T, S]` or None."""
    if attention_mask is None:
        return None
    return ops.expand_dims(ops.cast(attention_mask, "bool"), 1)
