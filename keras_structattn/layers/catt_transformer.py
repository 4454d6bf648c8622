"""Stacked CATT causal-intervention attention for Transformers (Transformer+CATT).

The Transformer+CATT of Yang et al., 2021, arXiv:2103.03493 (Fig. 5); see
docs/catt_attention.md.

Every block carries two streams side by side, the in-sample (IS) stream Z
and the cross-sample (CS) stream X, through the same sublayers (Eq. 8:
multi-head attention, then residual + LayerNorm, then FFN + residual +
LayerNorm, post-norm as in the original Transformer and the released
LXMERT+CATT code: the post-norm `Residual` and the `FeedForward` of
`layers/blocks.py`):

* Self-attention (a `CATTAttention` with `fusion="none"`): the IS stream
  attends to itself; the CS stream's attention uses the *same query* (the
  IS stream) over the CS context: the dictionary in the first block of a
  stack (image dictionary in the encoder, word dictionary in the decoder;
  no mask), the previous block's CS output afterwards (with the token mask,
  and causal in the decoder). Both residuals are the IS input. This is the
  single-modality layer of yangxuntu/lxmertcatt (`BertLayer`, `ft_same`).
* Decoder cross-attention: the IS stream attends to the encoder's IS
  output, the CS stream (as query) to the encoder's CS output, with one
  set of weights (Fig. 5; the `g2g` cross layer of the code).
  Its attention (`StructuredMultiHeadAttention`) gives zero weights to rows
  without keys, like the self-attention.
* FFN and norms: shared by the streams.

With `share_weights=False` (the paper's "w/o Share" ablation, `ft` in the
code) the CS stream gets its own attention projections, norms and FFN.

The decoder stack returns `[Z^; X^]` (width 2 * hidden), what the paper
feeds the word predictor. The IS stream never reads the CS stream: it
depends neither on the dictionaries nor on the encoder's CS output (the CS
stream reads the IS stream, through its queries and residuals).

Blocks are used in full-sequence (teacher-forced) form; there is no
incremental decoding cache.
"""

import keras
from keras import ops

from keras_structattn.layers.blocks import BlockBase
from keras_structattn.layers.blocks import clone_initializer
from keras_structattn.layers.blocks import sub_seed
from keras_structattn.layers.catt_attention import CATTAttention
from keras_structattn.layers.catt_attention import GlobalDictionary
from keras_structattn.layers.catt_attention import uniform_dictionary_initializer
from keras_structattn.layers.structured_attention import StructuredMultiHeadAttention
from keras_structattn.ops import _checks


class _CATTBlock(BlockBase):
    """Shared parts: streams, post-norm residuals, the FFN, config."""

    normalize_first = False
    # Sublayer kinds a CS stream owns separately when weights are not shared.
    _STREAM_LAYERS = ()

    def __init__(
        self,
        hidden_size,
        filter_size,
        num_heads,
        *,
        share_weights=True,
        activation="relu",
        **kwargs,
    ):
        super().__init__(hidden_size, filter_size, num_heads, **kwargs)
        _checks.boolean("share_weights", share_weights)
        self.share_weights = share_weights
        self.activation = keras.activations.get(activation)
        self.self_attention = CATTAttention(
            num_heads,
            hidden_size // num_heads,
            dictionary_size=None,
            share_weights=share_weights,
            fusion="none",
            dropout=self.attention_dropout,
            seed=self._next_seed(),
            name="self_attention",
            dtype=self.dtype_policy,
        )
        self._make_stream_layers("")
        if not share_weights:
            self._make_stream_layers("cs_")

    def _make_stream_layers(self, prefix):
        """Attentions, residuals and FFN of one stream (prefix "" or "cs_")."""
        for kind in self._STREAM_LAYERS + ("self_attention",):
            if kind != "self_attention":
                setattr(self, prefix + kind, self._make_attention(prefix + kind))
            setattr(self, prefix + kind + "_residual", self._residual(prefix + kind + "_residual"))
        setattr(self, prefix + "ffn", self._feed_forward(prefix + "ffn", self.activation))
        setattr(self, prefix + "ffn_residual", self._residual(prefix + "ffn_residual"))

    def _make_attention(self, name):
        return StructuredMultiHeadAttention(
            self.num_heads,
            self.hidden_size // self.num_heads,
            dropout=self.attention_dropout,
            seed=self._next_seed(),
            name=name,
            dtype=self.dtype_policy,
        )

    def _layer(self, name, stream):
        """The sublayer `name` of a stream ("is" or "cs")."""
        if stream == "cs" and not self.share_weights:
            return getattr(self, "cs_" + name)
        return getattr(self, name)

    def _build_stream_layers(self, x_shape):
        prefixes = ("",) if self.share_weights else ("", "cs_")
        for prefix in prefixes:
            for kind in self._STREAM_LAYERS + ("self_attention", "ffn"):
                getattr(self, prefix + kind + "_residual").build(x_shape)
            getattr(self, prefix + "ffn").build(x_shape)

    def _residual_add(self, x, y, kind, stream, training):
        """Post-norm residual: LayerNorm(x + Dropout(y))."""
        return self._layer(kind + "_residual", stream)(x, y, training=training)

    def _apply_feed_forward(self, x, stream, training):
        y = self._layer("ffn", stream)(x, training=training)
        return self._residual_add(x, y, "ffn", stream, training)

    def _self_attention(self, x, context, padding_mask, cs_mask, causal, training):
        """Both streams' self-attention sublayer (attention + residual + norm)."""
        is_out, cs_out = self.self_attention(
            x,
            x,
            dictionary=context,
            value_mask=padding_mask,
            dictionary_mask=cs_mask,
            use_causal_mask=causal,
            training=training,
        )
        return (
            self._residual_add(x, is_out, "self_attention", "is", training),
            self._residual_add(x, cs_out, "self_attention", "cs", training),
        )

    def compute_output_shape(self, x_shape, *args, **kwargs):
        return (tuple(x_shape), tuple(x_shape))

    def get_config(self):
        config = super().get_config()
        config.update(
            share_weights=self.share_weights,
            activation=keras.activations.serialize(self.activation),
        )
        return config


