"""Beam and greedy search, checked against the NumPy references in
`tests/decoding/reference.py`.

Toy "models" are Markov tables (logits indexed by the last token), some with
a term that depends on the sum of all earlier tokens, which `step_fn` keeps
in the cache: beam search must then gather the cache of the surviving beams
for the scores to come out right. With enough beams (`_exhaustive_beam`)
beam search is exact search and must return what brute-force enumeration
finds; with fewer it must return what the list-based tensor2tensor
algorithm finds.
"""

import math

import numpy as np
import pytest
from keras import backend
from keras import ops

from keras_structattn.decoding import beam_search
from keras_structattn.decoding import greedy_search
from keras_structattn.decoding import length_penalty
from tests._backend import jit
from tests.decoding import reference as ref

EOS = 1
ALPHAS = [0.0, 0.6, 1.0, 2.0]


def _exhaustive_beam(vocab_size, max_length):
    """Beams for which every hypothesis is kept and every extension scored.

    At the last step `(V - 1) ** (T - 1)` EOS-free hypotheses are alive and
    each of their `V` extensions must be among the `2 * beam` candidates.
    """
    return math.ceil((vocab_size - 1) ** (max_length - 1) * vocab_size / 2)


def _np(x):
    return np.asarray(ops.convert_to_numpy(x))


# ---------------------------------------------------------------------------
# Models.


def _markov_step(table):
    """`step_fn` of a Markov table `[V, V]` of logits: no cache needed."""

    def step_fn(ids, cache, index):
        return ops.take(ops.convert_to_tensor(table), ids[:, 0], axis=0), cache

    return step_fn


def _markov_model(table):
    table = np.asarray(table, dtype=np.float64)
    return lambda prefix: ref.log_softmax(table[prefix[-1]])


def _table_from_probs(probs):
    with np.errstate(divide="ignore"):
        return np.log(np.asarray(probs, dtype=np.float64)).astype("float32")


def _history_step(vocab_size, modulus):
    """`step_fn` whose logits depend on the last token and on the sum of all
    earlier tokens (the initial id included) modulo `modulus`.

    Cache: `{"total": int32 [B], "tables": (markov [B, V, V], bias
    [B, modulus, V])}`: the running sum, and per-row tables (tiled over the
    beams like encoder outputs). The new cache comes back with a list where
    a tuple went in, which beam search must accept.
    """

    def step_fn(ids, cache, index):
        last = ids[:, 0]
        total = cache["total"] + last
        markov, bias = cache["tables"]
        logits = ops.einsum("bv,bvw->bw", ops.one_hot(last, vocab_size), markov)
        logits = logits + ops.einsum(
            "bm,bmw->bw", ops.one_hot(ops.mod(total, modulus), modulus), bias
        )
        return logits, {"total": total, "tables": [markov, bias]}

    return step_fn


def _history_cache(markov, bias):
    return {
        "total": np.zeros(len(markov), dtype="int32"),
        "tables": (np.asarray(markov, "float32"), np.asarray(bias, "float32")),
    }


def _history_model(markov, bias):
    markov = np.asarray(markov, dtype=np.float64)
    bias = np.asarray(bias, dtype=np.float64)
    modulus = len(bias)
    return lambda prefix: ref.log_softmax(markov[prefix[-1]] + bias[sum(prefix) % modulus])


def _random_history(rng, batch, vocab_size, modulus):
    markov = rng.normal(scale=2.0, size=(batch, vocab_size, vocab_size))
    bias = rng.normal(scale=2.0, size=(batch, modulus, vocab_size))
    return markov.astype("float32"), bias.astype("float32")


# Length penalty decides: from the start, EOS (p = 0.40) makes the best
# short hypothesis [EOS]; the chain 2 -> 3 -> EOS (0.56 * 0.73 * 0.73) is
# less probable but longer, and wins once alpha is large enough.
LENGTH_TABLE = _table_from_probs(
    [
        [0.02, 0.40, 0.56, 0.02],  # after 0 (the start)
        [0.25, 0.25, 0.25, 0.25],  # after EOS (never used)
        [0.10, 0.07, 0.10, 0.73],  # after 2
        [0.10, 0.73, 0.07, 0.10],  # after 3
    ]
)

# Ending is improbable: the EOS-free hypotheses stay far more probable than
# any finished one, which must still be returned.
RARE_EOS_TABLE = _table_from_probs(
    [
        [0.05, 0.05, 0.90],  # after 0 (the start)
        [0.30, 0.40, 0.30],  # after EOS (never used)
        [0.04, 0.01, 0.95],  # after 2
    ]
)


