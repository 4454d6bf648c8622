"""Beam search with the GNMT length penalty, as in tensor2tensor.

The algorithm is tensor2tensor's `beam_search` (also the TF Model Garden's
`official/nlp/modeling/ops/beam_search.py`), with static shapes throughout:

- Two sets of `beam_size` hypotheses per row: *alive* ones, which never
  contain EOS and are extended at every step, and *finished* ones, which end
  with EOS and are never extended.
- At step `i` every alive hypothesis is extended by every token; the
  `2 * beam_size` best extensions by log-probability are the candidates (at
  most `beam_size` of them end with EOS, so at least `beam_size` can stay
  alive). The best non-EOS candidates become the new alive set; the EOS ones
  compete with the finished set on the length-penalised score
  `log_prob / ((5 + length) / 6) ** alpha`, where `length = i + 1` counts the
  EOS.
- The loop stops early once no alive hypothesis can beat the finished ones of
  any row (see `beam_search`), which gives the results of running all
  `max_decode_length` steps.
- A row with no finished hypothesis at the end returns its alive ones.

Sequences live in a fixed `[B, beam, max_decode_length + 1]` buffer whose
position 0 holds the initial ids; unwritten positions stay 0, which is the
padding of the result.
"""

from keras import ops

from keras_structattn import checks
from keras_structattn.decoding import _cache
from keras_structattn.decoding.greedy_search import greedy_decode
from keras_structattn.decoding.tokens import EOS_ID

_NEG_INF = float("-inf")


def length_penalty(length, alpha):
    """GNMT length penalty `((5 + length) / 6) ** alpha` (float32).

    Args:
        length: int or int tensor, the hypothesis length (EOS included).
        alpha: non-negative float; 0 disables the penalty (it is then 1).

    Returns:
        A float32 tensor of the shape of `length`.
    """
    length = ops.cast(length, "float32")
    return ops.power((5.0 + length) / 6.0, alpha)


