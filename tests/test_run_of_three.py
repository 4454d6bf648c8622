"""`keras_structattn.tasks.run_of_three`: the area attention demo's task."""

import numpy as np

from keras_structattn.tasks import run_of_three


def longest_zero_run(seq):
    """Brute-force reference: the longest stretch of adjacent zeros."""
    best = current = 0
    for token in seq:
        current = current + 1 if token == 0 else 0
        best = max(best, current)
    return best


def test_dataset_labels_match_the_rule_and_are_balanced():
    tokens, labels = run_of_three.make_dataset(400, seed=3)
    assert tokens.shape == (400, 24) and labels.shape == (400,)
    runs = [longest_zero_run(seq) >= 3 for seq in tokens]
    np.testing.assert_array_equal(np.array(runs, dtype="int32"), labels)
    assert 0.35 < labels.mean() < 0.65
    # Negatives still contain zeros, so counting them does not solve the task.
    assert all((seq == 0).sum() >= 3 for seq in tokens[labels == 0])


def test_has_run_matches_the_reference():
    rng = np.random.default_rng(0)
    for seq in rng.integers(0, 2, size=(300, 10)):
        assert run_of_three.has_run(seq) == (longest_zero_run(seq) >= 3)


def test_dataset_is_deterministic_for_a_seed():
    a = run_of_three.make_dataset(50, seed=7)
    b = run_of_three.make_dataset(50, seed=7)
    np.testing.assert_array_equal(a[0], b[0])
    np.testing.assert_array_equal(a[1], b[1])


def test_the_model_maps_tokens_to_one_logit():
    tokens, _ = run_of_three.make_dataset(4, length=12, seed=0)
    for positions in (False, True):
        model = run_of_three.build_model(3, length=12, positions=positions)
        assert tuple(model(tokens).shape) == (4, 1)
