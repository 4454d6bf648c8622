"""Tests of `keras_structattn.ops.kmeans` (the K-means initialiser of CATT, seed 001).

Distances, assignments and inertia are checked against brute-force loops;
the vectorised mini-batch update against Sculley's per-sample update with
learning rate 1 / count; the whole algorithm on well-separated synthetic
clusters (centres recovered up to a permutation), for determinism under a
seed, and for the same result from an array, a `tf.data.Dataset` and a list
of batches.
"""

import math

import numpy as np
import pytest

from keras_structattn.ops import kmeans as km


def loop_distances(x, centers):
    out = np.zeros((len(x), len(centers)))
    for i, row in enumerate(x):
        for j, center in enumerate(centers):
            out[i, j] = sum((float(a) - float(b)) ** 2 for a, b in zip(row, center))
    return out


def loop_assign(x, centers):
    labels, distances = [], []
    for row in x:
        best, best_d = None, math.inf
        for j, center in enumerate(centers):
            d = sum((float(a) - float(b)) ** 2 for a, b in zip(row, center))
            if d < best_d:
                best, best_d = j, d
        labels.append(best)
        distances.append(best_d)
    return np.array(labels), np.array(distances)


def clusters(seed, n_clusters=6, per_cluster=200, dim=5, spread=20.0, noise=0.3):
    rng = np.random.default_rng(seed)
    true = rng.uniform(-spread, spread, size=(n_clusters, dim))
    labels = rng.integers(0, n_clusters, size=n_clusters * per_cluster)
    x = true[labels] + rng.normal(scale=noise, size=(len(labels), dim))
    return x.astype("float32"), true, labels


def matched(true, found, tolerance):
    """True iff each true centre has its own found centre within `tolerance`."""
    distances = np.sqrt(loop_distances(true, found))
    nearest = distances.argmin(axis=1)
    return sorted(nearest) == list(range(len(found))) and distances.min(axis=1).max() < tolerance


def test_distances_assignments_and_inertia_match_loops():
    rng = np.random.default_rng(0)
    x = rng.normal(size=(40, 3)).astype("float32")
    centers = rng.normal(size=(5, 3)).astype("float32")
    np.testing.assert_allclose(km.pairwise_squared_distances(x, centers),
                               loop_distances(x, centers), rtol=1e-5, atol=1e-5)
    labels, distances = km.assign(x, centers)
    expected_labels, expected_distances = loop_assign(x, centers)
    np.testing.assert_array_equal(labels, expected_labels)
    np.testing.assert_allclose(distances, expected_distances, rtol=1e-6)
    assert km.inertia(x, centers) == pytest.approx(expected_distances.sum(), rel=1e-6)


def test_exact_distance_for_a_point_on_its_centre():
    """The reported distance is recomputed from the difference: a row equal
    to a centre far from the origin has distance 0, not cancellation noise."""
    x = np.full((1, 64), 1000.0, "float32")
    _, distances = km.assign(x, np.concatenate([x, -x]))
    assert distances[0] == 0.0


def test_minibatch_update_is_sculley_running_mean():
    """The vectorised update equals Sculley's loop: per sample, v[c] += 1,
    eta = 1 / v[c], c <- (1 - eta) c + eta x, with labels fixed per batch."""
    rng = np.random.default_rng(1)
    centers = rng.normal(size=(4, 3))
    counts = np.array([0, 3, 1, 0])
    batch = rng.normal(size=(30, 3)).astype("float32")
    labels = rng.integers(0, 3, size=30)  # centre 3 gets nothing
    expected_centers, expected_counts = centers.copy(), counts.copy()
    for row, label in zip(batch, labels):
        expected_counts[label] += 1
        eta = 1.0 / expected_counts[label]
        expected_centers[label] = (1 - eta) * expected_centers[label] + eta * row
    km._update(centers, counts, batch, labels)
    np.testing.assert_allclose(centers, expected_centers, rtol=1e-10, atol=1e-12)
    np.testing.assert_array_equal(counts, expected_counts)


def test_kmeans_plus_plus_is_seeded_and_picks_distinct_rows():
    x, _, _ = clusters(2)
    a, ia = km.kmeans_plus_plus(x, 6, seed=3)
    b, ib = km.kmeans_plus_plus(x, 6, seed=3)
    c, ic = km.kmeans_plus_plus(x, 6, seed=4)
    np.testing.assert_array_equal(ia, ib)
    np.testing.assert_array_equal(a, x[ia])
    assert len(set(ia.tolist())) == 6
    assert not np.array_equal(ia, ic)


@pytest.mark.parametrize("local_trials", [1, None])
def test_kmeans_plus_plus_seeds_one_point_per_separated_cluster(local_trials):
    x, _, labels = clusters(5, n_clusters=8)
    for seed in range(3):
        _, indices = km.kmeans_plus_plus(x, 8, seed=seed, local_trials=local_trials)
        assert sorted(labels[indices]) == list(range(8))


def test_kmeans_plus_plus_with_duplicate_rows():
    x = np.repeat(np.eye(3, dtype="float32"), 5, axis=0)
    centers, indices = km.kmeans_plus_plus(x, 5, seed=0)
    assert len(set(indices.tolist())) == 5  # distinct rows, repeated values
    assert {tuple(c) for c in centers} == {tuple(r) for r in np.eye(3)}


