"""Unified attention blocks and the MUAN-L stack (Yu et al., 2019, arXiv:1908.04107).

A unified attention (UA) block is gated self-attention and a feed-forward
network, each followed by a residual add and a layer norm (post-norm), over
the unified sequence `Z = [X; FC_y(Y)]` of the text features X (`[B, m, d]`)
and the projected visual features Y (`[B, n, d_y]`), with the joint key
padding mask. Attention over Z models the intra-modal (A_TT, A_VV) and the
inter-modal (A_TV, A_VT) interactions at once. Only the first block of a
stack takes (X, Y) and builds Z (the paper's Eq. 7, without FC_x as in its
footnote 1); later blocks take Z (Eq. 8). The residuals and the
feed-forward network are the post-norm `Residual` and the `FeedForward` of
`layers/blocks.py`. See docs/gated_attention.md.
"""

from typing import NamedTuple

import keras
from keras import ops

from keras_structattn import checks
from keras_structattn.layers._masking import compute_output_spec
from keras_structattn.layers._masking import set_keras_mask
from keras_structattn.layers.blocks import LAYER_NORMS
from keras_structattn.layers.blocks import PostNormSublayers
from keras_structattn.layers.blocks import check_sizes
from keras_structattn.layers.blocks import clone_initializer
from keras_structattn.layers.blocks import layer_normalization
from keras_structattn.layers.blocks import sub_seed
from keras_structattn.layers.gated_attention import GatedMultiHeadAttention

MASK_QUADRANTS = (None, "self", "co")

# Arguments of `UnifiedAttentionBlock` that `UnifiedAttentionStack` passes on.
BLOCK_OPTIONS = (
    "filter_size",
    "dropout",
    "attention_dropout",
    "gate_dim",
    "gate_per_head",
    "share_gate_weights_across_heads",
    "qk_gate",
    "gate_bias_initializer",
    "mask_quadrants",
    "layer_norm",
    "layer_norm_epsilon",
    "modality_norm",
    "kernel_initializer",
    "bias_initializer",
)


class AttentionQuadrants(NamedTuple):
    """The four parts of a unified attention map (rows = queries).

    `tt`: text queries over text keys (A_TT), `tv`: text over visual
    (A_TV), `vt`: visual over text (A_VT), `vv`: visual over visual (A_VV).
    """

    tt: object
    tv: object
    vt: object
    vv: object


def _check_text_length(text_length):
    # A tensor (a dynamic length) is taken as it is.
    if isinstance(text_length, (bool, int)):
        checks.positive_int("text_length", text_length)


def _length(tensor):
    """Static length of axis 1 if known, else a scalar tensor."""
    return tensor.shape[1] if tensor.shape[1] is not None else ops.shape(tensor)[1]


def joint_padding_mask(text, visual, text_mask=None, visual_mask=None):
    """The key mask `[B, m + n]` of `Z = [X; Y]` (True = real token), or None
    when both masks are None."""
    if text_mask is None and visual_mask is None:
        return None

    def mask_or_ones(mask, tensor):
        if mask is None:
            return ops.ones(ops.shape(tensor)[:2], "bool")
        return ops.cast(mask, "bool")

    return ops.concatenate(
        [mask_or_ones(text_mask, text), mask_or_ones(visual_mask, visual)], axis=1
    )


def split_attention(scores, text_length):
    """Splits `[..., m + n, m + n]` attention weights into A_TT, A_TV, A_VT
    and A_VV (the paper's Fig. 6), the text being the first `text_length`
    positions of the unified sequence. Returns `AttentionQuadrants`."""
    _check_text_length(text_length)
    m = text_length
    return AttentionQuadrants(
        tt=scores[..., :m, :m],
        tv=scores[..., :m, m:],
        vt=scores[..., m:, :m],
        vv=scores[..., m:, m:],
    )


def split_sequence(z, text_length):
    """Splits unified features `[B, m + n, d]` into `(text [B, m, d],
    visual [B, n, d])`."""
    _check_text_length(text_length)
    return z[:, :text_length], z[:, text_length:]


