"""Ancestral sampling (`sample_search`), checked against a NumPy loop that
inverts each step's cumulative distribution, and statistically against the
model's own probabilities."""

import numpy as np
import pytest
from keras import ops

from keras_structattn.decoding import sample_search
from tests._backend import jit
from tests.decoding import reference as ref
from tests.decoding.test_beam_search import _history_cache
from tests.decoding.test_beam_search import _history_model
from tests.decoding.test_beam_search import _history_step
from tests.decoding.test_beam_search import _random_history

EOS = 1


def _np(x):
    return np.asarray(ops.convert_to_numpy(x))


def _reference_samples(models, initial_ids, uniforms, temperature=1.0):
    """Per row: draw token i as the first v with cdf(v) > u[i] (float64)."""
    rows, row_log_probs = [], []
    for model, start, us in zip(models, initial_ids, uniforms):
        prefix, tokens, log_probs = (int(start),), [], []
        for u in us:
            log_p = model(prefix)
            cdf = np.cumsum(np.exp(ref.log_softmax(log_p / temperature)))
            token = min(int(np.sum(cdf <= u * cdf[-1])), len(cdf) - 1)
            tokens.append(token)
            log_probs.append(log_p[token])
            prefix += (token,)
            if token == EOS:
                break
        pad = len(us) - len(tokens)
        rows.append(tokens + [0] * pad)
        row_log_probs.append(log_probs + [0.0] * pad)
    return np.array(rows), np.array(row_log_probs)


def _row_models(markov, bias):
    return [_history_model(m, b) for m, b in zip(markov, bias)]


@pytest.mark.parametrize("temperature", [1.0, 0.5])
def test_matches_numpy_inverse_cdf(temperature):
    rng = np.random.default_rng(3)
    batch, vocab, length = 6, 5, 7
    markov, bias = _random_history(rng, batch, vocab, 3)
    initial_ids = rng.integers(0, vocab, batch).astype("int32")
    uniforms = rng.random((batch, length)).astype("float32")
    ids, log_probs = sample_search(
        _history_step(vocab, 3), initial_ids, _history_cache(markov, bias),
        uniforms=uniforms, temperature=temperature,
    )
    want_ids, want_log_probs = _reference_samples(
        _row_models(markov, bias), initial_ids, uniforms, temperature
    )
    np.testing.assert_array_equal(_np(ids), want_ids)
    np.testing.assert_allclose(_np(log_probs), want_log_probs, atol=1e-5)


def test_draws_follow_the_model_distribution():
    # 4,000 rows share one Markov table: the first token's frequencies must
    # match its softmax (each within 4 standard errors).
    rng = np.random.default_rng(0)
    vocab, rows = 4, 4000
    logits = np.array([0.5, -1.0, 1.5, 0.0], "float32")
    table = np.tile(logits, (vocab, 1))

    def step_fn(ids, cache, index):
        return ops.take(ops.convert_to_tensor(table), ids[:, 0], axis=0), cache

    ids, _ = sample_search(
        step_fn, np.zeros(rows, "int32"), None, uniforms=rng.random((rows, 1)).astype("float32")
    )
    counts = np.bincount(_np(ids)[:, 0], minlength=vocab) / rows
    p = np.exp(ref.log_softmax(logits))
    np.testing.assert_array_less(np.abs(counts - p), 4 * np.sqrt(p * (1 - p) / rows))


def test_stops_at_eos_and_compiles():
    rng = np.random.default_rng(5)
    batch, vocab, length = 8, 4, 6
    markov, bias = _random_history(rng, batch, vocab, 2)
    markov[:, :, EOS] += 2.0  # EOS likely: most rows stop early
    initial_ids = np.zeros(batch, "int32")
    uniforms = rng.random((batch, length)).astype("float32")
    step_fn = _history_step(vocab, 2)

    def draw(initial_ids, markov, bias, uniforms):
        cache = {"total": ops.zeros_like(initial_ids), "tables": (markov, bias)}
        return sample_search(step_fn, initial_ids, cache, uniforms=uniforms)

    eager = draw(initial_ids, markov, bias, uniforms)
    compiled = jit(draw)(initial_ids, markov, bias, uniforms)
    ids = _np(eager[0])
    np.testing.assert_array_equal(_np(compiled[0]), ids)
    np.testing.assert_allclose(_np(compiled[1]), _np(eager[1]), atol=1e-6)
    for row, row_log_probs in zip(ids, _np(eager[1])):
        ends = np.flatnonzero(row == EOS)
        if len(ends):  # after EOS: zeros, and no log-probability
            assert not row[ends[0] + 1:].any()
            assert not row_log_probs[ends[0] + 1:].any()
    assert (ids == EOS).any(axis=1).sum() >= batch // 2


@pytest.mark.parametrize(
    "kwargs, match",
    [
        (dict(temperature=0.0), "temperature"),
        (dict(uniforms=np.zeros((2,), "float32")), "uniforms"),
    ],
)
def test_bad_arguments_raise(kwargs, match):
    table = np.zeros((3, 3), "float32")

    def step_fn(ids, cache, index):
        return ops.take(ops.convert_to_tensor(table), ids[:, 0], axis=0), cache

    arguments = dict(uniforms=np.zeros((2, 3), "float32"))
    arguments.update(kwargs)
    with pytest.raises(ValueError, match=match):
        sample_search(step_fn, np.zeros(2, "int32"), None, **arguments)
