"""Gated multi-head self-attention (MUAN: Yu et al., 2019, arXiv:1908.04107).

Before the scaled dot products, a gate computed by low-rank bilinear pooling
of each token's own query and key reweights that query and that key (the
paper's Eqs. 4-6):

    M = sigmoid(FC_g(FC_q^g(Q) * FC_k^g(K)))          one pair per token
    Q~ = M_q * Q,  K~ = M_k * K                       broadcast over features
    A = softmax(Q~ K~^T / sqrt(d_h)),  F = A V

Token i's gate is computed from token i's query and token i's key, so the
query and the key must be the same sequence length: with the gate on this
is self-attention (with `qk_gate=False` the layer is Keras MHA and may
cross-attend). See docs/gated_attention.md.
"""

import keras
from keras import ops

from keras_structattn import checks
from keras_structattn.layers.structured_attention import StructuredMultiHeadAttention

# Channels of the gate's last axis: the paper's M = [M_q, M_k] (Eq. 5). The
# third-party openvqa code orders them the other way round; see
# docs/gated_attention.md for porting its weights.
QUERY_CHANNEL = 0
KEY_CHANNEL = 1


def _check_same_length(query_length, key_length):
    if query_length is not None and key_length is not None and query_length != key_length:
        raise ValueError(
            "GatedMultiHeadAttention with qk_gate=True is self-attention: the gate of "
            "token i is computed from query i and key i, so `query` and `key` (or "
            "`value` when `key` is None) must have the same length (qk_gate=False, "
            "Keras MHA, may cross-attend). Received: "
            f"query length {query_length}, key length {key_length}"
        )


