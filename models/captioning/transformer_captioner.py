"""A Transformer image captioner with 2-D area attention.

The image-captioning model of Li et al., "Area Attention", ICML 2019
(arXiv:1810.10126, section 4.3), after the benchmark of Sharma et al., 2018
(ACL, "Conceptual Captions"): the image comes as an `H x W` grid of CNN
embeddings (8x8 Inception-ResNet cells in the paper), a Transformer encoder
encodes the grid, flattened row-major, and a Transformer decoder writes the
caption. Area attention over rectangles of up to `max_area_height x
max_area_width` cells (Eq. 3 mean keys and Eq. 4 summed values by default,
the learned keys of Eq. 9 with `area_key_mode`; docs/area_attention.md) is
used in the first `num_area_layers` layers of the encoder self-attention
and of the caption-to-image (encoder-decoder) attention, as in the paper's
Table 5; the caption's self-attention stays regular unless
`area_attention_kinds` names `decoder_self` (1-D spans of the caption).

Two image inputs (`encoder_input`):

* `"grid"`: float `[B, H, W, C]` features, projected to `hidden_size`
  (a Dense), plus a 2-D position signal (`grid_positions`): learned row
  and column embeddings added, or float32 sinusoids of the row in the
  first half of the channels and of the column in the second
  (`keras_structattn.ops.positions.timing_signal`).
* `"regions"`: bottom-up region features (Anderson et al., 2018,
  arXiv:1707.07998), a dict `{"features": [B, R, C], "boxes": [B, R, 4],
  "mask": [B, R] bool}` with normalised `(x1, y1, x2, y2)` boxes. As M4C
  embeds objects (Hu et al., 2020, arXiv:1911.06258, section 3.1):
  `LN(W f) + LN(W_b g)`, here with the box geometry
  `g = (x1, y1, x2, y2, w, h, w * h)`; padding regions (mask False) are
  masked out of every attention. Regions have no grid, so no area
  attention.

Then dropout (tensor2tensor's `layer_prepostprocess_dropout`, after the
positions as on the Transformer's inputs), the pre-norm encoder blocks and
a final layer norm. The decoder is the translation Transformer's
(`models/translation/transformer.py`): target embedding scaled by `sqrt(hidden_size)`
plus the timing signal, pre-norm decoder blocks, final layer norm and the
softmax (shared with the target embedding by default); token ids follow
`keras_structattn.decoding.tokens` (0 pads and starts the caption, 1 is EOS).

Hyper-parameter sets (`models/captioning/hparams_sets.py`): `captioner_tiny`,
`captioner_small` and `captioner_base` (the paper's 6+6 layers x 512, 8
heads), each with `_area2x2` and `_area3x3` variants (area attention in
the first third of the layers as the paper's first 2 of 6: 1 of tiny's 2, 1 of
small's 3, 2 of base's 6; encoder self and encoder-decoder attention).
"""

import keras
from keras import ops

from keras_structattn.layers.area_attention import MultiHeadAreaAttention
from keras_structattn.ops import areas
from models.captioning import hparams_sets
from models.captioning.base import Captioner
from models.translation.transformer import TransformerDecoding
from models.translation.transformer import area_arguments
from models.translation.transformer import make_stacks


