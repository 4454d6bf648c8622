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

A stack made with `dictionary_size=None` has no CS stream: its blocks
are post-norm Transformer blocks with the very same IS weights (the
non-CATT twin of a CATT model, for ablations and for the test that the IS
stream alone is that model).

Incremental decoding (`CATTDecoder.initial_cache` / `call_cached`): the
IS self-attention keeps its projected keys and values in the attention
core's cache (docs/attention_core.md); a later block's CS context, the
previous block's CS outputs, is kept unprojected in a `[B, L, hidden]`
buffer, written one position per step and attended up to that position
(re-projected every step: `O(L d^2)` per step, negligible for captions of
~20 tokens next to the encoder memory); the encoder's IS and CS outputs
are projected once (static caches). A step equals the teacher-forced pass
at that position to round-off.
"""

import keras
from keras import ops

from keras_structattn import checks
from keras_structattn.layers.blocks import BlockBase
from keras_structattn.layers.blocks import clone_initializer
from keras_structattn.layers.blocks import sub_seed
from keras_structattn.layers.catt_attention import CATTAttention
from keras_structattn.layers.global_dictionary import GlobalDictionary
from keras_structattn.layers.global_dictionary import uniform_dictionary_initializer
from keras_structattn.layers.structured_attention import StructuredMultiHeadAttention


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
        checks.boolean("share_weights", share_weights)
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

    def _self_attention(self, x, context, padding_mask, cs_mask, causal, training,
                        cache=None, index=None):
        """Both streams' self-attention sublayer (attention + residual + norm).

        Returns:
            `(is_stream, cs_stream, cache)`; the CS stream is None without a
            CS context, the cache None without one.
        """
        caching = {} if cache is None else dict(cache=cache, cache_update_index=index)
        outputs = self.self_attention(
            x,
            x,
            dictionary=context,
            value_mask=padding_mask,
            dictionary_mask=cs_mask,
            use_causal_mask=causal,
            training=training,
            **caching,
        )
        if cache is not None:
            outputs, cache = outputs
        is_out, cs_out = outputs if context is not None else (outputs, None)
        z = self._residual_add(x, is_out, "self_attention", "is", training)
        if cs_out is None:
            return z, None, cache
        return z, self._residual_add(x, cs_out, "self_attention", "cs", training), cache

    def compute_output_shape(self, x_shape, context_shape=None, *args, **kwargs):
        cs_shape = None if context_shape is None else tuple(x_shape)
        return (tuple(x_shape), cs_shape)

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
            CS output `[B, S, hidden_size]` afterwards; None for no CS
            stream (a post-norm Transformer block).
        padding_mask: optional bool `[B, S]`, True for real tokens; masks
            the keys of both streams (the dictionary excepted).
        training: whether dropout is active.

    Returns:
        `(is_stream, cs_stream)`, each `[B, S, hidden_size]` (the CS stream
        None without a context).
    """

    def build(self, x_shape, context_shape=None):
        self._check_width("x", x_shape)
        self._check_width("context", context_shape)
        self.self_attention.build(x_shape, x_shape, None, context_shape)
        self._build_stream_layers(x_shape)

    def call(self, x, context=None, padding_mask=None, training=None):
        cs_mask = None
        if context is not None and len(context.shape) == 3:
            cs_mask = _stream_mask(padding_mask)
        z, c, _ = self._self_attention(x, context, padding_mask, cs_mask, False, training)
        return (
            self._apply_feed_forward(z, "is", training),
            None if c is None else self._apply_feed_forward(c, "cs", training),
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
        return_cross_scores: also return the cross-attention weights.

    Returns:
        `(is_stream, cs_stream)`, each `[B, T, hidden_size]` (CS None
        without a context); with `return_cross_scores`, `((is_stream,
        cs_stream), (is_scores, cs_scores))`, the weights `[B, num_heads,
        T, S]` of each stream's cross-attention (to `encoder_is`,
        `encoder_cs`).
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
        return_cross_scores=False,
    ):
        cs_mask = None
        if context is not None and len(context.shape) == 3:
            cs_mask = _stream_mask(padding_mask, ops.shape(x)[1])
        z, c, _ = self._self_attention(x, context, padding_mask, cs_mask, True, training)
        outputs, scores = self._cross_and_feed_forward(
            z, c, encoder_is, encoder_cs, encoder_padding_mask, training,
            return_scores=return_cross_scores,
        )
        return (outputs, scores) if return_cross_scores else outputs

    def _cross_and_feed_forward(self, z, c, encoder_is, encoder_cs, encoder_padding_mask,
                                training, cache=None, return_scores=False):
        """Each stream's cross-attention to its encoder memory, then FFN.

        With `cache` (decoding) the memories are its static caches and
        `encoder_is` / `encoder_cs` are not read.

        Returns:
            `((is_stream, cs_stream), (is_scores, cs_scores))`, the scores
            `[B, N, T, S]` (None unless `return_scores`; the CS ones None
            without a CS stream).
        """
        mask = None
        if encoder_padding_mask is not None:
            mask = ops.cast(encoder_padding_mask, "bool")[:, None, :]
        outputs, scores = [], []
        for stream, query, memory in (("is", z, encoder_is), ("cs", c, encoder_cs)):
            if query is None:
                outputs.append(None)
                scores.append(None)
                continue
            attention = self._layer("cross_attention", stream)
            caching = {} if cache is None else {"cache": cache[f"encoder_{stream}"]}
            result = attention(query, memory, attention_mask=mask, training=training,
                               return_attention_scores=return_scores, **caching)
            result = result if isinstance(result, tuple) else (result,)
            y = result[0]
            scores.append(result[1] if return_scores else None)
            y = self._residual_add(query, y, "cross_attention", stream, training)
            outputs.append(self._apply_feed_forward(y, stream, training))
        return tuple(outputs), tuple(scores)

    # --------------------------------------------------- incremental decoding

    def empty_cache(self, batch_size, max_length, cs_context=False, dtype=None):
        """A zero decoding cache: the IS self-attention's keys and values
        `[B, 2, max_length, N, d]` and, with `cs_context` (a block after
        the first, with a CS stream), the CS context buffer `[B,
        max_length, hidden_size]`."""
        dtype = dtype or self.compute_dtype
        cache = {"self_attention": self.self_attention.empty_cache(batch_size, max_length, dtype)}
        if cs_context:
            cache["cs_context"] = ops.zeros((batch_size, max_length, self.hidden_size), dtype)
        return cache

    def encoder_cache(self, encoder_is, encoder_cs=None):
        """The encoder's IS (and CS) outputs projected once by the
        cross-attentions, `[B, 2, S, N, d]` each (static caches)."""
        cache = {"encoder_is": self.cross_attention.project_memory(encoder_is)}
        if encoder_cs is not None:
            cache["encoder_cs"] = self._layer("cross_attention", "cs").project_memory(encoder_cs)
        return cache

    def call_cached(self, x, context, cache, index, encoder_padding_mask=None):
        """One decoding step (inference: no dropout).

        Args:
            x: the IS stream at position `index`, `[B, 1, hidden_size]`.
            context: the word dictionary `[K, hidden_size]` (first block),
                the previous block's CS output at `index` `[B, 1,
                hidden_size]` (later blocks; written into the cache's
                buffer), or None (no CS stream).
            cache: `empty_cache` merged with `encoder_cache`.
            index: int scalar tensor, the position being decoded.
            encoder_padding_mask: optional bool `[B, S]`.

        Returns:
            `((is_stream, cs_stream), cache)`, each stream `[B, 1,
            hidden_size]` (CS None without a context).
        """
        new_cache = dict(cache)
        cs_mask = None
        if context is not None and len(context.shape) == 3:
            buffer = cache["cs_context"]
            zero = ops.zeros((), "int32")
            start = (zero, ops.cast(index, "int32"), zero)
            buffer = ops.slice_update(buffer, start, ops.cast(context, buffer.dtype))
            new_cache["cs_context"] = context = buffer
            # Causal: the positions decoded so far, this one included.
            cs_mask = ops.arange(buffer.shape[1]) <= index
        z, c, new_cache["self_attention"] = self._self_attention(
            x, context, None, cs_mask, True, False, cache=cache["self_attention"], index=index
        )
        outputs, _ = self._cross_and_feed_forward(z, c, None, None, encoder_padding_mask, False,
                                                  cache=cache)
        return outputs, new_cache


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
        checks.positive_int("num_layers", num_layers)
        if dictionary_size is not None:
            checks.positive_int("dictionary_size", dictionary_size)
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
        # `set_centers` builds it first. None: no CS stream.
        self.global_dictionary = None
        if dictionary_size is not None:
            self.global_dictionary = GlobalDictionary(
                dictionary_size,
                initializer=clone_initializer(self.dictionary_initializer),
                name="global_dictionary",
                dtype=self.dtype_policy,
            )

    @property
    def has_cs_stream(self):
        """Whether the stack has a dictionary and a CS stream."""
        return self.global_dictionary is not None

    def _dictionary_shape(self):
        if not self.has_cs_stream:
            return None
        return (self.dictionary_size, self.hidden_size)

    def _build_dictionary(self):
        if not self.has_cs_stream:
            return
        if not self.global_dictionary.built:
            self.global_dictionary.build((self.hidden_size,))
        elif self.global_dictionary.dim != self.hidden_size:
            raise ValueError(
                f"The dictionary must be hidden_size={self.hidden_size} wide. "
                f"Received centres of width {self.global_dictionary.dim}."
            )

    def _dictionary(self):
        if not self.has_cs_stream:
            return None
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
        dictionary_size: K of the image dictionary (500 in the paper);
            None for no dictionary and no CS stream (the non-CATT twin).
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
        [V_C]_E, the decoder's memories (`cs_output` None without a CS
        stream).
    """

    _block_class = CATTEncoderBlock

    def build(self, x_shape):
        self._build_dictionary()
        stream_shape = x_shape if self.has_cs_stream else None
        for i, block in enumerate(self.blocks):
            block.build(x_shape, self._dictionary_shape() if i == 0 else stream_shape)

    def call(self, x, padding_mask=None, training=None):
        z, c = x, self._dictionary()
        for block in self.blocks:
            z, c = block(z, c, padding_mask=padding_mask, training=training)
        return z, c

    def compute_output_shape(self, x_shape):
        return (tuple(x_shape), tuple(x_shape) if self.has_cs_stream else None)


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
        `[B, T, 2 * hidden_size]`, or `(Z^, X^)` with `concat_outputs=False`;
        `Z^` `[B, T, hidden_size]` without a CS stream.
    """

    _block_class = CATTDecoderBlock

    def __init__(self, num_layers, hidden_size, filter_size, num_heads, *,
                 concat_outputs=True, **kwargs):
        super().__init__(num_layers, hidden_size, filter_size, num_heads, **kwargs)
        checks.boolean("concat_outputs", concat_outputs)
        self.concat_outputs = concat_outputs

    def build(self, x_shape, encoder_is_shape=None, encoder_cs_shape=None):
        self._build_dictionary()
        stream_shape = x_shape if self.has_cs_stream else None
        for i, block in enumerate(self.blocks):
            block.build(
                x_shape,
                self._dictionary_shape() if i == 0 else stream_shape,
                encoder_is_shape,
                encoder_cs_shape if self.has_cs_stream else None,
            )

    def call(
        self,
        x,
        encoder_is,
        encoder_cs=None,
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
        return self._outputs(z, c)

    def cross_attention_scores(self, x, encoder_is, encoder_cs=None, layer=-1,
                               encoder_padding_mask=None):
        """Block `layer`'s cross-attention weights, IS and CS (no dropout).

        Args:
            x, encoder_is, encoder_cs, encoder_padding_mask: as `call`.
            layer: the block (default the last).

        Returns:
            `(is_scores, cs_scores)` `[B, num_heads, T, S]` (CS None without
            a CS stream).
        """
        index = range(self.num_layers)[layer]
        z, c = x, self._dictionary()
        for block in self.blocks[:index]:
            z, c = block(z, c, encoder_is, encoder_cs, encoder_padding_mask=encoder_padding_mask)
        _, scores = self.blocks[index](
            z, c, encoder_is, encoder_cs, encoder_padding_mask=encoder_padding_mask,
            return_cross_scores=True,
        )
        return scores

    def _outputs(self, z, c):
        if c is None:
            return z
        if self.concat_outputs:
            return ops.concatenate([z, c], axis=-1)
        return z, c

    # --------------------------------------------------- incremental decoding

    def initial_cache(self, encoder_is, encoder_cs, max_length):
        """The decoding state before the first step (`call_cached`).

        Args:
            encoder_is, encoder_cs: the `CATTEncoder` outputs `[B, S,
                hidden_size]` (`encoder_cs` None without a CS stream).
            max_length: the most positions decoded (static).

        Returns:
            A dict of batch-leading fixed-shape tensors, `block_<i>` per
            block (beam search tiles and gathers it).
        """
        batch = ops.shape(encoder_is)[0]
        cache = {}
        for i, block in enumerate(self.blocks):
            layer = block.empty_cache(batch, max_length, cs_context=i > 0 and self.has_cs_stream)
            layer.update(block.encoder_cache(
                encoder_is, encoder_cs if self.has_cs_stream else None))
            cache[f"block_{i}"] = layer
        return cache

    def call_cached(self, x, cache, index, encoder_padding_mask=None):
        """One decoding step: the stack's output at position `index`.

        Args:
            x: `[B, 1, hidden_size]`, the embedded word at `index`.
            cache: from `initial_cache` or a previous step.
            index: int scalar tensor.
            encoder_padding_mask: optional bool `[B, S]`.

        Returns:
            `(output, cache)`: the output as `call`'s at that position
            (`[B, 1, 2 * hidden_size]` by default).
        """
        z, c = x, self._dictionary()
        new_cache = {}
        for i, block in enumerate(self.blocks):
            (z, c), new_cache[f"block_{i}"] = block.call_cached(
                z, c, cache[f"block_{i}"], index, encoder_padding_mask
            )
        return self._outputs(z, c), new_cache

    def compute_output_shape(self, x_shape, encoder_is_shape=None, encoder_cs_shape=None):
        x_shape = tuple(x_shape)
        if not self.has_cs_stream:
            return x_shape
        if self.concat_outputs:
            return x_shape[:-1] + (2 * x_shape[-1],)
        return (x_shape, x_shape)

    def get_config(self):
        config = super().get_config()
        config.update(concat_outputs=self.concat_outputs)
        return config
