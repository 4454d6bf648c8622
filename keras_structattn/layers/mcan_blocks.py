"""MCAN's attention units: self-attention (SA) and self-guided-attention (SGA).

Yu et al., 2019, "Deep Modular Co-Attention Networks for Visual Question
Answering", CVPR, arXiv:1906.10770 (Sec. 3; code `MILVLG/mcan-vqa`,
`core/model/mca.py`). Both are post-norm Transformer blocks with MCAN's
layer norm (unbiased std, epsilon added to it: `StdLayerNormalization`):

    SA(X):     X <- LN(X + Drop(MHA(X, X)));    X <- LN(X + Drop(FFN(X)))
    SGA(X, Y): X <- LN(X + Drop(MHA_1(X, X)));  X <- LN(X + Drop(MHA_2(X, Y)))
               X <- LN(X + Drop(FFN(X)))

with FFN = `Dense(4d) - ReLU - Dropout - Dense(d)` and dropout 0.1 on the
attention weights, the FFN's hidden layer and every sublayer's output.
Masks act on keys only (padded query rows are computed and ignored later).

`positional=True` turns them into MCAN+PA's modules (Mao et al., 2022,
"Positional Attention Guided Transformer-like Architecture for Visual
Question Answering", IEEE TNNLS, Sec. III-B to III-E): SA's attention
becomes PWA (word positions, Eq. 8), SGA's self-attention POA (box
geometry, Eqs. 13-14) and its guided attention PMA (projected 5-d box
features attending to word positions, Eq. 8). The attentions are the
library's `positional_word_attention`, `positional_object_attention` and
`positional_multimodal_attention` (docs/positional_attention.md); without
`positional` they are `StructuredMultiHeadAttention`, Keras multi-head
attention whose fully masked rows get zero weights on every path.
See docs/vqa.md.
"""

import keras

from keras_structattn import checks
from keras_structattn.layers.blocks import LAYER_NORMS
from keras_structattn.layers.blocks import PostNormSublayers
from keras_structattn.layers.blocks import check_sizes
from keras_structattn.layers.blocks import clone_initializer
from keras_structattn.layers.blocks import sub_seed
from keras_structattn.layers.positional_attention import FUSIONS
from keras_structattn.layers.positional_attention import POA_VARIANTS
from keras_structattn.layers.positional_attention import positional_multimodal_attention
from keras_structattn.layers.positional_attention import positional_object_attention
from keras_structattn.layers.positional_attention import positional_word_attention
from keras_structattn.layers.structured_attention import StructuredMultiHeadAttention


def _key_mask(padding_mask):
    """`[B, S]` key padding mask -> `[B, 1, S]` attention mask (or None)."""
    if padding_mask is None:
        return None
    return keras.ops.cast(padding_mask, "bool")[:, None, :]


