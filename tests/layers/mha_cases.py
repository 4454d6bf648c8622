"""The layers in their plain configuration, paired with Keras MHA.

Helpers of `test_structured_attention.py`: one factory per layer of the library
with its structure switched off, inputs of the tested shapes, and a pairing
that builds a layer and a `keras.layers.MultiHeadAttention` with the same
constructor arguments and gives both the same weights.
"""

import importlib

import keras
import numpy as np

from tests.layers.weights import randomize
from tests.layers.weights import to_np

BATCH, QUERY_LENGTH, MEMORY_LENGTH, DIM, KEY_WIDTH = 2, 5, 4, 8, 6
NUM_HEADS, KEY_DIM = 2, 4

# The layers, by a short id. Their factories import them lazily, so that a
# layer missing while the library is rewritten fails its own cases only.
KINDS = ("structured", "area", "graph", "gated", "positional", "causal")
# Keyword-only call inputs each layer must accept besides Keras MHA's.
EXTRA_INPUTS = {
    "structured": ("cache", "cache_update_index"),
    "area": ("cache", "cache_update_index"),
    "graph": ("relations", "cache", "cache_update_index"),
    "gated": ("return_gates", "cache", "cache_update_index"),
    "positional": (
        "query_positions",
        "key_positions",
        "query_boxes",
        "key_boxes",
        "return_raw_scores",
        "cache",
        "cache_update_index",
    ),
    "causal": ("dictionary", "dictionary_mask"),
}


# Keras MHA arguments every structured layer refuses, by name: attention
# over several axes. Each layer's bad-argument table ends with them.
REFUSED_MHA_ARGUMENTS = [
    (dict(attention_axes=(1, 2)), "attention_axes"),
]


def layer_class(kind):
    names = {
        "structured": "StructuredMultiHeadAttention",
        "area": "MultiHeadAreaAttention",
        "graph": "GraphMultiHeadAttention",
        "gated": "GatedMultiHeadAttention",
        "positional": "PositionalMultiHeadAttention",
        "causal": "CATTAttention",
    }
    return getattr(importlib.import_module("keras_structattn.layers"), names[kind])


def make_layer(kind, cls=None, **mha_kwargs):
    """The layer `kind` in its plain configuration, with MHA's arguments
    (`cls`: a subclass of the layer's class to make instead)."""
    cls = cls or layer_class(kind)
    if kind == "graph":
        # Any labels: the layer is called without `relations`.
        heads = mha_kwargs.get("num_heads", 0)
        heads = heads if isinstance(heads, int) and heads > 0 else 0
        return cls(head_relations=[[h % 13, (h + 5) % 13] for h in range(heads)], **mha_kwargs)
    if kind == "gated":
        return cls(qk_gate=False, **mha_kwargs)
    if kind == "positional":
        return cls(position_type=None, **mha_kwargs)
    if kind == "causal":
        return cls(dictionary_size=None, **mha_kwargs)
    return cls(**mha_kwargs)


def lengths(kind):
    """`(T, S)`: query and memory lengths for `kind` (every layer's plain
    setting cross-attends, as Keras MHA)."""
    return (QUERY_LENGTH, MEMORY_LENGTH)


def random_inputs(kind, seed=0, key_width=None):
    """`(query [B, T, DIM], value [B, S, DIM], key [B, S, key_width] or None)`."""
    rng = np.random.default_rng(seed)
    t, s = lengths(kind)
    query = rng.normal(size=(BATCH, t, DIM)).astype("float32")
    value = rng.normal(size=(BATCH, s, DIM)).astype("float32")
    key = None if key_width is None else rng.normal(size=(BATCH, s, key_width)).astype("float32")
    return query, value, key


def weight_suffix(variable):
    """`"query/kernel"`: sublayer and variable, whatever the layer's name."""
    return "/".join(variable.path.split("/")[-2:])


def copy_keras_weights(reference, layer, kind):
    """Gives `layer` the weights of the Keras MHA `reference`.

    The lists must line up (same names, same order, same shapes): in its
    plain setting a layer has Keras MHA's weights and no others.
    """
    ours = [(weight_suffix(w), tuple(w.shape)) for w in layer.weights]
    theirs = [(weight_suffix(w), tuple(w.shape)) for w in reference.weights]
    assert ours == theirs, f"weights do not line up: {ours} != {theirs}"
    layer.set_weights(reference.get_weights())


def paired(kind, query, value, key=None, weight_seed=1, **mha_kwargs):
    """`(layer, keras_mha)` built on these inputs, with the same weights."""
    layer = make_layer(kind, **mha_kwargs)
    reference = keras.layers.MultiHeadAttention(**mha_kwargs)
    # With scores: Keras MHA's fused path fails on JAX when value_dim != key_dim.
    reference(query, value, key, return_attention_scores=True)
    layer(query, value, key)
    randomize(reference, weight_seed)
    copy_keras_weights(reference, layer, kind)
    return layer, reference


def output_bias(layer):
    """The output projection's bias (zeros without biases), NumPy."""
    dense = layer.output_dense
    if dense.bias is None:
        # The kernel is [num_heads, value_dim, *output_shape].
        return np.zeros(tuple(dense.kernel.shape[2:]))
    return to_np(dense.bias)
