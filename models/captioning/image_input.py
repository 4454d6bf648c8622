"""Image features as a Transformer's encoder input: a grid or bottom-up regions.

Shared by the captioners (`models/captioning/base.py`: `transformer_captioner.py`,
`catt_captioner.py`, `updown.py`). Two kinds of features (`encoder_input`):

* `"grid"`: float `[B, H, W, C]` CNN features, projected to `hidden_size`
  (a Dense), plus a 2-D position signal (`grid_positions`): learned row
  and column embeddings added, or float32 sinusoids of the row in the
  first half of the channels and of the column in the second
  (`keras_structattn.ops.positions.timing_signal`); flattened row-major.
* `"regions"`: bottom-up region features (Anderson et al., 2018,
  arXiv:1707.07998), a dict `{"features": [B, R, C], "boxes": [B, R, 4],
  "mask": [B, R] bool}` with normalised `(x1, y1, x2, y2)` boxes, embedded
  as M4C embeds objects (Hu et al., 2020, arXiv:1911.06258, Sec. 3.1):
  `LN(W f) + LN(W_b g)` with the box geometry `g = (x1, y1, x2, y2, w, h,
  w * h)`; padding regions (mask False) are zeroed (and masked out of every
  attention by the model).

Also `decode_captions`, the captioners' `call` over `[B, T]` or `[B, K, T]`
captions (K captions of each image against one encoding of it).
"""

import keras
from keras import ops

from keras_structattn import checks
from keras_structattn.ops.positions import timing_signal

ENCODER_INPUTS = ("grid", "regions")
GRID_POSITIONS = ("learned", "sinusoid")
REGION_KEYS = ("features", "boxes", "mask")
# (x1, y1, x2, y2, w, h, w * h) of a normalised box.
BOX_GEOMETRY_SIZE = 7


