"""Pre-norm Transformer encoder and decoder blocks, tensor2tensor style.

Each attention of a block is either `StructuredMultiHeadAttention` (Keras
MHA with the library's float32 core and caches) or `MultiHeadAreaAttention`
(pass `area=dict(max_area_width=..., ...)`). Blocks follow tensor2tensor's
`transformer_prepostprocess` defaults: layer norm before each sub-layer
(epsilon 1e-6), dropout after it, residual add (the pre-norm `Residual` of
`layers/blocks.py`, around each attention and the `FeedForward`); the model
adds the final layer norm. Attention projections have no biases, as in
tensor2tensor.

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
from keras_structattn.layers.blocks import BlockBase
from keras_structattn.layers.structured_attention import StructuredMultiHeadAttention


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


def _key_mask(padding_mask):
    """`[B, 1, S]` attention mask of a bool `[B, S]` key padding mask."""
    return None if padding_mask is None else ops.cast(padding_mask, "bool")[:, None, :]


class _Block(BlockBase):
    """Pre-norm residuals around attentions and a feed-forward (the kit of
    `layers/blocks.py`); sublayers are seeded by `sub_seed` in the order they
    are made."""

    normalize_first = True

    def _attention(self, name, area):
        return make_attention(
            self.num_heads,
            self.hidden_size // self.num_heads,
            self.attention_dropout,
            area=area,
            seed=self._next_seed(),
            name=name,
            dtype=self.dtype_policy,
        )

    def _make_feed_forward(self):
        self.ffn = self._feed_forward("ffn")
        self.ffn_residual = self._residual("ffn_residual")

    def _build_feed_forward(self, input_shape):
        self.ffn_residual.build(input_shape)
        self.ffn.build(input_shape)

    def _apply_feed_forward(self, x, training):
        y = self.ffn(self.ffn_residual.sublayer_input(x), training=training)
        return self.ffn_residual(x, y, training=training)


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

    Call arguments:
        x: `[B, S, hidden_size]`.
        padding_mask: optional bool `[B, S]`, True for real tokens.
        training: whether dropout is active.

    Returns:
        `[B, S, hidden_size]`.
    """

    def __init__(self, hidden_size, filter_size, num_heads, *, area=None, **kwargs):
        super().__init__(hidden_size, filter_size, num_heads, **kwargs)
        self.area = dict(area) if area else None
        self.self_attention = self._attention("self_attention", self.area)
        self.self_attention_residual = self._residual("self_attention_residual")
        self._make_feed_forward()

    def build(self, input_shape):
        self.self_attention_residual.build(input_shape)
        self.self_attention.build(input_shape, input_shape)
        self._build_feed_forward(input_shape)

    def call(self, x, padding_mask=None, training=None):
        residual = self.self_attention_residual
        y = residual.sublayer_input(x)
        y = self.self_attention(
            y, y, attention_mask=_key_mask(padding_mask), training=training
        )
        x = residual(x, y, training=training)
        return self._apply_feed_forward(x, training)

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

    Call arguments:
        x: `[B, T, hidden_size]` (the whole target prefix; causal).
        encoder_outputs: `[B, S, hidden_size]`.
        encoder_padding_mask: optional bool `[B, S]`.
        training: whether dropout is active.
        return_encdec_scores: also return the encoder-decoder attention
            weights (to draw what the decoder attended).

    Returns:
        `[B, T, hidden_size]`; with `return_encdec_scores`, the tuple of it
        and the float32 encoder-decoder attention weights
        `[B, num_heads, T, S]` (over areas, `[B, num_heads, T, num_areas]`,
        for area attention: `encdec_attention.area_coordinates()`).
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
        self.self_attention = self._attention("self_attention", self.self_area)
        self.self_attention_residual = self._residual("self_attention_residual")
        self.encdec_attention = self._attention("encdec_attention", self.encdec_area)
        self.encdec_attention_residual = self._residual("encdec_attention_residual")
        self._make_feed_forward()

    def build(self, input_shape, encoder_shape=None):
        encoder_shape = input_shape if encoder_shape is None else encoder_shape
        self.self_attention_residual.build(input_shape)
        self.self_attention.build(input_shape, input_shape)
        self.encdec_attention_residual.build(input_shape)
        self.encdec_attention.build(input_shape, encoder_shape)
        self._build_feed_forward(input_shape)

    def call(
        self,
        x,
        encoder_outputs,
        encoder_padding_mask=None,
        training=None,
        return_encdec_scores=False,
    ):
        residual = self.self_attention_residual
        y = residual.sublayer_input(x)
        y = self.self_attention(y, y, use_causal_mask=True, training=training)
        x = residual(x, y, training=training)
        residual = self.encdec_attention_residual
        y = self.encdec_attention(
            residual.sublayer_input(x),
            encoder_outputs,
            attention_mask=_key_mask(encoder_padding_mask),
            return_attention_scores=return_encdec_scores,
            training=training,
        )
        if return_encdec_scores:
            y, scores = y
        x = residual(x, y, training=training)
        x = self._apply_feed_forward(x, training)
        return (x, scores) if return_encdec_scores else x

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
        residual = self.self_attention_residual
        y = residual.sublayer_input(x)
        y, self_cache = self.self_attention(
            y, y, use_causal_mask=True, training=False,
            cache=cache["self_attention"], cache_update_index=index,
        )
        x = residual(x, y, training=False)
        residual = self.encdec_attention_residual
        y, _ = self.encdec_attention(
            residual.sublayer_input(x),
            None,
            attention_mask=_key_mask(encoder_padding_mask),
            training=False,
            cache=cache["encdec_attention"],
        )
        x = residual(x, y, training=False)
        x = self._apply_feed_forward(x, training=False)
        return x, dict(cache, self_attention=self_cache)

    def get_config(self):
        config = super().get_config()
        config.update(self_area=self.self_area, encdec_area=self.encdec_area)
        return config
