"""MCAN's attentional reduction of a sequence to one vector (AttFlat).

Yu et al., 2019, "Deep Modular Co-Attention Networks for Visual Question
Answering", CVPR, arXiv:1906.10770 (the "multimodal fusion and output
classifier" of Sec. 4; code `MILVLG/mcan-vqa`, `AttFlat`): an MLP scores
each position, a softmax over the sequence turns the scores into weights,
and the weighted sum of the positions, projected, is the sequence's
summary. With several glimpses (columns of scores) the glimpses' sums are
concatenated before the projection. Mao et al., 2022 (MCAN+PA, IEEE TNNLS),
Eqs. 1-2, use the same reduction. See docs/vqa.md.
"""

import keras
from keras import ops

from keras_structattn import checks
from keras_structattn.layers.blocks import FeedForward
from keras_structattn.layers.blocks import clone_initializer
from keras_structattn.layers.blocks import sub_seed
from keras_structattn.ops.masked_softmax import masked_softmax


@keras.saving.register_keras_serializable(package="keras_structattn")
class AttentionFlattening(keras.layers.Layer):
    """AttFlat: attention-weighted sum of a sequence, then a projection.

    `s = Dense(glimpses)(Dropout(ReLU(Dense(mlp_size)(x))))` scores each
    position; padded positions are masked (float32 logits); `a =
    softmax(s)` over the sequence, one distribution per glimpse;
    `z = concat_g sum_t a[t, g] x[t]`; the output is `Dense(output_size)(z)`.
    A sequence without any real position gets zero weights, so its output
    is the projection's bias (never NaN).

    Args:
        mlp_size: the scoring MLP's hidden width (512 in MCAN).
        glimpses: the number of score columns (1 in MCAN).
        output_size: the projection's width (1024 in MCAN-small, 2048 in
            MCAN-large).
        dropout: after the MLP's ReLU (0.1 in MCAN).
        kernel_initializer, bias_initializer: of every dense layer (Keras
            defaults, not PyTorch's of the MCAN code).
        seed: int seed of the dropout.
        **kwargs: `keras.layers.Layer` arguments (`name`, `dtype`, ...).

    Call arguments:
        inputs: `[B, T, d]`.
        padding_mask: optional bool `[B, T]`, True for real positions.
            Keras implicit masks are not read.
        training: whether dropout is active.
        return_attention_scores: also return the weights.

    Returns:
        `[B, output_size]`; then the weights `[B, T, glimpses]` (float32)
        if `return_attention_scores`.
    """

    def __init__(
        self,
        mlp_size=512,
        glimpses=1,
        output_size=1024,
        *,
        dropout=0.1,
        kernel_initializer="glorot_uniform",
        bias_initializer="zeros",
        seed=None,
        **kwargs,
    ):
        super().__init__(**kwargs)
        checks.positive_int("mlp_size", mlp_size)
        checks.positive_int("glimpses", glimpses)
        checks.positive_int("output_size", output_size)
        self.mlp_size = mlp_size
        self.glimpses = glimpses
        self.output_size = output_size
        self.dropout = checks.rate("dropout", dropout)
        self.kernel_initializer = keras.initializers.get(kernel_initializer)
        self.bias_initializer = keras.initializers.get(bias_initializer)
        self.seed = seed
        # Linear(d -> mlp) - ReLU - Dropout - Linear(mlp -> glimpses): the
        # block kit's feed-forward network.
        self.mlp = FeedForward(
            glimpses,
            mlp_size,
            dropout=self.dropout,
            kernel_initializer=self.kernel_initializer,
            bias_initializer=self.bias_initializer,
            seed=sub_seed(seed, 0),
            name="mlp",
            dtype=self.dtype_policy,
        )
        self.output_dense = keras.layers.Dense(
            output_size,
            kernel_initializer=clone_initializer(self.kernel_initializer),
            bias_initializer=clone_initializer(self.bias_initializer),
            name="output",
            dtype=self.dtype_policy,
        )

    def build(self, inputs_shape, padding_mask_shape=None):
        inputs_shape = tuple(inputs_shape)
        if len(inputs_shape) != 3 or inputs_shape[-1] is None:
            raise ValueError(
                "AttentionFlattening takes [B, T, d] inputs with a known d. "
                f"Received: inputs.shape={inputs_shape}"
            )
        self.mlp.build(inputs_shape)
        self.output_dense.build((inputs_shape[0], inputs_shape[-1] * self.glimpses))

    def call(self, inputs, padding_mask=None, training=None, return_attention_scores=False):
        scores = self.mlp(inputs, training=training)  # [B, T, G]
        allowed = None
        if padding_mask is not None:
            allowed = ops.cast(padding_mask, "bool")[:, None, :]
        # Softmax over the sequence: the sequence axis last, float32.
        weights = masked_softmax(ops.transpose(scores, (0, 2, 1)), allowed)  # [B, G, T]
        pooled = ops.einsum("bgt,btd->bgd", weights, ops.cast(inputs, "float32"))
        pooled = ops.reshape(pooled, (-1, self.glimpses * inputs.shape[-1]))
        outputs = self.output_dense(ops.cast(pooled, self.compute_dtype))
        if return_attention_scores:
            return outputs, ops.transpose(weights, (0, 2, 1))
        return outputs

    def compute_output_shape(self, inputs_shape, padding_mask_shape=None):
        return (inputs_shape[0], self.output_size)

    def compute_output_spec(
        self, inputs, padding_mask=None, training=None, return_attention_scores=False
    ):
        outputs = keras.KerasTensor((inputs.shape[0], self.output_size), self.compute_dtype)
        if return_attention_scores:
            weights = keras.KerasTensor(
                (inputs.shape[0], inputs.shape[1], self.glimpses), "float32"
            )
            return outputs, weights
        return outputs

    def get_config(self):
        config = super().get_config()
        config.update(
            mlp_size=self.mlp_size,
            glimpses=self.glimpses,
            output_size=self.output_size,
            dropout=self.dropout,
            kernel_initializer=keras.initializers.serialize(self.kernel_initializer),
            bias_initializer=keras.initializers.serialize(self.bias_initializer),
            seed=self.seed,
        )
        return config
