"""Mini-batch K-means with k-means++ seeding, on the host (NumPy).

Used to initialise the global dictionaries of causal attention (CATT: Yang
et al., 2021, arXiv:2103.03493, Section 3.2): the paper clusters all
training RoI features (or word embeddings) and uses the K centres as the
dictionary. `GlobalDictionary.adapt` calls `minibatch_kmeans`; see
docs/catt_attention.md.

Why NumPy and not `keras.ops`: this is a one-off, host-side preprocessing
pass (like the `adapt` of Keras preprocessing layers), fed batch by batch
from an array or a `tf.data` pipeline that already yields host arrays.
NumPy gives the same centres for a given seed on every backend and device
(a test relies on that), never recompiles for the odd last batch (JAX
would, per shape), and runs k-means++'s K sequential seeding steps as plain
loops. The work is vectorised: one BLAS matrix product per batch for the
distances, sorted segment sums for the centre updates; no Python loop runs
over samples. What it gives up is the GPU, which a pass this size does not
need (`benchmarks/catt_attention.py` times one).

Algorithm (Sculley 2010, "Web-scale k-means clustering"; the update of
scikit-learn's `MiniBatchKMeans`, without its reassignment heuristics):

1. Seeding: greedy k-means++ (Arthur and Vassilvitskii 2007; at each step
   `2 + floor(ln K)` candidates are drawn with probability proportional to
   D(x)^2 and the one that lowers the potential most is kept) on a uniform
   random sample of `init_size` rows of the stream, drawn in one pass by
   random keys (a reservoir sample, so a dataset of unknown length works).
2. Mini-batch updates: each batch is assigned to the nearest centres, and
   each centre becomes the running mean of every point ever assigned to it
   (per-centre learning rate 1 / count), for `epochs` passes.
3. Inertia: the sum of squared distances of all rows to their nearest
   final centre, in a last pass.
"""

import collections
import math

import numpy as np

from keras_structattn import checks

KMeansResult = collections.namedtuple(
    "KMeansResult", ["centers", "inertia", "counts", "history"]
)
KMeansResult.__doc__ = """Result of `minibatch_kmeans`.

Fields:
    centers: float32 `[k, d]`.
    inertia: sum over all rows of the squared distance to the nearest
        centre (float), or None when `compute_inertia=False`.
    counts: int64 `[k]`, rows assigned to each centre over all epochs.
    history: per epoch, the sum over batches of each batch's inertia with
        the centres it was assigned to (before that batch's update); a
        cheap running estimate of the inertia.
"""


def pairwise_squared_distances(x, centers):
    """Squared Euclidean distances `[n, k]` between rows of `x` and `centers`.

    Computed as |x|^2 - 2 x.c + |c|^2 (one matrix product), clipped at 0.

    Args:
        x: `[n, d]` rows (cast to float32).
        centers: `[k, d]` centres (cast to float32).

    Returns:
        float32 `[n, k]`.
    """
    x = np.asarray(x, dtype=np.float32)
    centers = np.asarray(centers, dtype=np.float32)
    distances = x @ centers.T
    distances *= -2.0
    distances += np.einsum("nd,nd->n", x, x)[:, None]
    distances += np.einsum("kd,kd->k", centers, centers)[None, :]
    return np.maximum(distances, 0.0, out=distances)


def assign(x, centers):
    """Nearest centre of each row.

    Args:
        x: `[n, d]` rows.
        centers: `[k, d]` centres.

    Returns:
        `(labels, squared_distances)`: int64 `[n]` (the lowest index on
        ties) and float64 `[n]`, the squared distance to that centre
        recomputed from the difference (exact, unlike the expansion used to
        find the nearest one).
    """
    x = np.asarray(x, dtype=np.float32)
    centers = np.asarray(centers, dtype=np.float32)
    labels = np.argmin(pairwise_squared_distances(x, centers), axis=1)
    diff = x.astype(np.float64) - centers[labels].astype(np.float64)
    return labels, np.einsum("nd,nd->n", diff, diff)


def inertia(x, centers):
    """Sum of squared distances of the rows of `x` to their nearest centre.

    Args:
        x: `[n, d]` rows.
        centers: `[k, d]` centres.

    Returns:
        A Python float.
    """
    return float(assign(x, centers)[1].sum())


