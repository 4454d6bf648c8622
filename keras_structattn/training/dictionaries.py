"""Fitting the global dictionaries of a CATT model before training.

CATT (Yang et al., 2021, "Causal Attention for Vision-Language Tasks",
arXiv:2103.03493, Sec. 3.2 and the supplementary's implementation details)
initialises each global dictionary by K-means over the training set's
embeddings: the visual dictionary over the embedded region (or grid)
features, the word dictionary over the embedded words. Table 6 of the
paper measures the alternative, "w/o Init" (here `init="uniform"`, the
released code's uniform(0, 0.01)): -1.9 CIDEr-D for the Transformer
captioner. See docs/catt_attention.md.

A model with dictionaries takes part through two methods:

* `global_dictionaries()`: `{name: GlobalDictionary}`;
* `dictionary_samples(inputs)`: `{name: float array [N, d]}`, the vectors
  each dictionary lives among for one batch of training inputs (what the
  layer attending to the dictionary would otherwise attend to, computed
  without dropout), padding rows left out.

`fit_dictionaries(model, batches)` gathers the samples of every batch and
runs `GlobalDictionary.adapt` (mini-batch K-means with k-means++ seeding,
`keras_structattn.ops.kmeans`) on each dictionary's rows, then reports how
much of each dictionary the data uses: the entries that are the nearest
centre of some row, per batch and in all, and the distinct rows clustered
(a K near or above the distinct rows gives centres that are copies of
single rows, not summaries of the data).

When to fit is the caller's choice: the captioning recipe fits after a
warm-up of the model (`--dictionary_warmup`, docs/catt_attention.md,
"When the dictionaries are fitted"), because from scratch the embeddings
the dictionaries live among are random projections at step 0, where the
paper clusters pretrained features.
"""

import numpy as np
from keras import ops

from keras_structattn.ops import kmeans

INITS = ("kmeans", "uniform")


def has_dictionaries(model):
    """Whether `model` has CATT dictionaries to fit."""
    finder = getattr(model, "global_dictionaries", None)
    return finder is not None and bool(finder())


def _too_few(name, size, rows):
    return (f"Dictionary {name!r} has {size} entries but the training data gave only {rows} "
            "vectors to cluster; use a smaller dictionary or more data.")


def too_few_samples(model, batches):
    """What `fit_dictionaries` would refuse, found without fitting: the
    message for the first dictionary with fewer sample rows than entries,
    or None. Reads `batches` only until every dictionary has enough (a
    recipe checks this before it commits a new run, even when it fits the
    dictionaries after a warm-up: the rows counted do not depend on the
    weights).

    Args:
        model: a built model with dictionaries (module docstring).
        batches: an iterable of model inputs (training batches, without
            targets).

    Returns:
        A str, or None.
    """
    dictionaries = model.global_dictionaries()
    counts = dict.fromkeys(dictionaries, 0)
    for inputs in batches:
        for name, values in model.dictionary_samples(inputs).items():
            counts[name] += int(np.prod(ops.shape(values)[:-1]))
        if all(counts[name] >= layer.size for name, layer in dictionaries.items()):
            return None
    name = next(n for n, layer in dictionaries.items() if counts[n] < layer.size)
    return _too_few(name, dictionaries[name].size, counts[name])


def fit_dictionaries(model, batches, *, init="kmeans", seed=0, max_rows=200_000, epochs=3):
    """Sets each of `model`'s dictionaries to K-means centres of its samples.

    Args:
        model: a built model with `global_dictionaries()` and
            `dictionary_samples(inputs)` (module docstring).
        batches: an iterable of model inputs (training batches, without
            targets), read once.
        init: "kmeans" (the paper) or "uniform" (leave the initializer's
            values: the "w/o Init" ablation; nothing is computed).
        seed: int seed of the K-means (the same seed, the same centres).
        max_rows: the most rows kept per dictionary (the first ones read).
        epochs: K-means passes over the rows.

    Returns:
        `{name: {...}}` per dictionary fitted (empty for "uniform"):
        `rows` (clustered), `distinct_rows` (distinct after rounding to
        1e-5), `inertia`, `entries_used` (entries that are the nearest
        centre of some row), `entries_used_per_batch` (the same per input
        batch, averaged over the batches read).

    Raises:
        ValueError: for an unknown `init`, or a dictionary with fewer
            sample rows than entries.
    """
    if init not in INITS:
        raise ValueError(f"Argument `init` must be one of {list(INITS)}. Received: {init!r}")
    dictionaries = model.global_dictionaries()
    if init == "uniform" or not dictionaries:
        return {}
    rows = {name: [] for name in dictionaries}
    counts = dict.fromkeys(dictionaries, 0)
    for inputs in batches:
        if all(counts[name] >= max_rows for name in dictionaries):
            break
        for name, values in model.dictionary_samples(inputs).items():
            values = np.asarray(ops.convert_to_numpy(ops.cast(values, "float32")))
            values = values.reshape(-1, values.shape[-1])[: max_rows - counts[name]]
            if len(values):
                rows[name].append(values)
            counts[name] += len(values)
    report = {}
    for name, layer in dictionaries.items():
        data = np.concatenate(rows[name]) if rows[name] else np.zeros((0, 1), "float32")
        if len(data) < layer.size:
            raise ValueError(_too_few(name, layer.size, len(data)))
        layer.adapt(data, seed=seed, epochs=epochs, compute_inertia=True)
        centers = ops.convert_to_numpy(layer.dictionary)
        labels = [kmeans.assign(batch, centers)[0] for batch in rows[name]]
        report[name] = {
            "rows": int(len(data)),
            "distinct_rows": int(len(np.unique(np.round(data, 5), axis=0))),
            "inertia": float(layer.inertia),
            "entries_used": int(len(np.unique(np.concatenate(labels)))),
            "entries_used_per_batch": float(np.mean([len(np.unique(b)) for b in labels])),
        }
    return report
