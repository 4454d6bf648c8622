"""Ancestral sampling with a step function and a cache (for self-critical training).

Self-critical sequence training (Rennie et al., 2017, arXiv:1612.00563,
Sec. 5) samples captions from the model and rewards them; this module does
the sampling, compiled like the other decoders (static shapes, one
`keras.ops.while_loop`).

The randomness comes in as an argument: `uniforms [B, max_decode_length]`,
one uniform number per row and step, and a token is drawn by inverting the
cumulative distribution (the first token whose cumulative probability
exceeds the uniform). That keeps the compiled function pure on every
backend (a JAX function cannot draw from Keras' stateful seed generators
inside `jax.jit`), makes a draw reproducible from a NumPy seed, and needs
`B * L` random numbers rather than the `B * L * V` of the Gumbel-max trick.
"""

from keras import ops

from keras_structattn import checks
from keras_structattn.decoding._token_loop import decode_tokens
from keras_structattn.decoding.tokens import EOS_ID


def sample_search(step_fn, initial_ids, initial_cache, *, uniforms, temperature=1.0,
                  eos_id=EOS_ID):
    """Draws one sequence per row from the model's distribution.

    At step `i` the next token of row `b` is the smallest `v` with
    `cdf_b(v) > uniforms[b, i]`, where `cdf_b` is the cumulative softmax of
    `logits / temperature`: a draw from that softmax when the uniforms are
    uniform on [0, 1). A row stops at its first `eos_id` (kept); later
    positions are 0.

    Args:
        step_fn: `step_fn(ids [B, 1], cache, index) -> (logits [B, V],
            new_cache)`, as in `greedy_search`.
        initial_ids: int `[B]`, the first decoder input of each row.
        initial_cache: nested structure of batch-leading tensors, or None.
        uniforms: float `[B, max_decode_length]` in [0, 1): the random
            numbers of the draw; the number of columns is the number of
            tokens generated (static).
        temperature: positive float dividing the logits.
        eos_id: the end-of-sequence token.

    Returns:
        `(ids, log_probs)`: int32 `[B, max_decode_length]` (EOS included,
        0 after it) and float32 `[B, max_decode_length]`, the
        log-probability (at temperature 1) of each drawn token, 0 after the
        row's EOS.
    """
    checks.non_negative_float("temperature", temperature)
    if not temperature > 0:
        raise ValueError(f"Argument `temperature` must be > 0. Received: {temperature!r}")
    checks.token_id("eos_id", eos_id)
    ids = checks.initial_ids(initial_ids)
    uniforms = ops.cast(ops.convert_to_tensor(uniforms), "float32")
    if len(uniforms.shape) != 2 or uniforms.shape[1] is None:
        raise ValueError(
            "Argument `uniforms` must be [batch, max_decode_length] with a static length. "
            f"Received shape: {uniforms.shape}"
        )
    max_decode_length = int(uniforms.shape[1])

    def pick(logits, i):
        logits = ops.cast(logits, "float32")
        log_probs = ops.log_softmax(logits, axis=-1)
        cdf = ops.cumsum(ops.softmax(logits / temperature, axis=-1), axis=-1)
        u = ops.take(uniforms, i, axis=1)
        # Scaled by the total so that rounding in the cumulative sum can
        # never leave a draw past the last token.
        below = ops.cast(cdf <= (u * cdf[:, -1])[:, None], "int32")
        token = ops.minimum(ops.sum(below, axis=-1), ops.shape(logits)[-1] - 1)
        token = ops.cast(token, "int32")
        return token, ops.take_along_axis(log_probs, token[:, None], axis=1)[:, 0]

    def initial(batch):
        return {"log_probs": ops.zeros((batch, max_decode_length), dtype="float32")}

    def update(state, i, at_i, token_log_prob):
        return {
            "log_probs": ops.where(at_i, token_log_prob[:, None], state["log_probs"])
        }

    state = decode_tokens(
        step_fn, ids, initial_cache, max_decode_length=max_decode_length, eos_id=eos_id,
        pick=pick, scores=(initial, update),
    )
    return state["seq"], state["log_probs"]
