"""The softmax of attention weights over the keys a query may attend to.

Shared by the attention layers: logits and weights in float32 (also under
mixed precision), masked keys get exactly zero weight, and a query row with
no allowed key gets zero weights everywhere (never NaN, never the uniform
row that a large negative fill alone would give).
"""

from keras import ops

# Finite, so that a row without any allowed key gives exp(0)/n rather than
# 0/0 before its weights are zeroed; float32 holds it.
MASKED_LOGIT = -1e30


def masked_softmax(logits, allowed=None):
    """Softmax over the last axis of `logits`, restricted to `allowed`.

    Args:
        logits: attention logits `[..., S]`, any float dtype (cast to
            float32).
        allowed: None, or a boolean tensor broadcastable to `logits`
            (True = may attend).

    Returns:
        float32 weights like `logits`: a distribution over the allowed keys
        of each row, or zeros for a row with none.
    """
    logits = ops.cast(logits, "float32")
    if allowed is None:
        return ops.softmax(logits, axis=-1)
    weights = ops.softmax(ops.where(allowed, logits, MASKED_LOGIT), axis=-1)
    # A row with no allowed key: uniform above, zeros here.
    return ops.where(allowed, weights, 0.0)