def _check_top1(model, step_fn, cache, vocab_size, max_length, alpha):
    """Beam search with exhaustive beams returns the brute-force best."""
    want_score, want_tokens = ref.best(model, 0, vocab_size, max_length, alpha, EOS)
    ids, scores = beam_search(
        step_fn,
        np.zeros(1, "int32"),
        cache,
        vocab_size=vocab_size,
        max_decode_length=max_length,
        beam_size=_exhaustive_beam(vocab_size, max_length),
        alpha=alpha,
        eos_id=EOS,
    )
    np.testing.assert_array_equal(_np(ids)[0], ref.padded(want_tokens, max_length))
    np.testing.assert_allclose(_np(scores)[0], want_score, rtol=1e-5)
    return want_tokens


# ---------------------------------------------------------------------------
# Exact search (exhaustive beams) against brute force.


def test_length_penalty_case_is_decided_by_alpha():
    """The LENGTH_TABLE case is meaningful: the winner depends on alpha, and
    no near tie makes the expected answer fragile."""
    model = _markov_model(LENGTH_TABLE)
    winners = {}
    for alpha in ALPHAS:
        finished, _ = ref.brute_force(model, 0, 4, 4, alpha, EOS)
        assert finished[0][0] - finished[1][0] > 1e-3
        winners[alpha] = finished[0][1]
    assert winners[0.0] == (EOS,)
    assert winners[2.0] == (2, 3, EOS)


@pytest.mark.parametrize("alpha", ALPHAS)
def test_length_penalty_changes_the_winner(alpha):
    _check_top1(
        _markov_model(LENGTH_TABLE), _markov_step(LENGTH_TABLE), None, 4, 4, alpha
    )


@pytest.mark.parametrize("alpha", ALPHAS)
def test_best_finished_beats_more_probable_alive(alpha):
    model = _markov_model(RARE_EOS_TABLE)
    finished, alive = ref.brute_force(model, 0, 3, 4, alpha, EOS)
    # The case is meaningful: alive hypotheses outscore every finished one.
    assert alive[0][0] > finished[0][0] + 1.0
    tokens = _check_top1(model, _markov_step(RARE_EOS_TABLE), None, 3, 4, alpha)
    assert tokens[-1] == EOS


def test_no_finished_hypothesis_returns_alive():
    """EOS is impossible (-inf logits): the alive hypotheses are returned,
    scored with the penalty of the full length."""
    rng = np.random.default_rng(3)
    table = rng.normal(size=(4, 4)).astype("float32")
    table[:, EOS] = -np.inf
    model = _markov_model(table)
    finished, alive = ref.brute_force(model, 0, 4, 3, 0.6, EOS)
    assert not finished
    ids, scores = beam_search(
        _markov_step(table),
        np.zeros(1, "int32"),
        None,
        vocab_size=4,
        max_decode_length=3,
        beam_size=_exhaustive_beam(4, 3),
        alpha=0.6,
        return_all_beams=True,
    )
    beam = _exhaustive_beam(4, 3)
    np.testing.assert_array_equal(_np(ids)[0], [ref.padded(t, 3) for _, t in alive[:beam]])
    np.testing.assert_allclose(_np(scores)[0], [s for s, _ in alive[:beam]], rtol=1e-5)


@pytest.mark.parametrize("alpha", ALPHAS)
@pytest.mark.parametrize("seed", [0, 1])
def test_all_beams_match_brute_force(seed, alpha):
    """Every finished hypothesis, in order; unused slots are (0s, -inf)."""
    vocab_size, max_length = 4, 3
    beam = _exhaustive_beam(vocab_size, max_length)  # 18 > 13 finished ones
    table = np.random.default_rng(seed).normal(scale=2.0, size=(4, 4)).astype("float32")
    finished, _ = ref.brute_force(_markov_model(table), 0, vocab_size, max_length, alpha, EOS)
    assert len(finished) < beam
    want_ids = np.zeros((beam, max_length), dtype=np.int64)
    want_scores = np.full(beam, -np.inf)
    for k, (score, tokens) in enumerate(finished):
        want_ids[k] = ref.padded(tokens, max_length)
        want_scores[k] = score
    ids, scores = beam_search(
        _markov_step(table),
        np.zeros(1, "int32"),
        None,
        vocab_size=vocab_size,
        max_decode_length=max_length,
        beam_size=beam,
        alpha=alpha,
        return_all_beams=True,
    )
    np.testing.assert_array_equal(_np(ids)[0], want_ids)
    np.testing.assert_allclose(_np(scores)[0], want_scores, rtol=1e-5)