def quadrant_mask(length, text_length, masked):
    """Boolean `[1, length, length]`, True where attention is allowed.

    `masked="self"` blocks A_TT and A_VV (text to text, visual to visual),
    `masked="co"` blocks A_TV and A_VT: the two degraded variants of the
    paper's Fig. 5b. `length` and `text_length` may be tensors.
    """
    checks.one_of("mask_quadrants", masked, ("self", "co"))
    positions = ops.arange(length)
    is_text = ops.less(positions, ops.cast(text_length, positions.dtype))
    same = ops.equal(ops.expand_dims(is_text, 1), ops.expand_dims(is_text, 0))
    allowed = ops.logical_not(same) if masked == "self" else same
    return ops.expand_dims(allowed, 0)


@keras.saving.register_keras_serializable(package="keras_structattn")
class UnifiedAttentionBlock(PostNormSublayers):
    """A MUAN unified attention (UA) block.

    `Z <- LN(Z + Dropout(GSA(Z)))`, then `Z <- LN(Z + Dropout(FFN(Z)))`, with
    GSA a `GatedMultiHeadAttention` self-attention (key_dim = hidden_size /
    num_heads) and FFN = `FC(filter_size) - ReLU - Dropout - FC(hidden_size)`.
    Padded positions are masked as keys only (as in the MCAN family): their
    own rows are still computed, and the caller ignores them.

    With `multimodal_input=True` (the first block of a stack) the block takes
    the text X `[B, m, hidden_size]` and the visual features Y `[B, n, d_y]`
    and forms `Z = [X; FC_y(Y)]` (Eq. 7; FC_y is a Dense to hidden_size), the
    text first. Otherwise it takes Z `[B, s, hidden_size]`.

    Args:
        hidden_size: d, the width of Z.
        num_heads: attention heads (hidden_size must be divisible by it).
        filter_size: the FFN's hidden width. Default `4 * hidden_size`.
        multimodal_input: whether the block takes (X, Y) rather than Z.
        dropout: on the attention and FFN outputs before each residual add,
            and after the FFN's ReLU (0.1 in the paper and the openvqa code).
        attention_dropout: on the attention weights; default `dropout`
            (the openvqa code uses the same rate).
        gate_dim, gate_per_head, share_gate_weights_across_heads, qk_gate,
            gate_bias_initializer: as in `GatedMultiHeadAttention`
            (`qk_gate=False`: the paper's ablation without the gate, Fig.
            5a; `gate_bias_initializer`: where the gates start).
        mask_quadrants: None (the UA block), "self" (block the
            self-attention quadrants A_TT and A_VV) or "co" (block the
            co-attention quadrants A_TV and A_VT): the ablations of Fig. 5b.
            A query row left with no key has zero attention weights.
        layer_norm: "keras" (default, `keras.layers.LayerNormalization`:
            biased variance, epsilon inside the root) or "mcan"
            (`StdLayerNormalization`: unbiased std, epsilon added to the std,
            as in the MCAN family and the openvqa code).
        layer_norm_epsilon: 1e-6 (the MCAN family's value).
        modality_norm: with `multimodal_input`, layer-normalize X and FC_y(Y)
            separately before concatenating them, as the openvqa code does (the paper does
            not say). Off by default.
        kernel_initializer, bias_initializer: for every dense layer, the
            attention's included. Keras defaults (Glorot uniform, zeros), not
            PyTorch's uniform(+-1/sqrt(fan_in)) of the reference code.
        seed: int seed for the dropouts (`sub_seed` numbers them: the
            attention 0, the attention residual 1, the FFN 2, the FFN
            residual 3).
        **kwargs: `keras.layers.Layer` arguments (`name`, `dtype`, ...).

    Call arguments:
        inputs: X (with `multimodal_input`) or Z.
        visual: Y `[B, n, d_y]`, with `multimodal_input` only.
        padding_mask: optional bool `[B, m]` (X) or `[B, s]` (Z), True for
            real tokens. Keras masks are not read.
        visual_padding_mask: optional bool `[B, n]` for Y.
        text_length: with Z input and `mask_quadrants`, the number m of text
            positions at the start of Z (an int). Taken from X otherwise.
        training: whether dropout is active.
        return_attention_scores: also return the attention weights
            `[B, num_heads, s, s]` (float32); `split_attention` cuts them.
        return_gates: also return the gates `[B, num_heads, s, 2]` (see
            `GatedMultiHeadAttention`).

    Returns:
        Z' `[B, s, hidden_size]`, then the weights and the gates if asked.
    """

    def __init__(
        self,
        hidden_size,
        num_heads,
        *,
        filter_size=None,
        multimodal_input=False,
        dropout=0.1,
        attention_dropout=None,
        gate_dim=None,
        gate_per_head=True,
        share_gate_weights_across_heads=True,
        qk_gate=True,
        gate_bias_initializer=None,
        mask_quadrants=None,
        layer_norm="keras",
        layer_norm_epsilon=1e-6,
        modality_norm=False,
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
            hidden_size,
            num_heads,
            filter_size,
            dropout=dropout,
            attention_dropout=attention_dropout,
        )
        checks.one_of("mask_quadrants", mask_quadrants, MASK_QUADRANTS)
        checks.one_of("layer_norm", layer_norm, LAYER_NORMS)
        checks.positive_float("layer_norm_epsilon", layer_norm_epsilon)
        if seed is not None:
            checks.non_negative_int("seed", seed)
        self.hidden_size = hidden_size
        self.num_heads = num_heads
        self.filter_size = filter_size
        self.multimodal_input = checks.boolean("multimodal_input", multimodal_input)
        self.dropout = rates["dropout"]
        self.attention_dropout = rates["attention_dropout"]
        self.mask_quadrants = mask_quadrants
        self.layer_norm = layer_norm
        self.layer_norm_epsilon = float(layer_norm_epsilon)
        self.modality_norm = checks.boolean("modality_norm", modality_norm)
        self.kernel_initializer = keras.initializers.get(kernel_initializer)
        self.bias_initializer = keras.initializers.get(bias_initializer)
        self.seed = seed
        initializers = dict(
            kernel_initializer=clone_initializer(self.kernel_initializer),
            bias_initializer=clone_initializer(self.bias_initializer),
        )
        self.attention = GatedMultiHeadAttention(
            num_heads=num_heads,
            key_dim=hidden_size // num_heads,
            gate_dim=gate_dim,
            gate_per_head=gate_per_head,
            share_gate_weights_across_heads=share_gate_weights_across_heads,
            qk_gate=qk_gate,
            gate_bias_initializer=gate_bias_initializer,
            dropout=self.attention_dropout,
            seed=sub_seed(seed, 0),
            name="attention",
            dtype=self.dtype_policy,
            **initializers,
        )
        self.attention_residual = self._residual(1, "attention_residual")
        self.ffn = self._feed_forward(2)
        self.ffn_residual = self._residual(3, "ffn_residual")
        if self.multimodal_input:
            self.visual_projection = keras.layers.Dense(
                hidden_size,
                name="visual_projection",
                dtype=self.dtype_policy,
                kernel_initializer=clone_initializer(self.kernel_initializer),
                bias_initializer=clone_initializer(self.bias_initializer),
            )
            if self.modality_norm:
                self.text_norm = self._norm("text_norm")
                self.visual_norm = self._norm("visual_norm")

    # ------------------------------------------------------------ sublayers

    def _norm(self, name):
        return layer_normalization(
            self.layer_norm, self.layer_norm_epsilon, name=name, dtype=self.dtype_policy
        )

    # -------------------------------------------------------------- Keras

    @property
    def gate_dim(self):
        return self.attention.gate_dim

    def build(self, inputs_shape, visual_shape=None):
        inputs_shape = tuple(inputs_shape)
        if len(inputs_shape) != 3 or inputs_shape[-1] != self.hidden_size:
            raise ValueError(
                f"UnifiedAttentionBlock takes [B, length, hidden_size={self.hidden_size}] "
                f"inputs. Received: inputs.shape={inputs_shape}"
            )
        self._check_visual(visual_shape)
        if self.multimodal_input:
            visual_shape = tuple(visual_shape)
            if len(visual_shape) != 3:
                raise ValueError(
                    "Argument `visual` must be [B, n, d_y]. "
                    f"Received: visual.shape={visual_shape}"
                )
            self.visual_projection.build(visual_shape)
            projected = visual_shape[:2] + (self.hidden_size,)
            if self.modality_norm:
                self.text_norm.build(inputs_shape)
                self.visual_norm.build(projected)
            length = None
            if inputs_shape[1] is not None and visual_shape[1] is not None:
                length = inputs_shape[1] + visual_shape[1]
            z_shape = (inputs_shape[0], length, self.hidden_size)
        else:
            z_shape = inputs_shape
        self.attention.build(z_shape, z_shape)
        self.attention_residual.build(z_shape)
        self.ffn.build(z_shape)
        self.ffn_residual.build(z_shape)

    def _check_visual(self, visual):
        if self.multimodal_input and visual is None:
            raise ValueError(
                "This block has multimodal_input=True: call it as "
                "block(text, visual, ...). Received: visual=None"
            )
        if not self.multimodal_input and visual is not None:
            raise ValueError(
                "This block has multimodal_input=False and takes the unified "
                "sequence Z only; pass `visual` to the first block of a stack "
                "(multimodal_input=True). Received a `visual` input."
            )

    def compute_output_spec(self, *args, **kwargs):
        # The outputs depend on the return flags: trace `call` symbolically.
        return compute_output_spec(self.call, *args, **kwargs)

    def call(
        self,
        inputs,
        visual=None,
        padding_mask=None,
        visual_padding_mask=None,
        text_length=None,
        training=None,
        return_attention_scores=False,
        return_gates=False,
    ):
        self._check_visual(visual)
        if self.multimodal_input:
            z, key_mask, text_length = self._unify(
                inputs, visual, padding_mask, visual_padding_mask
            )
        else:
            z = inputs
            key_mask = None if padding_mask is None else ops.cast(padding_mask, "bool")
        attention_mask = None if key_mask is None else ops.expand_dims(key_mask, 1)
        if self.mask_quadrants is not None:
            if text_length is None:
                raise ValueError(
                    f"With mask_quadrants={self.mask_quadrants!r}, a block that takes Z "
                    "needs `text_length` (the number of text positions at the start "
                    "of Z). Received: text_length=None"
                )
            quadrants = quadrant_mask(ops.shape(z)[1], text_length, self.mask_quadrants)
            attention_mask = (
                quadrants if attention_mask is None else ops.logical_and(attention_mask, quadrants)
            )
        attended = self.attention(
            z,
            z,
            attention_mask=attention_mask,
            training=training,
            return_attention_scores=return_attention_scores,
            return_gates=return_gates,
        )
        extras = ()
        if isinstance(attended, tuple):
            attended, extras = attended[0], attended[1:]
        z = self.attention_residual(z, attended, training=training)
        z = self.ffn_residual(z, self.ffn(z, training=training), training=training)
        return (z,) + tuple(extras) if extras else z

    def _unify(self, text, visual, text_mask, visual_mask):
        """Z = [X; FC_y(Y)], the joint key mask and the text length (Eq. 7)."""
        projected = self.visual_projection(visual)
        if self.modality_norm:
            text, projected = self.text_norm(text), self.visual_norm(projected)
        z = ops.concatenate([ops.cast(text, projected.dtype), projected], axis=1)
        return z, joint_padding_mask(text, visual, text_mask, visual_mask), _length(text)

    def compute_output_shape(self, inputs_shape, visual_shape=None):
        length = inputs_shape[1]
        if visual_shape is not None:
            length = None if length is None or visual_shape[1] is None else length + visual_shape[1]
        return (inputs_shape[0], length, self.hidden_size)

    def get_config(self):
        config = super().get_config()
        config.update(
            multimodal_input=self.multimodal_input,
            gate_dim=self.attention.gate_dim,
            gate_per_head=self.attention.gate_per_head,
            share_gate_weights_across_heads=self.attention.share_gate_weights_across_heads,
            qk_gate=self.attention.qk_gate,
            gate_bias_initializer=self.attention.get_config()["gate_bias_initializer"],
            mask_quadrants=self.mask_quadrants,
            modality_norm=self.modality_norm,
        )
        return config


