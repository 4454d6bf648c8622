"""The block kit: what the library's Transformer-like blocks are made of.

The pre-norm Transformer blocks (`layers/transformer.py`), the post-norm
Transformer+CATT blocks (`layers/catt_transformer.py`) and MUAN's unified
attention block (`layers/unified_attention.py`) are an attention, a
`FeedForward` and one `Residual` around each, built with the helpers below:

* `FeedForward`: the position-wise feed-forward network
  `Dense(filter_size, activation) -> Dropout -> Dense(hidden_size)`
  (Vaswani et al., 2017, arXiv:1706.03762, Eq. 2).
* `Residual`: the residual connection, dropout and layer norm around a
  sublayer F, pre-norm `x + Dropout(F(LN(x)))` (`normalize_first=True`,
  tensor2tensor's Transformer) or post-norm `LN(x + Dropout(F(x)))`
  (`normalize_first=False`: the original Transformer, MCAN, MUAN and CATT).
* `layer_normalization`: Keras' layer norm or the MCAN family's
  (`StdLayerNormalization`).
* `clone_initializer`: one initializer object per layer.
* `sub_seed`: the seed of a layer's random sublayers.
* `check_sizes`: the width, heads, filter size and dropout rates of a block.
* `BlockBase`: the arguments, checks, config and sublayer factories of a
  Transformer-style block.
* `PostNormSublayers`: the `Residual` and `FeedForward` factories of the
  MCAN-style post-norm blocks (MCAN's, MUAN's unified attention block).
"""

import keras

from keras_structattn import checks
from keras_structattn.layers.dropout import Dropout
from keras_structattn.layers.normalization import StdLayerNormalization

LAYER_NORMS = ("keras", "mcan")

# `sub_seed` is `seed * _SEED_STRIDE + index`: one-to-one for indices below
# the stride (a prime), reduced modulo the largest int32 prime so that the
# seeds of nested sublayers stay valid seeds on every backend.
_SEED_STRIDE = 101
_SEED_MODULUS = 2**31 - 1


def sub_seed(seed, index):
    """The int seed of a layer's random sublayer number `index`.

    The rule of every layer of the library that derives seeds for its
    dropouts, attentions, blocks or initializers from its own `seed`:
    `(seed * 101 + index) mod (2**31 - 1)`, with `index` the sublayer's
    position (0, 1, ...) among the layer's random sublayers. Distinct
    indices give distinct seeds, so no two sublayers draw the same masks.

    Args:
        seed: the layer's int seed, or None.
        index: an int in `[0, 101)`.

    Returns:
        An int, or None when `seed` is None (unseeded sublayers).
    """
    if not isinstance(index, int) or isinstance(index, bool) or not 0 <= index < _SEED_STRIDE:
        raise ValueError(
            f"A sub-seed index must be an int in [0, {_SEED_STRIDE}). Received: index={index!r}"
        )
    if seed is None:
        return None
    return (int(seed) * _SEED_STRIDE + index) % _SEED_MODULUS


def clone_initializer(initializer):
    """A fresh initializer with the configuration of `initializer`.

    A Keras random initializer fixes its seed when it is made (a random one
    when `seed=None`), so one instance draws the same values at every call:
    layers sharing it would start with equal weights. Each layer therefore
    gets its own clone (clones of a seeded initializer draw what its seed
    says, as the original would).

    Args:
        initializer: a `keras.initializers.Initializer`, or an identifier
            (a name or a config dict, which make a new instance wherever
            they are used, and are returned as they are).

    Returns:
        The clone, or the identifier.
    """
    if not isinstance(initializer, keras.initializers.Initializer):
        return initializer
    return initializer.__class__.from_config(initializer.get_config())


def layer_normalization(kind="keras", epsilon=1e-6, **kwargs):
    """A layer norm over the last axis.

    Args:
        kind: "keras" (`keras.layers.LayerNormalization`: biased variance,
            epsilon inside the square root) or "mcan"
            (`StdLayerNormalization`: unbiased std, epsilon added to it, as
            in the MCAN family's code).
        epsilon: the epsilon.
        **kwargs: layer arguments (`name`, `dtype`).

    Returns:
        The layer.
    """
    checks.one_of("layer_norm", kind, LAYER_NORMS)
    if kind == "mcan":
        return StdLayerNormalization(epsilon, **kwargs)
    return keras.layers.LayerNormalization(epsilon=epsilon, **kwargs)


