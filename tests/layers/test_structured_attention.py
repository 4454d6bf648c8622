"""Every layer, with its structure switched off, is `keras.layers.MultiHeadAttention`.

With its structure input omitted or switched off (area width 1; no
relations, i.e. every pair allowed; no gate; no positions; no dictionary
branch) each layer of the library must compute what
`keras.layers.MultiHeadAttention` computes with the same weights, called
the same way, positionally too. The reference for what that means is Keras'
own test file, `keras/src/layers/attention/multi_head_attention_test.py`
(Keras 3.15): its cases that apply to `[B, T, dim]` inputs attending over
axis 1 are ported here and run against each layer, which is compared with
a Keras MHA built with the same constructor arguments and given the same
weights (`mha_cases.paired`). Keras MHA is the independent reference: no
expected number is written down here.

The layers in their plain configuration: `StructuredMultiHeadAttention`,
`MultiHeadAreaAttention` (max_area_width = max_area_height = 1),
`GraphMultiHeadAttention` called without `relations`,
`GatedMultiHeadAttention(qk_gate=False)`,
`PositionalMultiHeadAttention(position_type=None)` and
`CATTAttention(dictionary_size=None)` called without a dictionary.

Ported (Keras test -> here):

* `test_basics`, `test_initializer`, `test_mha_constraints`,
  `test_invalid_scalar_args_rejected`, `test_shape_mismatch_error` (3-D
  cases), `test_multi_head_attention_output_shape_error` ->
  `test_weights_options_and_argument_checks`.
* `test_compute_output_shape` (3-D cases), `test_symbolic_return_attention_scores`,
  `test_multi_head_attention_output_shape_as_int` / `_as_tuple` ->
  `test_outputs_and_scores_equal_keras` and `test_symbolic_calls_and_output_shapes`.
* `test_masking`, `test_query_mask_propagation`, `test_no_warning_with_keras_mask`
  -> `test_keras_masks_of_the_inputs`; explicit `query_mask=` / `value_mask=`
  / `key_mask=` -> `test_explicit_mask_arguments`.
* `test_masking_with_different_shapes`, `test_causal_only_fast_path`,
  `test_causal_only_with_other_mask_falls_back`,
  `test_causal_only_masks_when_fused_path_disabled`, `test_sliding_window`
  -> `test_attention_mask_shapes_and_causal_masks` and the causal and
  sliding-window cases of `test_outputs_and_scores_equal_keras`.
* `test_correctness` (without flash attention) -> every comparison with
  Keras MHA, in float32 and under mixed precision (`test_mixed_precision`).
* `test_sliding_window_serialization` -> `test_config_and_keras_file_round_trips`.
* dropout (`dropout=0.5` in `test_basics`) -> `test_dropout`: inference is
  Keras MHA, training drops, and with the same seed drops the same weights
  as Keras MHA.

Beyond Keras' file: the call signatures and a positional call
(`test_call_signature_extends_keras`, `test_positional_call_means_what_it_means_in_keras`;
`Layer.__call__` takes only tensors by position, so the seven tensors
`query` .. `attention_mask` go by position and the flags by name),
and the caches of `StructuredMultiHeadAttention` and `MultiHeadAreaAttention`
(`test_cached_decoding_equals_the_full_causal_pass`,
`test_projected_memory_equals_cross_attention`).

Differences by design, asserted as such and never compared with Keras:

* a query row with no allowed key gets zero attention weights, so its
  output is the output projection's bias (Keras MHA averages every value,
  or whatever its fused kernel gives): such rows are built only in
  `test_query_without_allowed_key_gives_the_output_bias`; elsewhere a padded
  query (itself a row without keys) is compared on the valid rows only;
* an explicit `query_mask=` is honoured (Keras MHA reads only the query's
  Keras mask and ignores the argument);
* attention scores are float32, also under mixed precision, and a symbolic
  call gives them as `[B, N, T, S]` (Keras' `compute_output_spec` says
  `[B, N, T, T]` whatever S is).

On JAX, Keras MHA's own fused path fails when `value_dim != key_dim` (the
kernel wants values as wide as keys): there the layers' call without scores
is compared with Keras MHA's explicit path only.

Not ported, and why:

* `test_high_dim_attention`, `test_attention_axes_negative_indexing`,
  `test_causal_only_masks_non_4d_inputs` and the high-dimensional cases of
  `test_compute_output_shape` / `test_shape_mismatch_error`: the layers take
  `[B, T, dim]` inputs and attend over axis 1 only (`attention_axes` must
  be None);
* `test_basics_with_flash_attention`, `test_flash_attention_with_errors`,
  the flash case of `test_correctness`: run from Keras' file (on JAX;
  `test_flash_attention_switch_is_keras` here checks the errors on every
  backend);
* `test_compute_attention_combines_causal_and_explicit_mask`,
  `test_causal_only_skipped_for_subclass`, `test_lora`,
  `test_quantize_int8`, `test_dtype_policy_map`: Keras' file itself runs
  against every layer in `test_keras_mha_file.py` (all of it but the
  high-dimensional `attention_axes` tests); `test_compute_attention_hook`
  here checks that a subclass's `_compute_attention` is what the plain
  path computes with.
"""

