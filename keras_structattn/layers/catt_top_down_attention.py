"""Up-Down additive attention with CATT: over the regions and over a dictionary.

BUTD+CATT (Yang et al., "Causal Attention for Vision-Language Tasks",
arXiv:2103.03493, supplementary C.4): `TopDownAttention` over the regions
(IS-ATT) and, with the same query, over a `GlobalDictionary` (CS-ATT).
See docs/catt_attention.md.
"""

import keras
from keras import ops

from keras_structattn import checks
from keras_structattn.layers._masking import set_keras_mask
from keras_structattn.layers.global_dictionary import own_dictionary
from keras_structattn.layers.global_dictionary import resolve_dictionary_initializer
from keras_structattn.layers.top_down_attention import TopDownAttention


@keras.saving.register_keras_serializable(package="keras_structattn")
class CATTTopDownAttention(keras.layers.Layer):
    """Up-Down additive attention with CATT: over the regions and over a dictionary.

    BUTD+CATT (the paper's supplementary, C.4): the attention LSTM's
    state h attends over the RoI features with the Up-Down scorer (IS-ATT)
    and, with the same query, over a global visual dictionary (CS-ATT). With
    `share_weights=True` one scorer (W_v, W_h, w) serves both; the language
    LSTM then takes `[v^_IS; v^_CS; h]`.

    Args:
        attention_dim: width of the additive scorer.
        dictionary_size: K of the own dictionary (1000 for BUTD+CATT in the
            paper's supplementary), or None: then pass `dictionary=`.
        share_weights: one scorer for both attentions.
        fusion: `"concat"`: `[v^_IS; v^_CS]` (`[B, 2 dv]`); `"none"`: the pair.
        dictionary_initializer: of the own dictionary; default
            uniform(0, 0.01). Use `layer.global_dictionary.adapt(features)`
            for the paper's K-means centres.
        **kwargs: `TopDownAttention` arguments (`use_bias`, initializers,
            regularizers) and base layer arguments.

    Call arguments:
        query: `[B, dq]` or `[B, T, dq]`.
        value: regions `[B, N, dv]`.
        dictionary: None (own dictionary), `[K, dv]` or `[B, K, dv]`.
        value_mask: optional bool `[B, N]` for the regions.
        return_attention_scores: also return `(is_weights, cs_weights)`.

    Returns:
        `output` (`[B(, T), 2 dv]` or the pair), or
        `(output, (is_weights, cs_weights))`.
    """

    _SCORER_ARGS = (
        "use_bias",
        "kernel_initializer",
        "bias_initializer",
        "kernel_regularizer",
        "bias_regularizer",
    )

    def __init__(
        self,
        attention_dim=512,
        dictionary_size=1000,
        share_weights=True,
        fusion="concat",
        dictionary_initializer=None,
        **kwargs,
    ):
        scorer_kwargs = {k: kwargs.pop(k) for k in self._SCORER_ARGS if k in kwargs}
        super().__init__(**kwargs)
        checks.positive_int("attention_dim", attention_dim)
        if dictionary_size is not None:
            checks.positive_int("dictionary_size", dictionary_size)
        checks.boolean("share_weights", share_weights)
        checks.one_of("fusion", fusion, ("concat", "none"))
        self.attention_dim = attention_dim
        self.dictionary_size = dictionary_size
        self.share_weights = share_weights
        self.fusion = fusion
        self.dictionary_initializer = resolve_dictionary_initializer(dictionary_initializer)
        self.supports_masking = True
        self.attention = TopDownAttention(
            attention_dim, name="attention", dtype=self.dtype_policy, **scorer_kwargs
        )
        self.cs_attention = None
        if not share_weights:
            self.cs_attention = TopDownAttention(
                attention_dim, name="cs_attention", dtype=self.dtype_policy, **scorer_kwargs
            )
        self.global_dictionary = None

    def build(self, query_shape, value_shape, dictionary_shape=None):
        if len(value_shape) != 3:
            raise ValueError(
                "CATTTopDownAttention takes regions [B, N, dv]. "
                f"Received: value_shape={tuple(value_shape)}"
            )
        dim = value_shape[-1]
        if dictionary_shape is not None:
            self._check_dictionary_shape(dictionary_shape, dim)
        self.attention.build(query_shape, value_shape)
        if self.cs_attention is not None:
            self.cs_attention.build(query_shape, (None, dim))
        if self.dictionary_size is not None:
            self.global_dictionary = own_dictionary(
                self.dictionary_size, dim, self.dictionary_initializer, self.dtype_policy
            )

    def _check_dictionary_shape(self, shape, dim):
        if len(shape) not in (2, 3) or (shape[-1] is not None and shape[-1] != dim):
            raise ValueError(
                "Argument `dictionary` must be [K, dv] or [B, K, dv] with dv the width "
                f"of `value` ({dim}). Received: dictionary.shape={tuple(shape)}"
            )

    def compute_output_spec(
        self, query, value, dictionary=None, value_mask=None, return_attention_scores=False
    ):
        lead = (query.shape[0],) + tuple(query.shape[1:-1])
        width = value.shape[-1]
        branch = keras.KerasTensor(lead + (width,), self.compute_dtype)
        if self.fusion == "none":
            output = (branch, keras.KerasTensor(lead + (width,), self.compute_dtype))
        else:
            output = keras.KerasTensor(lead + (2 * width,), self.compute_dtype)
        if not return_attention_scores:
            return output
        size = self.dictionary_size if dictionary is None else dictionary.shape[-2]
        return output, (
            keras.KerasTensor(lead + (value.shape[1],), "float32"),
            keras.KerasTensor(lead + (size,), "float32"),
        )

    def compute_mask(self, query, value, dictionary=None, value_mask=None,
                     return_attention_scores=False):
        return None

    def call(self, query, value, dictionary=None, value_mask=None, return_attention_scores=False):
        set_keras_mask(value, None)
        if dictionary is None:
            if self.global_dictionary is None:
                raise ValueError(
                    "CATTTopDownAttention was built with dictionary_size=None, so "
                    "each call needs `dictionary` ([K, dv] or [B, K, dv])."
                )
            dictionary = ops.cast(self.global_dictionary.dictionary, self.compute_dtype)
        else:
            set_keras_mask(dictionary, None)
            self._check_dictionary_shape(dictionary.shape, value.shape[-1])
        is_context, is_weights = self.attention.attend(query, value, value_mask)
        scorer = self.attention if self.cs_attention is None else self.cs_attention
        cs_context, cs_weights = scorer.attend(query, dictionary)
        if self.fusion == "none":
            output = (is_context, cs_context)
        else:
            output = ops.concatenate([is_context, cs_context], axis=-1)
        if return_attention_scores:
            return output, (is_weights, cs_weights)
        return output

    def get_config(self):
        config = super().get_config()
        scorer = self.attention.get_config()
        config.update({k: scorer[k] for k in self._SCORER_ARGS})
        config.update(
            attention_dim=self.attention_dim,
            dictionary_size=self.dictionary_size,
            share_weights=self.share_weights,
            fusion=self.fusion,
            dictionary_initializer=keras.initializers.serialize(self.dictionary_initializer),
        )
        return config
