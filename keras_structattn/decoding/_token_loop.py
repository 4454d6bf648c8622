"""The one-token-a-step decoding loop that greedy search and sampling share.

Both decoders feed each row's last token to `step_fn`, pick the next token
from the logits, write it at the step's position, and stop a row at its
first EOS (a stopped row emits 0 and its cache keeps updating, unread,
which keeps the step branch-free). They differ only in how a token is
picked and in what they keep of its log-probability, which the caller
passes in.
"""

from keras import ops

from keras_structattn.decoding import _cache


def decode_tokens(step_fn, ids, initial_cache, *, max_decode_length, eos_id, pick, scores):
    """Runs the decoding `keras.ops.while_loop` (static shapes, XLA-compilable).

    Args:
        step_fn: `step_fn(ids [B, 1], cache, index) -> (logits, new_cache)`.
        ids: int32 `[B]`, the checked first decoder inputs.
        initial_cache: nested structure of batch-leading tensors, or None.
        max_decode_length: int, the number of positions.
        eos_id: the end-of-sequence token.
        pick: `pick(logits, index) -> (token, token_log_prob)`: the int32
            `[B]` token of the step and its float32 `[B]` log-probability.
        scores: `(initial, update)`: `initial(batch)` is a dict of the
            caller's extra loop tensors; `update(state, index, at_index,
            token_log_prob)` their next values, where `at_index` is the
            bool `[1, max_decode_length]` one-hot of the step's position
            and `token_log_prob` is already 0 for stopped rows.

    Returns:
        The final loop state: `"seq"` (int32 `[B, max_decode_length]`),
        `"finished"`, `"cache"` and the caller's extra tensors.
    """
    initial, update = scores
    batch = ops.shape(ids)[0]
    positions = ops.arange(max_decode_length, dtype="int32")
    state = {
        "index": ops.convert_to_tensor(0, dtype="int32"),
        "last": ids,
        "seq": ops.zeros((batch, max_decode_length), dtype="int32"),
        "finished": ops.zeros((batch,), dtype="bool"),
        "cache": _cache.as_cache(initial_cache),
        **initial(batch),
    }

    def cond(state):
        return ops.logical_and(
            state["index"] < max_decode_length,
            ops.logical_not(ops.all(state["finished"])),
        )

    def body(state):
        i = state["index"]
        finished = state["finished"]
        logits, new_cache = step_fn(state["last"][:, None], state["cache"], i)
        token, token_log_prob = pick(logits, i)
        token = ops.where(finished, 0, token)
        at_i = positions[None, :] == i
        return {
            "index": i + 1,
            "last": token,
            "seq": ops.where(at_i, token[:, None], state["seq"]),
            "finished": ops.logical_or(finished, token == eos_id),
            "cache": _cache.like(state["cache"], new_cache),
            **update(state, i, at_i, ops.where(finished, 0.0, token_log_prob)),
        }

    return ops.while_loop(cond, body, state)