class ImageInput:
    """Mixin of a `models.translation.base.Seq2Seq` captioner: the image's embedding.

    The model calls `_set_image_input(hp)` then (once its own seeded
    sublayers are made, to keep their seeds) `_make_image_layers()` in its
    constructor, `_build_image_layers(feature_shape)` in `build`, and
    `embed_image(features)` in `encode`. It needs `hidden_size` and
    `_next_seed()` (from `Seq2Seq`).
    """

    def _set_image_input(self, hp):
        """Checks and keeps the image hparams of `hp` (module docstring;
        without `grid_positions`, as Up-Down's, it is None)."""
        checks.one_of("encoder_input", hp.encoder_input, ENCODER_INPUTS)
        checks.positive_int("grid_height", hp.grid_height)
        checks.positive_int("grid_width", hp.grid_width)
        grid_positions = getattr(hp, "grid_positions", None)
        if grid_positions is not None:
            checks.one_of("grid_positions", grid_positions, GRID_POSITIONS)
        self.encoder_input = hp.encoder_input
        self.grid_height = hp.grid_height
        self.grid_width = hp.grid_width
        self.grid_positions = grid_positions

    def _make_image_layers(self):
        """The projection, position embeddings and norms of the features."""
        self.feature_projection = keras.layers.Dense(
            self.hidden_size, kernel_initializer=self._glorot(), name="feature_projection"
        )
        self.row_embedding = self.column_embedding = None
        self.box_projection = self.feature_norm = self.box_norm = None
        if self.encoder_input == "grid" and self.grid_positions == "learned":
            self.row_embedding = self._position_embedding(self.grid_height, "row_embedding")
            self.column_embedding = self._position_embedding(self.grid_width, "column_embedding")
        if self.encoder_input == "regions":
            self.box_projection = keras.layers.Dense(
                self.hidden_size, kernel_initializer=self._glorot(), name="box_projection"
            )
            self.feature_norm = keras.layers.LayerNormalization(
                epsilon=1e-6, name="feature_norm"
            )
            self.box_norm = keras.layers.LayerNormalization(epsilon=1e-6, name="box_norm")

    def _glorot(self):
        return keras.initializers.GlorotUniform(seed=self._next_seed())

    def _position_embedding(self, size, name):
        # Normal with stddev hidden_size ** -0.5, as tensor2tensor's learned
        # positional embeddings.
        initializer = keras.initializers.RandomNormal(
            stddev=self.hidden_size**-0.5, seed=self._next_seed()
        )
        return keras.layers.Embedding(
            size, self.hidden_size, embeddings_initializer=initializer, name=name
        )


    @property
    def memory_length(self):
        """Encoder positions of a grid, `H * W` (None for regions)."""
        if self.encoder_input == "grid":
            return self.grid_height * self.grid_width
        return None

    def _check_grid_shape(self, shape):
        if isinstance(shape, dict):
            raise ValueError(
                "encoder_input='grid' takes float features [batch, grid_height, "
                f"grid_width, channels], not a dict (keys {sorted(shape)}); "
                "regions need encoder_input='regions'."
            )
        shape = tuple(shape)
        expected = (self.grid_height, self.grid_width)
        if len(shape) != 4 or shape[1:3] != expected:
            raise ValueError(
                "encoder_input='grid' takes float features [batch, grid_height, "
                f"grid_width, channels] with (grid_height, grid_width) = {expected} "
                f"(static). Received features of shape {shape}; set the grid_height "
                "and grid_width hparams to the grid of the features."
            )

    def _region_shapes(self, features):
        """The shapes of a regions dict (of tensors or of shapes), checked."""
        if not isinstance(features, dict) or set(features) != set(REGION_KEYS):
            keys = sorted(features) if isinstance(features, dict) else type(features).__name__
            raise ValueError(
                "encoder_input='regions' takes a dict with the keys "
                f"{list(REGION_KEYS)} (features [B, R, C], boxes [B, R, 4], mask "
                f"[B, R]). Received: {keys}"
            )
        shapes = {
            key: tuple(value.shape) if hasattr(value, "shape") else tuple(value)
            for key, value in features.items()
        }
        ranks = tuple(len(shapes[key]) for key in REGION_KEYS)
        if ranks != (3, 3, 2) or shapes["boxes"][-1] not in (4, None):
            raise ValueError(
                "encoder_input='regions' takes features [B, R, C], boxes [B, R, 4] "
                f"and mask [B, R]. Received shapes {shapes}"
            )
        return shapes

    def _build_image_layers(self, feature_shape):
        """Builds the image layers for features of `feature_shape` (a grid
        shape, a dict of region shapes, or None); returns the embedded
        shape `(B, L, hidden_size)`."""
        batch, length = None, self.memory_length
        if feature_shape is not None and self.encoder_input == "grid":
            self._check_grid_shape(feature_shape)
            batch = feature_shape[0]
            self.feature_projection.build(tuple(feature_shape))
        elif feature_shape is not None:
            feature_shape = self._region_shapes(feature_shape)["features"]
            batch, length = feature_shape[0], feature_shape[1]
            self.feature_projection.build(feature_shape)
        if self.encoder_input == "grid" and self.row_embedding is not None:
            self.row_embedding.build((self.grid_height,))
            self.column_embedding.build((self.grid_width,))
        hidden = (batch, length, self.hidden_size)
        if self.encoder_input == "regions":
            self.box_projection.build((None, BOX_GEOMETRY_SIZE))
            self.feature_norm.build(hidden)
            self.box_norm.build(hidden)
        return hidden

    def _build_for(self, features):
        """Builds a fresh model as a first call on `features` would (for
        `generate` and the attention maps called before any `call`)."""
        if not self.built:
            shapes = keras.tree.map_structure(lambda t: tuple(t.shape), features)
            self.build((shapes, (None, None)))


    def _grid_positions(self):
        """float32 `[H, W, hidden_size]` position signal of the grid cells."""
        rows = ops.arange(self.grid_height)
        columns = ops.arange(self.grid_width)
        if self.grid_positions == "learned":
            row = ops.cast(self.row_embedding(rows), "float32")
            column = ops.cast(self.column_embedding(columns), "float32")
            return row[:, None, :] + column[None, :, :]
        half = self.hidden_size // 2
        row = timing_signal(rows, half)
        column = timing_signal(columns, self.hidden_size - half)
        grid = (self.grid_height, self.grid_width)
        return ops.concatenate(
            [
                ops.broadcast_to(row[:, None, :], grid + (half,)),
                ops.broadcast_to(column[None, :, :], grid + (self.hidden_size - half,)),
            ],
            axis=-1,
        )

    def _embed_grid(self, features):
        """`(x [B, H * W, hidden], mask all True [B, H * W])` of a grid."""
        if isinstance(features, dict):
            self._check_grid_shape(features)
        features = ops.convert_to_tensor(features)
        self._check_grid_shape(features.shape)
        x = self.feature_projection(ops.cast(features, self.compute_dtype))
        x = x + ops.cast(self._grid_positions(), x.dtype)
        x = ops.reshape(x, (-1, self.memory_length, self.hidden_size))
        mask = ops.ones((ops.shape(x)[0], self.memory_length), "bool")
        return x, mask

    def _embed_regions(self, features):
        """`(x [B, R, hidden], mask [B, R])` of region features: M4C's
        `LN(W f) + LN(W_b g)`, zero for padding regions."""
        self._region_shapes(features)
        mask = ops.cast(features["mask"], "bool")
        boxes = ops.cast(features["boxes"], "float32")
        x1, y1, x2, y2 = (boxes[..., i] for i in range(4))
        width, height = x2 - x1, y2 - y1
        geometry = ops.stack([x1, y1, x2, y2, width, height, width * height], axis=-1)
        dtype = self.compute_dtype
        x = self.feature_norm(self.feature_projection(ops.cast(features["features"], dtype)))
        x = x + self.box_norm(self.box_projection(ops.cast(geometry, dtype)))
        # Padding regions are masked out of every attention; zeroing them
        # also keeps whatever fills them (even NaN) out of the sums.
        x = ops.where(mask[..., None], x, ops.zeros_like(x))
        return x, mask

    def embed_image(self, features):
        """`(x [B, L, hidden_size], mask bool [B, L])` of the features:
        `L = H * W` (the mask all True) for a grid, `L = R` for regions."""
        if self.encoder_input == "grid":
            return self._embed_grid(features)
        return self._embed_regions(features)


