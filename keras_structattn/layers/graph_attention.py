"""Multi-head attention restricted, head by head, to the edges of a relation graph.

SA-M4C (Kant et al., 2020, "Spatially Aware Multimodal Transformers for
TextVQA", arXiv:2007.12146, Section 3.2): each head attends only along a
subset of the spatial relations between boxes (one head per relation, plus neighbouring
directions), so heads look at local context instead of learning redundant
global features. The graph arrives as one int label per (query, key) pair;
see `keras_structattn.ops.relation_tables` for the labels and the tables,
and docs/graph_attention.md.
"""

import keras
import numpy as np
from keras import ops

from keras_structattn import checks
from keras_structattn.layers._attention_core import LogitStructure
from keras_structattn.layers._attention_core import and_masks
from keras_structattn.layers.structured_attention import StructuredMultiHeadAttention
from keras_structattn.ops import relation_tables as rt


@keras.saving.register_keras_serializable(package="keras_structattn")
class GraphMultiHeadAttention(StructuredMultiHeadAttention):
    """Multi-head attention in which each head follows its own relations.

    A drop-in for `keras.layers.MultiHeadAttention` with one more call
    input, `relations`: an int tensor `[B, T, S]` of relation labels (0..12
    spatial relations, `IMPLICIT` = 13 for edges every head may use,
    `BLOCKED` = 14 for edges none may use). Head h attends from query i to
    key j only where `relations[i, j]` is one of its labels *and* the usual
    masks (`attention_mask`, Keras masks, `use_causal_mask`) allow it. A
    query row with no allowed key outputs zeros (the paper's footnote 5),
    never NaN; logits, the softmax and the relation bias are float32 under
    mixed precision. Per-head masks are built inside the layer from the
    labels, so no float mask per head is ever an input.

    Args:
        num_heads: number of attention heads.
        key_dim: size of each head for query and key.
        head_relations: the spatial labels (0..12) each head may use, a list
            of `num_heads` lists. Default: the SA-M4C assignment for 12 heads
            (`relation_tables.context_head_relations(context_size)`).
        context_size: odd int; with the default table, the width of the
            window of directions a direction head accepts, centred on its
            own (3, the released code's default: its direction and one on
            each side). The paper's `c` counts a different window; see
            docs/graph_attention.md. Ignored when `head_relations` is given.
        graph_masking: if False, heads are not restricted by spatial labels
            (`BLOCKED` still blocks): with `relation_bias=True` this is the
            ReGAT-style baseline, a learned relation bias without masking.
        relation_bias: add a learned `beta[head, label]` (zeros at first) to
            the allowed logits, the paper's Eq. 5.
        top_k: if set, each query row keeps only its `top_k` largest allowed
            logits (Explicit Sparse Transformer baseline, k = 9 in the
            paper); ties with the k-th logit are kept.
        **kwargs: the other arguments of `keras.layers.MultiHeadAttention`
            (`value_dim`, `dropout`, `use_bias`, `output_shape`, initializers,
            regularizers, constraints, `seed`, ...). `attention_axes` must be
            None: attention runs over axis 1 of `[B, T, dim]` inputs.

    Call arguments:
        query, value, key, query_mask, value_mask, key_mask, attention_mask,
        return_attention_scores, training, use_causal_mask: as in
            `keras.layers.MultiHeadAttention` (boolean masks, True = may
            attend).
        relations: keyword-only; int labels `[B, T, S]`, or None for a graph
            that joins every pair with an `IMPLICIT` edge (then the layer is
            `keras.layers.MultiHeadAttention` with the same weights, apart
            from zero rows and `top_k`).
        cache, cache_update_index: keyword-only; as in
            `StructuredMultiHeadAttention`.

    Returns:
        `[B, T, output_dim]`, and with `return_attention_scores=True` also
        the attention weights `[B, num_heads, T, S]` (float32); then the
        cache if one was given.
    """

    structure_inputs = {"relations": None}

    def __init__(
        self,
        num_heads,
        key_dim,
        head_relations=None,
        context_size=3,
        graph_masking=True,
        relation_bias=False,
        top_k=None,
        **kwargs,
    ):
        super().__init__(num_heads=num_heads, key_dim=key_dim, **kwargs)
        if head_relations is None:
            if num_heads != 12:
                raise ValueError(
                    "The default `head_relations` (one head per spatial relation) needs "
                    f"num_heads=12. Received: num_heads={num_heads}; pass "
                    "`head_relations`, a list of label lists, one per head."
                )
            head_relations = rt.context_head_relations(context_size)
        table = rt.table_from_sets(head_relations)
        if len(table) != num_heads:
            raise ValueError(
                "Argument `head_relations` must have one entry per head "
                f"(num_heads={num_heads}). Received {len(table)} entries."
            )
        checks.boolean("graph_masking", graph_masking)
        checks.boolean("relation_bias", relation_bias)
        if top_k is not None:
            checks.positive_int("top_k", top_k)
        self._head_relations = rt.sets_from_table(table)
        self._context_size = context_size
        self._graph_masking = graph_masking
        self._use_relation_bias = relation_bias
        self._top_k = top_k
        if not graph_masking:
            table[:, : rt.NUM_SPATIAL_LABELS] = True
        # [NUM_LABELS, num_heads]: gathered by label, heads last.
        self._label_table = np.ascontiguousarray(table.T)

    @property
    def head_relations(self):
        return [list(labels) for labels in self._head_relations]

    def get_config(self):
        config = super().get_config()
        config.update(
            head_relations=self.head_relations,
            context_size=self._context_size,
            graph_masking=self._graph_masking,
            relation_bias=self._use_relation_bias,
            top_k=self._top_k,
        )
        return config

    def build(self, query_shape, value_shape, key_shape=None):
        super().build(query_shape, value_shape, key_shape)
        if self._use_relation_bias:
            # Float32 under mixed precision (the variable dtype), like the logits.
            self.relation_bias = self.add_weight(
                name="relation_bias",
                shape=(self.num_heads, rt.NUM_LABELS),
                initializer="zeros",
            )

    def _check_inputs(self, query, value, key, state):
        relations = state["relations"]
        if relations is None:
            return
        checks.rank("relations", relations, 3)
        memory = value if value is not None else key
        key_length = None if memory is None else memory.shape[1]
        if state.get("cache") is not None:  # the keys are the cache's positions
            key_length = state["cache"].shape[2]
        for got, want in zip(relations.shape[1:], (query.shape[1], key_length)):
            if got is not None and want is not None and got != want:
                raise ValueError(
                    "Argument `relations` must be [B, T, S] for T queries and S keys. "
                    f"Received: relations.shape={tuple(relations.shape)}, "
                    f"query.shape={tuple(query.shape)}, value.shape="
                    f"{None if memory is None else tuple(memory.shape)}"
                )
        rt.check_relations("relations", relations)

    def _logit_structure(self, query, key, allowed, state):
        relations = state["relations"]
        bias = None
        if relations is not None:
            # Out-of-range labels (unseen by `_check_inputs` in compiled
            # code) are BLOCKED, so that both look-ups are safe.
            labels = rt.blocked_if_out_of_range(relations)
            # [B, T, S, N] by label lookup, then heads second as in the logits.
            table = ops.convert_to_tensor(self._label_table)
            by_head = ops.transpose(ops.take(table, labels, axis=0), (0, 3, 1, 2))
            allowed = and_masks(by_head, allowed)
            if self._use_relation_bias:
                bias = _relation_bias(ops.cast(self.relation_bias, "float32"), labels)
        return LogitStructure(allowed=allowed, bias=bias, top_k=self._top_k)