def check_sizes(hidden_size, num_heads, filter_size=None, **rates):
    """Checks a block's sizes and dropout rates.

    Args:
        hidden_size: the model width, a positive int divisible by
            `num_heads`.
        num_heads: a positive int.
        filter_size: None, or the feed-forward width (a positive int).
        **rates: dropout rates by argument name, each in [0, 1).

    Returns:
        The rates, as floats, by name.
    """
    checks.positive_int("hidden_size", hidden_size)
    checks.positive_int("num_heads", num_heads)
    if filter_size is not None:
        checks.positive_int("filter_size", filter_size)
    if hidden_size % num_heads:
        raise ValueError(
            "Argument `hidden_size` must be divisible by `num_heads`. "
            f"Received: hidden_size={hidden_size}, num_heads={num_heads}"
        )
    return {name: checks.rate(name, value) for name, value in rates.items()}


@keras.saving.register_keras_serializable(package="keras_structattn")
class FeedForward(keras.layers.Layer):
    """The position-wise feed-forward network of a Transformer block.

    `Dense(filter_size, activation) -> Dropout(dropout) -> Dense(hidden_size)`
    over the last axis (Vaswani et al., 2017, arXiv:1706.03762, Eq. 2; the
    dropout after the activation is tensor2tensor's `relu_dropout`). The
    residual connection and the norm are the caller's (`Residual`).

    Args:
        hidden_size: the output width.
        filter_size: the inner width.
        activation: of the inner layer (ReLU in the Transformer).
        dropout: rate after the activation.
        kernel_initializer, bias_initializer: of both dense layers (each
            gets its own clone).
        seed: int seed of the dropout.
        **kwargs: `keras.layers.Layer` arguments (`name`, `dtype`, ...).

    Call arguments:
        inputs: `[..., dim]`.
        training: whether dropout is active.

    Returns:
        `[..., hidden_size]`.
    """

    def __init__(
        self,
        hidden_size,
        filter_size,
        *,
        activation="relu",
        dropout=0.0,
        kernel_initializer="glorot_uniform",
        bias_initializer="zeros",
        seed=None,
        **kwargs,
    ):
        super().__init__(**kwargs)
        checks.positive_int("hidden_size", hidden_size)
        checks.positive_int("filter_size", filter_size)
        self.hidden_size = hidden_size
        self.filter_size = filter_size
        self.activation = keras.activations.get(activation)
        self.dropout = checks.rate("dropout", dropout)
        self.kernel_initializer = keras.initializers.get(kernel_initializer)
        self.bias_initializer = keras.initializers.get(bias_initializer)
        self.seed = seed
        dense = dict(dtype=self.dtype_policy)
        self.hidden_dense = keras.layers.Dense(
            filter_size,
            activation=self.activation,
            kernel_initializer=clone_initializer(self.kernel_initializer),
            bias_initializer=clone_initializer(self.bias_initializer),
            name="hidden",
            **dense,
        )
        self.dropout_layer = Dropout(
            self.dropout, seed=seed, name="dropout", dtype=self.dtype_policy
        )
        self.output_dense = keras.layers.Dense(
            hidden_size,
            kernel_initializer=clone_initializer(self.kernel_initializer),
            bias_initializer=clone_initializer(self.bias_initializer),
            name="output",
            **dense,
        )

    def build(self, input_shape):
        self.hidden_dense.build(input_shape)
        self.output_dense.build(tuple(input_shape[:-1]) + (self.filter_size,))

    def call(self, inputs, training=None):
        hidden = self.dropout_layer(self.hidden_dense(inputs), training=training)
        return self.output_dense(hidden)

    def compute_output_shape(self, input_shape):
        return tuple(input_shape[:-1]) + (self.hidden_size,)

    def get_config(self):
        config = super().get_config()
        config.update(
            hidden_size=self.hidden_size,
            filter_size=self.filter_size,
            activation=keras.activations.serialize(self.activation),
            dropout=self.dropout,
            kernel_initializer=keras.initializers.serialize(self.kernel_initializer),
            bias_initializer=keras.initializers.serialize(self.bias_initializer),
            seed=self.seed,
        )
        return config


