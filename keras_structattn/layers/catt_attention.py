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

Layers: `GlobalDictionary` (the `[K, d]` weight, with K-means `adapt`),
`CATTAttention` (multi-head, on `StructuredMultiHeadAttention`),
`TopDownAttention` (additive Up-Down attention, Eq. 23 of the paper's
supplementary) and `CATTTopDownAttention` (its IS + CS version).
"""

import keras
import numpy as np
from keras import ops

from keras_structattn.layers._attention_core import LogitStructure
from keras_structattn.layers._attention_core import scaled_dot_product_attention
from keras_structattn.layers._masking import set_keras_mask
from keras_structattn.layers.blocks import clone_initializer
from keras_structattn.layers.structured_attention import StructuredMultiHeadAttention
from keras_structattn.ops import _checks
from keras_structattn.ops import kmeans
from keras_structattn.ops.masked_softmax import masked_softmax

FUSIONS = ("concat", "concat_dense", "none")


def uniform_dictionary_initializer():
    """uniform(0, 0.01): the dictionary initialisation of the released code
    (the paper's "w/o Init" ablation; the paper fits K-means centres)."""
    return keras.initializers.RandomUniform(minval=0.0, maxval=0.01)


def resolve_dictionary_initializer(initializer=None):
    """`initializer` as a Keras initializer; None gives uniform(0, 0.01)."""
    if initializer is None:
        return uniform_dictionary_initializer()
    return keras.initializers.get(initializer)


def own_dictionary(size, dim, initializer, dtype):
    """A layer's own `GlobalDictionary` (named `global_dictionary`), with a
    fresh copy of `initializer` so that no two dictionaries share draws."""
    return GlobalDictionary(
        size,
        dim=dim,
        initializer=clone_initializer(initializer),
        name="global_dictionary",
        dtype=dtype,
    )


# ------------------------------------------------------------- dictionary


@keras.saving.register_keras_serializable(package="keras_structattn")
class GlobalDictionary(keras.layers.Layer):
    """A trainable global dictionary `[size, dim]` for cross-sample attention.

    The dictionary stands for "other samples" in CS-ATT. Three ways to set
    it, all trainable afterwards:

    * `initializer`: default uniform(0, 0.01), as the released code
      (`torch.rand / 100`); any Keras initializer.
    * `adapt(data, ...)`: mini-batch K-means with k-means++ seeding over
      training features, the paper's initialisation (see
      `keras_structattn.ops.kmeans`); reports the inertia in
      `self.inertia`.
    * `set_centers(centers)`: given centres, e.g. a K-means run elsewhere.

    The weight is float32 under mixed precision (the variable dtype); the
    layer's output is cast to the compute dtype.

    Args:
        size: K, the number of entries (500 in the paper's Transformer and
            LXMERT models).
        dim: entry width. If None, taken from the last axis of the first
            input (or of the centres given to `set_centers`/`adapt`). When
            known, the layer is built at once.
        initializer, regularizer, constraint: for the weight.
        **kwargs: base `keras.layers.Layer` arguments (`name`, `dtype`, ...).

    Call arguments:
        inputs: any tensor `[..., dim]`; only its last axis is used (to
            build). Calling on the features ties the dictionary into a
            functional model: `D = GlobalDictionary(500)(features)`.

    Returns:
        The dictionary `[size, dim]` (no batch axis) in the compute dtype.
    """

    def __init__(
        self,
        size=500,
        dim=None,
        initializer=None,
        regularizer=None,
        constraint=None,
        **kwargs,
    ):
        super().__init__(**kwargs)
        _checks.positive_int("size", size)
        if dim is not None:
            _checks.positive_int("dim", dim)
        self.size = size
        self.dim = dim
        if initializer is None:
            initializer = uniform_dictionary_initializer()
        self.initializer = keras.initializers.get(initializer)
        self.regularizer = keras.regularizers.get(regularizer)
        self.constraint = keras.constraints.get(constraint)
        self.inertia = None
        self.kmeans_history = None
        if dim is not None:
            self.build((dim,))

    def build(self, input_shape=None):
        if self.built:
            return
        self._check_width(input_shape)
        dim = self.dim
        if input_shape is not None and input_shape[-1] is not None:
            dim = input_shape[-1]
        if dim is None:
            raise ValueError(
                "GlobalDictionary needs `dim`, or an input or centres to take it from."
            )
        self.dim = int(dim)
        self.dictionary = self.add_weight(
            name="dictionary",
            shape=(self.size, self.dim),
            initializer=self.initializer,
            regularizer=self.regularizer,
            constraint=self.constraint,
        )
        self.built = True

    def _check_width(self, input_shape):
        if input_shape is None or input_shape[-1] is None or self.dim is None:
            return
        if input_shape[-1] != self.dim:
            raise ValueError(
                f"GlobalDictionary has dim={self.dim} but its input has "
                f"{input_shape[-1]} features. Received: input_shape={tuple(input_shape)}"
            )

    def call(self, inputs=None):
        if inputs is not None:
            self._check_width(inputs.shape)
        return ops.cast(self.dictionary, self.compute_dtype)

    def compute_output_shape(self, input_shape=None):
        dim = self.dim if self.dim is not None else input_shape[-1]
        return (self.size, dim)

    def compute_mask(self, inputs, mask=None):
        return None

    def set_centers(self, centers):
        """Sets the dictionary to the given `[size, dim]` centres."""
        centers = np.asarray(centers, dtype="float32")
        if centers.ndim != 2 or centers.shape[0] != self.size or (
            self.dim is not None and centers.shape[1] != self.dim
        ):
            raise ValueError(
                f"Argument `centers` must be [size, dim] = [{self.size}, "
                f"{self.dim if self.dim is not None else 'dim'}]. "
                f"Received: centers.shape={centers.shape}"
            )
        self.build((centers.shape[1],))
        self.dictionary.assign(centers)

    def adapt(self, data, batch_size=None, steps=None, **kmeans_options):
        """Sets the dictionary to K-means centres of `data` (the paper's init).

        Mini-batch K-means with greedy k-means++ seeding on the host
        (`keras_structattn.ops.kmeans.minibatch_kmeans`, vectorised NumPy).

        Args:
            data: feature vectors `[..., dim]`: a NumPy array or backend
                tensor (leading axes are flattened), a batched
                `tf.data.Dataset` (of arrays or `(features, ...)` tuples),
                or a list of batches. It is read several times.
            batch_size: rows per mini-batch for arrays (default 1024); None
                for datasets and lists, which come batched.
            steps: batches per pass (default: all).
            **kmeans_options: keyword arguments of `minibatch_kmeans`:
                `epochs` (3), `init_size`, `seed` (the same seed gives the
                same centres), `shuffle`, `ignore_zero_rows` (skip all-zero
                padding rows), `compute_inertia` (the exact inertia, stored
                in `self.inertia`), `verbose`.
        """
        result = kmeans.minibatch_kmeans(
            data, self.size, batch_size=batch_size, steps=steps, **kmeans_options
        )
        self.set_centers(result.centers)
        self.inertia = result.inertia
        self.kmeans_history = result.history

    def get_config(self):
        config = super().get_config()
        config.update(
            size=self.size,
            dim=self.dim,
            initializer=keras.initializers.serialize(self.initializer),
            regularizer=keras.regularizers.serialize(self.regularizer),
            constraint=keras.constraints.serialize(self.constraint),
        )
        return config


# ------------------------------------------------------------ multi-head


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
            ...). `attention_axes` must be None and `flash_attention` False;
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
            _checks.positive_int("dictionary_size", dictionary_size)
        _checks.boolean("share_weights", share_weights)
        _checks.one_of("fusion", fusion, FUSIONS)
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

