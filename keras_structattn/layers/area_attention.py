"""`MultiHeadAreaAttention`: a drop-in for `keras.layers.MultiHeadAttention`
whose heads attend to areas (spans or rectangles) of the memory."""

import math

import keras
from keras import ops

from keras_structattn import checks
from keras_structattn.layers._masking import check_value_key_shapes
from keras_structattn.layers.structured_attention import StructuredMultiHeadAttention
from keras_structattn.ops.areas import area_coordinates
from keras_structattn.ops.areas import area_features
from keras_structattn.ops.areas import num_areas
from keras_structattn.ops.attend_areas import IMPLEMENTATIONS
from keras_structattn.ops.attend_areas import VALUE_MODES
from keras_structattn.ops.attend_areas import area_attention
from keras_structattn.ops.attend_areas import attend_to_areas

# Parameter-free key modes (handled by `area_attention`) and the learned ones
# of Eq. 9, whose MLP and shape embeddings are shared by all heads.
PLAIN_KEY_MODES = ("mean", "max", "sample")
MLP_KEY_MODES = ("concat", "max_concat", "sum", "sample_concat", "sample_sum")
KEY_MODES = PLAIN_KEY_MODES + MLP_KEY_MODES


def _mlp_input_dim(mode, key_dim):
    """Width of the feature vector fed to the area-key MLP."""
    shape_dim = 2 * (key_dim // 2)
    return {
        "concat": 2 * key_dim + shape_dim,  # [mean, std, e]
        "max_concat": key_dim + shape_dim,  # [max, e]
        "sum": key_dim,  # e + mean + std
        "sample_concat": key_dim + shape_dim,  # [mean (+ noise), e]
        "sample_sum": key_dim,  # mean (+ noise) + e
    }[mode]


@keras.saving.register_keras_serializable(package="keras_structattn")
class MultiHeadAreaAttention(StructuredMultiHeadAttention):
    """Multi-head area attention (Li et al., 2019).

    Each head attends to *areas* of the memory: spans of up to
    `max_area_width` adjacent items of a 1-D memory, or rectangles of up to
    `max_area_height x max_area_width` items of a 2-D memory. An area's key
    is the mean of its items' keys (or another `area_key_mode`), its value
    the sum of their values (or another `area_value_mode`). With
    `max_area_width = max_area_height = 1` it computes exactly what
    `keras.layers.MultiHeadAttention` computes with the same weights.

    Constructor arguments, call signature and masking follow
    `keras.layers.MultiHeadAttention` (`key_dim` is the per-head size). The
    differences:

    * a query row with no attendable area outputs zeros (before the output
      projection), in every code path; `keras.layers.MultiHeadAttention`
      gives zeros or a uniform average depending on the path.
    * an explicit `query_mask=` is honoured (Keras MHA ignores it in favour
      of the query's Keras mask).
    * `return_attention_scores=True` returns weights over areas,
      `[B, num_heads, T, num_areas]`; `area_coordinates()` maps an area
      index to `(row, col, height, width)`.
    * a 2-D memory may be given as `[B, H, W, dim]` (then `memory_height` is
      `H`), or flattened row-major as `[B, H * W, dim]` with
      `memory_height=H`. A `[B, H, W, dim]` query gives a `[B, H, W, out]`
      output.
    * `attention_axes` must be left at its default. `flash_attention=True`
      (Keras MHA's flash attention) needs 1x1 areas with a parameter-free
      key: larger areas have no flash kernel.

    Masks are boolean, True = may attend. An area may be attended iff every
    item in it may, so padding masks and causal masks (raster order in 2-D)
    carry over to areas.

    Args:
        num_heads, key_dim, value_dim, dropout, use_bias, output_shape,
            sliding_window, kernel_initializer, bias_initializer,
            kernel_regularizer, bias_regularizer, activity_regularizer,
            kernel_constraint, bias_constraint, use_gate, seed: as in
            `keras.layers.MultiHeadAttention`. `dropout` drops area weights,
            drawing from Keras MHA's own dropout seed generator: the layer
            has Keras MHA's seed generators (none without dropout), plus
            one for the noise of a `sample` key mode without dropout.
        max_area_width: largest area width (span length in 1-D).
        max_area_height: largest area height (2-D memories).
        memory_height: rows of a flattened 2-D memory (1 for 1-D).
        area_key_mode: `"mean"` (Eq. 3, default), `"max"`, `"sample"`
            (mean + std * noise when training), or a learned mode of Eq. 9:
            `"concat"`, `"max_concat"`, `"sum"`, `"sample_concat"`,
            `"sample_sum"`. The learned modes add weights shared by all
            heads: `area_height_embedding` `[max_area_height, key_dim // 2]`,
            `area_width_embedding` `[max_area_width, key_dim // 2]` and the
            Dense sublayers `area_key_hidden` (ReLU) and `area_key_output`.
        area_value_mode: `"sum"` (Eq. 4, default), `"mean"` or `"max"`.
        area_temperature: the area logits are divided by it.
        top_k_areas: if > 0, each query keeps only its top-k areas.
        area_implementation: `"fast"` (default: item logits summed over
            areas, area weights folded back onto items; never materialises
            area keys or values where the mode allows), `"direct"`
            (materialises them, like tensor2tensor), `"fused"` (JAX only: a
            Pallas kernel, FlashAttention-style, memory O(L) per query row,
            for `mean` keys with `sum`/`mean` values; other settings, and
            training with dropout, run `"fast"`; see
            docs/fused_area_attention.md), `"stacked"` (area keys and
            values materialised as one memory of `num_areas` items and
            attended by `keras.ops.dot_product_attention`: cuDNN flash
            attention on a GPU under bfloat16; any key mode, also the
            learned ones, with `sum`/`mean` values and `value_dim ==
            key_dim`; other settings run `"fast"`) or `"auto"` (`"fused"`
            on a JAX GPU, else `"fast"`). Same results.
        **kwargs: base layer arguments (`name`, `dtype`, ...).

    Call arguments:
        query, value, key, query_mask, value_mask, key_mask, attention_mask,
        return_attention_scores, training, use_causal_mask: as in
            `keras.layers.MultiHeadAttention` (boolean masks, True = may
            attend); 2-D inputs as `[B, H, W, dim]` (above).
        cache, cache_update_index: keyword-only; as in
            `StructuredMultiHeadAttention` (the item mask of the cache
            carries over to areas).

    Returns:
        `[B, T, output_dim]` (or `[B, H, W, output_dim]` for a 2-D query);
        then the weights over areas `[B, num_heads, T, num_areas]`
        (float32) if `return_attention_scores`; then the cache if one was
        given.

    Example:

    >>> layer = MultiHeadAreaAttention(num_heads=4, key_dim=16,
    ...                                max_area_width=3)
    >>> x = keras.random.normal((2, 10, 64))
    >>> layer(x, x, use_causal_mask=True).shape
    (2, 10, 64)
    """

    def __init__(
        self,
        num_heads,
        key_dim,
        value_dim=None,
        dropout=0.0,
        use_bias=True,
        output_shape=None,
        attention_axes=None,
        sliding_window=None,
        flash_attention=None,
        kernel_initializer="glorot_uniform",
        bias_initializer="zeros",
        kernel_regularizer=None,
        bias_regularizer=None,
        activity_regularizer=None,
        kernel_constraint=None,
        bias_constraint=None,
        use_gate=False,
        seed=None,
        max_area_width=1,
        max_area_height=1,
        memory_height=1,
        area_key_mode="mean",
        area_value_mode="sum",
        area_temperature=1.0,
        top_k_areas=0,
        area_implementation="fast",
        **kwargs,
    ):
        checks.positive_int("max_area_width", max_area_width)
        checks.positive_int("max_area_height", max_area_height)
        checks.positive_int("memory_height", memory_height)
        checks.one_of("area_key_mode", area_key_mode, KEY_MODES)
        checks.one_of("area_value_mode", area_value_mode, VALUE_MODES)
        checks.positive_float("area_temperature", area_temperature)
        checks.non_negative_int("top_k_areas", top_k_areas)
        checks.one_of(
            "area_implementation", area_implementation, IMPLEMENTATIONS
        )
        checks.rate("dropout", dropout)
        # The base class rejects `attention_axes` other than the memory axis
        # (2-D memories come as [B, H, W, dim] or with `memory_height`).
        super().__init__(
            num_heads=num_heads,
            key_dim=key_dim,
            value_dim=value_dim,
            dropout=dropout,
            use_bias=use_bias,
            output_shape=output_shape,
            attention_axes=attention_axes,
            sliding_window=sliding_window,
            flash_attention=flash_attention,
            kernel_initializer=kernel_initializer,
            bias_initializer=bias_initializer,
            kernel_regularizer=kernel_regularizer,
            bias_regularizer=bias_regularizer,
            activity_regularizer=activity_regularizer,
            kernel_constraint=kernel_constraint,
            bias_constraint=bias_constraint,
            use_gate=use_gate,
            seed=seed,
            **kwargs,
        )
        if area_key_mode in ("sum", "sample_sum") and key_dim % 2:
            raise ValueError(
                f"area_key_mode={area_key_mode!r} adds the area-shape "
                "embedding (key_dim // 2 for height and for width) to the "
                "key features, so `key_dim` must be even. "
                f"Received: key_dim={key_dim}"
            )
        if flash_attention and (
            max_area_width > 1 or max_area_height > 1 or area_key_mode in MLP_KEY_MODES
        ):
            raise ValueError(
                "Argument `flash_attention=True` needs max_area_width = max_area_height = 1 "
                "and a parameter-free `area_key_mode`: area attention over larger areas "
                f"has no flash kernel. Received: max_area_width={max_area_width}, "
                f"max_area_height={max_area_height}, area_key_mode={area_key_mode!r}"
            )
        self._max_area_width = max_area_width
        self._max_area_height = max_area_height
        self._memory_height = memory_height
        self._area_key_mode = area_key_mode
        self._area_value_mode = area_value_mode
        self._area_temperature = float(area_temperature)
        self._top_k_areas = top_k_areas
        self._area_implementation = area_implementation
        # Draws for `sample` noise without dropout. Area dropout (and the
        # noise, with dropout) draws from Keras MHA's own Dropout layer's
        # generator, so that the layer has Keras MHA's seed generators: none
        # without dropout, one with it (and none of its structure is off).
        self._area_seed_generator = None
        if area_key_mode.startswith("sample") and not dropout:
            self._area_seed_generator = keras.random.SeedGenerator(seed)
        self._memory_length = None
        self._grid_height = memory_height

    # Read-only views of the area arguments, like MHA's properties.
    @property
    def max_area_width(self):
        return self._max_area_width

    @property
    def max_area_height(self):
        return self._max_area_height

    @property
    def memory_height(self):
        return self._memory_height

    @property
    def area_key_mode(self):
        return self._area_key_mode

    @property
    def area_value_mode(self):
        return self._area_value_mode

    def get_config(self):
        config = super().get_config()
        config.update(
            max_area_width=self._max_area_width,
            max_area_height=self._max_area_height,
            memory_height=self._memory_height,
            area_key_mode=self._area_key_mode,
            area_value_mode=self._area_value_mode,
            area_temperature=self._area_temperature,
            top_k_areas=self._top_k_areas,
            area_implementation=self._area_implementation,
        )
        return config

    # ------------------------------------------------------------------ shapes

    def _grid_height_for(self, memory_shape):
        """The memory's grid height: from a `[B, H, W, dim]` shape, or the
        `memory_height` argument for `[B, L, dim]`."""
        if len(memory_shape) == 4:
            height = memory_shape[1]
            if self._memory_height not in (1, height):
                raise ValueError(
                    "A 2-D memory [B, H, W, dim] sets the grid height to H, "
                    f"which conflicts with memory_height={self._memory_height}"
                    f". Received a memory of shape {tuple(memory_shape)}."
                )
            return height
        if len(memory_shape) != 3:
            raise ValueError(
                "`value` and `key` must be [batch, length, dim] or "
                f"[batch, height, width, dim]. Received shape {tuple(memory_shape)}"
            )
        return self._memory_height

    @staticmethod
    def _flat_shape(shape):
        shape = tuple(shape)
        if len(shape) == 4:
            rows, cols = shape[1], shape[2]
            length = None if rows is None or cols is None else rows * cols
            return (shape[0], length, shape[3])
        if len(shape) != 3:
            raise ValueError(
                "`query` must be [batch, length, dim] or "
                f"[batch, height, width, dim]. Received shape {shape}"
            )
        return shape

    def build(self, query_shape, value_shape, key_shape=None):
        check_value_key_shapes(value_shape, key_shape)
        key_shape = value_shape if key_shape is None else key_shape
        self._grid_height = self._grid_height_for(value_shape)
        self._grid_height_for(key_shape)
        query_shape = self._flat_shape(query_shape)
        value_shape = self._flat_shape(value_shape)
        key_shape = self._flat_shape(key_shape)
        self._memory_length = value_shape[1]
        if self._memory_length is not None:
            checks.grid(self._memory_length, self._grid_height)
        super().build(query_shape, value_shape, key_shape)
        if self._area_key_mode in MLP_KEY_MODES:
            self._build_area_key_mlp()

    def _build_area_key_mlp(self):
        half = self._key_dim // 2
        self.area_height_embedding = self.add_weight(
            name="area_height_embedding",
            shape=(self._max_area_height, half),
            initializer=self._get_common_kwargs_for_sublayer()[
                "kernel_initializer"
            ],
        )
        self.area_width_embedding = self.add_weight(
            name="area_width_embedding",
            shape=(self._max_area_width, half),
            initializer=self._get_common_kwargs_for_sublayer()[
                "kernel_initializer"
            ],
        )
        common = self._get_common_kwargs_for_sublayer()
        self._area_key_hidden = keras.layers.Dense(
            self._key_dim, activation="relu", name="area_key_hidden", **common
        )
        self._area_key_hidden.build(
            (None, _mlp_input_dim(self._area_key_mode, self._key_dim))
        )
        common = self._get_common_kwargs_for_sublayer()
        self._area_key_output = keras.layers.Dense(
            self._key_dim, name="area_key_output", **common
        )
        self._area_key_output.build((None, self._key_dim))

    def area_coordinates(self, memory_length=None):
        """Maps area indices (of the returned scores) to grid positions.

        Args:
            memory_length: items in the memory; defaults to the length the
                layer was built with.

        Returns:
            An int32 NumPy array `[num_areas, 4]` of
            `(row, col, height, width)`.
        """
        length = memory_length or self._memory_length
        if length is None:
            raise ValueError(
                "Pass `memory_length`: the layer was not built with a static "
                "memory length."
            )
        return area_coordinates(
            length, self._grid_height, self._max_area_width, self._max_area_height
        )

    # -------------------------------------------------------------------- call

    @staticmethod
    def _flatten(x):
        """`[B, H, W, d]` -> `[B, H * W, d]`; other ranks unchanged."""
        if x is None or len(x.shape) != 4:
            return x
        shape = ops.shape(x)
        return ops.reshape(x, (shape[0], shape[1] * shape[2], shape[3]))

    @staticmethod
    def _flatten_mask(mask):
        """`[B, H, W]` item masks -> `[B, H * W]`."""
        if mask is None or len(mask.shape) != 3:
            return mask
        shape = ops.shape(mask)
        return ops.reshape(mask, (shape[0], shape[1] * shape[2]))

    def compute_output_spec(self, *args, **kwargs):
        arguments = self._call_signature.bind(*args, **kwargs).arguments
        query, value, key = arguments["query"], arguments["value"], arguments.get("key")
        lengths = tuple(query.shape[1:-1]) + (() if value is None else tuple(value.shape[1:-1]))
        if None not in lengths:
            return super().compute_output_spec(*args, **kwargs)
        # Unknown lengths: JAX traces them as symbolic dimensions, which the
        # area layout (a Python loop over area shapes) cannot compare; the
        # shapes follow from the static parts.
        output_shape = self.compute_output_shape(
            query.shape, value.shape, None if key is None else key.shape
        )
        outputs = [keras.KerasTensor(output_shape, dtype=self.compute_dtype)]
        if arguments.get("return_attention_scores"):
            length = self._flat_shape(value.shape)[1]
            areas = None if length is None else num_areas(
                length, self._grid_height_for(value.shape), self._max_area_width,
                self._max_area_height,
            )
            query_length = self._flat_shape(query.shape)[1]
            shape = (query.shape[0], self._num_heads, query_length, areas)
            outputs.append(keras.KerasTensor(shape, dtype="float32"))
        cache = arguments.get("cache")
        if cache is not None:
            outputs.append(keras.KerasTensor(cache.shape, dtype=cache.dtype))
        return outputs[0] if len(outputs) == 1 else tuple(outputs)

    def _as_sequences(self, query, value, key, query_mask, value_mask, key_mask):
        # 2-D inputs are attended as their row-major flattening; an
        # `attention_mask` is given over the flattened axes (T = H * W
        # queries, S = H * W keys) and checked with every layer's.
        tensors = (self._flatten(t) for t in (query, value, key))
        masks = (self._flatten_mask(m) for m in (query_mask, value_mask, key_mask))
        return (*tensors, *masks)

    def _like_query(self, output, query_mask, query):
        # A 2-D query gets its grid back on the output (and its mask).
        if len(query.shape) != 4:
            return output, query_mask
        grid = (ops.shape(output)[0],) + tuple(ops.shape(query)[1:3])
        output = ops.reshape(output, grid + tuple(ops.shape(output)[2:]))
        if query_mask is not None:
            query_mask = ops.reshape(query_mask, grid)
        return output, query_mask

    def _items_are_areas(self):
        """Whether every area is one item with its own key and value."""
        return (
            self._max_area_width == 1
            and self._max_area_height == 1
            and self._area_key_mode in PLAIN_KEY_MODES
        )

    def _area_layout(self):
        return dict(
            memory_height=self._grid_height,
            max_area_width=self._max_area_width,
            max_area_height=self._max_area_height,
        )

    def _attend(self, query, key, value, structure, training, need_weights, state):
        """Area attention over projected `[B, T, N, d]` inputs; the item
        mask `structure.allowed` `[B, 1, T, S]` carries over to areas (an
        area may be attended iff all its items may).

        Returns `(output [B, T, N, dv], weights [B, N, T, num_areas] float32
        or None)`.
        """
        if self._items_are_areas():
            # 1x1 areas with a parameter-free key are the items themselves:
            # the base attention (which also takes memories of unknown
            # length), with the area temperature and top-k on the logits.
            structure = structure._replace(
                scale=structure.scale / self._area_temperature,
                top_k=self._top_k_areas or None,
            )
            return super()._attend(query, key, value, structure, training, need_weights, state)
        # [B, T, N, d] -> [B, N, T, d], queries scaled as in MHA.
        query = ops.transpose(query, (0, 2, 1, 3))
        query = ops.multiply(
            query, ops.cast(1.0 / math.sqrt(float(self._key_dim)), query.dtype)
        )
        key = ops.transpose(key, (0, 2, 1, 3))
        value = ops.transpose(value, (0, 2, 1, 3))
        options = dict(
            value_mode=self._area_value_mode,
            temperature=self._area_temperature,
            top_k_areas=self._top_k_areas,
            training=bool(training),
            return_weights=need_weights,
            dropout_rate=self._dropout,
            seed=self._area_seed(),
            implementation=self._area_implementation,
            **self._area_layout(),
        )
        mask = structure.allowed
        if self._area_key_mode in PLAIN_KEY_MODES:
            result = area_attention(
                query, key, value, mask, key_mode=self._area_key_mode, **options
            )
        else:
            area_key = self._learned_area_keys(key, training=bool(training))
            result = attend_to_areas(query, area_key, value, mask, **options)
        output, weights = result if need_weights else (result, None)
        if weights is not None:
            weights = ops.cast(weights, "float32")
        return ops.transpose(output, (0, 2, 1, 3)), weights

    def _area_seed(self):
        """The generator of area dropout and `sample` noise (None if neither
        can draw)."""
        if self._dropout:
            return self._dropout_layer.seed_generator
        return self._area_seed_generator

    def _learned_area_keys(self, key, training):
        """Area keys of Eq. 9: `Dense(ReLU(Dense(f)))` of area features `f`
        and the area-shape embedding, the MLP shared by all heads."""
        mode = self._area_key_mode
        wanted = {
            "concat": ("mean", "std"),
            "max_concat": ("max",),
            "sum": ("mean", "std"),
            "sample_concat": ("mean", "std"),
            "sample_sum": ("mean", "std"),
        }[mode]
        feats = area_features(key, axis=-2, features=wanted, **self._area_layout())
        dtype = self.compute_dtype
        shape_embedding = ops.concatenate(
            [
                ops.take(self.area_height_embedding, feats["heights"] - 1, axis=0),
                ops.take(self.area_width_embedding, feats["widths"] - 1, axis=0),
            ],
            axis=-1,
        )
        shape_embedding = ops.cast(shape_embedding, dtype)
        if mode.startswith("sample"):
            mean = feats["mean"]
            if training:
                noise = keras.random.normal(
                    ops.shape(mean), seed=self._area_seed()
                )
                mean = mean + feats["std"] * noise
            feats = dict(feats, mean=mean)
        if mode in ("sum", "sample_sum"):
            summed = feats["mean"] + (feats["std"] if mode == "sum" else 0.0)
            features = ops.cast(summed, dtype) + shape_embedding
        else:
            parts = {
                "concat": ("mean", "std"),
                "max_concat": ("max",),
                "sample_concat": ("mean",),
            }[mode]
            pieces = [ops.cast(feats[name], dtype) for name in parts]
            batch_shape = ops.shape(pieces[0])[:-1]
            pieces.append(
                ops.broadcast_to(
                    shape_embedding,
                    tuple(batch_shape) + (shape_embedding.shape[-1],),
                )
            )
            features = ops.concatenate(pieces, axis=-1)
        return self._area_key_output(self._area_key_hidden(features))
