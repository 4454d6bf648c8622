"""Tests of `QuestionEncoder` (MCAN's embedding + LSTM question encoder).

Against a NumPy LSTM written from the Keras cell (gates i, f, c, o;
sigmoid recurrent activation, tanh activation) run over every step,
padding included; the prepended token; the mask; GloVe rows; config.
"""

import keras
import numpy as np
import pytest
from keras import ops

from keras_structattn.layers.question_encoder import QuestionEncoder

VOCAB, WORD, HIDDEN = 7, 5, 4


def to_np(x):
    return np.asarray(ops.convert_to_numpy(x), dtype=np.float64)


def sigmoid(x):
    return 1.0 / (1.0 + np.exp(-x))


def numpy_lstm(x, kernel, recurrent, bias):
    """`[B, T, C] -> [B, T, H]`, the Keras LSTM cell from zero states."""
    batch, steps, _ = x.shape
    units = recurrent.shape[0]
    h = np.zeros((batch, units))
    c = np.zeros((batch, units))
    outputs = []
    for t in range(steps):
        z = x[:, t] @ kernel + h @ recurrent + bias
        i, f, g, o = (z[:, k * units:(k + 1) * units] for k in range(4))
        c = sigmoid(f) * c + sigmoid(i) * np.tanh(g)
        h = sigmoid(o) * np.tanh(c)
        outputs.append(h)
    return np.stack(outputs, axis=1)


QUESTION = np.array([[3, 1, 6, 0, 0], [2, 2, 2, 5, 4]], dtype="int32")


@pytest.mark.parametrize("prepend_token", [False, True])
def test_matches_numpy_lstm(prepend_token):
    rng = np.random.default_rng(0)
    glove = rng.normal(size=(VOCAB, WORD)).astype("float32")
    encoder = QuestionEncoder(
        VOCAB, HIDDEN, word_dim=WORD, embeddings=glove, prepend_token=prepend_token, seed=1
    )
    output = to_np(encoder(QUESTION))
    # The GloVe rows are the initial embeddings.
    np.testing.assert_allclose(to_np(encoder.embedding.embeddings), glove)
    # Non-zero biases, so the gate order matters.
    lstm = encoder.lstm.cell
    lstm.bias.assign(rng.normal(size=lstm.bias.shape).astype("float32"))
    output = to_np(encoder(QUESTION))
    words = glove[QUESTION].astype(np.float64)
    if prepend_token:
        token = to_np(encoder.token)
        words = np.concatenate([np.broadcast_to(token, (2, 1, WORD)), words], axis=1)
    expected = numpy_lstm(words, to_np(lstm.kernel), to_np(lstm.recurrent_kernel), to_np(lstm.bias))
    assert output.shape == (2, QUESTION.shape[1] + prepend_token, HIDDEN)
    np.testing.assert_allclose(output, expected, atol=1e-5)


def test_prepended_token_comes_first_and_mask():
    encoder = QuestionEncoder(VOCAB, HIDDEN, word_dim=WORD, prepend_token=True, seed=2)
    encoder(QUESTION)
    encoder.token.assign(np.full((WORD,), 3.0, "float32"))
    output = to_np(encoder(QUESTION))
    # The first step sees the token alone: the same for both questions.
    np.testing.assert_allclose(output[0, 0], output[1, 0], atol=1e-6)
    kernel = to_np(encoder.lstm.cell.kernel)
    bias = to_np(encoder.lstm.cell.bias)
    expected = numpy_lstm(np.full((1, 1, WORD), 3.0), kernel, np.zeros((HIDDEN, 4 * HIDDEN)), bias)
    np.testing.assert_allclose(output[0, 0], expected[0, 0], atol=1e-5)
    mask = ops.convert_to_numpy(encoder.question_mask(QUESTION))
    np.testing.assert_array_equal(
        mask, [[True, True, True, True, False, False], [True] * 6]
    )
    plain = QuestionEncoder(VOCAB, HIDDEN, word_dim=WORD)
    np.testing.assert_array_equal(ops.convert_to_numpy(plain.question_mask(QUESTION)),
                                  QUESTION != 0)


def test_config_round_trip_and_checks():
    encoder = QuestionEncoder(VOCAB, HIDDEN, word_dim=WORD, prepend_token=True, seed=3)
    encoder(QUESTION)
    clone = QuestionEncoder.from_config(encoder.get_config())
    clone(QUESTION)
    clone.set_weights(encoder.get_weights())
    np.testing.assert_allclose(to_np(clone(QUESTION)), to_np(encoder(QUESTION)), atol=1e-6)
    # The same seed gives the same initial weights.
    again = QuestionEncoder(VOCAB, HIDDEN, word_dim=WORD, prepend_token=True, seed=3)
    again(QUESTION)
    for a, b in zip(again.get_weights(), encoder.get_weights()):
        np.testing.assert_array_equal(a, b)
    with pytest.raises(ValueError, match="embeddings"):
        QuestionEncoder(VOCAB, HIDDEN, word_dim=WORD, embeddings=np.zeros((VOCAB, WORD + 1)))
    assert keras.saving.get_registered_object("keras_structattn>QuestionEncoder")