def test_recovers_centres_of_separated_clusters():
    x, true, _ = clusters(6)
    result = km.minibatch_kmeans(x, 6, batch_size=100, seed=0)
    assert matched(true, result.centers, tolerance=0.1)
    # The exact inertia of the final centres, about n * dim * noise**2.
    assert result.inertia == pytest.approx(loop_assign(x, result.centers)[1].sum(), rel=1e-5)
    assert result.inertia == pytest.approx(len(x) * 5 * 0.3**2, rel=0.1)
    assert result.counts.sum() == 3 * len(x)  # three epochs
    assert len(result.history) == 3 and result.history[-1] <= result.history[0] * 1.01


def test_more_centres_than_clusters_still_cover_every_cluster():
    x, true, _ = clusters(7, n_clusters=4)
    centers = km.minibatch_kmeans(x, 10, batch_size=64, seed=1).centers
    distances = np.sqrt(loop_distances(true, centers))
    assert distances.min(axis=1).max() < 1.0


def test_same_seed_same_centres():
    rng = np.random.default_rng(8)
    x = rng.normal(size=(500, 4)).astype("float32")  # no clusters: the seed matters
    run = lambda seed: km.minibatch_kmeans(x, 7, batch_size=64, seed=seed)  # noqa: E731
    a, b, c = run(11), run(11), run(12)
    np.testing.assert_array_equal(a.centers, b.centers)
    assert a.inertia == b.inertia and a.history == b.history
    assert not np.allclose(a.centers, c.centers)


def test_array_dataset_and_list_give_the_same_centres():
    import tensorflow as tf

    x, _, _ = clusters(9, per_cluster=50)
    options = dict(seed=5, shuffle=False, epochs=2)
    from_array = km.minibatch_kmeans(x, 6, batch_size=64, **options)
    dataset = tf.data.Dataset.from_tensor_slices(x).batch(64)
    from_dataset = km.minibatch_kmeans(dataset, 6, **options)
    labelled = tf.data.Dataset.from_tensor_slices((x, np.zeros(len(x)))).batch(64)
    from_pairs = km.minibatch_kmeans(labelled, 6, **options)
    from_list = km.minibatch_kmeans([x[i : i + 64] for i in range(0, len(x), 64)], 6, **options)
    for other in (from_dataset, from_pairs, from_list):
        np.testing.assert_array_equal(other.centers, from_array.centers)
        assert other.inertia == pytest.approx(from_array.inertia, rel=1e-9)


def test_zero_rows_are_skipped_and_leading_axes_flattened():
    """[N, 2, d] features whose second item is zero padding: the same result
    as the [N, d] non-zero rows (with matching batches)."""
    x, _, _ = clusters(10, per_cluster=40)
    padded = np.stack([x, np.zeros_like(x)], axis=1)  # [N, 2, d]
    options = dict(seed=2, shuffle=False)
    plain = km.minibatch_kmeans(x, 6, batch_size=50, **options)
    skipped = km.minibatch_kmeans(padded, 6, batch_size=100, **options)
    np.testing.assert_array_equal(skipped.centers, plain.centers)
    kept = km.minibatch_kmeans(padded, 7, batch_size=100, ignore_zero_rows=False, **options)
    assert np.abs(kept.centers).sum(axis=1).min() < 0.05  # a centre for the zeros


def test_steps_limits_the_batches_read():
    """With steps=2 only the first two batches are seen: a far-away cluster
    in the third batch gets no centre."""
    near, _, _ = clusters(12, n_clusters=3, per_cluster=100)
    far = near[:100] + 1000.0
    x = np.concatenate([near[:200], far])
    limited = km.minibatch_kmeans(x, 3, batch_size=100, steps=2, shuffle=False, seed=0)
    assert np.abs(limited.centers).max() < 100
    full = km.minibatch_kmeans(x, 3, batch_size=100, shuffle=False, seed=0)
    assert np.abs(full.centers).max() > 500


def test_no_inertia_pass_and_verbose(capsys):
    x, _, _ = clusters(13, per_cluster=20)
    result = km.minibatch_kmeans(x, 6, batch_size=32, epochs=1, compute_inertia=False,
                                 seed=0, verbose=1)
    assert result.inertia is None and len(result.history) == 1
    assert "epoch 1/1" in capsys.readouterr().out


@pytest.mark.parametrize(
    "call, match",
    [
        (lambda x: km.minibatch_kmeans(x, 0), "`k`"),
        (lambda x: km.minibatch_kmeans(x, 500), "at least 500"),
        (lambda x: km.minibatch_kmeans(x, 6, init_size=3), "init_size"),
        (lambda x: km.minibatch_kmeans(x, 6, batch_size=0), "batch_size"),
        (lambda x: km.minibatch_kmeans(x, 6, steps=0), "steps"),
        (lambda x: km.minibatch_kmeans(x, 6, epochs=-1), "epochs"),
        (lambda x: km.minibatch_kmeans(x[:, 0], 6), r"data\.shape"),
        (lambda x: km.minibatch_kmeans(iter([x]), 6), "one-shot"),
        (lambda x: km.minibatch_kmeans([x], 6, batch_size=8), "batch_size"),
        (lambda x: km.minibatch_kmeans(np.zeros_like(x), 6), "no .*rows"),
        (lambda x: km.kmeans_plus_plus(x, 6, local_trials=0), "local_trials"),
    ],
)
def test_bad_arguments_are_named(call, match):
    x, _, _ = clusters(14, per_cluster=10)
    with pytest.raises(ValueError, match=match):
        call(x)