import inspect
import re
import warnings

import keras
import numpy as np
import pytest
from keras import ops

from keras_structattn.layers._masking import get_keras_mask
from keras_structattn.layers._masking import set_keras_mask
from tests.layers.mha_cases import BATCH
from tests.layers.mha_cases import DIM
from tests.layers.mha_cases import EXTRA_INPUTS
from tests.layers.mha_cases import KEY_DIM
from tests.layers.mha_cases import KEY_WIDTH
from tests.layers.mha_cases import KINDS
from tests.layers.mha_cases import NUM_HEADS
from tests.layers.mha_cases import copy_keras_weights
from tests.layers.mha_cases import layer_class
from tests.layers.mha_cases import lengths
from tests.layers.mha_cases import make_layer
from tests.layers.mha_cases import output_bias
from tests.layers.mha_cases import paired
from tests.layers.mha_cases import random_inputs
from tests.layers.mha_cases import randomize
from tests.layers.mha_cases import to_np
from tests.layers.mha_cases import weight_suffix

HEADS = dict(num_heads=NUM_HEADS, key_dim=KEY_DIM)
ATOL = 1e-5

each_layer = pytest.mark.parametrize("kind", KINDS)


def seed_generators(layer):
    """The seed generators of `layer` and its sublayers."""
    return sum(len(sub._seed_generators) for sub in layer._flatten_layers())


def assert_close(ours, theirs, rows=None, atol=ATOL):
    """Equal within `atol`, on the `rows` ([B, T] bool) of `[B, T, ...]` tensors."""
    ours, theirs = to_np(ours), to_np(theirs)
    assert ours.shape == theirs.shape
    assert np.isfinite(ours).all()
    if rows is not None:
        ours, theirs = ours[rows], theirs[rows]
    np.testing.assert_allclose(ours, theirs, atol=atol, rtol=1e-5)


def by_query(scores):
    """Attention scores `[B, N, T, S]` as `[B, T, N, S]` (rows first)."""
    return np.moveaxis(to_np(scores), 1, 2)


def assert_scores_close(ours, theirs, rows=None, atol=ATOL):
    assert keras.backend.standardize_dtype(ours.dtype) == "float32"
    assert_close(by_query(ours), by_query(theirs), rows, atol)


def assert_rows_attend_nowhere(layer, output, scores, rows):
    """The `rows` ([B, T] bool) have zero weights and output the output bias."""
    output = to_np(output)
    assert np.isfinite(output).all()
    np.testing.assert_allclose(
        output[rows], np.broadcast_to(output_bias(layer), output[rows].shape), atol=ATOL
    )
    if scores is not None:
        assert np.isfinite(to_np(scores)).all()
        assert not by_query(scores)[rows].any()


def both_paths(layer, *args, **kwargs):
    """`(output, output with scores, scores)`: the call without scores (a
    fused kernel where one is taken) and the explicit call with them.

    `args` may be one function giving the inputs: inputs with Keras masks
    are made afresh for each call, since a call clears its inputs' masks.
    """
    fresh = args[0] if len(args) == 1 and callable(args[0]) else (lambda: args)
    output = layer(*fresh(), **kwargs)
    with_scores, scores = layer(*fresh(), return_attention_scores=True, **kwargs)
    return output, with_scores, scores


def keras_fused_path_fails(reference):
    """Whether Keras MHA's own fused path cannot run: JAX's kernel wants
    values as wide as keys, and Keras MHA takes it anyway (then the call
    without scores is compared with Keras' explicit path only)."""
    return keras.backend.backend() == "jax" and reference.value_dim != reference.key_dim


def assert_same_as_keras(layer, reference, *args, rows=None, **kwargs):
    ours = both_paths(layer, *args, **kwargs)
    expected, expected_scores = reference(*args, return_attention_scores=True, **kwargs)
    assert_close(ours[0], expected, rows)
    assert_close(ours[1], expected, rows)
    assert_scores_close(ours[2], expected_scores, rows)
    if not keras_fused_path_fails(reference):
        assert_close(ours[0], reference(*args, **kwargs), rows)
    return ours


# ---------------------------------------------------------------- basics


