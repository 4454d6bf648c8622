"""Pre-norm Transformer encoder and decoder blocks, tensor2tensor style.

Each attention of a block is either `StructuredMultiHeadAttention` (Keras
MHA with the library's float32 core and caches) or `MultiHeadAreaAttention`
(pass `area=dict(max_area_width=..., ...)`). Blocks follow tensor2tensor's
`transformer_prepostprocess` defaults: layer norm before each sub-layer
(epsilon 1e-6), dropout after it, residual add; the model adds the final
layer norm. Attention projections have no biases, as in tensor2tensor.

The decoder block also steps one position at a time (`call_cached`), for
XLA-compilable incremental decoding, through the attention layers' own
caches (docs/attention_core.md): the self-attention writes each position's
projected key and value into a fixed-shape `[B, 2, max_length, N, d]`
cache at `index` and attends over it with the positions after `index`
masked, and the encoder outputs are projected once (`encoder_cache`). That
gives the causal full pass's result, for area attention too: an area is
attendable iff all its items are, so areas reaching past `index` get no
weight in either.
"""

import keras
from keras import ops

from keras_structattn.layers.area_attention import MultiHeadAreaAttention
from keras_structattn.layers.structured_attention import StructuredMultiHeadAttention
from keras_structattn.ops import _checks


def make_attention(num_heads, key_dim, dropout, area=None, seed=None, name=None, dtype=None):
    """Regular or area multi-head attention without projection biases.

    Args:
        num_heads, key_dim, dropout: as in `keras.layers.MultiHeadAttention`.
        area: None for regular attention, else a dict of the area arguments
            of `MultiHeadAreaAttention` (`max_area_width`, ...).
        seed, name, dtype: passed to the layer.

    Returns:
        The layer.
    """
    common = dict(
        num_heads=num_heads,
        key_dim=key_dim,
        dropout=dropout,
        use_bias=False,
        seed=seed,
        name=name,
        dtype=dtype,
    )
    if area:
        return MultiHeadAreaAttention(**common, **area)
    return StructuredMultiHeadAttention(**common)


def _check_block_args(hidden_size, filter_size, num_heads, dropouts):
    for name, value in (
        ("hidden_size", hidden_size),
        ("filter_size", filter_size),
        ("num_heads", num_heads),
    ):
        _checks.positive_int(name, value)
    if hidden_size % num_heads:
        raise ValueError(
            "Argument `hidden_size` must be divisible by `num_heads`. "
            f"Received: hidden_size={hidden_size}, num_heads={num_heads}"
        )
    for name, value in dropouts.items():
        if not 0.0 <= value < 1.0:
            raise ValueError(
                f"Argument `{name}` must be in [0, 1). Received: {value!r}"
            )