@keras.saving.register_keras_serializable(package="keras_structattn")
class TransformerCaptioner(TransformerDecoding, Captioner):
    """Transformer image captioner with optional 2-D area attention.

    See the module docstring. The defaults are the paper's model (6 encoder
    and 6 decoder layers, hidden 512, 8 heads, an 8x8 grid):
    `hparams_sets.TRANSFORMER_CAPTIONER`, the class's `HPARAMS`. Its training values
    (`hparams_sets.captioning_training_defaults`) differ from translation's: `batch_size` counts
    *images* per batch (each with its captions: `decoder_inputs` may be
    `[B, K, T]`, K captions per image), not tokens; `max_length` is the
    longest caption in tokens (EOS included); the learning rate
    (`constant * warmup * rsqrt decay * rsqrt(hidden_size)`) warms up over
    1,000 steps to a peak of about 1.4e-3 (hidden 512) or 2.8e-3 (hidden
    128), for data sets far smaller than WMT.

    Args:
        vocab_size: size of the caption vocabulary.
        hidden_size, filter_size, num_hidden_layers, num_heads: sizes (the
            encoder and the decoder each have `num_hidden_layers` layers).
        layer_prepostprocess_dropout, attention_dropout, relu_dropout:
            tensor2tensor's three dropouts.
        shared_embedding_and_softmax_weights: one matrix for the caption
            embedding and the output projection.
        encoder_input: `"grid"` (float `[B, H, W, C]`) or `"regions"` (a
            dict of `features`, `boxes`, `mask`).
        grid_height, grid_width: the grid's `H` and `W` (static; another
            grid size is an error).
        grid_positions: `"learned"` (row and column embeddings) or
            `"sinusoid"` (float32 sinusoids, half the channels each).
        num_area_layers: the first layers that use area attention (0 for
            none; must be 0 with regions).
        area_attention_kinds: comma-separated subset of `encoder_self`,
            `encdec` (2-D areas of the grid) and `decoder_self` (1-D spans
            of the caption).
        max_area_width, max_area_height: the largest areas, in cells.
        area_key_mode: `"mean"` (Eq. 3), `"max"`, `"sample"` or a learned
            mode of Eq. 9 (`"concat"`, `"max_concat"`, `"sum"`,
            `"sample_concat"`, `"sample_sum"`); see
            `MultiHeadAreaAttention`.
        area_value_mode: `"sum"` (Eq. 4), `"mean"` or `"max"`.
        seed: int seed of the initializers and dropouts.
        **kwargs: `keras.Model` arguments.

    Call arguments and returns: as `Captioner`'s.
    """

    model_type = "captioner"
    HPARAMS = hparams_sets.TRANSFORMER_CAPTIONER

    def _check_hparams(self, hp):
        super()._check_hparams(hp)
        if hp.encoder_input == "regions" and hp.num_area_layers:
            raise ValueError(
                "Area attention needs a grid: encoder_input='regions' has no grid "
                "(regions are a set, not rows and columns), so `num_area_layers` must "
                f"be 0. Received: num_area_layers={hp.num_area_layers!r}"
            )

    def _make_captioner(self, hp):
        self.num_hidden_layers = hp.num_hidden_layers
        self.num_area_layers = hp.num_area_layers
        grid_area = area_arguments(hp, memory_height=hp.grid_height)
        # The caption is 1-D: spans of up to `max_area_width` tokens.
        caption_area = dict(grid_area, max_area_height=1, memory_height=1)
        # The Transformer's stacks, under its attribute names: its decoding
        # methods run on them (below).
        make_stacks(self, hp, {"encoder_self": grid_area, "encdec": grid_area,
                               "decoder_self": caption_area})
        self._make_image_layers()

    # The caption decoder is the translation Transformer's: one implementation
    # of the teacher-forced pass and of cached decoding, run on this model's
    # `target_embedding`, `target_dropout`, `decoder_blocks` and
    # `decoder_norm`.

    # ---------------------------------------------------------------- build

    def build(self, input_shape=None):
        feature_shape, target_shape = self._input_shapes(input_shape)
        hidden = self._build_image_layers(feature_shape)
        target_hidden = (target_shape[0], target_shape[1], self.hidden_size)
        self._build_embeddings(target_shape=target_shape)
        self._build_stacks(hidden, target_hidden)
        self.built = True

    # -------------------------------------------------------------- encoder

    def encode(self, features, training=False):
        """Encodes the image.

        Args:
            features: a grid `[B, H, W, C]` or a dict of regions (see the
                class docstring).
            training: whether dropout is active.

        Returns:
            `(encoder_outputs [B, L, hidden_size], mask bool [B, L])`, with
            `L = H * W` (row-major; the mask all True) for a grid and
            `L = R` for regions.
        """
        self._build_for(features)
        x, mask = self.embed_image(features)
        x = self.input_dropout(x, training=training)
        for block in self.encoder_blocks:
            x = block(x, padding_mask=mask, training=training)
        return self.encoder_norm(x), mask

    # ------------------------------------------------------- visualisation

    def _check_layer(self, layer):
        if isinstance(layer, bool) or not isinstance(layer, int) or not (
            0 <= layer < self.num_hidden_layers
        ):
            raise ValueError(
                f"Argument `layer` must be a decoder layer in [0, {self.num_hidden_layers})"
                f" (num_hidden_layers). Received: layer={layer!r}"
            )

    def encdec_attention(self, features, decoder_inputs, layer=0):
        """What a decoder layer's caption-to-image attention attends.

        A teacher-forced pass (no dropout) up to decoder layer `layer`.

        Args:
            features: the image features, as for `encode`.
            decoder_inputs: int `[B, T]`, the caption shifted right with 0.
            layer: the decoder layer, in `[0, num_hidden_layers)`.

        Returns:
            float32 `[B, num_heads, T, num_areas]`: each query's weights
            over the areas (in the order of `area_coordinates(layer)`) for
            an area layer, over the grid cells (row-major) or the regions
            for a regular one. Each row sums to 1 (0 for an image with
            every region masked).
        """
        self._check_layer(layer)
        encoded, mask = self.encode(features, training=False)
        decoder_inputs = ops.cast(decoder_inputs, "int32")
        positions = ops.arange(ops.shape(decoder_inputs)[1])
        x = self._embed_at(self.target_embedding, decoder_inputs, positions)
        for block in self.decoder_blocks[:layer]:
            x = block(x, encoded, encoder_padding_mask=mask, training=False)
        _, scores = self.decoder_blocks[layer](
            x, encoded, encoder_padding_mask=mask, training=False, return_encdec_scores=True
        )
        return ops.cast(scores, "float32")

    def area_coordinates(self, layer=0):
        """The grid rectangles of `encdec_attention(..., layer)`'s areas.

        Args:
            layer: the decoder layer, in `[0, num_hidden_layers)`.

        Returns:
            An int32 NumPy array `[num_areas, 4]` of `(row, col, height,
            width)` in cells: the layer's areas (`MultiHeadAreaAttention.
            area_coordinates`), or one 1x1 area per cell, row-major, for a
            regular layer.

        Raises:
            ValueError: for `encoder_input="regions"` (regions have no grid:
                the weights are per region, in the input's order).
        """
        self._check_layer(layer)
        if self.encoder_input != "grid":
            raise ValueError(
                "area_coordinates() needs a grid; with encoder_input='regions' the "
                "weights of encdec_attention() are per region, in the order of the "
                "input boxes."
            )
        attention = self.decoder_blocks[layer].encdec_attention
        if isinstance(attention, MultiHeadAreaAttention):
            return attention.area_coordinates(self.memory_length)
        return areas.area_coordinates(self.memory_length, self.grid_height)
