"""Greedy (argmax) decoding with a step function and a cache."""

from keras import ops

from keras_structattn import checks
from keras_structattn.decoding._token_loop import decode_tokens
from keras_structattn.decoding.tokens import EOS_ID


def greedy_search(step_fn, initial_ids, initial_cache, *, max_decode_length, eos_id=EOS_ID):
    """Greedy decoding: the most probable next token at every step.

    A row stops at its first `eos_id` (which is kept); its later positions
    are 0. The loop ends when every row has stopped or after
    `max_decode_length` steps. Uses `keras.ops` only (any backend) and is
    XLA-compilable: static shapes and a `keras.ops.while_loop`.

    Args:
        step_fn: `step_fn(ids, cache, index) -> (logits, new_cache)`. `ids`:
            int32 `[B, 1]`, the tokens at position `index` (a scalar int32
            tensor, the 0-based decoding step); `logits`: float
            `[B, vocab_size]` for the next token; `new_cache`: the updated
            cache, with the structure, shapes and dtypes of `cache`.
        initial_ids: int `[B]`, the first decoder input of each row (0 in
            the tensor2tensor convention of targets shifted right with 0).
        initial_cache: nested structure (dict / list / tuple) of tensors
            whose leading axis is `B`, or `None`.
        max_decode_length: positive int, the number of tokens generated.
        eos_id: non-negative int, the end-of-sequence token.

    Returns:
        Tuple `(ids, scores)`: `ids` int32 `[B, max_decode_length]`, the
        decoded tokens (EOS included, later positions 0); `scores` float32
        `[B]`, the sum of the log-probabilities of the decoded tokens.
    """
    ids, log_probs, _ = greedy_decode(
        step_fn,
        initial_ids,
        initial_cache,
        max_decode_length=max_decode_length,
        eos_id=eos_id,
    )
    return ids, log_probs


def greedy_decode(step_fn, initial_ids, initial_cache, *, max_decode_length, eos_id=EOS_ID):
    """`greedy_search` that also returns the lengths (int32 `[B]`).

    A row's length counts its EOS; a row without EOS has length
    `max_decode_length`. (`beam_search` with `beam_size=1` uses the lengths
    for its length penalty.)

    Args:
        step_fn, initial_ids, initial_cache, max_decode_length, eos_id: as
            in `greedy_search`.

    Returns:
        `(ids, scores, lengths)`: the ids and scores as `greedy_search`
        returns them, and the int32 lengths `[B]`.
    """
    checks.positive_int("max_decode_length", max_decode_length)
    checks.token_id("eos_id", eos_id)
    ids = checks.initial_ids(initial_ids)

    def pick(logits, i):
        log_probs = ops.log_softmax(ops.cast(logits, "float32"), axis=-1)
        token = ops.cast(ops.argmax(log_probs, axis=-1), "int32")
        return token, ops.take_along_axis(log_probs, token[:, None], axis=1)[:, 0]

    def initial(batch):
        return {
            "log_probs": ops.zeros((batch,), dtype="float32"),
            "lengths": ops.zeros((batch,), dtype="int32"),
        }

    def update(state, i, at_i, token_log_prob):
        return {
            "log_probs": state["log_probs"] + token_log_prob,
            "lengths": ops.where(state["finished"], state["lengths"], i + 1),
        }

    state = decode_tokens(
        step_fn, ids, initial_cache, max_decode_length=max_decode_length, eos_id=eos_id,
        pick=pick, scores=(initial, update),
    )
    # A row still running at the end was extended at every step, so its
    # length is already `max_decode_length`.
    return state["seq"], state["log_probs"], state["lengths"]