class _MCANBlock(PostNormSublayers):
    """Arguments, checks, config and sublayer factories of the two blocks."""

    def __init__(
        self,
        hidden_size,
        num_heads,
        *,
        filter_size=None,
        dropout=0.1,
        attention_dropout=None,
        positional=False,
        fusion="scaled_sum",
        layer_norm="mcan",
        layer_norm_epsilon=1e-6,
        kernel_initializer="glorot_uniform",
        bias_initializer="zeros",
        seed=None,
        **kwargs,
    ):
        super().__init__(**kwargs)
        if filter_size is None:
            filter_size = 4 * hidden_size
        if attention_dropout is None:
            attention_dropout = dropout
        rates = check_sizes(
            hidden_size, num_heads, filter_size,
            dropout=dropout, attention_dropout=attention_dropout,
        )
        checks.boolean("positional", positional)
        checks.one_of("fusion", fusion, FUSIONS)
        checks.one_of("layer_norm", layer_norm, LAYER_NORMS)
        self.hidden_size = hidden_size
        self.num_heads = num_heads
        self.filter_size = filter_size
        self.dropout = rates["dropout"]
        self.attention_dropout = rates["attention_dropout"]
        self.positional = positional
        self.fusion = fusion
        self.layer_norm = layer_norm
        self.layer_norm_epsilon = checks.positive_float("layer_norm_epsilon", layer_norm_epsilon)
        self.kernel_initializer = keras.initializers.get(kernel_initializer)
        self.bias_initializer = keras.initializers.get(bias_initializer)
        self.seed = seed

    def _attention(self, factory, seed_index, name, **kwargs):
        return factory(
            num_heads=self.num_heads,
            key_dim=self.hidden_size // self.num_heads,
            dropout=self.attention_dropout,
            kernel_initializer=clone_initializer(self.kernel_initializer),
            bias_initializer=clone_initializer(self.bias_initializer),
            seed=sub_seed(self.seed, seed_index),
            name=name,
            dtype=self.dtype_policy,
            **kwargs,
        )

    def _plain_attention(self, seed_index, name):
        return self._attention(StructuredMultiHeadAttention, seed_index, name)

    def _check_width(self, name, shape):
        shape = tuple(shape)
        if len(shape) != 3 or shape[-1] != self.hidden_size:
            raise ValueError(
                f"Argument `{name}` must be [B, length, hidden_size={self.hidden_size}]. "
                f"Received: {name}.shape={shape}"
            )
        return shape

    def _check_positions(self, **given):
        if not self.positional:
            for name, value in given.items():
                if value is not None:
                    raise ValueError(
                        f"Argument `{name}` needs positional=True (MCAN+PA); this "
                        f"{type(self).__name__} is plain MCAN."
                    )
            return
        for name, value in given.items():
            if value is None:
                raise ValueError(
                    f"A positional {type(self).__name__} (MCAN+PA) needs `{name}`. "
                    "Received: None"
                )

    def compute_output_shape(self, inputs_shape, *args, **kwargs):
        return tuple(inputs_shape)

    def get_config(self):
        config = super().get_config()
        config.update(positional=self.positional, fusion=self.fusion)
        return config


@keras.saving.register_keras_serializable(package="keras_structattn")
class MCANSelfAttentionBlock(_MCANBlock):
    """MCAN's SA unit (post-norm self-attention and FFN); MCAN+PA's PWA.

    `X <- LN(X + Drop(MHA(X, X)))`, then `X <- LN(X + Drop(FFN(X)))`. With
    `positional=True` the attention is PWA (Mao et al., 2022, Sec. III-C):
    the word-position vectors give a positional map fused with the semantic
    one by `fusion` (Eq. 8 by default), then Eqs. 9-12 as in SA.

    Args:
        hidden_size: d, the width of X.
        num_heads: attention heads (d must be divisible by it).
        filter_size: the FFN's hidden width; default `4 * hidden_size`.
        dropout: on each sublayer's output before the residual add and
            after the FFN's ReLU (0.1 in MCAN).
        attention_dropout: on the attention weights; default `dropout`.
        positional: PWA instead of plain multi-head attention.
        fusion: PWA's fusion, `"scaled_sum"` (Eq. 8), `"relation_network"`
            or `"add"` (`PositionalMultiHeadAttention`).
        layer_norm: `"mcan"` (default: `StdLayerNormalization`, unbiased std
            plus epsilon, MCAN's code) or `"keras"`.
        layer_norm_epsilon: 1e-6.
        kernel_initializer, bias_initializer: of every dense layer, the
            attention's included (Keras defaults, not PyTorch's of the MCAN
            code).
        seed: int seed of the dropouts (`sub_seed`: the attention 0, its
            residual 1, the FFN 2, its residual 3).
        **kwargs: `keras.layers.Layer` arguments (`name`, `dtype`, ...).

    Call arguments:
        inputs: X `[B, T, hidden_size]`.
        padding_mask: optional bool `[B, T]`, True for real tokens (masks
            keys only). Keras implicit masks are not read.
        positions: keyword-only; with `positional`, the word-position
            vectors `[B or 1, T, P]` (required then; an error otherwise).
        training: whether dropout is active.
        return_attention_scores: also return the attention weights
            `[B, num_heads, T, T]` (float32).

    Returns:
        `[B, T, hidden_size]`, then the weights if asked.
    """

    def __init__(self, hidden_size, num_heads, **kwargs):
        super().__init__(hidden_size, num_heads, **kwargs)
        if self.positional:
            self.attention = self._attention(
                positional_word_attention, 0, "attention", fusion=self.fusion
            )
        else:
            self.attention = self._plain_attention(0, "attention")
        self.attention_residual = self._residual(1, "attention_residual")
        self.ffn = self._feed_forward(2)
        self.ffn_residual = self._residual(3, "ffn_residual")

    def build(self, inputs_shape, padding_mask_shape=None):
        shape = self._check_width("inputs", inputs_shape)
        self.attention.build(shape, shape)
        self.attention_residual.build(shape)
        self.ffn.build(shape)
        self.ffn_residual.build(shape)

    def call(
        self,
        inputs,
        padding_mask=None,
        *,
        positions=None,
        training=None,
        return_attention_scores=False,
    ):
        self._check_positions(positions=positions)
        extra = {"query_positions": positions} if self.positional else {}
        y = self.attention(
            inputs, inputs, attention_mask=_key_mask(padding_mask), training=training,
            return_attention_scores=return_attention_scores, **extra,
        )
        if return_attention_scores:
            y, scores = y
        x = self.attention_residual(inputs, y, training=training)
        x = self.ffn_residual(x, self.ffn(x, training=training), training=training)
        if return_attention_scores:
            return x, scores
        return x

    def compute_output_spec(self, inputs, padding_mask=None, *, positions=None,
                            training=None, return_attention_scores=False):
        outputs = keras.KerasTensor(inputs.shape, self.compute_dtype)
        if not return_attention_scores:
            return outputs
        length = inputs.shape[1]
        scores = keras.KerasTensor((inputs.shape[0], self.num_heads, length, length), "float32")
        return outputs, scores