class _Block(keras.layers.Layer):
    """Shared parts: the feed-forward sub-layer, norms, dropouts, config."""

    def __init__(
        self,
        hidden_size,
        filter_size,
        num_heads,
        *,
        attention_dropout=0.0,
        relu_dropout=0.0,
        layer_dropout=0.0,
        layer_norm_epsilon=1e-6,
        seed=None,
        **kwargs,
    ):
        super().__init__(**kwargs)
        _check_block_args(
            hidden_size,
            filter_size,
            num_heads,
            dict(
                attention_dropout=attention_dropout,
                relu_dropout=relu_dropout,
                layer_dropout=layer_dropout,
            ),
        )
        self.hidden_size = hidden_size
        self.filter_size = filter_size
        self.num_heads = num_heads
        self.attention_dropout = attention_dropout
        self.relu_dropout = relu_dropout
        self.layer_dropout = layer_dropout
        self.layer_norm_epsilon = layer_norm_epsilon
        self.seed = seed
        self._seeds = keras.random.SeedGenerator(seed)

    def _next_seed(self):
        # Each dropout sublayer gets its own integer seed drawn from the
        # block's seed, so that a seeded model is reproducible.
        if self.seed is None:
            return None
        return int(self.seed) * 101 + len(self._sublayer_names)

    def _norm(self, name):
        self._sublayer_names.append(name)
        return keras.layers.LayerNormalization(
            epsilon=self.layer_norm_epsilon, name=name, dtype=self.dtype_policy
        )

    def _dropout(self, rate, name):
        self._sublayer_names.append(name)
        return keras.layers.Dropout(
            rate, seed=self._next_seed(), name=name, dtype=self.dtype_policy
        )

    def _attention(self, name, area):
        self._sublayer_names.append(name)
        return make_attention(
            self.num_heads,
            self.hidden_size // self.num_heads,
            self.attention_dropout,
            area=area,
            seed=self._next_seed(),
            name=name,
            dtype=self.dtype_policy,
        )

    def _build_feed_forward(self, input_shape):
        self._sublayer_names.append("ffn")
        self.ffn_norm = self._norm("ffn_norm")
        self.ffn_norm.build(input_shape)
        self.ffn_hidden = keras.layers.Dense(
            self.filter_size, activation="relu", name="ffn_hidden",
            dtype=self.dtype_policy,
        )
        self.ffn_hidden.build(input_shape)
        self.ffn_output = keras.layers.Dense(
            self.hidden_size, name="ffn_output", dtype=self.dtype_policy
        )
        self.ffn_output.build(tuple(input_shape[:-1]) + (self.filter_size,))
        self.relu_dropout_layer = self._dropout(self.relu_dropout, "relu_dropout")
        self.ffn_dropout = self._dropout(self.layer_dropout, "ffn_dropout")

    def _feed_forward(self, x, training):
        y = self.ffn_hidden(self.ffn_norm(x))
        y = self.ffn_output(self.relu_dropout_layer(y, training=training))
        return x + self.ffn_dropout(y, training=training)

    def compute_output_shape(self, input_shape, *args, **kwargs):
        return input_shape

    def get_config(self):
        config = super().get_config()
        config.update(
            hidden_size=self.hidden_size,
            filter_size=self.filter_size,
            num_heads=self.num_heads,
            attention_dropout=self.attention_dropout,
            relu_dropout=self.relu_dropout,
            layer_dropout=self.layer_dropout,
            layer_norm_epsilon=self.layer_norm_epsilon,
            seed=self.seed,
        )
        return config


@keras.saving.register_keras_serializable(package="keras_structattn")
class TransformerEncoderBlock(_Block):
    """Self-attention and feed-forward, each pre-normed with a residual.

    Args:
        hidden_size, filter_size, num_heads: model width, feed-forward width
            and heads (key_dim = hidden_size // num_heads).
        attention_dropout: dropout on the attention weights.
        relu_dropout: dropout after the feed-forward ReLU.
        layer_dropout: dropout on each sub-layer's output before the
            residual add (t2t's `layer_prepostprocess_dropout`).
        area: None (regular attention) or a dict of `MultiHeadAreaAttention`
            area arguments for the self-attention.
        layer_norm_epsilon: 1e-6 as in tensor2tensor.
        seed: int seed for the dropouts.

    Call args:
        x: `[B, S, hidden_size]`.
        padding_mask: optional bool `[B, S]`, True for real tokens.
        training: whether dropout is active.
    """

    def __init__(self, hidden_size, filter_size, num_heads, *, area=None, **kwargs):
        super().__init__(hidden_size, filter_size, num_heads, **kwargs)
        self.area = dict(area) if area else None
        self._sublayer_names = []

    def build(self, input_shape):
        self._sublayer_names = []
        self.attention_norm = self._norm("self_attention_norm")
        self.attention_norm.build(input_shape)
        self.self_attention = self._attention("self_attention", self.area)
        self.self_attention.build(input_shape, input_shape)
        self.attention_dropout_layer = self._dropout(
            self.layer_dropout, "self_attention_dropout"
        )
        self._build_feed_forward(input_shape)

    def call(self, x, padding_mask=None, training=None):
        y = self.attention_norm(x)
        mask = None if padding_mask is None else padding_mask[:, None, :]
        y = self.self_attention(y, y, attention_mask=mask, training=training)
        x = x + self.attention_dropout_layer(y, training=training)
        return self._feed_forward(x, training)

    def get_config(self):
        config = super().get_config()
        config.update(area=self.area)
        return config