@each_layer
def test_weights_options_and_argument_checks(kind):
    # Keras' shapes are (2, 8, 16) and (2, 4, 16); those of the other tests
    # here save JAX compilations.
    query, value, _ = random_inputs(kind)
    t = query.shape[1]
    # Keras' test_basics: the trainable weights of each configuration.
    for kwargs, count in (
        ({}, 8),
        (dict(value_dim=4, use_bias=False, dropout=0.5), 4),
        (dict(use_gate=True), 10),
        (dict(value_dim=4, use_bias=False, dropout=0.5, use_gate=True), 5),
    ):
        layer = make_layer(kind, **HEADS, **kwargs)
        reference = keras.layers.MultiHeadAttention(**HEADS, **kwargs)
        assert layer.supports_masking
        assert tuple(layer(query, value).shape) == (BATCH, t, DIM)
        reference(query, value, return_attention_scores=True)
        ours = {weight_suffix(w): tuple(w.shape) for w in layer.trainable_weights}
        theirs = {weight_suffix(w): tuple(w.shape) for w in reference.trainable_weights}
        assert len(theirs) == count
        # Keras MHA's weights and nothing else (no weights of structure
        # that is off), and its seed generators: one with dropout, else none.
        assert ours == theirs
        assert not layer.non_trainable_weights
        assert seed_generators(layer) == seed_generators(reference) == int("dropout" in kwargs)

    # test_initializer: each projection draws its own initial kernel.
    layer = make_layer(
        kind,
        **HEADS,
        use_gate=True,
        kernel_initializer=keras.initializers.TruncatedNormal(stddev=0.02),
    )
    layer(query, value)
    kernels = [
        to_np(dense.kernel)
        for dense in (layer.query_dense, layer.key_dense, layer.value_dense, layer._gate_dense)
    ]
    for i in range(len(kernels)):
        for j in range(i):
            assert not np.allclose(kernels[i], kernels[j])

    # test_mha_constraints: constraints reach the projections and the gate.
    layer = make_layer(
        kind, **HEADS, use_gate=True, kernel_constraint="non_neg", bias_constraint="non_neg"
    )
    layer(query, value)
    for dense in (layer.query_dense, layer.key_dense, layer.value_dense, layer._gate_dense):
        assert isinstance(dense.kernel.constraint, keras.constraints.NonNeg)
        assert isinstance(dense.bias.constraint, keras.constraints.NonNeg)

    # test_invalid_scalar_args_rejected, output_shape_error.
    for bad in (0, -2, 1.5):
        with pytest.raises(ValueError, match="`num_heads`"):
            make_layer(kind, num_heads=bad, key_dim=4)
        with pytest.raises(ValueError, match="`key_dim`"):
            make_layer(kind, num_heads=4, key_dim=bad)
        with pytest.raises(ValueError, match="`value_dim`"):
            make_layer(kind, num_heads=4, key_dim=4, value_dim=bad)
    with pytest.raises(ValueError, match="Invalid `output_shape`"):
        make_layer(kind, num_heads=2, key_dim=16, output_shape=8.0)

    # test_shape_mismatch_error: keys and values of different lengths,
    # with Keras' message.
    layer = make_layer(kind, num_heads=4, key_dim=2, value_dim=2)
    shapes = ((2, 4, 8), (2, 2, 8), (2, 1, 7))
    with pytest.raises(ValueError, match="must be equal"):
        layer.compute_output_shape(*shapes)
    with pytest.raises(ValueError, match="must be equal"):
        layer(*(np.ones(shape, "float32") for shape in shapes))


# ------------------------------------------------------ outputs and scores

PARITY_CASES = [
    pytest.param({}, "self", {}, id="self"),
    pytest.param({}, "self", dict(use_causal_mask=True), id="self-causal"),
    pytest.param(
        dict(value_dim=3, use_bias=False, output_shape=6),
        "key",
        {},
        id="key-value_dim-no_bias-int_output",
    ),
    pytest.param(dict(use_gate=True, output_shape=(3, 2)), "cross", {}, id="use_gate-tuple_output"),
    pytest.param(dict(dropout=0.5, seed=3), "cross", dict(training=False), id="dropout-inference"),
    pytest.param(
        dict(sliding_window=2), "self", dict(use_causal_mask=True), id="sliding_window-causal"
    ),
]


@each_layer
@pytest.mark.parametrize("mha_kwargs, inputs, call_kwargs", PARITY_CASES)
def test_outputs_and_scores_equal_keras(kind, mha_kwargs, inputs, call_kwargs):
    query, value, key = random_inputs(kind, key_width=KEY_WIDTH if inputs == "key" else None)
    if inputs == "self":
        value = query
    layer, reference = paired(kind, query, value, key, **HEADS, **mha_kwargs)
    output, _, scores = assert_same_as_keras(layer, reference, query, value, key, **call_kwargs)
    t, s = query.shape[1], value.shape[1]
    assert tuple(scores.shape) == (BATCH, NUM_HEADS, t, s)
    assert tuple(output.shape) == tuple(reference.compute_output_shape(query.shape, value.shape))


# ------------------------------------------------------ the subclass hook


class _Recorded:
    """A mixin overriding `_compute_attention`, Keras MHA's documented
    extension point: it records how it is called and changes the result
    (outputs doubled, scores halved), so that a layer that does not use it
    for its plain path cannot give Keras' results."""

    def _compute_attention(
        self, query, key, value, attention_mask=None, training=None,
        return_attention_scores=False,
    ):
        self.calls.append(
            dict(
                shapes=tuple(tuple(x.shape) for x in (query, key, value)),
                mask=None if attention_mask is None else tuple(attention_mask.shape),
                training=training,
                return_attention_scores=return_attention_scores,
            )
        )
        output, scores = super()._compute_attention(
            query, key, value, attention_mask, training, return_attention_scores
        )
        return output * 2.0, None if scores is None else scores * 0.5