@pytest.mark.parametrize("alpha", ALPHAS)
def test_cache_is_gathered_with_the_beams(alpha):
    """Logits depend on the running sum kept in the cache; a cache left in
    the wrong beam order would change the scores."""
    rng = np.random.default_rng(10 + int(alpha * 10))
    markov, bias = _random_history(rng, 1, 3, 3)
    _check_top1(
        _history_model(markov[0], bias[0]),
        _history_step(3, 3),
        _history_cache(markov, bias),
        3,
        4,
        alpha,
    )


# ---------------------------------------------------------------------------
# Narrow beams against the list-based tensor2tensor algorithm.


@pytest.mark.parametrize(
    "seed,beam_size,alpha", [(0, 2, 0.6), (1, 3, 0.0), (2, 2, 2.0), (3, 3, 1.0)]
)
def test_narrow_beams_match_reference_beam_search(seed, beam_size, alpha):
    """Two rows with their own tables (tiled cache leaves of rank 3) and
    different initial ids; vocabulary 6, up to 6 tokens."""
    vocab_size, max_length, batch = 6, 6, 2
    rng = np.random.default_rng(seed)
    markov, bias = _random_history(rng, batch, vocab_size, 4)
    initial_ids = np.array([0, 3], dtype="int32")
    ids, scores = beam_search(
        _history_step(vocab_size, 4),
        initial_ids,
        _history_cache(markov, bias),
        vocab_size=vocab_size,
        max_decode_length=max_length,
        beam_size=beam_size,
        alpha=alpha,
        return_all_beams=True,
    )
    for b in range(batch):
        want = ref.beam_search(
            _history_model(markov[b], bias[b]),
            int(initial_ids[b]),
            vocab_size,
            max_length,
            beam_size,
            alpha,
            EOS,
        )
        want_ids = np.zeros((beam_size, max_length), dtype=np.int64)
        want_scores = np.full(beam_size, -np.inf)
        for k, (score, tokens) in enumerate(want):
            want_ids[k] = ref.padded(tokens, max_length)
            want_scores[k] = score
        np.testing.assert_array_equal(_np(ids)[b], want_ids)
        np.testing.assert_allclose(_np(scores)[b], want_scores, rtol=1e-5)


# Continuing is likely but each step costs log-probability: [EOS] finishes
# at once, and the alive chains 2, 2, ... soon have a lower log-probability
# than its score. With alpha = 2 the longest chain still wins: an early stop
# must allow for the largest length penalty.
LATE_TABLE = _table_from_probs(
    [
        [0.05, 0.30, 0.65],  # after 0 (the start)
        [0.30, 0.40, 0.30],  # after EOS (never used)
        [0.05, 0.15, 0.80],  # after 2
    ]
)


@pytest.mark.parametrize("return_all_beams", [False, True])
def test_long_winner_is_not_cut_off_by_early_stopping(return_all_beams):
    max_length = 12
    want = ref.beam_search(_markov_model(LATE_TABLE), 0, 3, max_length, 2, 2.0, EOS)
    # The case is meaningful: the winner is found at the very last step,
    # long after the best alive log-probability fell below [EOS]'s score.
    assert len(want[0][1]) == max_length
    assert ref.sequence_log_prob(_markov_model(LATE_TABLE), 0, (2,) * 6) < math.log(0.3)
    ids, scores = beam_search(
        _markov_step(LATE_TABLE),
        np.zeros(1, "int32"),
        None,
        vocab_size=3,
        max_decode_length=max_length,
        beam_size=2,
        alpha=2.0,
        return_all_beams=return_all_beams,
    )
    if return_all_beams:
        np.testing.assert_array_equal(_np(ids)[0], [ref.padded(t, max_length) for _, t in want])
        np.testing.assert_allclose(_np(scores)[0], [s for s, _ in want], rtol=1e-5)
    else:
        np.testing.assert_array_equal(_np(ids)[0], ref.padded(want[0][1], max_length))
        np.testing.assert_allclose(_np(scores)[0], want[0][0], rtol=1e-5)


# ---------------------------------------------------------------------------
# Batching, beam_size=1, all beams.


