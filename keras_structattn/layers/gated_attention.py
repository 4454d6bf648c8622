"""Gated multi-head self-attention (MUAN, seed 004; Yu et al., arXiv 1908.04107).

Before the scaled dot products, a gate computed by low-rank bilinear pooling
of each token's own query and key reweights that query and that key (the
paper's Eqs. 4-6):

    M = sigmoid(FC_g(FC_q^g(Q) * FC_k^g(K)))          one pair per token
    Q~ = M_q * Q,  K~ = M_k * K                       broadcast over features
    A = softmax(Q~ K~^T / sqrt(d_h)),  F = A V

Token i's gate is computed from token i's query and token i's key, so the
query and the key must be the same sequence length: this is self-attention.
See /work/shared/specs/vl_attention_specs.md, section C.
"""

import keras
from keras import ops

from keras_structattn.layers._attend import allowed_from_mask
from keras_structattn.layers._attend import attend
from keras_structattn.layers._masking import check_explicit_attention_options
from keras_structattn.layers._masking import check_sequence_shapes
from keras_structattn.layers._masking import merged_attention_mask
from keras_structattn.layers._masking import set_keras_mask
from keras_structattn.ops import _checks

# Channels of the gate's last axis (the order of S6, openvqa/models/muan).
KEY_CHANNEL = 0
QUERY_CHANNEL = 1


def _check_same_length(query_length, key_length):
    if query_length is not None and key_length is not None and query_length != key_length:
        raise ValueError(
            "GatedMultiHeadAttention is self-attention: the gate of token i is "
            "computed from query i and key i, so `query` and `key` (or `value` "
            "when `key` is None) must have the same length. Received: "
            f"query length {query_length}, key length {key_length}"
        )