@each_layer
@pytest.mark.parametrize("use_causal_mask", [False, True], ids=["", "causal"])
def test_compute_attention_hook(kind, use_causal_mask):
    """A subclass overriding `_compute_attention` changes the plain path of
    every layer as it changes Keras MHA's, and gets Keras' arguments."""
    ours_cls = type(f"Recorded{kind}", (_Recorded, layer_class(kind)), {})
    keras_cls = type("RecordedMHA", (_Recorded, keras.layers.MultiHeadAttention), {})
    query, value, _ = random_inputs(kind)
    layer = make_layer(kind, cls=ours_cls, **HEADS)
    reference = keras_cls(**HEADS)
    layer.calls, reference.calls = [], []
    reference(query, value, return_attention_scores=True)
    layer(query, value)
    randomize(reference, 1)
    layer.set_weights(reference.get_weights())
    for return_attention_scores in (False, True):
        layer.calls, reference.calls = [], []
        kwargs = dict(use_causal_mask=use_causal_mask, training=False)
        ours = layer(query, value, return_attention_scores=return_attention_scores, **kwargs)
        theirs = reference(query, value, return_attention_scores=return_attention_scores, **kwargs)
        assert layer.calls == reference.calls
        assert len(layer.calls) == 1
        if return_attention_scores:
            assert_close(ours[0], theirs[0])
            assert_scores_close(ours[1], theirs[1])
        else:
            assert_close(ours, theirs)


@each_layer
def test_flash_attention_switch_is_keras(kind):
    """`flash_attention=True` is accepted as in Keras MHA, with its errors
    word for word (Keras' test runs on JAX and Torch only; this one on every
    backend): no dropout, no returned scores."""
    with pytest.raises(ValueError, match="Dropout is not supported when flash attention"):
        make_layer(kind, **HEADS, flash_attention=True, dropout=0.1)
    layer = make_layer(kind, **HEADS, flash_attention=True)
    assert layer._flash_attention
    query, value, _ = random_inputs(kind)
    with pytest.raises(ValueError, match="Returning attention scores is not supported"):
        layer(query, value, return_attention_scores=True)


def test_flash_attention_with_a_structure_that_cannot_take_it_is_an_error():
    # Top-k keeps some logits only: no fused kernel, so no flash attention.
    layer = layer_class("graph")(
        num_heads=2, key_dim=4, head_relations=[[0], [1]], top_k=2, flash_attention=True
    )
    query, value, _ = random_inputs("graph")
    with pytest.raises(ValueError, match="flash_attention=True needs the fused .*top-k"):
        layer(query, value)


# ------------------------------------------------------------------ masks

# Keras' test_masking, with T = 5 queries (two padded in the first example)
# and S = 4 values (5 for self-attention layers). Value 0 is always valid,
# so that, with the causal mask too, every valid query has a key.
QUERY_IDS = np.array([[1, 2, 3, 0, 0], [3, 3, 1, 1, 2]])
VALUE_IDS = {
    4: np.array([[5, 4, 0, 0], [3, 2, 1, 0]]),
    5: np.array([[5, 4, 0, 0, 0], [3, 2, 1, 1, 0]]),
}


@each_layer
@pytest.mark.parametrize("use_causal_mask", [False, True], ids=["", "causal"])
def test_keras_masks_of_the_inputs(kind, use_causal_mask):
    value_ids = VALUE_IDS[lengths(kind)[1]]
    embed_query = keras.layers.Embedding(
        4, DIM, mask_zero=True, embeddings_initializer=keras.initializers.RandomNormal(seed=1)
    )
    embed_value = keras.layers.Embedding(
        6, DIM, mask_zero=True, embeddings_initializer=keras.initializers.RandomNormal(seed=2)
    )

    # Fresh embeddings for each call: a call clears its inputs' Keras masks.
    def inputs():
        return embed_query(QUERY_IDS), embed_value(value_ids)

    layer, reference = paired(kind, *inputs(), **HEADS)
    valid = QUERY_IDS != 0
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        output, with_scores, scores = both_paths(layer, inputs, use_causal_mask=use_causal_mask)
    assert not [str(w.message) for w in caught]
    theirs = both_paths(reference, inputs, use_causal_mask=use_causal_mask)
    assert_close(output, theirs[0], valid)
    assert_close(with_scores, theirs[1], valid)
    assert_scores_close(scores, theirs[2], valid)
    # test_query_mask_propagation: the output carries the query's mask.
    for tensor in (output, with_scores):
        np.testing.assert_array_equal(to_np(get_keras_mask(tensor)).astype(bool), valid)

    # Keras' own check of the layer against itself: the same mask given
    # as `attention_mask` (padded queries included) changes nothing.
    manual = valid[:, :, None] & (value_ids != 0)[:, None, :]
    if use_causal_mask:
        manual &= np.tril(np.ones(manual.shape[1:], bool))[None]
    query, value = inputs()
    set_keras_mask(query, None)
    set_keras_mask(value, None)
    assert_close(layer(query, value, attention_mask=manual), output)
    # Padded queries have no key: they attend nowhere.
    assert_rows_attend_nowhere(layer, with_scores, scores, ~valid)


