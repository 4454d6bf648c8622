"""CATT causal-intervention attention: in-sample plus cross-sample attention.

Yang et al., "Causal Attention for Vision-Language Tasks", CVPR 2021,
arXiv:2103.03493. "Causal" is the paper's causal intervention (a front-door
adjustment), not decoder masking (`use_causal_mask` everywhere in this
library). The adjustment is approximated by two attentions with one query:

* IS-ATT (in-sample, Eq. 6): the query attends over the current sample (the
  regions of this image, the words of this sentence): ordinary attention.
* CS-ATT (cross-sample, Eq. 7): the same query attends over a global
  dictionary `D [K, d]` that stands for the whole training set: K centres of
  the training features (K-means, the paper) or uniform(0, 0.01) (the only
  released code), trained by backprop either way.

Their outputs (Z^, X^) go on together, concatenated (Section 3.2; a Linear
2d -> d belongs once at the top of a stack, as in the released code). With shared
weights (the paper's choice) both attentions use the same Q-K-V-O
projections, so that Z^ and X^ stay in one representation space and the only
new parameters are the dictionary's. See docs/catt_attention.md.

This module holds `CATTAttention` (multi-head, on
`StructuredMultiHeadAttention`). The other CATT layers have their own
modules: `global_dictionary` (`GlobalDictionary`, the `[K, d]` weight with
K-means `adapt`), `top_down_attention` (`TopDownAttention`, additive Up-Down
attention, Eq. 23 of the paper's supplementary) and
`catt_top_down_attention` (`CATTTopDownAttention`, its IS + CS version).
"""

import keras
from keras import ops

from keras_structattn import checks
from keras_structattn.layers._attention_core import LogitStructure
from keras_structattn.layers._attention_core import scaled_dot_product_attention
from keras_structattn.layers._masking import check_value_key_shapes
from keras_structattn.layers._masking import set_keras_mask
from keras_structattn.layers.global_dictionary import own_dictionary
from keras_structattn.layers.global_dictionary import resolve_dictionary_initializer
from keras_structattn.layers.structured_attention import StructuredMultiHeadAttention

FUSIONS = ("concat", "concat_dense", "none")