def _stream_mask(padding_mask, length=None):
    """Key mask of a CS stream: `[B, 1, S]` padding, AND causal `[1, T, T]`."""
    mask = None if padding_mask is None else ops.cast(padding_mask, "bool")[:, None, :]
    if length is not None:
        positions = ops.arange(length)
        causal = (positions[None, :] <= positions[:, None])[None]
        mask = causal if mask is None else ops.logical_and(mask, causal)
    return mask


@keras.saving.register_keras_serializable(package="keras_structattn")
class CATTEncoderBlock(_CATTBlock):
    """One Transformer+CATT encoder block: two streams through shared sublayers.

    Args:
        hidden_size, filter_size, num_heads: model width, FFN width and
            heads (key_dim = hidden_size // num_heads).
        share_weights: one set of weights for both streams (the paper).
        attention_dropout: dropout on attention weights.
        relu_dropout: dropout after the FFN activation.
        layer_dropout: dropout on each sublayer's output before the
            residual add.
        layer_norm_epsilon: of the post-norms.
        activation: of the FFN (ReLU in the Transformer).
        seed: int seed for the dropouts.
        **kwargs: base layer arguments.

    Call arguments:
        x: the IS stream `[B, S, hidden_size]` (the input features in the
            first block).
        context: the CS context: the image dictionary `[K, hidden_size]` in
            the first block (attended without a mask), the previous block's
            CS output `[B, S, hidden_size]` afterwards.
        padding_mask: optional bool `[B, S]`, True for real tokens; masks
            the keys of both streams (the dictionary excepted).
        training: whether dropout is active.

    Returns:
        `(is_stream, cs_stream)`, each `[B, S, hidden_size]`.
    """

    def build(self, x_shape, context_shape=None):
        self._check_width("x", x_shape)
        self._check_width("context", context_shape)
        context_shape = x_shape if context_shape is None else context_shape
        self.self_attention.build(x_shape, x_shape, None, context_shape)
        self._build_stream_layers(x_shape)

    def call(self, x, context, padding_mask=None, training=None):
        cs_mask = _stream_mask(padding_mask) if len(context.shape) == 3 else None
        z, c = self._self_attention(x, context, padding_mask, cs_mask, False, training)
        return (
            self._apply_feed_forward(z, "is", training),
            self._apply_feed_forward(c, "cs", training),
        )