@each_layer
def test_explicit_mask_arguments(kind):
    query, value, key = random_inputs(kind, key_width=KEY_WIDTH)
    t, s = lengths(kind)
    layer, reference = paired(kind, query, value, key, **HEADS)
    query_mask = np.ones((BATCH, t), bool)
    query_mask[0, 1] = query_mask[1, -1] = False
    value_mask = np.ones((BATCH, s), bool)
    value_mask[0, -1] = False
    key_mask = np.ones((BATCH, s), bool)
    key_mask[1, 1] = False
    for use_causal_mask in (False, True):
        kwargs = dict(
            query_mask=query_mask,
            value_mask=value_mask,
            key_mask=key_mask,
            use_causal_mask=use_causal_mask,
        )
        # Keras MHA ignores the explicit query mask: compare the valid rows.
        output, with_scores, scores = assert_same_as_keras(
            layer, reference, query, value, key, rows=query_mask, **kwargs
        )
        # Ours honours it.
        assert_rows_attend_nowhere(layer, output, None, ~query_mask)
        assert_rows_attend_nowhere(layer, with_scores, scores, ~query_mask)
        np.testing.assert_array_equal(to_np(get_keras_mask(output)).astype(bool), query_mask)
        # Masked values and keys get no weight.
        weights = to_np(scores)
        blocked = np.broadcast_to(~(value_mask & key_mask)[:, None, None, :], weights.shape)
        assert not weights[blocked].any()


@each_layer
def test_attention_mask_shapes_and_causal_masks(kind):
    query, value, _ = random_inputs(kind)
    t, s = lengths(kind)
    layer, reference = paired(kind, query, value, **HEADS)
    rng = np.random.default_rng(5)
    per_head = rng.random((BATCH, NUM_HEADS, t, s)) < 0.6
    per_head[..., 0] = True  # every query keeps a key, with a causal mask too
    cases = (
        ("[B, T, S]", per_head[:, 0], True),
        ("[T, S] float", per_head[0, 0].astype("float32"), False),
        ("[B, N, T, S]", per_head, True),
    )
    for name, mask, use_causal_mask in cases:
        try:
            assert_same_as_keras(
                layer,
                reference,
                query,
                value,
                attention_mask=mask,
                use_causal_mask=use_causal_mask,
            )
        except Exception as error:
            raise AssertionError(
                f"attention_mask {name}, use_causal_mask={use_causal_mask}: {error}"
            ) from error
    # The causal mask merged with another is the merged mask.
    merged = per_head[:, 0] & np.tril(np.ones((t, s), bool))[None]
    assert_close(
        layer(query, value, attention_mask=per_head[:, 0], use_causal_mask=True),
        layer(query, value, attention_mask=merged),
    )


@each_layer
def test_query_without_allowed_key_gives_the_output_bias(kind):
    query, value, _ = random_inputs(kind)
    t, s = lengths(kind)
    layer, reference = paired(kind, query, value, **HEADS)
    mask = np.ones((BATCH, t, s), bool)
    mask[0, 2] = False
    mask[1, 0] = False
    empty = ~mask.any(-1)
    for call in (
        dict(attention_mask=mask),
        dict(attention_mask=mask, use_causal_mask=True),
    ):
        ours = both_paths(layer, query, value, **call)
        theirs = both_paths(reference, query, value, **call)
        assert_rows_attend_nowhere(layer, ours[0], None, empty)
        assert_rows_attend_nowhere(layer, ours[1], ours[2], empty)
        assert_close(ours[0], theirs[0], ~empty)
        assert_close(ours[1], theirs[1], ~empty)
        assert_scores_close(ours[2], theirs[2], ~empty)
    # Every value of the second example masked: all its queries are empty.
    value_mask = np.ones((BATCH, s), bool)
    value_mask[1] = False
    empty = np.zeros((BATCH, t), bool)
    empty[1] = True
    ours = both_paths(layer, query, value, value_mask=value_mask)
    theirs = both_paths(reference, query, value, value_mask=value_mask)
    assert_rows_attend_nowhere(layer, ours[0], None, empty)
    assert_rows_attend_nowhere(layer, ours[1], ours[2], empty)
    assert_close(ours[1], theirs[1], ~empty)
    assert_scores_close(ours[2], theirs[2], ~empty)


# Issue 17: one check of `attention_mask` for every layer, its shape
# (item 16) and the values of a non-boolean mask (item 6).


def compiled_predict(layer, *arrays, **call_kwargs):
    """The layer on `(query, value, attention_mask)` in a `keras.Model` run by
    `predict` with `jit_compile=True` (XLA on TensorFlow, jit on JAX), where
    no value is known to a check."""
    inputs = [keras.Input(batch_shape=x.shape, dtype=str(x.dtype)) for x in arrays]
    outputs = layer(inputs[0], inputs[1], attention_mask=inputs[2], **call_kwargs)
    model = keras.Model(inputs, outputs)
    model.compile(jit_compile=True)
    return model.predict(list(arrays), batch_size=BATCH, verbose=0)