@keras.saving.register_keras_serializable(package="keras_structattn")
class UnifiedAttentionStack(keras.layers.Layer):
    """MUAN-L: `num_blocks` unified attention blocks in depth.

    The first block takes the text X `[B, m, hidden_size]` and the visual
    features Y `[B, n, d_y]` and forms `Z = [X; FC_y(Y)]` (Eq. 7); the others
    take the previous block's Z (Eq. 8). The output is split back into its
    text part `[B, m, hidden_size]` (its first row is the [ans] token when
    the caller prepends one) and its visual part `[B, n, hidden_size]`.

    Args:
        num_blocks: L (2 to 12 in the paper; 10 is its best).
        hidden_size, num_heads: as in `UnifiedAttentionBlock` (the paper:
            768 and 8).
        seed: int seed; block i uses `sub_seed(seed, i)`.
        **kwargs: the other `UnifiedAttentionBlock` options (`filter_size`,
            `dropout`, `attention_dropout`, `gate_dim`, `gate_per_head`,
            `share_gate_weights_across_heads`, `qk_gate`, `mask_quadrants`,
            `layer_norm`, `layer_norm_epsilon`, `modality_norm`,
            initializers), the same for every block, and `keras.layers.Layer`
            arguments.

    Call arguments:
        text: X `[B, m, hidden_size]`.
        visual: Y `[B, n, d_y]`.
        text_mask, visual_mask: optional bool `[B, m]` and `[B, n]`, True
            for real tokens (keys only are masked); filled from the inputs'
            Keras masks when not given. The outputs carry no Keras mask.
        training: whether dropout is active.
        return_attention_scores: also return a list of each block's
            attention weights `[B, num_heads, m + n, m + n]`.

    Returns:
        `(text_out, visual_out)`, or `(text_out, visual_out, scores)`.
    """

    def __init__(self, num_blocks, hidden_size, num_heads, *, seed=None, **kwargs):
        block_options = {k: kwargs.pop(k) for k in BLOCK_OPTIONS if k in kwargs}
        super().__init__(**kwargs)
        checks.positive_int("num_blocks", num_blocks)
        if seed is not None:
            checks.non_negative_int("seed", seed)
        self.num_blocks = num_blocks
        self.seed = seed
        self.blocks = [
            UnifiedAttentionBlock(
                hidden_size,
                num_heads,
                multimodal_input=i == 0,
                seed=sub_seed(seed, i),
                name=f"block_{i}",
                dtype=self.dtype_policy,
                **block_options,
            )
            for i in range(num_blocks)
        ]

    @property
    def hidden_size(self):
        return self.blocks[0].hidden_size

    @property
    def num_heads(self):
        return self.blocks[0].num_heads

    def build(self, text_shape, visual_shape):
        text_shape, visual_shape = tuple(text_shape), tuple(visual_shape)
        self.blocks[0].build(text_shape, visual_shape)
        z_shape = self.blocks[0].compute_output_shape(text_shape, visual_shape)
        for block in self.blocks[1:]:
            block.build(z_shape)

    def call(
        self,
        text,
        visual,
        text_mask=None,
        visual_mask=None,
        training=None,
        return_attention_scores=False,
    ):
        text_length = _length(text)
        # `Layer.__call__` has filled the masks from the inputs' Keras masks.
        for tensor in (text, visual):
            set_keras_mask(tensor, None)
        outputs = self.blocks[0](
            text,
            visual,
            padding_mask=text_mask,
            visual_padding_mask=visual_mask,
            training=training,
            return_attention_scores=return_attention_scores,
        )
        z, scores = self._unpack(outputs, return_attention_scores, [])
        key_mask = joint_padding_mask(text, visual, text_mask, visual_mask)
        for block in self.blocks[1:]:
            outputs = block(
                z,
                padding_mask=key_mask,
                text_length=text_length,
                training=training,
                return_attention_scores=return_attention_scores,
            )
            z, scores = self._unpack(outputs, return_attention_scores, scores)
        text_out, visual_out = split_sequence(z, text_length)
        if return_attention_scores:
            return text_out, visual_out, scores
        return text_out, visual_out

    @staticmethod
    def _unpack(outputs, with_scores, scores):
        if with_scores:
            return outputs[0], scores + [outputs[1]]
        return outputs, scores

    def compute_output_spec(self, *args, **kwargs):
        return compute_output_spec(self.call, *args, **kwargs)

    def get_config(self):
        config = super().get_config()
        block_config = self.blocks[0].get_config()
        config.update(
            num_blocks=self.num_blocks,
            hidden_size=self.hidden_size,
            num_heads=self.num_heads,
            seed=self.seed,
            **{k: block_config[k] for k in BLOCK_OPTIONS},
        )
        return config