@keras.saving.register_keras_serializable(package="keras_structattn")
class CATTDecoderBlock(_CATTBlock):
    """One Transformer+CATT decoder block (causal self-attention, cross-attention, FFN).

    Args:
        As `CATTEncoderBlock`.

    Call arguments:
        x: the IS stream `[B, T, hidden_size]` (word embeddings in the first
            block); the whole prefix, attended causally.
        context: the word dictionary `[K, hidden_size]` in the first block
            (no mask), the previous block's CS output `[B, T, hidden_size]`
            afterwards (causal and padding masks).
        encoder_is, encoder_cs: the encoder's IS and CS outputs
            `[B, S, hidden_size]`; the IS stream attends to the first, the
            CS stream to the second.
        padding_mask: optional bool `[B, T]` for the decoder keys.
        encoder_padding_mask: optional bool `[B, S]`.
        training: whether dropout is active.

    Returns:
        `(is_stream, cs_stream)`, each `[B, T, hidden_size]`.
    """

    _STREAM_LAYERS = ("cross_attention",)

    def build(self, x_shape, context_shape=None, encoder_is_shape=None, encoder_cs_shape=None):
        self._check_width("x", x_shape)
        for name, shape in (
            ("context", context_shape),
            ("encoder_is", encoder_is_shape),
            ("encoder_cs", encoder_cs_shape),
        ):
            self._check_width(name, shape)
        context_shape = x_shape if context_shape is None else context_shape
        encoder_shape = encoder_is_shape or encoder_cs_shape or x_shape
        self.self_attention.build(x_shape, x_shape, None, context_shape)
        self.cross_attention.build(x_shape, encoder_shape)
        if not self.share_weights:
            self.cs_cross_attention.build(x_shape, encoder_shape)
        self._build_stream_layers(x_shape)

    def call(
        self,
        x,
        context,
        encoder_is,
        encoder_cs,
        padding_mask=None,
        encoder_padding_mask=None,
        training=None,
    ):
        cs_mask = None
        if len(context.shape) == 3:
            cs_mask = _stream_mask(padding_mask, ops.shape(x)[1])
        z, c = self._self_attention(x, context, padding_mask, cs_mask, True, training)
        mask = None
        if encoder_padding_mask is not None:
            mask = ops.cast(encoder_padding_mask, "bool")[:, None, :]
        outputs = []
        for stream, query, memory in (("is", z, encoder_is), ("cs", c, encoder_cs)):
            attention = self._layer("cross_attention", stream)
            y = attention(query, memory, attention_mask=mask, training=training)
            y = self._residual_add(query, y, "cross_attention", stream, training)
            outputs.append(self._apply_feed_forward(y, stream, training))
        return tuple(outputs)


class _CATTStack(keras.layers.Layer):
    """A dictionary and `num_layers` blocks; config."""

    _BLOCK_ARGS = (
        "share_weights",
        "attention_dropout",
        "relu_dropout",
        "layer_dropout",
        "layer_norm_epsilon",
        "activation",
    )

    def __init__(
        self,
        num_layers,
        hidden_size,
        filter_size,
        num_heads,
        *,
        dictionary_size=500,
        dictionary_initializer=None,
        seed=None,
        **kwargs,
    ):
        block_kwargs = {k: kwargs.pop(k) for k in self._BLOCK_ARGS if k in kwargs}
        super().__init__(**kwargs)
        _checks.positive_int("num_layers", num_layers)
        _checks.positive_int("dictionary_size", dictionary_size)
        self.num_layers = num_layers
        self.hidden_size = hidden_size
        self.filter_size = filter_size
        self.num_heads = num_heads
        self.dictionary_size = dictionary_size
        if dictionary_initializer is None:
            dictionary_initializer = uniform_dictionary_initializer()
        self.dictionary_initializer = keras.initializers.get(dictionary_initializer)
        self.seed = seed
        self.blocks = [
            self._block_class(
                hidden_size,
                filter_size,
                num_heads,
                seed=sub_seed(seed, i),
                name=f"block_{i}",
                dtype=self.dtype_policy,
                **block_kwargs,
            )
            for i in range(num_layers)
        ]
        self._block_kwargs = {
            k: v for k, v in self.blocks[0].get_config().items() if k in self._BLOCK_ARGS
        }
        # Built in `build`, under the stack's name scope, unless `adapt` or
        # `set_centers` builds it first.
        self.global_dictionary = GlobalDictionary(
            dictionary_size,
            initializer=clone_initializer(self.dictionary_initializer),
            name="global_dictionary",
            dtype=self.dtype_policy,
        )

    def _build_dictionary(self):
        if not self.global_dictionary.built:
            self.global_dictionary.build((self.hidden_size,))
        elif self.global_dictionary.dim != self.hidden_size:
            raise ValueError(
                f"The dictionary must be hidden_size={self.hidden_size} wide. "
                f"Received centres of width {self.global_dictionary.dim}."
            )

    def _dictionary(self):
        return ops.cast(self.global_dictionary.dictionary, self.compute_dtype)

    def get_config(self):
        config = super().get_config()
        config.update(self._block_kwargs)
        config.update(
            num_layers=self.num_layers,
            hidden_size=self.hidden_size,
            filter_size=self.filter_size,
            num_heads=self.num_heads,
            dictionary_size=self.dictionary_size,
            dictionary_initializer=keras.initializers.serialize(self.dictionary_initializer),
            seed=self.seed,
        )
        return config