@each_layer
def test_additive_or_other_non_boolean_attention_mask(kind):
    query, value, _ = random_inputs(kind)
    t, s = lengths(kind)
    layer, _ = paired(kind, query, value, **HEADS)
    allowed = np.random.default_rng(8).random((BATCH, t, s)) < 0.6
    allowed[..., 0] = True
    # tensor2tensor's additive mask: cast to bool, it would mean the opposite.
    additive = np.where(allowed, 0.0, -1e9).astype("float32")
    for mask in (additive, ops.convert_to_tensor(additive)):
        with pytest.raises(ValueError, match=r"-1000000000\.0 at \[\d, \d, \d\]\. It looks like "
                           r"an additive mask.*Pass a boolean mask \(True = may attend\)"):
            layer(query, value, attention_mask=mask)
    halves = np.where(allowed, 1.0, 0.5).astype("float32")
    with pytest.raises(ValueError, match=r"boolean mask \(True = may attend\) or hold only 0 "
                       r"and 1\. Received: a float32 mask holding 0\.5"):
        layer(query, value, attention_mask=halves)
    # 0/1 numbers are the booleans they stand for, as in Keras MHA ...
    expected = layer(query, value, attention_mask=allowed)
    for numbers in (allowed.astype("float32"), allowed.astype("int32")):
        assert_close(layer(query, value, attention_mask=numbers), expected)
    # ... and compiled code, where the values are not known, reads `mask > 0`:
    # the additive mask then blocks every key instead of inverting.
    assert_close(compiled_predict(layer, query, value, allowed.astype("float32")), expected)
    blocked = compiled_predict(layer, query, value, additive)
    assert_rows_attend_nowhere(layer, blocked, None, np.ones((BATCH, t), bool))


@each_layer
def test_attention_mask_of_another_shape_is_named(kind):
    query, value, _ = random_inputs(kind)
    t, s = lengths(kind)
    layer, _ = paired(kind, query, value, **HEADS)
    forms = r"must be \[T, S\], \[B, T, S\] or \[B, N, T, S\] for B = "
    for shape in (
        (BATCH, t + 1, s),
        (BATCH, t, s - 1),
        (BATCH + 1, t, s),
        (BATCH, NUM_HEADS + 1, t, s),
        (t, s - 1),
        (s,),
        (BATCH, 1, t, s, 1),
    ):
        received = re.escape(f"Received: attention_mask.shape={shape}")
        with pytest.raises(ValueError, match=forms + "2 examples.*" + received):
            layer(query, value, attention_mask=np.ones(shape, bool))
    # Symbolic calls are checked too, on their static sizes.
    with pytest.raises(ValueError, match=forms + "None examples"):
        layer(
            keras.Input((t, DIM)),
            keras.Input((s, DIM)),
            attention_mask=keras.Input((t, s + 1), dtype="bool"),
        )
    # Any axis of size 1 broadcasts, as in Keras MHA.
    for shape in ((1, t, s), (BATCH, 1, s), (BATCH, t, 1), (1, 1, t, s), (t, 1)):
        assert_close(
            layer(query, value, attention_mask=np.ones(shape, bool)), layer(query, value)
        )


# --------------------------------------------------------------- training


@each_layer
def test_dropout(kind):
    query, value, _ = random_inputs(kind)
    kwargs = dict(HEADS, dropout=0.5, seed=7)
    layer, reference = paired(kind, query, value, **kwargs)
    twin = make_layer(kind, **kwargs)
    twin(query, value)
    copy_keras_weights(reference, twin, kind)
    inference = layer(query, value, training=False)
    assert_close(inference, reference(query, value, training=False))
    assert_close(layer(query, value), inference)  # training=None is inference
    output, scores = layer(query, value, training=True, return_attention_scores=True)
    assert not np.allclose(to_np(output), to_np(inference), atol=1e-3)
    # Keras MHA returns the weights before dropout: the same as ours. The
    # masks come from the library's cheaper random numbers (ops.dropout,
    # docs/performance.md), the same law as Keras' but another stream, so
    # the dropped output is checked by its law: unbiased (the mean of many
    # draws approaches the inference output) and seeded.
    _, expected_scores = reference(query, value, training=True, return_attention_scores=True)
    assert_scores_close(scores, expected_scores)
    draws = [to_np(layer(query, value, training=True)) for _ in range(50)]
    single = np.abs(draws[0] - to_np(inference)).mean()
    mean = np.abs(np.mean(draws, axis=0) - to_np(inference)).mean()
    assert mean < 0.3 * single, (mean, single)  # about 0.14 expected (1/sqrt(50))
    # Seeded: a twin with the same seed drops the same weights.
    twin_output, _ = twin(query, value, training=True, return_attention_scores=True)
    assert_close(twin_output, output)
    # Without scores too (dropout rules out a fused kernel in both).
    output = layer(query, value, training=True)
    assert not np.allclose(to_np(output), to_np(inference), atol=1e-3)