@keras.saving.register_keras_serializable(package="keras_structattn")
class Residual(keras.layers.Layer):
    """A sublayer's residual connection, with dropout and a layer norm.

    Pre-norm (`normalize_first=True`, tensor2tensor's Transformer):
    `x + Dropout(F(LN(x)))`. Post-norm (`normalize_first=False`: the
    original Transformer, MCAN, MUAN and CATT): `LN(x + Dropout(F(x)))`.
    The sublayer F is the caller's, called on `sublayer_input(x)` (which
    is `residual(x)`); the layer then combines its output with x. The same
    code serves both orders:

        y = attention(residual.sublayer_input(x), ...)
        x = residual(x, y, training=training)

    Args:
        normalize_first: True for pre-norm, False for post-norm.
        dropout: rate on the sublayer's output before the residual add.
        layer_norm: "keras" or "mcan" (see `layer_normalization`).
        epsilon: the layer norm's epsilon.
        seed: int seed of the dropout.
        **kwargs: `keras.layers.Layer` arguments (`name`, `dtype`, ...).

    Call arguments:
        inputs: x `[..., dim]`, the sublayer's input before the norm.
        sublayer_output: F's output for `sublayer_input(x)`, of x's shape;
            None to get `sublayer_input(x)` itself.
        training: whether dropout is active.

    Returns:
        The next x, of x's shape (what the sublayer reads, if
        `sublayer_output` is None).
    """

    def __init__(
        self,
        normalize_first,
        *,
        dropout=0.0,
        layer_norm="keras",
        epsilon=1e-6,
        seed=None,
        **kwargs,
    ):
        super().__init__(**kwargs)
        checks.boolean("normalize_first", normalize_first)
        self.normalize_first = normalize_first
        self.dropout = checks.rate("dropout", dropout)
        self.layer_norm = layer_norm
        self.epsilon = checks.positive_float("layer_norm_epsilon", epsilon)
        self.seed = seed
        self.norm = layer_normalization(layer_norm, self.epsilon, name="norm",
                                        dtype=self.dtype_policy)
        self.dropout_layer = Dropout(
            self.dropout, seed=seed, name="dropout", dtype=self.dtype_policy
        )

    def build(self, inputs_shape, sublayer_output_shape=None):
        self.norm.build(inputs_shape)

    def sublayer_input(self, inputs):
        """What the sublayer reads: `LN(x)` when `normalize_first`, else x."""
        # Through `__call__`, so that a functional model records this layer
        # (not its norm alone) and can be rebuilt from its config.
        return self(inputs)

    def call(self, inputs, sublayer_output=None, training=None):
        if sublayer_output is None:
            return self.norm(inputs) if self.normalize_first else inputs
        added = inputs + self.dropout_layer(sublayer_output, training=training)
        return added if self.normalize_first else self.norm(added)

    def compute_output_shape(self, inputs_shape, sublayer_output_shape=None):
        return tuple(inputs_shape)

    def get_config(self):
        config = super().get_config()
        config.update(
            normalize_first=self.normalize_first,
            dropout=self.dropout,
            layer_norm=self.layer_norm,
            epsilon=self.epsilon,
            seed=self.seed,
        )
        return config