def test_batch_rows_are_independent():
    vocab_size, modulus, batch = 5, 3, 3
    markov, bias = _random_history(np.random.default_rng(7), batch, vocab_size, modulus)
    initial_ids = np.array([0, 2, 4], dtype="int32")
    kwargs = dict(vocab_size=vocab_size, max_decode_length=5, beam_size=3, alpha=0.6)
    step_fn = _history_step(vocab_size, modulus)
    ids, scores = beam_search(step_fn, initial_ids, _history_cache(markov, bias), **kwargs)
    for b in range(batch):
        row_ids, row_scores = beam_search(
            step_fn,
            initial_ids[b : b + 1],
            _history_cache(markov[b : b + 1], bias[b : b + 1]),
            **kwargs,
        )
        np.testing.assert_array_equal(_np(ids)[b], _np(row_ids)[0])
        np.testing.assert_allclose(_np(scores)[b], _np(row_scores)[0], rtol=1e-6)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_beam_size_one_is_greedy(seed):
    vocab_size, max_length, batch = 5, 6, 3
    rng = np.random.default_rng(seed)
    markov, bias = _random_history(rng, batch, vocab_size, 2)
    # Make EOS likely enough that some rows stop before the others.
    markov[:, :, EOS] += 2.5
    step_fn = _history_step(vocab_size, 2)
    initial_ids = np.zeros(batch, "int32")
    greedy_ids, greedy_scores = greedy_search(
        step_fn, initial_ids, _history_cache(markov, bias), max_decode_length=max_length
    )
    beam_ids, beam_scores = beam_search(
        step_fn,
        initial_ids,
        _history_cache(markov, bias),
        vocab_size=vocab_size,
        max_decode_length=max_length,
        beam_size=1,
        alpha=0.6,
    )
    np.testing.assert_array_equal(_np(beam_ids), _np(greedy_ids))
    lengths = []
    for b in range(batch):
        want_score, want_tokens = ref.greedy_search(
            _history_model(markov[b], bias[b]), 0, max_length, EOS
        )
        lengths.append(len(want_tokens))
        np.testing.assert_array_equal(_np(greedy_ids)[b], ref.padded(want_tokens, max_length))
        np.testing.assert_allclose(_np(greedy_scores)[b], want_score, rtol=1e-5)
        np.testing.assert_allclose(
            _np(beam_scores)[b], want_score / ref.length_penalty(len(want_tokens), 0.6), rtol=1e-5
        )
    # The case is meaningful: one row stopped early while another ran on.
    assert min(lengths) < max_length == max(lengths)


def test_return_all_beams_sorted_and_consistent_with_top_beam():
    vocab_size, batch, beam = 6, 2, 4
    markov, bias = _random_history(np.random.default_rng(5), batch, vocab_size, 3)
    kwargs = dict(vocab_size=vocab_size, max_decode_length=6, beam_size=beam, alpha=0.6)
    step_fn = _history_step(vocab_size, 3)
    initial_ids = np.zeros(batch, "int32")
    all_ids, all_scores = beam_search(
        step_fn, initial_ids, _history_cache(markov, bias), return_all_beams=True, **kwargs
    )
    ids, scores = beam_search(step_fn, initial_ids, _history_cache(markov, bias), **kwargs)
    all_ids, all_scores = _np(all_ids), _np(all_scores)
    assert all_ids.shape == (batch, beam, 6) and all_ids.dtype == np.int32
    assert all_scores.shape == (batch, beam) and all_scores.dtype == np.float32
    assert np.all(np.diff(all_scores, axis=1) <= 0)
    np.testing.assert_array_equal(all_ids[:, 0], _np(ids))
    np.testing.assert_allclose(all_scores[:, 0], _np(scores), rtol=1e-6)
    # Finished hypotheses contain one EOS, at the end, and then only 0s.
    for row in all_ids.reshape(-1, 6):
        (eos_at,) = np.nonzero(row == EOS)
        assert len(eos_at) == 1
        assert np.all(row[eos_at[0] + 1 :] == 0)


def test_greedy_stops_each_row_at_its_eos():
    # Row 0 emits 2, 2, 2, ...; row 1 emits 3 then EOS.
    table = np.full((4, 4), -5.0, dtype="float32")
    table[0, 2] = table[2, 2] = 0.0
    table[0, 3] = -1.0
    table[3, EOS] = 0.0
    ids, scores = greedy_search(
        _markov_step(table), np.array([0, 3], "int32"), None, max_decode_length=4
    )
    np.testing.assert_array_equal(_np(ids), [[2, 2, 2, 2], [EOS, 0, 0, 0]])
    model = _markov_model(table)
    want = [ref.sequence_log_prob(model, 0, (2, 2, 2, 2)), ref.sequence_log_prob(model, 3, (EOS,))]
    np.testing.assert_allclose(_np(scores), want, rtol=1e-5)


def test_length_penalty_values():
    np.testing.assert_allclose(
        _np(length_penalty(np.array([1, 4, 7]), 0.6)),
        [ref.length_penalty(n, 0.6) for n in (1, 4, 7)],
        rtol=1e-6,
    )
    np.testing.assert_allclose(_np(length_penalty(3, 0.0)), 1.0)