@each_layer
def test_mixed_precision(kind):
    query, value, _ = random_inputs(kind)
    layer = make_layer(kind, dtype="mixed_float16", **HEADS)
    reference = keras.layers.MultiHeadAttention(**HEADS)
    layer(query, value)
    reference(query, value)
    randomize(reference, 1)
    copy_keras_weights(reference, layer, kind)
    output, with_scores, scores = both_paths(layer, query, value, use_causal_mask=True)
    _, expected, expected_scores = both_paths(reference, query, value, use_causal_mask=True)
    for tensor in (output, with_scores):
        assert keras.backend.standardize_dtype(tensor.dtype) == "float16"
        assert_close(tensor, expected, atol=3e-2)
    assert_scores_close(scores, expected_scores, atol=5e-3)


# ---------------------------------------------------------- serialization

CONFIG_KWARGS = dict(
    num_heads=NUM_HEADS,
    key_dim=KEY_DIM,
    value_dim=3,
    dropout=0.25,
    use_bias=False,
    output_shape=6,
    sliding_window=3,
    use_gate=True,
    seed=5,
    kernel_initializer="he_normal",
    kernel_regularizer="l2",
)


@each_layer
def test_config_and_keras_file_round_trips(kind, tmp_path):
    query, value, _ = random_inputs(kind)
    t, s = lengths(kind)
    layer, reference = paired(kind, query, value, **CONFIG_KWARGS)
    config = layer.get_config()
    for name, expected in reference.get_config().items():
        if name != "name":
            assert config[name] == expected, name
    expected = layer(query, value, return_attention_scores=True)

    clone = type(layer).from_config(config)
    clone(query, value)
    clone.set_weights(layer.get_weights())
    for got, want in zip(clone(query, value, return_attention_scores=True), expected):
        assert_close(got, want)

    inputs = [keras.Input((t, DIM)), keras.Input((s, DIM))]
    model = keras.Model(inputs, layer(*inputs, return_attention_scores=True))
    path = str(tmp_path / "layer.keras")
    model.save(path)
    loaded = keras.saving.load_model(path)
    assert [type(x) for x in loaded.layers] == [type(x) for x in model.layers]
    for got, want in zip(loaded([query, value]), expected):
        assert_close(got, want)


@each_layer
@pytest.mark.parametrize("with_key", [False, True], ids=["value", "key-tuple_output"])
def test_symbolic_calls_and_output_shapes(kind, with_key):
    query, value, key = random_inputs(kind, key_width=KEY_WIDTH if with_key else None)
    layer, reference = paired(
        kind, query, value, key, **HEADS, output_shape=(3, 2) if with_key else None
    )
    output, scores = layer(query, value, key, return_attention_scores=True)
    assert output.shape == reference(query, value, key).shape
    key_shape = None if key is None else key.shape
    # test_compute_output_shape: tuples and lists.
    assert tuple(layer.compute_output_shape(query.shape, value.shape, key_shape)) == output.shape
    assert (
        tuple(
            layer.compute_output_shape(
                list(query.shape), list(value.shape), None if key is None else list(key_shape)
            )
        )
        == output.shape
    )

    def symbolic(*shapes):
        inputs = [keras.Input(batch_shape=shape) for shape in shapes if shape is not None]
        return inputs, layer(*inputs, return_attention_scores=True)

    # test_symbolic_return_attention_scores: the eager shapes and dtypes.
    _, (sym_output, sym_scores) = symbolic(query.shape, value.shape, key_shape)
    assert sym_output.shape == output.shape
    assert sym_scores.shape == scores.shape
    assert sym_output.dtype == output.dtype
    assert keras.backend.standardize_dtype(sym_scores.dtype) == "float32"

    # Unknown batch and lengths, as a functional model.
    widths = [(None, None, x.shape[-1]) if x is not None else None for x in (query, value, key)]
    inputs, outputs = symbolic(*widths)
    assert tuple(outputs[0].shape) == (None, None) + tuple(output.shape[2:])
    assert tuple(outputs[1].shape) == (None, NUM_HEADS, None, None)
    model = keras.Model(inputs, outputs)
    given = [x for x in (query, value, key) if x is not None]
    for got, want in zip(model(given), (output, scores)):
        assert_close(got, want)


# ---------------------------------------------------------- call signature


@each_layer
def test_call_signature_extends_keras(kind):
    keras_parameters = list(
        inspect.signature(keras.layers.MultiHeadAttention.call).parameters.values()
    )
    parameters = list(inspect.signature(layer_class(kind).call).parameters.values())
    head = parameters[: len(keras_parameters)]
    assert [(p.name, p.kind, p.default) for p in head] == [
        (p.name, p.kind, p.default) for p in keras_parameters
    ]
    extra = {p.name: p.kind for p in parameters[len(keras_parameters) :]}
    assert set(extra.values()) <= {
        inspect.Parameter.KEYWORD_ONLY,
        inspect.Parameter.VAR_KEYWORD,
    }, extra
    takes_any_keyword = inspect.Parameter.VAR_KEYWORD in extra.values()
    for name in EXTRA_INPUTS[kind]:
        assert extra.get(name) == inspect.Parameter.KEYWORD_ONLY or takes_any_keyword, name


