"""Keras' own `MultiHeadAttention` test file, run against every layer.

`keras/src/layers/attention/multi_head_attention_test.py` ships with Keras
(3.15.1 when this was written; the installed file is the one run). It names
the layer under test only as `layers.MultiHeadAttention` (also as the base
class of its `_compute_attention` subclass), so each run below loads a fresh
copy of the module whose `layers` is `keras.layers` with `MultiHeadAttention`
replaced by one of the library's layers in its plain setting (structure off,
`PLAIN_LAYERS`), and runs the file's test class as it is. Keras MHA itself
runs as the control (`keras`): a test that fails there is not ours to pass.

Excluded, by design and only these (`EXCLUDED`): the tests of
high-dimensional `attention_axes` (inputs of rank > 3, or attention over
another axis than 1). The layers attend over axis 1 of `[B, T, dim]`
inputs and reject other `attention_axes` (docs/attention_core.md).
"""

import importlib.util
import os

import keras
import pytest

from keras_structattn.layers import CATTAttention
from keras_structattn.layers import GatedMultiHeadAttention
from keras_structattn.layers import GraphMultiHeadAttention
from keras_structattn.layers import MultiHeadAreaAttention
from keras_structattn.layers import PositionalMultiHeadAttention
from keras_structattn.layers import StructuredMultiHeadAttention

KERAS_TEST_FILE = os.path.join(
    os.path.dirname(keras.src.layers.attention.multi_head_attention.__file__),
    "multi_head_attention_test.py",
)

# Test methods of Keras' file left out for the library's layers, with why.
HIGH_DIMENSIONAL = "high-dimensional attention_axes: the layers take [B, T, dim] inputs"
EXCLUDED = {
    **{
        f"test_high_dim_attention_{case}": HIGH_DIMENSIONAL
        for case in (
            "4d_inputs_1freebatch_mask2",
            "4d_inputs_1freebatch_mask3",
            "4d_inputs_1freebatch_mask4",
            "4d_inputs_2d_attention",
            "5d_inputs_2d_attention",
            "5d_inputs_2d_attention_fullmask",
        )
    },
    "test_attention_axes_negative_indexing": HIGH_DIMENSIONAL,
    "test_causal_only_masks_non_4d_inputs": HIGH_DIMENSIONAL,
    "test_compute_output_shape_high_dim_same_proj": HIGH_DIMENSIONAL,
    "test_compute_output_shape_high_dim_different_proj": HIGH_DIMENSIONAL,
    "test_compute_output_shape_different_qv_last_dims": HIGH_DIMENSIONAL,
    "test_shape_mismatch_error_key_value_dim_mismatch_high_dim": HIGH_DIMENSIONAL,
}


# The layers in their plain setting, as classes (Keras' file subclasses the
# layer it tests, and saves and loads it): the defaults that switch the
# structure off, nothing else changed.
@keras.saving.register_keras_serializable(package="keras_mha_file")
class PlainGraphAttention(GraphMultiHeadAttention):
    """Graph attention called without `relations` (every pair allowed); any
    head labels (the default table needs 12 heads)."""

    def __init__(self, num_heads, key_dim, head_relations=None, **kwargs):
        if head_relations is None and isinstance(num_heads, int) and num_heads > 0:
            head_relations = [[h % 13] for h in range(num_heads)]
        super().__init__(num_heads, key_dim, head_relations=head_relations, **kwargs)


@keras.saving.register_keras_serializable(package="keras_mha_file")
class PlainGatedAttention(GatedMultiHeadAttention):
    """Gated attention with its gate off (`qk_gate=False`)."""

    def __init__(self, num_heads, key_dim, qk_gate=False, **kwargs):
        super().__init__(num_heads, key_dim, qk_gate=qk_gate, **kwargs)


@keras.saving.register_keras_serializable(package="keras_mha_file")
class PlainPositionalAttention(PositionalMultiHeadAttention):
    """Positional attention without positions (`position_type=None`)."""

    def __init__(self, num_heads, key_dim, position_type=None, **kwargs):
        super().__init__(num_heads, key_dim, position_type=position_type, **kwargs)


@keras.saving.register_keras_serializable(package="keras_mha_file")
class PlainCATTAttention(CATTAttention):
    """CATT attention without a dictionary (no cross-sample branch)."""

    def __init__(self, num_heads, key_dim, dictionary_size=None, **kwargs):
        super().__init__(num_heads, key_dim, dictionary_size=dictionary_size, **kwargs)


PLAIN_LAYERS = {
    "keras": keras.layers.MultiHeadAttention,
    "structured": StructuredMultiHeadAttention,
    "area": MultiHeadAreaAttention,  # max_area_width = max_area_height = 1
    "graph": PlainGraphAttention,
    "gated": PlainGatedAttention,
    "positional": PlainPositionalAttention,
    "causal": PlainCATTAttention,
}


class _LayersWith:
    """`keras.src.layers` with another class as `MultiHeadAttention`."""

    def __init__(self, attention_class):
        self.MultiHeadAttention = attention_class

    def __getattr__(self, name):
        return getattr(keras.src.layers, name)


def keras_test_case(kind):
    """Keras' `MultiHeadAttentionTest`, testing `PLAIN_LAYERS[kind]`."""
    spec = importlib.util.spec_from_file_location(
        f"keras_multi_head_attention_test_{kind}", KERAS_TEST_FILE
    )
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    module.layers = _LayersWith(PLAIN_LAYERS[kind])
    attributes = {}
    if kind != "keras":
        # unittest (and pytest's unittest runner) skips non-callable names.
        attributes.update({name: None for name in EXCLUDED})
    return type(f"KerasMHATestFile_{kind}", (module.MultiHeadAttentionTest,), attributes)


def test_the_excluded_tests_exist_in_keras_file():
    # An exclusion must name a test of the file (a renamed test would
    # otherwise run unnoticed, or an exclusion outlive its test).
    names = dir(keras_test_case("keras"))
    missing = sorted(name for name in EXCLUDED if name not in names)
    assert not missing, missing


def test_keras_file_is_shipped():
    # Fail loudly rather than collect nothing if Keras stops shipping it.
    assert os.path.exists(KERAS_TEST_FILE), KERAS_TEST_FILE


KerasMHATestFile_keras = keras_test_case("keras")
KerasMHATestFile_structured = keras_test_case("structured")
KerasMHATestFile_area = keras_test_case("area")
KerasMHATestFile_graph = keras_test_case("graph")
KerasMHATestFile_gated = keras_test_case("gated")
KerasMHATestFile_positional = keras_test_case("positional")
KerasMHATestFile_causal = keras_test_case("causal")

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")