def beam_search(
    step_fn,
    initial_ids,
    initial_cache,
    *,
    vocab_size,
    max_decode_length,
    beam_size=4,
    alpha=0.6,
    eos_id=EOS_ID,
    return_all_beams=False,
):
    """Beam search decoding with the GNMT length penalty (tensor2tensor).

    Scores are `log_prob / ((5 + length) / 6) ** alpha` with `length`
    counting the EOS; log-probabilities are the `log_softmax` of the logits
    in float32. Uses `keras.ops` only (any backend) and is XLA-compilable:
    static shapes (the batch may be dynamic) and a `keras.ops.while_loop`.

    The loop stops before `max_decode_length` steps once, in every row, the
    best alive hypothesis cannot beat the finished ones even with the largest
    length penalty (tensor2tensor's `_is_not_finished` bound; extending a
    hypothesis never raises its log-probability): the best finished one for
    `return_all_beams=False`, the worst of a full finished set for
    `return_all_beams=True`. Either way the results are those of running all
    `max_decode_length` steps.

    `beam_size=1` decodes greedily, as tensor2tensor does: a one-beam search
    with a separate finished set could return an early EOS hypothesis over
    the argmax path, so it would not be greedy decoding.

    Args:
        step_fn: `step_fn(ids, cache, index) -> (logits, new_cache)`. `ids`:
            int32 `[B * beam_size, 1]`, the tokens at position `index` (a
            scalar int32 tensor, the 0-based decoding step); `logits`: float
            `[B * beam_size, vocab_size]` for the next token; `new_cache`:
            the updated cache, with the structure, shapes and dtypes of
            `cache`.
        initial_ids: int `[B]`, the first decoder input of each row (0 in
            the tensor2tensor convention of targets shifted right with 0).
        initial_cache: nested structure (dict / list / tuple) of tensors
            whose leading axis is `B`, or `None`. Each leaf is tiled to
            `[B * beam_size, ...]`, beam-major within a row (row `b`'s beams
            are rows `b * beam_size` to `b * beam_size + beam_size - 1`), and
            after every step the rows of the surviving beams are gathered.
            Encoder outputs and masks can ride along the same way.
        vocab_size: positive int, the size of the logits' last axis.
        max_decode_length: positive int, the most tokens generated.
        beam_size: positive int, hypotheses kept per row.
        alpha: non-negative float, the length penalty exponent (0: none).
        eos_id: int in `[0, vocab_size)`, the end-of-sequence token.
        return_all_beams: whether to return every finished hypothesis of a
            row instead of the best one.

    Returns:
        Tuple `(ids, scores)`. With `return_all_beams=False`: `ids` int32
        `[B, max_decode_length]`, the best hypothesis of each row (EOS
        included, later positions 0), and `scores` float32 `[B]`, its
        length-penalised log-probability. With `return_all_beams=True`:
        `[B, beam_size, max_decode_length]` and `[B, beam_size]`, best
        first; a row with fewer than `beam_size` finished hypotheses pads
        with ids 0 and score `-inf` (as tensor2tensor does). A row with no
        finished hypothesis returns its alive ones instead, scored with the
        penalty of length `max_decode_length`.
    """
    checks.positive_int("vocab_size", vocab_size)
    checks.positive_int("max_decode_length", max_decode_length)
    checks.positive_int("beam_size", beam_size)
    alpha = checks.non_negative_float("alpha", alpha)
    checks.token_id("eos_id", eos_id, vocab_size)
    ids = checks.initial_ids(initial_ids)

    if beam_size == 1:
        seq, log_probs, lengths = greedy_decode(
            step_fn,
            ids,
            initial_cache,
            max_decode_length=max_decode_length,
            eos_id=eos_id,
        )
        scores = log_probs / length_penalty(lengths, alpha)
        if return_all_beams:
            return seq[:, None, :], scores[:, None]
        return seq, scores

    cache = _cache.tile(_cache.as_cache(initial_cache), beam_size)
    batch = ops.shape(ids)[0]
    # Candidates per row: 2 * beam_size, fewer only for a vocabulary of 1.
    num_candidates = min(2 * beam_size, beam_size * vocab_size)
    positions = ops.arange(max_decode_length + 1, dtype="int32")
    row_offsets = ops.arange(batch, dtype="int32")[:, None]
    max_penalty = length_penalty(max_decode_length, alpha)

    def gather_beams(x, indices, num_beams):
        """`x[b, indices[b, j], ...]` for `x` `[B, num_beams, ...]`."""
        flat = ops.reshape(x, (-1,) + tuple(x.shape[2:]))
        taken = ops.take(flat, ops.reshape(indices + row_offsets * num_beams, (-1,)), axis=0)
        return ops.reshape(taken, (-1, indices.shape[1]) + tuple(x.shape[2:]))

    # Only beam 0 starts alive: the other copies are -inf, so the first step
    # does not pick the same extension beam_size times.
    first_beam = ops.arange(beam_size) == 0
    alive_log_probs = ops.where(first_beam[None, :], 0.0, _NEG_INF)
    alive_log_probs = ops.cast(alive_log_probs * ops.ones((batch, 1)), "float32")
    alive_seq = ops.where(
        positions[None, None, :] == 0,
        ids[:, None, None],
        ops.zeros((batch, beam_size, max_decode_length + 1), dtype="int32"),
    )
    state = {
        "index": ops.convert_to_tensor(0, dtype="int32"),
        "alive_seq": alive_seq,
        "alive_last": ops.repeat(ids[:, None], beam_size, axis=1),
        "alive_log_probs": alive_log_probs,
        "alive_cache": cache,
        "finished_seq": ops.zeros_like(alive_seq),
        # A finished slot is used iff its score is finite (only finite
        # candidates ever enter the set), so no separate flags are needed.
        "finished_scores": ops.full((batch, beam_size), _NEG_INF, dtype="float32"),
    }

    def cond(state):
        # No extension of the best alive hypothesis can score above this:
        # log-probabilities only fall as it grows, and the penalty (which
        # divides a negative number) is largest at the maximum length.
        best_alive = state["alive_log_probs"][:, 0] / max_penalty
        if return_all_beams:
            # Every finished slot must be safe; unused ones are -inf.
            bar = ops.min(state["finished_scores"], axis=1)
        else:
            bar = ops.max(state["finished_scores"], axis=1)
        bound_is_met = ops.all(bar > best_alive)
        return ops.logical_and(
            state["index"] < max_decode_length, ops.logical_not(bound_is_met)
        )

    def body(state):
        i = state["index"]
        flat_ids = ops.reshape(state["alive_last"], (-1, 1))
        logits, new_cache = step_fn(flat_ids, state["alive_cache"], i)
        new_cache = _cache.like(state["alive_cache"], new_cache)
        log_probs = ops.log_softmax(ops.cast(logits, "float32"), axis=-1)
        log_probs = ops.reshape(log_probs, (-1, beam_size, vocab_size))
        log_probs = log_probs + state["alive_log_probs"][:, :, None]

        # Candidates: the best extensions over all beams of a row.
        flat_log_probs = ops.reshape(log_probs, (-1, beam_size * vocab_size))
        cand_log_probs, cand_index = ops.top_k(flat_log_probs, num_candidates)
        cand_index = ops.cast(cand_index, "int32")
        cand_beam = ops.floor_divide(cand_index, vocab_size)
        cand_ids = ops.mod(cand_index, vocab_size)
        cand_seq = gather_beams(state["alive_seq"], cand_beam, beam_size)
        cand_seq = ops.where(
            positions[None, None, :] == i + 1, cand_ids[:, :, None], cand_seq
        )
        cand_eos = cand_ids == eos_id

        # New alive set: the best candidates that did not emit EOS.
        alive_scores = ops.where(cand_eos, _NEG_INF, cand_log_probs)
        new_alive_log_probs, pick = ops.top_k(alive_scores, beam_size)
        pick = ops.cast(pick, "int32")
        # The cache is gathered once, from the beams the picks extend.
        source_beam = ops.take_along_axis(cand_beam, pick, axis=1)
        flat_source = ops.reshape(source_beam + row_offsets * beam_size, (-1,))

        # New finished set: the old one and the EOS candidates, by score.
        # (-inf candidates, e.g. extensions of the initial -inf beams, keep
        # a -inf score, so "finite score" == "finished" still holds.)
        new_scores = cand_log_probs / length_penalty(i + 1, alpha)
        new_scores = ops.where(cand_eos, new_scores, _NEG_INF)
        all_scores = ops.concatenate([state["finished_scores"], new_scores], axis=1)
        all_seq = ops.concatenate([state["finished_seq"], cand_seq], axis=1)
        finished_scores, finished_pick = ops.top_k(all_scores, beam_size)
        finished_pick = ops.cast(finished_pick, "int32")

        return {
            "index": i + 1,
            "alive_seq": gather_beams(cand_seq, pick, num_candidates),
            "alive_last": ops.take_along_axis(cand_ids, pick, axis=1),
            "alive_log_probs": new_alive_log_probs,
            "alive_cache": _cache.gather(new_cache, flat_source),
            "finished_seq": gather_beams(all_seq, finished_pick, beam_size + num_candidates),
            "finished_scores": finished_scores,
        }

    state = ops.while_loop(cond, body, state)

    # Rows without a finished hypothesis fall back to their alive ones. This
    # only happens when the loop ran all the steps, so those have the full
    # length. (The early-stop bound needs a finite finished score per row.)
    has_finished = state["finished_scores"][:, 0] > _NEG_INF
    alive_scores = state["alive_log_probs"] / max_penalty
    seq = ops.where(has_finished[:, None, None], state["finished_seq"], state["alive_seq"])
    scores = ops.where(has_finished[:, None], state["finished_scores"], alive_scores)
    seq = seq[:, :, 1:]
    if return_all_beams:
        return seq, scores
    return seq[:, 0], scores[:, 0]