def kmeans_plus_plus(x, k, seed=None, local_trials=None):
    """Greedy k-means++ seeding.

    Args:
        x: `[n, d]` rows, n >= k.
        k: number of centres.
        seed: int seed or a `np.random.Generator`.
        local_trials: candidates tried per step; default `2 + floor(ln k)`.
            1 gives plain k-means++.

    Returns:
        `(centers [k, d] float32, indices [k] int64)`: the chosen rows.
    """
    x = np.asarray(x, dtype=np.float32)
    checks.positive_int("k", k)
    if x.ndim != 2 or x.shape[0] < k:
        raise ValueError(
            f"k-means++ needs at least k={k} rows of a [n, d] array. "
            f"Received: x.shape={x.shape}"
        )
    if local_trials is None:
        local_trials = 2 + int(math.log(k))
    checks.positive_int("local_trials", local_trials)
    rng = np.random.default_rng(seed)
    n = x.shape[0]
    sq_norms = np.einsum("nd,nd->n", x, x)
    indices = np.empty(k, dtype=np.int64)
    indices[0] = rng.integers(n)

    def distances_to(rows):
        d = sq_norms[None, :] - 2.0 * (x[rows] @ x.T) + sq_norms[rows][:, None]
        return np.maximum(d, 0.0).astype(np.float64)

    closest = distances_to(indices[:1])[0]
    for i in range(1, k):
        potential = closest.sum()
        if potential > 0:
            cumulative = np.cumsum(closest)
            draws = rng.random(local_trials) * cumulative[-1]
            candidates = np.searchsorted(cumulative, draws, side="right")
            candidates = np.minimum(candidates, n - 1)
        else:  # every row already sits on a centre (duplicates): any unused row
            unused = np.setdiff1d(np.arange(n), indices[:i])
            candidates = rng.choice(unused, size=min(local_trials, len(unused)), replace=False)
        trial = np.minimum(closest[None, :], distances_to(candidates))
        best = int(np.argmin(trial.sum(axis=1)))
        indices[i] = candidates[best]
        closest = trial[best]
    return x[indices].copy(), indices


# ----------------------------------------------------------------- streams


def _is_dataset(data):
    return hasattr(data, "as_numpy_iterator") and hasattr(data, "element_spec")


def _rows(batch, ignore_zero_rows):
    """A batch element as float32 `[n, d]` (leading axes flattened)."""
    if isinstance(batch, (tuple, list)):
        batch = batch[0]  # (features, labels) datasets: the features
    if isinstance(batch, dict):
        raise ValueError(
            "K-means takes arrays of feature vectors; received a dict element. "
            "Map the dataset to the features first."
        )
    batch = np.asarray(batch, dtype=np.float32)
    if batch.ndim < 2:
        raise ValueError(
            "Each batch must be [..., d] with at least a batch axis. "
            f"Received shape {batch.shape}"
        )
    batch = batch.reshape(-1, batch.shape[-1])
    if ignore_zero_rows:
        batch = batch[np.any(batch != 0, axis=1)]
    return batch


class _Stream:
    """Re-iterable batches of rows from an array, a `tf.data.Dataset` or a
    list of batches."""

    def __init__(self, data, batch_size, steps, ignore_zero_rows):
        self.is_dataset = _is_dataset(data)
        self.is_list = isinstance(data, (list, tuple))
        if self.is_dataset or self.is_list:
            if batch_size is not None:
                raise ValueError(
                    "Argument `batch_size` must be None for a tf.data.Dataset "
                    "or a list of batches (batch the data instead). "
                    f"Received: batch_size={batch_size!r}"
                )
            self.data = data
        elif not hasattr(data, "shape"):
            raise ValueError(
                "Argument `data` must be an array, a tf.data.Dataset or a list "
                "of batches (several passes are made, so a one-shot iterator "
                f"does not do). Received: {type(data).__name__}"
            )
        else:
            array = np.asarray(data, dtype=np.float32)
            if array.ndim < 2:
                raise ValueError(
                    "Argument `data` must be [..., d] feature vectors or a "
                    f"tf.data.Dataset. Received: data.shape={array.shape}"
                )
            self.data = array.reshape(-1, array.shape[-1])
            batch_size = 1024 if batch_size is None else batch_size
            checks.positive_int("batch_size", batch_size)
        if steps is not None:
            checks.positive_int("steps", steps)
        self.batch_size = batch_size
        self.steps = steps
        self.ignore_zero_rows = ignore_zero_rows

    def __iter__(self):
        return self.batches()

    def batches(self, rng=None):
        """Yields float32 `[n, d]` batches; `rng` shuffles an array's rows."""
        if self.is_dataset or self.is_list:
            if self.is_list:
                data = self.data[: self.steps]
            else:
                data = self.data if self.steps is None else self.data.take(self.steps)
                data = data.as_numpy_iterator()
            for element in data:
                rows = _rows(element, self.ignore_zero_rows)
                if len(rows):
                    yield rows
            return
        n = len(self.data)
        order = None if rng is None else rng.permutation(n)
        starts = range(0, n, self.batch_size)
        if self.steps is not None:
            starts = starts[: self.steps]
        for start in starts:
            if order is None:
                rows = self.data[start : start + self.batch_size]
            else:
                rows = self.data[order[start : start + self.batch_size]]
            rows = _rows(rows, self.ignore_zero_rows)
            if len(rows):
                yield rows