# ---------------------------------------------------------------- Up-Down


@keras.saving.register_keras_serializable(package="keras_structattn")
class TopDownAttention(keras.layers.Layer):
    """Additive attention of the Up-Down (BUTD) captioner (Eq. 23).

        e_i = w^T tanh(W_v v_i + W_h h),  alpha = softmax(e),  out = sum_i alpha_i v_i

    As in ruotianluo/self-critical.pytorch (`Attention`: ctx2att, h2att,
    alpha_net), each projection is a Dense layer with bias. Masked regions
    get zero weight (the code renormalises after the softmax, which is the
    same); a row with no allowed region gets zeros, never NaN. Scores and
    the softmax are float32 under mixed precision.

    Args:
        attention_dim: width of the additive scorer (512 in the Up-Down code).
        use_bias: biases on the three projections.
        kernel_initializer, bias_initializer, kernel_regularizer,
            bias_regularizer: for the three projections.
        **kwargs: base `keras.layers.Layer` arguments.

    Call arguments:
        query: `[B, dq]` (one step: the attention LSTM's h) or `[B, T, dq]`
            (T queries at once).
        value: `[B, N, dv]` regions, or `[N, dv]` shared by the batch (a
            dictionary; projected once).
        value_mask: optional bool `[B, N]` (or `[N]`), True = may attend.
        return_attention_scores: also return the weights.

    Returns:
        `context` `[B, dv]` (or `[B, T, dv]`), and with
        `return_attention_scores=True` also the float32 weights `[B, N]`
        (or `[B, T, N]`).
    """

    def __init__(
        self,
        attention_dim=512,
        use_bias=True,
        kernel_initializer="glorot_uniform",
        bias_initializer="zeros",
        kernel_regularizer=None,
        bias_regularizer=None,
        **kwargs,
    ):
        super().__init__(**kwargs)
        _checks.positive_int("attention_dim", attention_dim)
        self.attention_dim = attention_dim
        self.use_bias = use_bias
        self.kernel_initializer = keras.initializers.get(kernel_initializer)
        self.bias_initializer = keras.initializers.get(bias_initializer)
        self.kernel_regularizer = keras.regularizers.get(kernel_regularizer)
        self.bias_regularizer = keras.regularizers.get(bias_regularizer)
        self.supports_masking = True

    def _dense(self, units, name):
        return keras.layers.Dense(
            units,
            use_bias=self.use_bias,
            kernel_initializer=clone_initializer(self.kernel_initializer),
            bias_initializer=clone_initializer(self.bias_initializer),
            kernel_regularizer=self.kernel_regularizer,
            bias_regularizer=self.bias_regularizer,
            name=name,
            dtype=self.dtype_policy,
        )

    def build(self, query_shape, value_shape):
        if len(query_shape) not in (2, 3) or len(value_shape) not in (2, 3):
            raise ValueError(
                "TopDownAttention takes a [B, dq] or [B, T, dq] query and [B, N, dv] "
                f"or [N, dv] values. Received: query_shape={tuple(query_shape)}, "
                f"value_shape={tuple(value_shape)}"
            )
        self.value_projection = self._dense(self.attention_dim, "value_projection")
        self.value_projection.build(value_shape)
        self.query_projection = self._dense(self.attention_dim, "query_projection")
        self.query_projection.build(query_shape)
        self.score = self._dense(1, "score")
        self.score.build((None, self.attention_dim))

    def compute_output_spec(self, query, value, value_mask=None, return_attention_scores=False):
        batch = query.shape[0]
        steps = tuple(query.shape[1:-1])
        context = keras.KerasTensor((batch,) + steps + (value.shape[-1],), self.compute_dtype)
        if return_attention_scores:
            return context, keras.KerasTensor((batch,) + steps + (value.shape[-2],), "float32")
        return context

    def compute_mask(self, query, value, value_mask=None, return_attention_scores=False):
        return None

    def call(self, query, value, value_mask=None, return_attention_scores=False):
        set_keras_mask(value, None)
        context, weights = self.attend(query, value, value_mask)
        if return_attention_scores:
            return context, weights
        return context

    def attend(self, query, value, value_mask=None, projected_value=None):
        """`(context, weights)`; `projected_value` = `value_projection(value)`
        if already computed (e.g. once per image for a step-by-step LSTM)."""
        single = len(query.shape) == 2
        if single:
            query = ops.expand_dims(query, 1)
        if projected_value is None:
            projected_value = self.value_projection(value)
        projected_query = self.query_projection(query)[:, :, None, :]  # [B, T, 1, a]
        if len(value.shape) == 2:
            projected_value = projected_value[None, None]  # [1, 1, N, a]
        else:
            projected_value = projected_value[:, None]  # [B, 1, N, a]
        hidden = ops.tanh(projected_query + projected_value)
        logits = ops.cast(self.score(hidden)[..., 0], "float32")  # [B, T, N]
        mask = None
        if value_mask is not None:
            mask = ops.cast(value_mask, "bool")
            mask = mask[None, None, :] if len(mask.shape) == 1 else mask[:, None, :]
        weights = masked_softmax(logits, mask)
        cast = ops.cast(weights, self.compute_dtype)
        if len(value.shape) == 2:
            context = ops.einsum("btn,nd->btd", cast, value)
        else:
            context = ops.einsum("btn,bnd->btd", cast, value)
        if single:
            context, weights = context[:, 0], weights[:, 0]
        return context, weights

    def get_config(self):
        config = super().get_config()
        config.update(
            attention_dim=self.attention_dim,
            use_bias=self.use_bias,
            kernel_initializer=keras.initializers.serialize(self.kernel_initializer),
            bias_initializer=keras.initializers.serialize(self.bias_initializer),
            kernel_regularizer=keras.regularizers.serialize(self.kernel_regularizer),
            bias_regularizer=keras.regularizers.serialize(self.bias_regularizer),
        )
        return config


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
        _checks.positive_int("attention_dim", attention_dim)
        if dictionary_size is not None:
            _checks.positive_int("dictionary_size", dictionary_size)
        _checks.boolean("share_weights", share_weights)
        _checks.one_of("fusion", fusion, ("concat", "none"))
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