@pytest.mark.skipif(
    backend.backend() != "tensorflow", reason="counts eager TensorFlow loop steps"
)
def test_stops_early_when_no_alive_hypothesis_can_win():
    """EOS is almost certain at once: the loop ends long before 50 steps,
    with the result of the full run."""
    table = np.full((4, 4), -8.0, dtype="float32")
    table[:, EOS] = 0.0
    steps = []

    def step_fn(ids, cache, index):
        steps.append(int(index))
        return _markov_step(table)(ids, cache, index)

    for return_all_beams in (False, True):
        steps.clear()
        ids, _ = beam_search(
            step_fn,
            np.zeros(2, "int32"),
            None,
            vocab_size=4,
            max_decode_length=50,
            beam_size=2,
            return_all_beams=return_all_beams,
        )
        assert len(steps) < 5
        want = ref.beam_search(_markov_model(table), 0, 4, 50, 2, 0.6, EOS)
        got = _np(ids)[0, 0] if return_all_beams else _np(ids)[0]
        np.testing.assert_array_equal(got, ref.padded(want[0][1], 50))


# ---------------------------------------------------------------------------
# Compilation.


def test_jit_matches_eager():
    vocab_size, batch = 5, 2
    markov, bias = _random_history(np.random.default_rng(11), batch, vocab_size, 3)
    step_fn = _history_step(vocab_size, 3)
    initial_ids = np.array([0, 2], "int32")

    def decode(initial_ids, markov, bias):
        cache = {"total": ops.zeros_like(initial_ids), "tables": (markov, bias)}
        kwargs = dict(vocab_size=vocab_size, max_decode_length=5, alpha=0.6)
        top = beam_search(step_fn, initial_ids, cache, beam_size=3, **kwargs)
        every = beam_search(
            step_fn, initial_ids, cache, beam_size=3, return_all_beams=True, **kwargs
        )
        greedy = greedy_search(step_fn, initial_ids, cache, max_decode_length=5)
        return (*top, *every, *greedy)

    eager = decode(initial_ids, markov, bias)
    compiled = jit(decode)(initial_ids, markov, bias)
    for want, got in zip(eager, compiled):
        np.testing.assert_allclose(_np(got), _np(want), rtol=1e-5)


@pytest.mark.skipif(backend.backend() != "tensorflow", reason="TensorFlow shape inference")
def test_unknown_batch_size_in_tf_function():
    import tensorflow as tf

    table = np.random.default_rng(4).normal(size=(4, 4)).astype("float32")
    kwargs = dict(vocab_size=4, max_decode_length=4, beam_size=2)

    @tf.function(input_signature=[tf.TensorSpec([None], tf.int32)])
    def decode(initial_ids):
        return beam_search(_markov_step(table), initial_ids, {"ids": initial_ids}, **kwargs)

    initial_ids = np.array([0, 2, 3], "int32")
    got = decode(initial_ids)
    want = beam_search(_markov_step(table), initial_ids, None, **kwargs)
    np.testing.assert_array_equal(_np(got[0]), _np(want[0]))


# ---------------------------------------------------------------------------
# Arguments.


@pytest.mark.parametrize(
    "overrides,name",
    [
        (dict(beam_size=0), "beam_size"),
        (dict(beam_size=2.0), "beam_size"),
        (dict(max_decode_length=0), "max_decode_length"),
        (dict(alpha=-0.1), "alpha"),
        (dict(vocab_size=0), "vocab_size"),
        (dict(eos_id=4), "eos_id"),
    ],
)
def test_bad_arguments_raise(overrides, name):
    kwargs = dict(vocab_size=4, max_decode_length=3, beam_size=2, alpha=0.6, eos_id=EOS)
    kwargs.update(overrides)
    with pytest.raises(ValueError, match=f"`{name}`"):
        beam_search(_markov_step(LENGTH_TABLE), np.zeros(1, "int32"), None, **kwargs)


def test_greedy_bad_arguments_raise():
    step_fn = _markov_step(LENGTH_TABLE)
    with pytest.raises(ValueError, match="`max_decode_length`"):
        greedy_search(step_fn, np.zeros(1, "int32"), None, max_decode_length=0)
    with pytest.raises(ValueError, match="`eos_id`"):
        greedy_search(step_fn, np.zeros(1, "int32"), None, max_decode_length=2, eos_id=-1)
    with pytest.raises(ValueError, match="`initial_ids`"):
        greedy_search(step_fn, np.zeros((1, 1), "int32"), None, max_decode_length=2)