def decode_captions(model, inputs, training=None):
    """A captioner's `call`: logits of captions `[B, T]` or `[B, K, T]`.

    Args:
        model: a captioner with `encode(features, training)` returning
            `(encoded, mask)` (`encoded` a tensor or a dict of batch-leading
            tensors) and `decode(decoder_inputs, encoded, mask, training)`.
        inputs: `(features, decoder_inputs)`; `decoder_inputs` int `[B, T]`,
            or `[B, K, T]`: K captions per image (static K), each image
            encoded once for its K captions (self-critical.pytorch's
            `seq_per_img`: the encoder runs once per image, not per caption).
        training: whether dropout is active.

    Returns:
        float32 logits `[B, T, V]` or `[B, K, T, V]`.
    """
    features, decoder_inputs = inputs
    encoded, mask = model.encode(features, training=training)
    if len(decoder_inputs.shape) != 3:
        return model.decode(decoder_inputs, encoded, mask, training=training)
    k = decoder_inputs.shape[1]
    if k is None:
        raise ValueError("Captions [B, K, T] need a static K (captions per image).")
    length = ops.shape(decoder_inputs)[2]
    encoded, mask = keras.tree.map_structure(lambda t: ops.repeat(t, k, axis=0), (encoded, mask))
    logits = model.decode(ops.reshape(decoder_inputs, (-1, length)), encoded, mask,
                          training=training)
    return ops.reshape(logits, (-1, k, length, model.vocab_size))