@keras.saving.register_keras_serializable(package="keras_structattn")
class TransformerDecoderBlock(_Block):
    """Causal self-attention, encoder-decoder attention and feed-forward.

    Args:
        (as `TransformerEncoderBlock`), plus:
        self_area: area arguments for the causal self-attention, or None.
        encdec_area: area arguments for the encoder-decoder attention, or
            None.

    Call args:
        x: `[B, T, hidden_size]` (the whole target prefix; causal).
        encoder_outputs: `[B, S, hidden_size]`.
        encoder_padding_mask: optional bool `[B, S]`.
        training: whether dropout is active.
    """

    def __init__(
        self,
        hidden_size,
        filter_size,
        num_heads,
        *,
        self_area=None,
        encdec_area=None,
        **kwargs,
    ):
        super().__init__(hidden_size, filter_size, num_heads, **kwargs)
        self.self_area = dict(self_area) if self_area else None
        self.encdec_area = dict(encdec_area) if encdec_area else None
        self._sublayer_names = []

    def build(self, input_shape, encoder_shape=None):
        self._sublayer_names = []
        encoder_shape = input_shape if encoder_shape is None else encoder_shape
        self.self_attention_norm = self._norm("self_attention_norm")
        self.self_attention_norm.build(input_shape)
        self.self_attention = self._attention("self_attention", self.self_area)
        self.self_attention.build(input_shape, input_shape)
        self.self_attention_dropout = self._dropout(
            self.layer_dropout, "self_attention_dropout"
        )
        self.encdec_attention_norm = self._norm("encdec_attention_norm")
        self.encdec_attention_norm.build(input_shape)
        self.encdec_attention = self._attention("encdec_attention", self.encdec_area)
        self.encdec_attention.build(input_shape, encoder_shape)
        self.encdec_attention_dropout = self._dropout(
            self.layer_dropout, "encdec_attention_dropout"
        )
        self._build_feed_forward(input_shape)

    def call(self, x, encoder_outputs, encoder_padding_mask=None, training=None):
        y = self.self_attention_norm(x)
        y = self.self_attention(y, y, use_causal_mask=True, training=training)
        x = x + self.self_attention_dropout(y, training=training)
        y = self.encdec_attention_norm(x)
        mask = (
            None if encoder_padding_mask is None else encoder_padding_mask[:, None, :]
        )
        y = self.encdec_attention(
            y, encoder_outputs, attention_mask=mask, training=training
        )
        x = x + self.encdec_attention_dropout(y, training=training)
        return self._feed_forward(x, training)

    # ------------------------------------------------------ incremental decoding

    def empty_cache(self, batch_size, max_length, dtype=None):
        """The self-attention's zero cache `[B, 2, max_length, N, d]`."""
        return {
            "self_attention": self.self_attention.empty_cache(batch_size, max_length, dtype)
        }

    def encoder_cache(self, encoder_outputs):
        """The encoder outputs projected once by the encoder-decoder
        attention, `[B, 2, S, N, d]` (a static cache)."""
        return {"encdec_attention": self.encdec_attention.project_memory(encoder_outputs)}

    def call_cached(self, x, cache, index, encoder_padding_mask=None):
        """One decoding step (inference: no dropout).

        Args:
            x: `[B, 1, hidden_size]`, the input at position `index`.
            cache: dict with `self_attention` (`empty_cache`) and
                `encdec_attention` (`encoder_cache`).
            index: int scalar tensor, the position being decoded.
            encoder_padding_mask: optional bool `[B, S]`.

        Returns:
            `(output [B, 1, hidden_size], cache)` with the position's keys
            and values written into the buffers.
        """
        y = self.self_attention_norm(x)
        y, self_cache = self.self_attention(
            y, y, use_causal_mask=True, training=False,
            cache=cache["self_attention"], cache_update_index=index,
        )
        x = x + y
        y = self.encdec_attention_norm(x)
        mask = None
        if encoder_padding_mask is not None:
            mask = ops.cast(encoder_padding_mask, "bool")[:, None, :]
        y, _ = self.encdec_attention(
            y, None, attention_mask=mask, training=False, cache=cache["encdec_attention"]
        )
        x = x + y
        x = self._feed_forward(x, training=False)
        return x, dict(cache, self_attention=self_cache)

    def get_config(self):
        config = super().get_config()
        config.update(self_area=self.self_area, encdec_area=self.encdec_area)
        return config
