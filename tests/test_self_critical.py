"""Self-critical training pieces (`keras_structattn.training.self_critical`), checked
against brute-force NumPy and the policy-gradient formula of Rennie et al.
(2017, arXiv:1612.00563, Eq. 8-9)."""

import numpy as np
import pytest

from keras_structattn.training import self_critical
from keras_structattn.training.losses import PaddedCrossEntropy
from tests._backend import gradients


def test_mean_baseline_is_the_mean_of_the_other_samples():
    rewards = np.random.default_rng(0).random((3, 4))
    got = self_critical.advantages(rewards)
    for b in range(3):
        for k in range(4):
            others = [rewards[b, j] for j in range(4) if j != k]
            assert got[b, k] == pytest.approx(rewards[b, k] - np.mean(others))


def test_greedy_baseline_subtracts_the_image_reward():
    rewards = np.array([[1.0, 2.0], [0.5, 0.0]])
    np.testing.assert_allclose(self_critical.advantages(rewards, [1.5, 0.25]),
                               [[-0.5, 0.5], [0.25, -0.25]])


def test_mean_baseline_needs_two_samples():
    with pytest.raises(ValueError, match="2 samples"):
        self_critical.advantages(np.ones((2, 1)))


def test_training_batch_shifts_and_weights_until_eos():
    ids = np.array([[5, 6, 1, 0], [7, 1, 0, 0]])
    decoder_inputs, targets, weight = self_critical.training_batch(ids, [2.0, -1.0])
    np.testing.assert_array_equal(decoder_inputs, [[0, 5, 6, 1], [0, 7, 1, 0]])
    np.testing.assert_array_equal(targets, ids)
    np.testing.assert_array_equal(weight, [[2, 2, 2, 0], [-1, -1, 0, 0]])


def test_weighted_cross_entropy_is_the_policy_gradient():
    # d loss / d logits of the weighted, unsmoothed cross-entropy must be
    # -(A / n) * (onehot(token) - softmax) on each real token: the gradient
    # of -(r - b) log p(w^s), averaged over the n real tokens.
    rng = np.random.default_rng(1)
    ids = np.array([[3, 2, 1, 0], [4, 1, 0, 0]])
    advantage = np.array([0.7, -1.3])
    _, targets, weight = self_critical.training_batch(ids, advantage)
    logits = rng.normal(size=(2, 4, 5)).astype("float32")
    loss = PaddedCrossEntropy(0.0)

    def total(logits):
        return loss(targets, logits, sample_weight=weight)

    (got,) = gradients(total, logits)
    probs = np.exp(logits - logits.max(-1, keepdims=True))
    probs /= probs.sum(-1, keepdims=True)
    n = np.count_nonzero(targets)
    want = np.zeros_like(probs)
    for b in range(2):
        for t in range(4):
            if targets[b, t]:
                want[b, t] = -(advantage[b] / n) * (np.eye(5)[targets[b, t]] - probs[b, t])
    np.testing.assert_allclose(got, want, atol=1e-6)


def test_uniforms_depend_on_seed_and_step_only():
    a = self_critical.draw_uniforms(3, 10, 4, 5)
    np.testing.assert_array_equal(a, self_critical.draw_uniforms(3, 10, 4, 5))
    assert not np.array_equal(a, self_critical.draw_uniforms(3, 11, 4, 5))
    assert a.dtype == np.float32 and a.shape == (4, 5) and (0 <= a).all() and (a < 1).all()


def test_caption_tokens_stop_at_eos():
    words = {3: "a", 4: "red", 5: "disc"}
    got = self_critical.caption_tokens([[3, 4, 5, 1, 3], [1, 0, 0, 0, 0]], words.__getitem__)
    assert got == [["a", "red", "disc"], []]


def test_sampled_captions_follow_the_models_full_pass():
    """Each sampled token is the inverse-CDF draw from the softmax of the
    teacher-forced full pass over the sampled prefix (no cache): the cached
    sampler tiles the encoder state over the samples correctly."""
    from models.captioning.transformer_captioner import TransformerCaptioner

    rng = np.random.default_rng(2)
    model = TransformerCaptioner(
        vocab_size=9, hidden_size=16, filter_size=32, num_hidden_layers=1, num_heads=2,
        grid_height=3, grid_width=3, num_area_layers=1, max_area_width=2, max_area_height=2,
        layer_prepostprocess_dropout=0.0, attention_dropout=0.0, relu_dropout=0.0, seed=0,
    )
    features = rng.normal(size=(2, 3, 3, 5)).astype("float32")
    samples, length = 3, 5
    uniforms = rng.random((2 * samples, length)).astype("float32")
    ids = np.asarray(self_critical.sample_captions(model, features, uniforms, samples))
    for row in range(2 * samples):
        prefix = [0]
        for step in range(length):
            logits = model((features[row // samples][None], np.array([prefix], "int32")))
            logits = np.asarray(logits, np.float64)[0, -1]
            probs = np.exp(logits - logits.max())
            cdf = np.cumsum(probs / probs.sum())
            token = min(int(np.sum(cdf <= uniforms[row, step] * cdf[-1])), len(cdf) - 1)
            assert ids[row, step] == token, (row, step)
            if token == 1:
                assert not ids[row, step + 1:].any()
                break
            prefix.append(token)