def _relation_bias(beta, labels, one_hot_gradient=None):
    """`beta[h, labels[b, i, j]]` as `[B, N, T, S]` (Eq. 5's bias), gathered.

    The gradient with respect to `beta` `[N, NUM_LABELS]` is the sum of the
    upstream gradients over the positions of each label. The gather's own
    gradient computes it as a scatter-add of B*N*T*S values into the 12 x 15
    table: on a GPU, atomics piling onto few addresses made the training step
    5.4x Keras MHA's (issue 22). There, the gradient is a one-hot contraction
    instead (a batched matmul, then a sum over the batch). On a CPU, XLA's
    scatter-add is a plain loop and the faster of the two (paired timings in
    benchmarks/results_graph_attention_cpu.txt), so the gather keeps its own
    gradient. The forward is a gather either way: the values are exact.
    (On Ampere and later GPUs the matmul may run in TF32, the default of
    both backends, like the attention's own matmuls: each upstream value is
    then rounded to 11 significant bits before the float32 sum.)

    Args:
        beta: float32 `[N, NUM_LABELS]`.
        labels: int32 `[B, T, S]` in 0..14
            (`relation_tables.blocked_if_out_of_range`).
        one_hot_gradient: None chooses by the default device (True unless it
            is a CPU); True or False forces a form (tests).
    """

    def gather(beta):
        gathered = ops.take(ops.transpose(beta), labels, axis=0)  # [B, T, S, N]
        return ops.transpose(gathered, (0, 3, 1, 2))

    if one_hot_gradient is None:
        one_hot_gradient = not _default_device_is_cpu()
    if not one_hot_gradient:
        return gather(beta)

    @ops.custom_gradient
    def lookup(beta):
        def grad(*args, upstream=None):
            if upstream is None:
                (upstream,) = args
            batch = ops.shape(labels)[0]
            # [B, T*S, NUM_LABELS]: a per-batch matmul; an einsum over b, i
            # and j at once transposes (2x slower with XLA on CPU).
            one_hot = ops.reshape(
                ops.one_hot(labels, rt.NUM_LABELS, dtype="float32"), (batch, -1, rt.NUM_LABELS)
            )
            upstream = ops.reshape(ops.cast(upstream, "float32"), (batch, ops.shape(beta)[0], -1))
            return ops.sum(ops.matmul(upstream, one_hot), axis=0)

        return gather(beta), grad

    return lookup(beta)


def _default_device_is_cpu():
    """Whether ops run on a CPU by default (a trace-time fact, not a value)."""
    backend = keras.backend.backend()
    if backend == "jax":
        import jax

        return jax.default_backend() == "cpu"
    if backend == "tensorflow":
        import tensorflow as tf

        return not tf.config.list_logical_devices("GPU")
    return False