@keras.saving.register_keras_serializable(package="keras_structattn")
class MCANGuidedAttentionBlock(_MCANBlock):
    """MCAN's SGA unit: self-attention, guided attention, FFN (post-norm).

    `X <- LN(X + Drop(MHA_1(X, X)))`, `X <- LN(X + Drop(MHA_2(X, Y)))`,
    `X <- LN(X + Drop(FFN(X)))`: the regions X attend to each other, then to
    the question Y (MCAN's encoder-decoder: Y is the last encoder block's
    output for every SGA). With `positional=True` (MCAN+PA): MHA_1 is POA
    (Mao et al., 2022, Sec. III-D, Eqs. 13-14: the boxes' relative
    geometry) and MHA_2 is PMA (Sec. III-E: the regions' projected 5-d box
    features as query positions, the word positions as key positions,
    fused by Eq. 8).

    Args:
        hidden_size, num_heads, filter_size, dropout, attention_dropout,
        layer_norm, layer_norm_epsilon, kernel_initializer,
        bias_initializer: as in `MCANSelfAttentionBlock`.
        positional: POA and PMA instead of plain multi-head attention.
        fusion: PMA's fusion (`"scaled_sum"`, Eq. 8, by default).
        object_variant: POA's variant, `"paper"` (default: per-head
            geometry weights fused by Eq. 8), `"released"` (the released
            code: one shared geometry weight, `A_sem + relu(A_pos)`, the
            "+1" box convention) or `"relation_network"`
            (`positional_object_attention`; docs/positional_attention.md).
        object_fusion: None (the variant's fusion) or a fusion overriding
            it.
        geometry_dim: POA's geometry embedding width (64, both released
            codes; a multiple of 8).
        seed: int seed of the dropouts (`sub_seed`: self-attention 0, its
            residual 1, guided attention 2, its residual 3, FFN 4, its
            residual 5).
        **kwargs: `keras.layers.Layer` arguments.

    Call arguments:
        inputs: X `[B, N, hidden_size]` (regions).
        guide: Y `[B, T, hidden_size]` (question).
        padding_mask: optional bool `[B, N]`, True for real regions.
        guide_padding_mask: optional bool `[B, T]`, True for real words.
        boxes: keyword-only; with `positional`, the regions' boxes
            `[B, N, 4]` (`[x1, y1, x2, y2]`) for POA.
        positions: keyword-only; with `positional`, the regions' position
            vectors `[B, N, P]` (the projected 5-d box features) for PMA's
            queries.
        guide_positions: keyword-only; with `positional`, the words'
            position vectors `[B or 1, T, P]` for PMA's keys.
        training: whether dropout is active.
        return_attention_scores: also return the weights of both
            attentions, `[B, num_heads, N, N]` and `[B, num_heads, N, T]`
            (float32).

    Returns:
        `[B, N, hidden_size]`, then the two weights if asked.
    """

    def __init__(
        self,
        hidden_size,
        num_heads,
        *,
        object_variant="paper",
        object_fusion=None,
        geometry_dim=64,
        **kwargs,
    ):
        super().__init__(hidden_size, num_heads, **kwargs)
        checks.one_of("object_variant", object_variant, tuple(POA_VARIANTS))
        if object_fusion is not None:
            checks.one_of("object_fusion", object_fusion, FUSIONS)
        checks.positive_int("geometry_dim", geometry_dim)
        self.object_variant = object_variant
        self.object_fusion = object_fusion
        self.geometry_dim = geometry_dim
        if self.positional:
            poa = dict(variant=object_variant, geometry_dim=geometry_dim)
            if object_fusion is not None:
                poa["fusion"] = object_fusion
            self.self_attention = self._attention(
                positional_object_attention, 0, "self_attention", **poa
            )
            self.guided_attention = self._attention(
                positional_multimodal_attention, 2, "guided_attention", fusion=self.fusion
            )
        else:
            self.self_attention = self._plain_attention(0, "self_attention")
            self.guided_attention = self._plain_attention(2, "guided_attention")
        self.self_residual = self._residual(1, "self_residual")
        self.guided_residual = self._residual(3, "guided_residual")
        self.ffn = self._feed_forward(4)
        self.ffn_residual = self._residual(5, "ffn_residual")

    def build(self, inputs_shape, guide_shape=None, *args, **kwargs):
        shape = self._check_width("inputs", inputs_shape)
        guide_shape = shape if guide_shape is None else self._check_width("guide", guide_shape)
        self.self_attention.build(shape, shape)
        self.guided_attention.build(shape, guide_shape)
        for layer in (self.self_residual, self.guided_residual, self.ffn, self.ffn_residual):
            layer.build(shape)

    def call(
        self,
        inputs,
        guide,
        padding_mask=None,
        guide_padding_mask=None,
        *,
        boxes=None,
        positions=None,
        guide_positions=None,
        training=None,
        return_attention_scores=False,
    ):
        self._check_positions(boxes=boxes, positions=positions, guide_positions=guide_positions)
        self_extra, guided_extra = {}, {}
        if self.positional:
            self_extra = {"query_boxes": boxes}
            guided_extra = {"query_positions": positions, "key_positions": guide_positions}
        scores = {}

        def attend(name, attention, query, value, mask, extra):
            result = attention(
                query, value, attention_mask=_key_mask(mask), training=training,
                return_attention_scores=return_attention_scores, **extra,
            )
            if return_attention_scores:
                result, scores[name] = result
            return result

        y = attend("self", self.self_attention, inputs, inputs, padding_mask, self_extra)
        x = self.self_residual(inputs, y, training=training)
        y = attend("guided", self.guided_attention, x, guide, guide_padding_mask, guided_extra)
        x = self.guided_residual(x, y, training=training)
        x = self.ffn_residual(x, self.ffn(x, training=training), training=training)
        if return_attention_scores:
            return x, scores["self"], scores["guided"]
        return x

    def compute_output_spec(self, inputs, guide, padding_mask=None, guide_padding_mask=None, *,
                            boxes=None, positions=None, guide_positions=None, training=None,
                            return_attention_scores=False):
        outputs = keras.KerasTensor(inputs.shape, self.compute_dtype)
        if not return_attention_scores:
            return outputs
        batch, length = inputs.shape[0], inputs.shape[1]
        return (
            outputs,
            keras.KerasTensor((batch, self.num_heads, length, length), "float32"),
            keras.KerasTensor((batch, self.num_heads, length, guide.shape[1]), "float32"),
        )

    def get_config(self):
        config = super().get_config()
        config.update(
            object_variant=self.object_variant,
            object_fusion=self.object_fusion,
            geometry_dim=self.geometry_dim,
        )
        return config