@keras.saving.register_keras_serializable(package="keras_structattn")
class GatedMultiHeadAttention(keras.layers.MultiHeadAttention):
    """Multi-head self-attention whose queries and keys are gated per token.

    The gated self-attention (GSA) of MUAN. Q, K and V are projected as in
    `keras.layers.MultiHeadAttention` (`key_dim` is the per-head size). Then,
    per token and (by default) per head,
    `M = sigmoid(FC_g(FC_q^g(Q_h) * FC_k^g(K_h)))` with `FC_q^g, FC_k^g:
    key_dim -> gate_dim` and `FC_g: gate_dim -> 2`; channel 0 of `M` gates
    the key and channel 1 the query (`KEY_CHANNEL`, `QUERY_CHANNEL`: the
    order of the only public code, nbgao/openvqa `muan/mua.py`; the paper
    does not fix it), each one scalar per token and head broadcast over the
    head's features. Attention is then ordinary scaled dot-product attention
    on the gated queries and keys; values are not gated. Gates are computed
    for every token, padded ones included (masks act on the logits only).

    With `qk_gate=False` the layer is `keras.layers.MultiHeadAttention` with
    the same weights (the paper's ablation without the gate), apart from
    query rows without any allowed key (below).

    A query row with no allowed key has zero attention weights in every code
    path, so the layer outputs the output projection's bias there, never NaN.
    Logits and softmax are float32 under mixed precision.

    Args:
        num_heads: number of attention heads.
        key_dim: size of each head for query and key (d_h).
        gate_dim: d_g, the width of the bilinear pooling space. Default:
            `key_dim` (d_g = d_h, as in the paper and S6).
        gate_per_head: True (default, S6): one gate pair per token *and
            head*, computed from that head's projected query and key
            (`FC_q^g, FC_k^g: key_dim -> gate_dim`). False: one gate pair
            per token computed from the full-width query and key
            (`num_heads * key_dim -> gate_dim`, the paper's single-head Eq. 4)
            and applied to every head.
        share_gate_weights_across_heads: with `gate_per_head=True`, whether
            all heads use the same `FC_q^g, FC_k^g, FC_g` (True, default, as
            in S6: the parameter counts of the paper's Table I agree) or each
            head has its own. Must stay True when `gate_per_head=False`
            (there is only one gate then).
        qk_gate: the MUAN gate on/off switch. Not named `use_gate`, because
            `keras.layers.MultiHeadAttention` already has a `use_gate`: a
            sigmoid gate on the attention *output* (Qiu et al., arXiv
            2505.06708), which is unrelated. Keras's `use_gate` is passed
            through and works as in Keras MHA, alone or with `qk_gate`; its
            weights are named `gate`, ours `qk_gate_query`, `qk_gate_key` and
            `qk_gate_output`.
        **kwargs: the other arguments of `keras.layers.MultiHeadAttention`
            (`value_dim`, `dropout`, `use_bias`, `output_shape`, initializers,
            regularizers, constraints, `use_gate`, `seed`, ...). The gate's
            dense layers use the same initializers, regularizers and
            constraints, and have biases iff `use_bias`. `attention_axes`
            must be None and `flash_attention` False or None.

    Call arguments:
        query, value, key, query_mask, value_mask, key_mask, attention_mask,
        return_attention_scores, training, use_causal_mask: as in
            `keras.layers.MultiHeadAttention` (boolean masks, True = may
            attend); `key` (or `value` when `key` is None) must have the
            query's length. An explicit `query_mask=` is honoured.
        return_gates: also return the gates.

    Returns:
        `[B, T, output_dim]`; then the attention weights
        `[B, num_heads, T, T]` (float32) if `return_attention_scores`; then
        the gates `[B, num_heads, T, 2]` (float32; channel 0 = key gate,
        channel 1 = query gate; identical across heads when
        `gate_per_head=False`, all ones when `qk_gate=False`) if
        `return_gates`.
    """

    def __init__(
        self,
        num_heads,
        key_dim,
        gate_dim=None,
        gate_per_head=True,
        share_gate_weights_across_heads=True,
        qk_gate=True,
        **kwargs,
    ):
        check_explicit_attention_options(
            kwargs, "the layer zeroes rows without allowed keys, which the flash kernels do not"
        )
        super().__init__(num_heads=num_heads, key_dim=key_dim, **kwargs)
        if gate_dim is None:
            gate_dim = key_dim
        _checks.positive_int("gate_dim", gate_dim)
        for name, flag in (
            ("gate_per_head", gate_per_head),
            ("share_gate_weights_across_heads", share_gate_weights_across_heads),
            ("qk_gate", qk_gate),
        ):
            if not isinstance(flag, bool):
                raise ValueError(
                    f"Argument `{name}` must be True or False. Received: {name}={flag!r}"
                )
        if not gate_per_head and not share_gate_weights_across_heads:
            raise ValueError(
                "Argument `share_gate_weights_across_heads` must be True when "
                "gate_per_head=False: a full-width gate is a single gate for all heads. "
                "Received: share_gate_weights_across_heads=False"
            )
        self._gate_dim = gate_dim
        self._gate_per_head = gate_per_head
        self._share_gate_weights = share_gate_weights_across_heads
        self._qk_gate = qk_gate

    @property
    def gate_dim(self):
        return self._gate_dim

    @property
    def gate_per_head(self):
        return self._gate_per_head

    @property
    def share_gate_weights_across_heads(self):
        return self._share_gate_weights

    @property
    def qk_gate(self):
        return self._qk_gate

    def get_config(self):
        config = super().get_config()
        config.update(
            gate_dim=self._gate_dim,
            gate_per_head=self._gate_per_head,
            share_gate_weights_across_heads=self._share_gate_weights,
            qk_gate=self._qk_gate,
        )
        return config

    def build(self, query_shape, value_shape, key_shape=None):
        check_sequence_shapes(self, query_shape, value_shape)
        key_length = (value_shape if key_shape is None else key_shape)[1]
        _check_same_length(query_shape[1], key_length)
        super().build(query_shape, value_shape, key_shape)
        if not self._qk_gate:
            return
        heads, width, gate = self._num_heads, self._key_dim, self._gate_dim
        bias = self._use_bias
        if not self._gate_per_head:
            # Full width: [B, T, N, d_h] x [N, d_h, d_g], then d_g -> 2.
            pool = ("btnh,nhg->btg", (None, gate), "g")
            out = ("btg,gc->btc", (None, 2), "c")
        elif self._share_gate_weights:
            pool = ("btnh,hg->btng", (None, heads, gate), "g")
            out = ("btng,gc->btnc", (None, heads, 2), "c")
        else:
            pool = ("btnh,nhg->btng", (None, heads, gate), "ng")
            out = ("btng,ngc->btnc", (None, heads, 2), "nc")

        def dense(spec, name, input_shape):
            equation, output_shape, bias_axes = spec
            layer = keras.layers.EinsumDense(
                equation,
                output_shape=output_shape,
                bias_axes=bias_axes if bias else None,
                name=name,
                **self._get_common_kwargs_for_sublayer(),
            )
            layer.build(input_shape)
            return layer

        projected = (query_shape[0], query_shape[1], heads, width)
        self._qk_gate_query = dense(pool, "qk_gate_query", projected)
        self._qk_gate_key = dense(pool, "qk_gate_key", projected)
        pooled = self._qk_gate_query.compute_output_shape(projected)
        self._qk_gate_output = dense(out, "qk_gate_output", pooled)

    def compute_output_spec(
        self,
        query,
        value,
        key=None,
        query_mask=None,
        value_mask=None,
        key_mask=None,
        attention_mask=None,
        return_attention_scores=False,
        training=None,
        use_causal_mask=False,
        return_gates=False,
    ):
        key_shape = None if key is None else key.shape
        _check_same_length(query.shape[1], (value if key is None else key).shape[1])
        output_shape = self.compute_output_shape(query.shape, value.shape, key_shape)
        outputs = [keras.KerasTensor(output_shape, dtype=self.compute_dtype)]
        batch, length = query.shape[0], query.shape[1]
        if return_attention_scores:
            shape = (batch, self._num_heads, length, value.shape[1])
            outputs.append(keras.KerasTensor(shape, dtype="float32"))
        if return_gates:
            shape = (batch, self._num_heads, length, 2)
            outputs.append(keras.KerasTensor(shape, dtype="float32"))
        return outputs[0] if len(outputs) == 1 else tuple(outputs)

    def call(
        self,
        query,
        value,
        key=None,
        query_mask=None,
        value_mask=None,
        key_mask=None,
        attention_mask=None,
        return_attention_scores=False,
        training=None,
        use_causal_mask=False,
        return_gates=False,
    ):
        if key is None:
            key = value
        _check_same_length(query.shape[1], key.shape[1])
        attention_mask = merged_attention_mask(
            self, query, value, key, query_mask, value_mask, key_mask, attention_mask,
            use_causal_mask,
        )
        if self._use_gate:
            output_gate = self._gate_dense(query)
        query = self._query_dense(query)
        key = self._key_dense(key)
        value = self._value_dense(value)
        gates = None
        if self._qk_gate:
            gates = self._gates(query, key)  # [B, T, N or 1, 2]
            query = ops.multiply(query, gates[..., QUERY_CHANNEL : QUERY_CHANNEL + 1])
            key = ops.multiply(key, gates[..., KEY_CHANNEL : KEY_CHANNEL + 1])
        output, weights = attend(
            self,
            query,
            key,
            value,
            allowed_from_mask(attention_mask),
            training,
            need_weights=return_attention_scores,
        )
        if self._use_gate:
            output = ops.multiply(output, output_gate)
        output = self._output_dense(output)
        if query_mask is not None:
            set_keras_mask(output, query_mask)
        outputs = [output]
        if return_attention_scores:
            outputs.append(weights)
        if return_gates:
            outputs.append(self._gates_for_inspection(gates, query))
        return outputs[0] if len(outputs) == 1 else tuple(outputs)

    def _gates(self, query, key):
        """Gates `[B, T, N, 2]` (per head) or `[B, T, 1, 2]` (full width)
        from the projected `[B, T, N, d_h]` query and key."""
        pooled = ops.multiply(self._qk_gate_query(query), self._qk_gate_key(key))
        gates = ops.sigmoid(self._qk_gate_output(pooled))
        if not self._gate_per_head:
            gates = ops.expand_dims(gates, 2)
        return gates

    def _gates_for_inspection(self, gates, query):
        """`[B, N, T, 2]` float32, heads second as in the attention weights."""
        shape = ops.shape(query)
        if gates is None:
            return ops.ones((shape[0], self._num_heads, shape[1], 2), "float32")
        gates = ops.transpose(ops.cast(gates, "float32"), (0, 2, 1, 3))
        if not self._gate_per_head:
            gates = ops.broadcast_to(gates, (shape[0], self._num_heads, shape[1], 2))
        return gates