@keras.saving.register_keras_serializable(package="keras_structattn")
class GatedMultiHeadAttention(StructuredMultiHeadAttention):
    """Multi-head self-attention whose queries and keys are gated per token.

    The gated self-attention (GSA) of MUAN. Q, K and V are projected as in
    `keras.layers.MultiHeadAttention` (`key_dim` is the per-head size). Then,
    per token and (by default) per head,
    `M = sigmoid(FC_g(FC_q^g(Q_h) * FC_k^g(K_h)))` with `FC_q^g, FC_k^g:
    key_dim -> gate_dim` and `FC_g: gate_dim -> 2`. The paper writes
    `M = [M_q, M_k]` (Eq. 5): channel 0 gates the query and channel 1 the
    key (`QUERY_CHANNEL`, `KEY_CHANNEL`; the third-party openvqa code has
    them the other way round, see docs/gated_attention.md to port its
    weights), each one scalar per token and head broadcast over the head's
    features. Attention is then ordinary scaled dot-product attention
    on the gated queries and keys; values are not gated. Gates are computed
    for every token, padded ones included (masks act on the logits only).

    With `qk_gate=False` the layer is `keras.layers.MultiHeadAttention` with
    the same weights (the paper's ablation without the gate), apart from
    query rows without any allowed key (below); it then also cross-attends
    (keys of another length than the queries), as Keras MHA does. With the
    gate on, a cross-attention call raises a ValueError: there is no key i
    to pair with query i.

    A query row with no allowed key has zero attention weights in every code
    path, so the layer outputs the output projection's bias there, never NaN.
    Logits and softmax are float32 under mixed precision.

    Args:
        num_heads: number of attention heads.
        key_dim: size of each head for query and key (d_h).
        gate_dim: d_g, the width of the bilinear pooling space. Default:
            `key_dim` (d_g = d_h, as in the paper and the openvqa code).
        gate_per_head: True (default, as the openvqa code): one gate pair per token *and
            head*, computed from that head's projected query and key
            (`FC_q^g, FC_k^g: key_dim -> gate_dim`). False: one gate pair
            per token computed from the full-width query and key
            (`num_heads * key_dim -> gate_dim`, the paper's single-head Eq. 4)
            and applied to every head.
        share_gate_weights_across_heads: with `gate_per_head=True`, whether
            all heads use the same `FC_q^g, FC_k^g, FC_g` (True, default, as
            the openvqa code: the parameter counts of the paper's Table I
            agree) or each
            head has its own. Must stay True when `gate_per_head=False`
            (there is only one gate then).
        gate_bias_initializer: the initializer of the bias of `FC_g` (the
            gate's last dense layer), or None (default) for the layer's
            `bias_initializer` (zeros by default: the paper's and openvqa's
            PyTorch default). At zero bias the gates start near
            sigmoid(0) = 0.5, so query and key gates together scale the
            logits by about a quarter and the first attention maps are
            near uniform; a large constant (e.g.
            `keras.initializers.Constant(4.0)`: sigmoid 0.98) starts the
            gates near 1, so the layer starts as the plain attention and
            the gate's function can be told apart from its initial
            scaling. Needs `use_bias=True` (the only bias it sets).
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
            must be None; `flash_attention` as in
            `StructuredMultiHeadAttention`.

    Call arguments:
        query, value, key, query_mask, value_mask, key_mask, attention_mask,
        return_attention_scores, training, use_causal_mask: as in
            `keras.layers.MultiHeadAttention` (boolean masks, True = may
            attend); with `qk_gate=True`, `key` (or `value` when `key` is
            None) must have the query's length. An explicit `query_mask=`
            is honoured.
        return_gates: keyword-only; also return the gates.
        cache, cache_update_index: keyword-only; as in
            `StructuredMultiHeadAttention` (a cache is written through
            `cache_update_index`, which gates each token's key once).

    Returns:
        `[B, T, output_dim]`; then the attention weights
        `[B, num_heads, T, T]` (float32) if `return_attention_scores`; then
        the gates `[B, num_heads, T, 2]` (float32; channel 0 = query gate,
        channel 1 = key gate; identical across heads when
        `gate_per_head=False`, all ones when `qk_gate=False`) if
        `return_gates`.
    """

    structure_inputs = {"return_gates": False}

    def __init__(
        self,
        num_heads,
        key_dim,
        gate_dim=None,
        gate_per_head=True,
        share_gate_weights_across_heads=True,
        qk_gate=True,
        gate_bias_initializer=None,
        **kwargs,
    ):
        super().__init__(num_heads=num_heads, key_dim=key_dim, **kwargs)
        if gate_dim is None:
            gate_dim = key_dim
        checks.positive_int("gate_dim", gate_dim)
        for name, flag in (
            ("gate_per_head", gate_per_head),
            ("share_gate_weights_across_heads", share_gate_weights_across_heads),
            ("qk_gate", qk_gate),
        ):
            checks.boolean(name, flag)
        if not gate_per_head and not share_gate_weights_across_heads:
            raise ValueError(
                "Argument `share_gate_weights_across_heads` must be True when "
                "gate_per_head=False: a full-width gate is a single gate for all heads. "
                "Received: share_gate_weights_across_heads=False"
            )
        if gate_bias_initializer is not None and not self._use_bias:
            raise ValueError(
                "Argument `gate_bias_initializer` needs use_bias=True: without biases the "
                "gate has no bias to initialise. Received: use_bias=False, "
                f"gate_bias_initializer={gate_bias_initializer!r}"
            )
        self._gate_bias_initializer = (
            None if gate_bias_initializer is None
            else keras.initializers.get(gate_bias_initializer)
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

    @property
    def gate_bias_initializer(self):
        return self._gate_bias_initializer

    def get_config(self):
        config = super().get_config()
        config.update(
            gate_dim=self._gate_dim,
            gate_per_head=self._gate_per_head,
            share_gate_weights_across_heads=self._share_gate_weights,
            qk_gate=self._qk_gate,
            gate_bias_initializer=(
                None if self._gate_bias_initializer is None
                else keras.initializers.serialize(self._gate_bias_initializer)
            ),
        )
        return config

    def build(self, query_shape, value_shape, key_shape=None):
        super().build(query_shape, value_shape, key_shape)
        if not self._qk_gate:
            # No gate, no pairing of query i with key i: Keras MHA, which
            # cross-attends too.
            return
        key_length = (value_shape if key_shape is None else key_shape)[1]
        _check_same_length(query_shape[1], key_length)
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

        def dense(spec, name, input_shape, bias_initializer=None):
            equation, output_shape, bias_axes = spec
            common = self._get_common_kwargs_for_sublayer()
            if bias_initializer is not None:
                # A clone: a shared initializer instance would give every
                # gate layer the same draw (as Keras MHA clones its own).
                common["bias_initializer"] = bias_initializer.__class__.from_config(
                    bias_initializer.get_config())
            layer = keras.layers.EinsumDense(
                equation,
                output_shape=output_shape,
                bias_axes=bias_axes if bias else None,
                name=name,
                **common,
            )
            layer.build(input_shape)
            return layer

        projected = (query_shape[0], query_shape[1], heads, width)
        self._qk_gate_query = dense(pool, "qk_gate_query", projected)
        self._qk_gate_key = dense(pool, "qk_gate_key", projected)
        pooled = self._qk_gate_query.compute_output_shape(projected)
        # The bias of FC_g sets where the sigmoid starts (`gate_bias_initializer`).
        self._qk_gate_output = dense(out, "qk_gate_output", pooled,
                                     self._gate_bias_initializer)

    def _check_inputs(self, query, value, key, state):
        if self._qk_gate and key is not None:
            _check_same_length(query.shape[1], key.shape[1])

    def _transform_heads(self, query, key, state):
        state["gates"] = None
        if not self._qk_gate:
            return query, key
        if key is None:
            raise ValueError(
                "GatedMultiHeadAttention gates each token's key when it is projected, "
                "so a cache must be written through `cache_update_index`, not read as it is."
            )
        gates = self._gates(query, key)  # [B, T, N or 1, 2]
        state["gates"] = gates
        query = ops.multiply(query, gates[..., QUERY_CHANNEL : QUERY_CHANNEL + 1])
        key = ops.multiply(key, gates[..., KEY_CHANNEL : KEY_CHANNEL + 1])
        return query, key

    def _extra_outputs(self, query, key, state):
        if not state["return_gates"]:
            return []
        return [self._gates_for_inspection(state["gates"], query)]

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