@each_layer
def test_positional_call_means_what_it_means_in_keras(kind):
    query, value, key = random_inputs(kind, key_width=KEY_WIDTH)
    t, s = lengths(kind)
    layer, reference = paired(kind, query, value, key, **HEADS)
    query_mask = np.ones((BATCH, t), bool)
    query_mask[0, 1] = False
    value_mask = np.ones((BATCH, s), bool)
    value_mask[1, -1] = False
    key_mask = np.ones((BATCH, s), bool)
    key_mask[0, -1] = False
    attention_mask = np.ones((BATCH, t, s), bool)
    attention_mask[1, 2, 1] = False
    # Tensors may be passed by position (`Layer.__call__` wants the flags,
    # `return_attention_scores`, `training` and `use_causal_mask`, by name).
    args = (query, value, key, query_mask, value_mask, key_mask, attention_mask)
    flags = dict(return_attention_scores=True, training=False, use_causal_mask=True)
    output, scores = layer(*args, **flags)
    expected, expected_scores = reference(*args, **flags)
    # Keras MHA ignores an explicit query mask: the valid rows are compared.
    assert_close(output, expected, query_mask)
    assert_scores_close(scores, expected_scores, query_mask)
    # The fourth slot is the query mask, as Keras documents it.
    assert_rows_attend_nowhere(layer, output, scores, ~query_mask)
    output = layer(query, value, key, query_mask)
    assert_close(output, reference(query, value, key), query_mask)
    assert_rows_attend_nowhere(layer, output, None, ~query_mask)


# ------------------------------------------------------------------ caches

CACHED = [
    pytest.param("structured", {}, id="structured"),
    pytest.param("area", {}, id="area-width1"),
    pytest.param("area", dict(max_area_width=2), id="area-width2"),
]


def cached_layer(cached_kind, layer_kwargs, query, value):
    layer = make_layer(cached_kind, **HEADS, **layer_kwargs)
    layer(query, value)
    randomize(layer, 3)
    return layer


@pytest.mark.parametrize("cached_kind, layer_kwargs", CACHED)
def test_cached_decoding_equals_the_full_causal_pass(cached_kind, layer_kwargs):
    t = 5
    x = np.random.default_rng(4).normal(size=(BATCH, t, DIM)).astype("float32")
    layer = cached_layer(cached_kind, layer_kwargs, x, x)
    full, full_scores = layer(x, x, use_causal_mask=True, return_attention_scores=True)
    # A two-token prefill, then one token at a time.
    steps = ((0, 2), (2, 3), (3, 4), (4, 5))
    cache = layer.empty_cache(BATCH, t)
    assert tuple(cache.shape) == (BATCH, 2, t, NUM_HEADS, KEY_DIM)
    for start, stop in steps:
        step = x[:, start:stop]
        output, scores, cache = layer(
            step,
            step,
            use_causal_mask=True,
            return_attention_scores=True,
            cache=cache,
            cache_update_index=ops.convert_to_tensor(start, "int32"),
        )
        assert_close(output, full[:, start:stop])
        assert_scores_close(scores, to_np(full_scores)[:, :, start:stop])
    # The cache now holds every position's keys and values.
    assert_close(cache, layer.project_memory(x))
    # The decoder's call: no scores.
    cache = layer.empty_cache(BATCH, t)
    for start, stop in steps:
        step = x[:, start:stop]
        output, cache = layer(
            step,
            step,
            use_causal_mask=True,
            cache=cache,
            cache_update_index=ops.convert_to_tensor(start, "int32"),
        )
        assert_close(output, full[:, start:stop])


@pytest.mark.parametrize("cached_kind, layer_kwargs", CACHED)
def test_projected_memory_equals_cross_attention(cached_kind, layer_kwargs):
    t, s = 5, 4
    rng = np.random.default_rng(6)
    query = rng.normal(size=(BATCH, t, DIM)).astype("float32")
    memory = rng.normal(size=(BATCH, s, DIM)).astype("float32")
    layer = cached_layer(cached_kind, layer_kwargs, query, memory)
    cache = layer.project_memory(memory)
    assert tuple(cache.shape) == (BATCH, 2, s, NUM_HEADS, KEY_DIM)
    output, same_cache = layer(query, None, cache=cache)
    assert_close(output, layer(query, memory))
    assert_close(same_cache, cache)
    mask = rng.random((BATCH, t, s)) < 0.6
    mask[..., 0] = True
    output, scores, _ = layer(
        query, None, attention_mask=mask, return_attention_scores=True, cache=cache
    )
    expected, expected_scores = layer(
        query, memory, attention_mask=mask, return_attention_scores=True
    )
    assert_close(output, expected)
    assert_scores_close(scores, expected_scores)