@keras.saving.register_keras_serializable(package="keras_structattn")
class CATTEncoder(_CATTStack):
    """Transformer+CATT encoder: an image dictionary and `num_layers` blocks.

    The first block's CS stream attends (with the IS query) to the
    dictionary; later blocks' to the previous CS output.

    Args:
        num_layers: blocks (6 in the paper).
        hidden_size, filter_size, num_heads: as `CATTEncoderBlock` (512,
            2048, 8 in the paper).
        dictionary_size: K of the image dictionary (500 in the paper).
        dictionary_initializer: default uniform(0, 0.01); or call
            `encoder.global_dictionary.adapt(features)` for K-means centres
            (the features must already be `hidden_size` wide).
        seed: int seed for the dropouts.
        **kwargs: `CATTEncoderBlock` arguments (`share_weights`, dropouts,
            `layer_norm_epsilon`, `activation`) and base layer arguments.

    Call arguments:
        x: `[B, S, hidden_size]` embedded features.
        padding_mask: optional bool `[B, S]`, True for real items.
        training: whether dropout is active.

    Returns:
        `(is_output, cs_output)` `[B, S, hidden_size]` each: [V_I]_E and
        [V_C]_E, the decoder's memories.
    """

    _block_class = CATTEncoderBlock

    def build(self, x_shape):
        self._build_dictionary()
        dictionary_shape = (self.dictionary_size, self.hidden_size)
        for i, block in enumerate(self.blocks):
            block.build(x_shape, dictionary_shape if i == 0 else x_shape)

    def call(self, x, padding_mask=None, training=None):
        z, c = x, self._dictionary()
        for block in self.blocks:
            z, c = block(z, c, padding_mask=padding_mask, training=training)
        return z, c

    def compute_output_shape(self, x_shape):
        return (tuple(x_shape), tuple(x_shape))


@keras.saving.register_keras_serializable(package="keras_structattn")
class CATTDecoder(_CATTStack):
    """Transformer+CATT decoder: a word dictionary and `num_layers` blocks.

    Args:
        As `CATTEncoder`, plus:
        concat_outputs: return `[Z^; X^]` (`[B, T, 2 * hidden_size]`, the
            predictor's input in the paper); False returns the pair.

    Call arguments:
        x: `[B, T, hidden_size]` embedded words (the whole prefix).
        encoder_is, encoder_cs: the `CATTEncoder` outputs.
        padding_mask: optional bool `[B, T]`.
        encoder_padding_mask: optional bool `[B, S]`.
        training: whether dropout is active.

    Returns:
        `[B, T, 2 * hidden_size]`, or `(Z^, X^)` with `concat_outputs=False`.
    """

    _block_class = CATTDecoderBlock

    def __init__(self, num_layers, hidden_size, filter_size, num_heads, *,
                 concat_outputs=True, **kwargs):
        super().__init__(num_layers, hidden_size, filter_size, num_heads, **kwargs)
        _checks.boolean("concat_outputs", concat_outputs)
        self.concat_outputs = concat_outputs

    def build(self, x_shape, encoder_is_shape=None, encoder_cs_shape=None):
        self._build_dictionary()
        dictionary_shape = (self.dictionary_size, self.hidden_size)
        for i, block in enumerate(self.blocks):
            block.build(
                x_shape, dictionary_shape if i == 0 else x_shape, encoder_is_shape, encoder_cs_shape
            )

    def call(
        self,
        x,
        encoder_is,
        encoder_cs,
        padding_mask=None,
        encoder_padding_mask=None,
        training=None,
    ):
        z, c = x, self._dictionary()
        for block in self.blocks:
            z, c = block(
                z,
                c,
                encoder_is,
                encoder_cs,
                padding_mask=padding_mask,
                encoder_padding_mask=encoder_padding_mask,
                training=training,
            )
        if self.concat_outputs:
            return ops.concatenate([z, c], axis=-1)
        return z, c

    def compute_output_shape(self, x_shape, encoder_is_shape=None, encoder_cs_shape=None):
        x_shape = tuple(x_shape)
        if self.concat_outputs:
            return x_shape[:-1] + (2 * x_shape[-1],)
        return (x_shape, x_shape)

    def get_config(self):
        config = super().get_config()
        config.update(concat_outputs=self.concat_outputs)
        return config