@keras.saving.register_keras_serializable(package="keras_structattn")
class CATTAttention(StructuredMultiHeadAttention):
    """CATT causal-intervention attention: IS-ATT over the sample plus CS-ATT over a dictionary.

    "Causal" here is the causal intervention of CATT (Yang et al., 2021,
    arXiv:2103.03493, Eqs. 6-7), not decoder masking (that is
    `use_causal_mask`, as in Keras). IS-ATT is
    `keras.layers.MultiHeadAttention(query, value, key, masks)` with this
    layer's weights. CS-ATT is multi-head attention of the same query over
    a global dictionary `D`, used as both key and value, with no mask:

        Z^ = MHA(q, X, X, mask),  X^ = MHA_cs(q, D, D)
        output = [Z^; X^]                          (fusion="concat")

    The paper concatenates the two (Section 3.2, after Eq. 7) and feeds
    the predictor with them;
    the released code adds a Linear 2d -> d once, at the top of its stack,
    which is where a Linear belongs (`fusion="concat_dense"` puts one in
    this layer; docs/catt_attention.md).

    With `share_weights=True` (the paper's choice, `ft_same` in the code)
    MHA_cs *is* MHA: the same query/key/value/output variables, and the
    query projection is computed once for both. `False` gives CS-ATT its
    own projections (`ft`, the "w/o Share" ablation).

    `D` is the layer's own trainable `GlobalDictionary` of
    `dictionary_size` entries in the key/value input space (set it through
    `layer.global_dictionary`: `adapt` for the paper's K-means
    initialisation, `set_centers`), or a tensor passed as `dictionary=`:
    `[K, d]` shared by the batch (a `GlobalDictionary` output, e.g. one
    dictionary shared by several layers) or `[B, K, d]` per sample (in
    stacked CATT, later layers attend to the previous CS output; see
    `catt_transformer`). An unbatched dictionary is projected once per
    call, not once per sample. With `dictionary_size=None` and no
    `dictionary=`, there is no CS branch: the layer is
    `keras.layers.MultiHeadAttention` with the same weights.

    A query row with no allowed key gets zero attention weights, so its
    branch outputs the output projection's bias alone, never NaN. Logits
    are masked and softmaxed in float32; the returned weights are float32.

    Args:
        num_heads: number of attention heads.
        key_dim: size of each head for query and key.
        dictionary_size: K of the layer's own dictionary (500 as in the
            paper), or None for no own dictionary.
        share_weights: one set of projections for IS-ATT and CS-ATT.
        fusion: `"concat"` (default, the paper): `[Z^; X^]`, width
            2 * output_dim; `"concat_dense"`: `Dense(output_dim)` on
            `[Z^; X^]` (the released code's Linear, here in every layer);
            `"none"`: the pair `(Z^, X^)`.
        dictionary_initializer: initializer of the own dictionary; default
            uniform(0, 0.01), the released code's, which is the paper's
            "w/o Init" ablation (-1.9 CIDEr in its Table 6): fit the
            dictionary by K-means (`global_dictionary.adapt(features)`)
            before training for the paper's model.
        **kwargs: the other arguments of `keras.layers.MultiHeadAttention`
            (`value_dim`, `dropout` (on both branches' weights), `use_bias`,
            `output_shape` (an int), initializers, regularizers, constraints
            (`use_bias` and these also apply to the fusion dense), `seed`,
            ...). `attention_axes` must be None; `flash_attention=True`
            applies to IS-ATT (CS-ATT's shared dictionary keys take the
            explicit path);
            `use_gate` (Keras' output gate) needs `share_weights=True` and
            gates both branches; a tuple `output_shape` cannot go with
            `"concat_dense"`.

    Call arguments:
        query, value, key, query_mask, value_mask, key_mask, attention_mask,
        return_attention_scores, training, use_causal_mask: as in
            `keras.layers.MultiHeadAttention`, for IS-ATT (boolean masks,
            True = may attend). `query_mask` (explicit or the query's Keras
            mask) also applies to CS-ATT and is set on the outputs.
        dictionary: keyword-only; None (the own dictionary, if any),
            `[K, d]` or `[B, K, d]`; `d` is the width of `value` and `key`.
        dictionary_mask: keyword-only; optional bool mask on the dictionary
            entries, `[K]`, `[B, K]` or `[B, T, K]` (filled from
            `dictionary`'s Keras mask). The paper's dictionary has none.
        cache, cache_update_index: keyword-only; as in
            `StructuredMultiHeadAttention`, for IS-ATT.

    Returns:
        `output`, then `(is_scores, cs_scores)` with
        `return_attention_scores=True`, then the cache if one was given.
        `output` is `[B, T, 2 * output_dim]` (`"concat"`), `[B, T,
        output_dim]` (`"concat_dense"`) or the pair `(Z^, X^)` of
        `[B, T, output_dim]` (`"none"`). Scores are float32
        `[B, num_heads, T, S]` and `[B, num_heads, T, K]`. Without a CS
        branch: the IS-ATT output and scores alone.
    """

    structure_inputs = {"dictionary": None, "dictionary_mask": None}

    def __init__(
        self,
        num_heads,
        key_dim,
        dictionary_size=500,
        share_weights=True,
        fusion="concat",
        dictionary_initializer=None,
        **kwargs,
    ):
        if kwargs.get("use_gate") and not share_weights:
            raise ValueError(
                "Argument `use_gate=True` needs share_weights=True (one output gate, "
                "computed from the query, serves both branches)."
            )
        output_shape = kwargs.get("output_shape")
        if fusion == "concat_dense" and output_shape is not None and not isinstance(
            output_shape, int
        ) and (not isinstance(output_shape, (tuple, list)) or len(output_shape) != 1):
            raise ValueError(
                "Argument `output_shape` must be None or an int (the output width) "
                f"with fusion='concat_dense'. Received: output_shape={output_shape!r}"
            )
        super().__init__(num_heads=num_heads, key_dim=key_dim, **kwargs)
        if dictionary_size is not None:
            checks.positive_int("dictionary_size", dictionary_size)
        checks.boolean("share_weights", share_weights)
        checks.one_of("fusion", fusion, FUSIONS)
        self._dictionary_size = dictionary_size
        self._share_weights = share_weights
        self._fusion = fusion
        self._dictionary_initializer = resolve_dictionary_initializer(dictionary_initializer)
        self._global_dictionary = None
        self._cs_attention = None
        self._fusion_dense = None

    @property
    def dictionary_size(self):
        return self._dictionary_size

    @property
    def share_weights(self):
        return self._share_weights

    @property
    def fusion(self):
        return self._fusion

    @property
    def global_dictionary(self):
        """The layer's own `GlobalDictionary` (None if `dictionary_size` is None)."""
        return self._global_dictionary

    def get_config(self):
        config = super().get_config()
        config.update(
            dictionary_size=self._dictionary_size,
            share_weights=self._share_weights,
            fusion=self._fusion,
            dictionary_initializer=keras.initializers.serialize(
                self._dictionary_initializer
            ),
        )
        return config

    def build(self, query_shape, value_shape, key_shape=None, dictionary_shape=None):
        check_value_key_shapes(value_shape, key_shape)
        key_shape = value_shape if key_shape is None else key_shape
        if len(key_shape) != 3:
            raise ValueError(
                "CATTAttention takes [B, T, dim] query, value and key. Received: "
                f"key_shape={tuple(key_shape)}"
            )
        dim = value_shape[-1]
        if self._dictionary_size is not None or dictionary_shape is not None:
            self._check_same_width(key_shape, value_shape)
        if dictionary_shape is not None:
            self._check_dictionary_shape(dictionary_shape, dim)
        super().build(query_shape, value_shape, key_shape)
        if self._dictionary_size is not None:
            self._global_dictionary = own_dictionary(
                self._dictionary_size, dim, self._dictionary_initializer, self.dtype_policy
            )
        if not self._share_weights:
            config = keras.layers.MultiHeadAttention.get_config(self)
            for name in ("name", "trainable", "dtype"):
                config.pop(name, None)
            self._cs_attention = StructuredMultiHeadAttention(
                **config, name="cs_attention", dtype=self.dtype_policy
            )
            self._cs_attention.build(query_shape, (None, None, dim))
        if self._fusion == "concat_dense":
            output_dim = self._output_shape[-1] if self._output_shape else query_shape[-1]
            common = self._get_common_kwargs_for_sublayer()
            self._fusion_dense = keras.layers.Dense(
                output_dim, use_bias=self._use_bias, name="fusion", **common
            )
            self._fusion_dense.build(tuple(query_shape[:-1]) + (2 * output_dim,))

    def _check_dictionary_shape(self, shape, dim):
        if len(shape) not in (2, 3) or (shape[-1] is not None and shape[-1] != dim):
            raise ValueError(
                "Argument `dictionary` must be [K, d] or [B, K, d] with d the width "
                f"of `value` ({dim}). Received: dictionary.shape={tuple(shape)}"
            )

    @staticmethod
    def _check_same_width(key_shape, value_shape):
        if key_shape[-1] != value_shape[-1]:
            raise ValueError(
                "The dictionary serves as both key and value of CS-ATT, so `key` and "
                "`value` must have the same width. Received: "
                f"key_shape={tuple(key_shape)}, value_shape={tuple(value_shape)}"
            )

    def _check_inputs(self, query, value, key, state):
        dictionary = state["dictionary"]
        if dictionary is None:
            if self._global_dictionary is not None:
                dictionary = ops.cast(self._global_dictionary.dictionary, self.compute_dtype)
        else:
            set_keras_mask(dictionary, None)
            if value is not None:
                self._check_same_width(key.shape, value.shape)
                self._check_dictionary_shape(dictionary.shape, value.shape[-1])
        if dictionary is None and state["dictionary_mask"] is not None:
            raise ValueError(
                "Argument `dictionary_mask` was given but there is no dictionary: the layer "
                "has dictionary_size=None and no `dictionary=` was passed."
            )
        state["dictionary"] = dictionary

    def _attend(self, query, key, value, structure, training, need_weights, state):
        is_context, is_weights = super()._attend(
            query, key, value, structure, training, need_weights, state
        )
        dictionary = state["dictionary"]
        if dictionary is None:  # no CS branch: plain multi-head attention
            return is_context, is_weights
        cs = self if self._share_weights else self._cs_attention
        cs_query = query if self._share_weights else cs.query_dense(state["query"])
        if len(dictionary.shape) == 2:
            # Projected once, shared by the batch: [K, N, d].
            entries = ops.expand_dims(dictionary, 0)
            cs_key, cs_value = cs.key_dense(entries)[0], cs.value_dense(entries)[0]
        else:
            cs_key, cs_value = cs.key_dense(dictionary), cs.value_dense(dictionary)
        mask = self._dictionary_attention_mask(state["query_mask"], state["dictionary_mask"])
        cs_context, cs_weights = scaled_dot_product_attention(
            cs_query,
            cs_key,
            cs_value,
            LogitStructure(allowed=None if mask is None else ops.expand_dims(mask, 1)),
            key_dim=self._key_dim,
            dropout_layer=self._dropout_layer,
            training=training,
            compute_dtype=self.compute_dtype,
            need_weights=need_weights,
        )
        weights = (is_weights, cs_weights) if need_weights else None
        return (is_context, cs_context), weights

    def _output(self, context, output_gate, state):
        if not isinstance(context, tuple):
            return super()._output(context, output_gate, state)
        is_context, cs_context = context
        if output_gate is not None:  # one gate for both branches (shared weights)
            is_context = ops.multiply(is_context, output_gate)
            cs_context = ops.multiply(cs_context, output_gate)
        cs = self if self._share_weights else self._cs_attention
        is_output = self._output_dense(is_context)
        cs_output = cs.output_dense(cs_context)
        if self._fusion == "none":
            return (is_output, cs_output)
        output = ops.concatenate([is_output, cs_output], axis=-1)
        if self._fusion == "concat_dense":
            output = self._fusion_dense(output)
        return output

    def _dictionary_attention_mask(self, query_mask, dictionary_mask):
        """Mask of CS-ATT, broadcastable to `[B, T, K]`, or None."""
        mask = None
        if dictionary_mask is not None:
            mask = ops.cast(dictionary_mask, "bool")
            rank = len(mask.shape)
            if rank == 1:
                mask = mask[None, None, :]
            elif rank == 2:
                mask = mask[:, None, :]
            elif rank != 3:
                raise ValueError(
                    "Argument `dictionary_mask` must be [K], [B, K] or [B, T, K]. "
                    f"Received: dictionary_mask.shape={tuple(dictionary_mask.shape)}"
                )
        if query_mask is not None:
            rows = ops.expand_dims(ops.cast(query_mask, "bool"), -1)
            mask = rows if mask is None else ops.logical_and(mask, rows)
        return mask