class BlockBase(keras.layers.Layer):
    """What the Transformer-style blocks share: arguments, checks, config,
    and the factories of their `Residual`s and `FeedForward`s.

    A subclass sets `normalize_first` (pre- or post-norm) and builds its
    sublayers with `_residual`, `_feed_forward` and `_next_seed`; the
    sublayers' seeds follow `sub_seed`, numbered in the order they are made.

    Args:
        hidden_size, filter_size, num_heads: model width, feed-forward width
            and heads (key_dim = hidden_size // num_heads).
        attention_dropout: dropout on the attention weights.
        relu_dropout: dropout after the feed-forward activation.
        layer_dropout: dropout on each sublayer's output before the
            residual add (tensor2tensor's `layer_prepostprocess_dropout`).
        layer_norm_epsilon: of the layer norms.
        seed: int seed of the block's random sublayers.
        **kwargs: `keras.layers.Layer` arguments.
    """

    normalize_first = True

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
        check_sizes(
            hidden_size,
            num_heads,
            filter_size,
            attention_dropout=attention_dropout,
            relu_dropout=relu_dropout,
            layer_dropout=layer_dropout,
        )
        self.hidden_size = hidden_size
        self.filter_size = filter_size
        self.num_heads = num_heads
        self.attention_dropout = attention_dropout
        self.relu_dropout = relu_dropout
        self.layer_dropout = layer_dropout
        self.layer_norm_epsilon = layer_norm_epsilon
        self.seed = seed
        self._seed_count = 0

    def _next_seed(self):
        """`sub_seed` of the next random sublayer made."""
        self._seed_count += 1
        return sub_seed(self.seed, self._seed_count - 1)

    def _residual(self, name):
        return Residual(
            self.normalize_first,
            dropout=self.layer_dropout,
            epsilon=self.layer_norm_epsilon,
            seed=self._next_seed(),
            name=name,
            dtype=self.dtype_policy,
        )

    def _feed_forward(self, name, activation="relu"):
        return FeedForward(
            self.hidden_size,
            self.filter_size,
            activation=activation,
            dropout=self.relu_dropout,
            seed=self._next_seed(),
            name=name,
            dtype=self.dtype_policy,
        )

    def _check_width(self, name, shape):
        if shape is not None and shape[-1] is not None and shape[-1] != self.hidden_size:
            raise ValueError(
                f"Argument `{name}` must have hidden_size={self.hidden_size} features. "
                f"Received: {name}.shape={tuple(shape)}"
            )

    def compute_output_shape(self, input_shape, *args, **kwargs):
        return tuple(input_shape)

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


class PostNormSublayers(keras.layers.Layer):
    """The sublayer factories of the MCAN-style post-norm blocks.

    MCAN's blocks (`layers/mcan_blocks.py`) and MUAN's unified attention
    block (`layers/unified_attention.py`) build the same post-norm
    `Residual`s and `FeedForward` from the same attributes, which a
    subclass sets: `hidden_size`, `filter_size`, `dropout` (on sublayer
    outputs and after the ReLU), `layer_norm`, `layer_norm_epsilon`,
    `kernel_initializer`, `bias_initializer` and `seed`. Each sublayer is
    numbered by the caller, its seed `sub_seed(seed, seed_index)`, so that
    the numbering (and so every seeded weight) is the block's own.
    """

    def get_config(self):
        """The shared attributes (and `num_heads`, `attention_dropout`);
        a subclass adds its own."""
        config = super().get_config()
        config.update(
            hidden_size=self.hidden_size,
            num_heads=self.num_heads,
            filter_size=self.filter_size,
            dropout=self.dropout,
            attention_dropout=self.attention_dropout,
            layer_norm=self.layer_norm,
            layer_norm_epsilon=self.layer_norm_epsilon,
            kernel_initializer=keras.initializers.serialize(self.kernel_initializer),
            bias_initializer=keras.initializers.serialize(self.bias_initializer),
            seed=self.seed,
        )
        return config

    def _residual(self, seed_index, name):
        """The post-norm `Residual` numbered `seed_index` by `sub_seed`."""
        return Residual(
            False,
            dropout=self.dropout,
            layer_norm=self.layer_norm,
            epsilon=self.layer_norm_epsilon,
            seed=sub_seed(self.seed, seed_index),
            name=name,
            dtype=self.dtype_policy,
        )

    def _feed_forward(self, seed_index, name="ffn"):
        """The ReLU `FeedForward` numbered `seed_index` by `sub_seed`."""
        return FeedForward(
            self.hidden_size,
            self.filter_size,
            dropout=self.dropout,
            kernel_initializer=self.kernel_initializer,
            bias_initializer=self.bias_initializer,
            seed=sub_seed(self.seed, seed_index),
            name=name,
            dtype=self.dtype_policy,
        )
