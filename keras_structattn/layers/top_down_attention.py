"""Additive attention of the Up-Down (BUTD) captioner.

Anderson et al., "Bottom-Up and Top-Down Attention for Image Captioning and
Visual Question Answering", CVPR 2018, as written in Eq. 23 of the
supplementary of Yang et al. (CATT, arXiv:2103.03493). Its CATT version
(IS + CS) is `catt_top_down_attention.CATTTopDownAttention`.
See docs/catt_attention.md.
"""

import keras
from keras import ops

from keras_structattn import checks
from keras_structattn.layers._masking import set_keras_mask
from keras_structattn.layers.blocks import clone_initializer
from keras_structattn.ops.additive_scores import additive_scores
from keras_structattn.ops.masked_softmax import masked_softmax


@keras.saving.register_keras_serializable(package="keras_structattn")
class TopDownAttention(keras.layers.Layer):
    """Additive attention of the Up-Down (BUTD) captioner (Eq. 23).

        e_i = w^T tanh(W_v v_i + W_h h),  alpha = softmax(e),  out = sum_i alpha_i v_i

    As in ruotianluo/self-critical.pytorch (`Attention`: ctx2att, h2att,
    alpha_net), each projection is a Dense layer with bias. Masked regions
    get zero weight (the code renormalises after the softmax, which is the
    same); a row with no allowed region gets zeros, never NaN. Scores and
    the softmax are float32 under mixed precision.

    Args:
        attention_dim: width of the additive scorer (512 in the Up-Down code).
        use_bias: biases on the three projections.
        kernel_initializer, bias_initializer, kernel_regularizer,
            bias_regularizer: for the three projections.
        **kwargs: base `keras.layers.Layer` arguments.

    Call arguments:
        query: `[B, dq]` (one step: the attention LSTM's h) or `[B, T, dq]`
            (T queries at once).
        value: `[B, N, dv]` regions, or `[N, dv]` shared by the batch (a
            dictionary; projected once).
        value_mask: optional bool `[B, N]` (or `[N]`), True = may attend.
        return_attention_scores: also return the weights.

    Returns:
        `context` `[B, dv]` (or `[B, T, dv]`), and with
        `return_attention_scores=True` also the float32 weights `[B, N]`
        (or `[B, T, N]`).
    """

    def __init__(
        self,
        attention_dim=512,
        use_bias=True,
        kernel_initializer="glorot_uniform",
        bias_initializer="zeros",
        kernel_regularizer=None,
        bias_regularizer=None,
        **kwargs,
    ):
        super().__init__(**kwargs)
        checks.positive_int("attention_dim", attention_dim)
        self.attention_dim = attention_dim
        self.use_bias = use_bias
        self.kernel_initializer = keras.initializers.get(kernel_initializer)
        self.bias_initializer = keras.initializers.get(bias_initializer)
        self.kernel_regularizer = keras.regularizers.get(kernel_regularizer)
        self.bias_regularizer = keras.regularizers.get(bias_regularizer)
        self.supports_masking = True

    def _dense(self, units, name):
        return keras.layers.Dense(
            units,
            use_bias=self.use_bias,
            kernel_initializer=clone_initializer(self.kernel_initializer),
            bias_initializer=clone_initializer(self.bias_initializer),
            kernel_regularizer=self.kernel_regularizer,
            bias_regularizer=self.bias_regularizer,
            name=name,
            dtype=self.dtype_policy,
        )

    def build(self, query_shape, value_shape):
        if len(query_shape) not in (2, 3) or len(value_shape) not in (2, 3):
            raise ValueError(
                "TopDownAttention takes a [B, dq] or [B, T, dq] query and [B, N, dv] "
                f"or [N, dv] values. Received: query_shape={tuple(query_shape)}, "
                f"value_shape={tuple(value_shape)}"
            )
        self.value_projection = self._dense(self.attention_dim, "value_projection")
        self.value_projection.build(value_shape)
        self.query_projection = self._dense(self.attention_dim, "query_projection")
        self.query_projection.build(query_shape)
        self.score = self._dense(1, "score")
        self.score.build((None, self.attention_dim))

    def compute_output_spec(self, query, value, value_mask=None, return_attention_scores=False):
        batch = query.shape[0]
        steps = tuple(query.shape[1:-1])
        context = keras.KerasTensor((batch,) + steps + (value.shape[-1],), self.compute_dtype)
        if return_attention_scores:
            return context, keras.KerasTensor((batch,) + steps + (value.shape[-2],), "float32")
        return context

    def compute_mask(self, query, value, value_mask=None, return_attention_scores=False):
        return None

    def call(self, query, value, value_mask=None, return_attention_scores=False):
        set_keras_mask(value, None)
        context, weights = self.attend(query, value, value_mask)
        if return_attention_scores:
            return context, weights
        return context

    def attend(self, query, value, value_mask=None, projected_value=None):
        """`(context, weights)`; `projected_value` = `value_projection(value)`
        if already computed (e.g. once per image for a step-by-step LSTM)."""
        single = len(query.shape) == 2
        if single:
            query = ops.expand_dims(query, 1)
        if projected_value is None:
            projected_value = self.value_projection(value)
        logits = additive_scores(  # float32 [B, T, N]
            self.query_projection(query), projected_value,
            self.score.kernel, self.score.bias if self.use_bias else None)
        mask = None
        if value_mask is not None:
            mask = ops.cast(value_mask, "bool")
            mask = mask[None, None, :] if len(mask.shape) == 1 else mask[:, None, :]
        weights = masked_softmax(logits, mask)
        cast = ops.cast(weights, self.compute_dtype)
        if len(value.shape) == 2:
            context = ops.einsum("btn,nd->btd", cast, value)
        else:
            context = ops.einsum("btn,bnd->btd", cast, value)
        if single:
            context, weights = context[:, 0], weights[:, 0]
        return context, weights

    def get_config(self):
        config = super().get_config()
        config.update(
            attention_dim=self.attention_dim,
            use_bias=self.use_bias,
            kernel_initializer=keras.initializers.serialize(self.kernel_initializer),
            bias_initializer=keras.initializers.serialize(self.bias_initializer),
            kernel_regularizer=keras.regularizers.serialize(self.kernel_regularizer),
            bias_regularizer=keras.regularizers.serialize(self.bias_regularizer),
        )
        return config