def _reservoir_sample(stream, size, rng):
    """A uniform sample of `size` rows of the stream (all rows if fewer).

    Every row gets a uniform random key; the rows with the smallest keys are
    kept, merging batch by batch.
    """
    kept, keys = None, None
    for rows in stream:
        batch_keys = rng.random(len(rows))
        if kept is None:
            kept, keys = rows, batch_keys
        else:
            kept = np.concatenate([kept, rows])
            keys = np.concatenate([keys, batch_keys])
        if len(keys) > size:
            keep = np.argpartition(keys, size - 1)[:size]
            kept, keys = kept[keep], keys[keep]
    if kept is None:
        raise ValueError("K-means received no (non-zero) rows.")
    # A fixed order, so that the result does not depend on argpartition.
    order = np.argsort(keys, kind="stable")
    return kept[order]


def _update(centers, counts, rows, labels):
    """Running-mean update of the centres that got rows in this batch."""
    order = np.argsort(labels, kind="stable")
    sorted_labels = labels[order]
    touched, starts, batch_counts = np.unique(
        sorted_labels, return_index=True, return_counts=True
    )
    sums = np.add.reduceat(rows[order].astype(np.float64), starts, axis=0)
    new_counts = counts[touched] + batch_counts
    centers[touched] += (sums - batch_counts[:, None] * centers[touched]) / new_counts[:, None]
    counts[touched] = new_counts


def minibatch_kmeans(
    data,
    k,
    batch_size=None,
    steps=None,
    epochs=3,
    init_size=None,
    seed=None,
    shuffle=True,
    ignore_zero_rows=True,
    compute_inertia=True,
    local_trials=None,
    verbose=0,
):
    """Mini-batch K-means with k-means++ seeding (see the module docstring).

    Args:
        data: `[..., d]` array (NumPy or backend tensor; leading axes are
            flattened into rows) or a batched `tf.data.Dataset` of such
            arrays (or of `(features, ...)` tuples). The dataset is iterated
            `epochs + 1` times, or `epochs + 2` with `compute_inertia`.
        k: number of centres.
        batch_size: rows per mini-batch for arrays (default 1024); must be
            None for a dataset.
        steps: batches per pass (default: all), like Keras' `adapt`.
        epochs: passes of mini-batch updates.
        init_size: rows sampled for the k-means++ seeding; default
            `max(3072, 10 * k)` (3072: scikit-learn's 3 * 1024).
        seed: int seed: the same seed gives the same centres. None draws
            fresh entropy.
        shuffle: shuffle an array's rows each epoch (datasets are iterated
            as they come).
        ignore_zero_rows: drop rows that are all zero (padding, by this
            library's convention).
        compute_inertia: run a last pass for the exact inertia.
        local_trials: candidates per k-means++ step (see `kmeans_plus_plus`).
        verbose: 1 prints the running inertia after each epoch.

    Returns:
        A `KMeansResult`.
    """
    checks.positive_int("k", k)
    checks.non_negative_int("epochs", epochs)
    stream = _Stream(data, batch_size, steps, ignore_zero_rows)
    if init_size is None:
        init_size = max(3072, 10 * k)
    checks.positive_int("init_size", init_size)
    if init_size < k:
        raise ValueError(
            f"Argument `init_size` must be at least k={k}. Received: init_size={init_size}"
        )
    rng = np.random.default_rng(seed)
    sample = _reservoir_sample(stream, init_size, rng)
    if len(sample) < k:
        raise ValueError(
            f"K-means with k={k} centres needs at least {k} (non-zero) rows; "
            f"the data has {len(sample)}."
        )
    centers, _ = kmeans_plus_plus(sample, k, seed=rng, local_trials=local_trials)
    centers = centers.astype(np.float64)
    counts = np.zeros(k, dtype=np.int64)
    history = []
    for epoch in range(epochs):
        total = 0.0
        for rows in stream.batches(rng if shuffle else None):
            labels, distances = assign(rows, centers)
            total += float(distances.sum())
            _update(centers, counts, rows, labels)
        history.append(total)
        if verbose:
            print(f"k-means epoch {epoch + 1}/{epochs}: running inertia {total:.6g}")
    centers = centers.astype(np.float32)
    total_inertia = None
    if compute_inertia:
        total_inertia = float(sum(assign(rows, centers)[1].sum() for rows in stream))
        if verbose:
            print(f"k-means inertia: {total_inertia:.6g}")
    return KMeansResult(centers, total_inertia, counts, history)
