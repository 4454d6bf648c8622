"""`StructuredMultiHeadAttention`: the base of the library's attention layers.

One call skeleton for every mechanism: the masks of a
`keras.layers.MultiHeadAttention` call are merged once, the inputs are
projected through the public `query_dense` / `key_dense` / `value_dense`,
the mechanism adds its structure through small hooks, the heads attend
through the one attention core (`_attention_core`), and the output gate,
`output_dense`, the Keras mask and the packing of the outputs follow. A
mechanism is `__init__` / `build` / `get_config`, a `structure_inputs`
dict naming its keyword-only call inputs (with defaults), and the hooks it
needs:

* `_as_sequences(...)` / `_like_query(...)`: inputs to `[B, L, dim]` and
  the output back to the query's shape (area attention's 2-D grids).
* `_check_inputs(query, value, key, state)`: validate the structure inputs.
* `_transform_heads(query, key, state)`: change the projected queries and
  keys (MUAN's gates).
* `_logit_structure(query, key, allowed, state)`: what the structure adds to
  the logits (allowed pairs per head, a scale, a float32 bias, top-k): a
  `LogitStructure`.
* `_attend(query, key, value, structure, training, need_weights, state)`:
  the attention itself (area attention attends to areas; CATT attention
  adds its cross-sample branch). A structure that is only a mask goes on
  to `_compute_attention(query, key, value, attention_mask, training,
  return_attention_scores)`, Keras MHA's documented override point, with
  Keras' arguments: a user's subclass overriding it changes the plain path
  of every layer as it would change Keras MHA's; the structured paths are
  changed through `_logit_structure` or `_attend`.
* `_output(context, output_gate, state)`: the output projection.
* `_extra_outputs(query, key, state)`: outputs after the scores.

`state` is a per-call dict: the structure inputs by name, `query` (the
unprojected query) and `query_mask`; hooks may add entries for later hooks.

See docs/attention_core.md.
"""

import inspect
import types

import keras
from keras import ops

from keras_structattn.layers._attention_core import LogitStructure
from keras_structattn.layers._attention_core import and_masks
from keras_structattn.layers._attention_core import scaled_dot_product_attention
from keras_structattn.layers._masking import boolean_attention_mask
from keras_structattn.layers._masking import check_explicit_attention_options
from keras_structattn.layers._masking import check_sequence_shapes
from keras_structattn.layers._masking import check_value_key_shapes
from keras_structattn.layers._masking import compute_output_spec
from keras_structattn.layers._masking import set_keras_mask


@keras.saving.register_keras_serializable(package="keras_structattn")
class StructuredMultiHeadAttention(keras.layers.MultiHeadAttention):
    """`keras.layers.MultiHeadAttention` with one explicit core, hooks and caches.

    With no structure (this class itself, or a subclass with its structure
    switched off) the layer computes what `keras.layers.MultiHeadAttention`
    computes with the same weights, with three differences: logits, masking
    and softmax are float32 under mixed precision and the returned scores
    are float32; a query row with no allowed key gets zero weights on every
    code path (its output is the output projection's bias), never NaN or a
    uniform average; an explicit `query_mask=` is honoured (Keras MHA reads
    only the query's Keras mask).

    Incremental decoding keeps the projected keys and values in a cache, as
    KerasHub's `CachedMultiHeadAttention` does: one tensor
    `[B, 2, S, num_heads, key_dim]` (keys at index 0 of axis 1, values at
    1; the value and key sizes must then agree). `empty_cache` makes one for
    self-attention, `project_memory` projects an encoder memory once.

    Args:
        num_heads: number of attention heads.
        key_dim: size of each head for query and key.
        **kwargs: the other arguments of `keras.layers.MultiHeadAttention`
            (`value_dim`, `dropout`, `use_bias`, `output_shape`,
            initializers, regularizers, constraints, `use_gate`, `seed`,
            ...). `attention_axes` must be None (attention over axis 1 of
            `[B, T, dim]` inputs). `flash_attention=True` is Keras MHA's:
            the fused kernel with flash attention, no dropout, no returned
            scores (a row without an allowed key is still zeroed after the
            kernel); a structure that cannot take the fused kernel then
            raises a ValueError.

    Call arguments:
        query, value, key, query_mask, value_mask, key_mask, attention_mask,
        return_attention_scores, training, use_causal_mask: as in
            `keras.layers.MultiHeadAttention` (boolean masks, True = may
            attend), in the same positional order. `attention_mask` is
            `[T, S]`, `[B, T, S]` or `[B, N, T, S]` (any axis may be 1),
            checked on its static shape; a non-boolean one must hold 0 and
            1 only: anything else (an additive mask, 0 / -1e9) raises a
            ValueError where the values are known, and compiled code reads
            it as `mask > 0` (docs/attention_core.md, "Checked masks").
        cache: keyword-only; None, or a cache `[B, 2, S, N, key_dim]`
            (`empty_cache`, `project_memory`, or a previous call's).
        cache_update_index: keyword-only; with `cache`, an int scalar: the
            query's T positions are projected from `key`/`value` and written
            at `index .. index + T - 1`, and the query attends over the whole
            cache; `use_causal_mask=True` then lets query t see the cache
            positions up to `index + t`. None: the cache is read as it is
            (`value` may be None) and `use_causal_mask` must be False. With
            a cache, `value_mask` and `key_mask` are not used (they would
            cover only the new positions): mask the cache with
            `attention_mask` `[B, T, S]`.

    Returns:
        `output [B, T, output_dim]`; then the attention weights
        `[B, num_heads, T, S]` (float32) if `return_attention_scores`; then
        a subclass's extra outputs; then the updated cache if `cache` was
        given. A single tensor when there is nothing but the output.
    """

    def __init__(self, num_heads, key_dim, **kwargs):
        check_explicit_attention_options(kwargs, type(self).__name__)
        super().__init__(num_heads=num_heads, key_dim=key_dim, **kwargs)

    def build(self, query_shape, value_shape, key_shape=None):
        check_value_key_shapes(value_shape, key_shape)
        check_sequence_shapes(self, query_shape, value_shape)
        super().build(query_shape, value_shape, key_shape)

    # Keyword-only call inputs a mechanism adds, with their defaults
    # (e.g. `{"relations": None}`). Each class's `call` gets them in its
    # signature (see `__init_subclass__`), so that Keras fills and checks
    # them as named arguments.
    structure_inputs = {}

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        if "call" not in cls.__dict__:
            cls.call = _call_with_signature(cls.structure_inputs)

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
        *,
        cache=None,
        cache_update_index=None,
        **structure_inputs,
    ):
        unknown = set(structure_inputs) - set(self.structure_inputs)
        if unknown:
            raise TypeError(
                f"{type(self).__name__}.call() got unexpected keyword arguments "
                f"{sorted(unknown)}; it takes {sorted(self.structure_inputs) or 'none'}."
            )
        state = dict(self.structure_inputs, **structure_inputs)
        return self._attention_call(
            query, value, key, query_mask, value_mask, key_mask, attention_mask,
            return_attention_scores, training, use_causal_mask, cache, cache_update_index,
            state,
        )

    def compute_output_spec(self, *args, **kwargs):
        # One generic spec for every subclass: trace `call` symbolically.
        return compute_output_spec(self.call, *args, **kwargs)

    # ------------------------------------------------------------- caches

    def empty_cache(self, batch_size, max_length, dtype=None):
        """A zero self-attention cache `[batch_size, 2, max_length, N, key_dim]`."""
        self._check_cacheable()
        shape = (batch_size, 2, max_length, self._num_heads, self._key_dim)
        return ops.zeros(shape, dtype or self.compute_dtype)

    def project_memory(self, value, key=None):
        """A memory's projected keys and values, `[B, 2, S, N, key_dim]`.

        Computed once (e.g. the encoder outputs of a decoder), then passed as
        `cache=` with `cache_update_index=None` at every step.
        """
        self._check_cacheable()
        if not self.built:
            raise ValueError(
                f"{type(self).__name__} must be built (called once, or `build`) before "
                "`project_memory`: the projections' input widths are not known yet."
            )
        key = value if key is None else key
        return ops.stack([self._key_dense(key), self._value_dense(value)], axis=1)

    def _check_cacheable(self):
        if self._value_dim != self._key_dim:
            raise ValueError(
                "A cache stacks keys and values, so it needs value_dim == key_dim. "
                f"Received: key_dim={self._key_dim}, value_dim={self._value_dim}"
            )

    def _read_cache(self, cache, index, key, value):
        """`(keys, values, cache)`: the cache, with the new positions written."""
        if index is None:
            return cache[:, 0], cache[:, 1], cache
        zero = ops.zeros((), "int32")
        start = (zero, zero, ops.cast(index, "int32"), zero, zero)
        new = ops.cast(ops.stack([key, value], axis=1), cache.dtype)
        cache = ops.slice_update(cache, start, new)
        return cache[:, 0], cache[:, 1], cache

    # --------------------------------------------------------------- masks

    def _merged_mask(
        self, query, value, query_mask, value_mask, key_mask, attention_mask,
        use_causal_mask, cache, cache_update_index,
    ):
        """Every mask of the call as one boolean `[B, 1 or N, T, S]`, or None."""
        if attention_mask is not None:
            # One shape and value check for every layer (`boolean_attention_mask`).
            key_length = value.shape[1] if cache is None else cache.shape[2]
            attention_mask = boolean_attention_mask(
                self, attention_mask, query.shape[0], query.shape[1], key_length
            )
        if cache is None:
            mask = self._compute_attention_mask(
                query,
                value,
                query_mask=query_mask,
                value_mask=value_mask,
                key_mask=key_mask,
                attention_mask=attention_mask,
                use_causal_mask=use_causal_mask,
            )
        else:
            mask = attention_mask
            if query_mask is not None:
                mask = and_masks(mask, ops.cast(query_mask, "bool")[:, :, None])
            if use_causal_mask:
                if cache_update_index is None:
                    raise ValueError(
                        "`use_causal_mask=True` needs `cache_update_index` with a cache "
                        "(a cache read as it is holds a memory, not past positions)."
                    )
                rows = ops.cast(cache_update_index, "int32") + ops.arange(
                    ops.shape(query)[1], dtype="int32"
                )
                cols = ops.arange(ops.shape(cache)[2], dtype="int32")
                mask = and_masks(mask, (cols[None, :] <= rows[:, None])[None])
        if mask is None:
            return None
        # As Keras MHA: [T, S] and [B, T, S] gain the missing axes in front
        # of T (the heads' first); a per-head [B, N, T, S] passes as it is.
        while len(mask.shape) < 4:
            mask = ops.expand_dims(mask, -3)
        return mask

    # ------------------------------------------------------------ skeleton

    def _attention_call(
        self,
        query,
        value,
        key,
        query_mask,
        value_mask,
        key_mask,
        attention_mask,
        return_attention_scores,
        training,
        use_causal_mask,
        cache,
        cache_update_index,
        state,
    ):
        """The call skeleton; `state` holds the structure inputs by name."""
        original_query = query
        query, value, key, query_mask, value_mask, key_mask = self._as_sequences(
            query, value, key, query_mask, value_mask, key_mask
        )
        # `cache` too: with one, the keys are the cache's, not `value`'s.
        state.update(query=query, query_mask=query_mask, cache=cache)
        if key is None:
            key = value
        if cache is not None:
            self._check_cacheable()
        elif value is None:
            raise ValueError("`value` may be None only with a cache (`cache=`).")
        self._check_inputs(query, value, key, state)
        # `Layer.__call__` has turned the inputs' Keras masks into the
        # `*_mask` arguments; clear them as Keras MHA does.
        for tensor in (query, value, key):
            if tensor is not None:
                set_keras_mask(tensor, None)
        allowed = self._merged_mask(
            query, value, query_mask, value_mask, key_mask, attention_mask,
            use_causal_mask, cache, cache_update_index,
        )
        output_gate = self._gate_dense(query) if self._use_gate else None
        projected_query = self._query_dense(query)
        projected_key = projected_value = None
        if cache is None or cache_update_index is not None:
            projected_key = self._key_dense(key)
            projected_value = self._value_dense(value)
        projected_query, projected_key = self._transform_heads(
            projected_query, projected_key, state
        )
        if cache is not None:
            projected_key, projected_value, cache = self._read_cache(
                cache, cache_update_index, projected_key, projected_value
            )
        structure = self._logit_structure(projected_query, projected_key, allowed, state)
        context, weights = self._attend(
            projected_query,
            projected_key,
            projected_value,
            structure,
            training,
            return_attention_scores,
            state,
        )
        output = self._output(context, output_gate, state)
        output, query_mask = self._like_query(output, query_mask, original_query)
        if query_mask is not None:
            for tensor in output if isinstance(output, tuple) else (output,):
                set_keras_mask(tensor, query_mask)
        outputs = [output]
        if return_attention_scores:
            outputs.append(weights)
        outputs += self._extra_outputs(projected_query, projected_key, state)
        if cache is not None:
            outputs.append(cache)
        return outputs[0] if len(outputs) == 1 else tuple(outputs)

    # --------------------------------------------------------------- hooks

    def _as_sequences(self, query, value, key, query_mask, value_mask, key_mask):
        """The inputs and their masks as `[B, L, dim]` sequences (area
        attention flattens 2-D grids here; an `attention_mask` is then given
        over the flattened axes, and `_merged_mask` checks it)."""
        return query, value, key, query_mask, value_mask, key_mask

    def _like_query(self, output, query_mask, query):
        """`(output, query_mask)` given back the shape of the caller's query."""
        return output, query_mask

    def _check_inputs(self, query, value, key, state):
        """Validates the structure inputs in `state` (shapes, combinations)."""

    def _transform_heads(self, query, key, state):
        """Projected `(query [B, T, N, d], key [B, S, N, d] or None)`, changed.

        `key` is None when a cache is read as it is (it was transformed when
        it was written).
        """
        return query, key

    def _logit_structure(self, query, key, allowed, state):
        """The `LogitStructure` of the call; `allowed` is the merged mask."""
        return LogitStructure(allowed=allowed)

    def _attend(self, query, key, value, structure, training, need_weights, state):
        """`(context [B, T, N, dv], weights [B, N, T, S] float32 or None)`.

        A structure that is only a mask (no scale, bias or top-k) over
        batched keys is Keras MHA's attention: it goes through
        `_compute_attention`, Keras' documented override point, so that a
        subclass overriding it behaves as on `keras.layers.MultiHeadAttention`.
        Any other structure reaches the core directly; a subclass changes
        those paths through this hook or `_logit_structure`.
        """
        if _is_mask_only(structure) and len(key.shape) == 4:
            mask = structure.allowed
            if mask is not None and mask.shape[1] == 1:
                # Keras' `_compute_attention` takes `[B, T, S]` (a per-head
                # `[B, N, T, S]` mask also broadcasts there, as it stays).
                mask = ops.squeeze(mask, 1)
            return self._compute_attention(
                query, key, value, mask, training, need_weights
            )
        return self._core_attention(query, key, value, structure, training, need_weights)

    def _core_attention(self, query, key, value, structure, training, need_weights):
        """The one attention core (`_attention_core`) with this layer's
        key size, dropout and compute dtype."""
        return scaled_dot_product_attention(
            query,
            key,
            value,
            structure,
            key_dim=self._key_dim,
            dropout_layer=self._dropout_layer,
            training=training,
            compute_dtype=self.compute_dtype,
            need_weights=need_weights,
            flash_attention=self._flash_attention,
        )

    def _compute_attention(
        self,
        query,
        key,
        value,
        attention_mask=None,
        training=None,
        return_attention_scores=False,
        use_causal_mask=False,
    ):
        """Attention of projected heads, with Keras MHA's signature.

        `keras.layers.MultiHeadAttention` documents this method as its
        extension point; here it runs the library's core (float32 logits
        and softmax, zero weights for a row without an allowed key), and the
        plain path of every layer of the library calls it.

        Args:
            query: projected query `[B, T, N, key_dim]`.
            key: projected key `[B, S, N, key_dim]`.
            value: projected value `[B, S, N, value_dim]`.
            attention_mask: None or a boolean mask (True = may attend)
                `[B, T, S]`, or anything broadcastable to `[B, N, T, S]`
                once the missing axes are added in front of T.
            training: the dropout switch.
            return_attention_scores: whether the weights are needed.
            use_causal_mask: also mask the keys after each query (Keras
                MHA's `_compute_attention` honours it too).

        Returns:
            `(attention_output [B, T, N, value_dim], attention_scores)`:
            the weights `[B, N, T, S]` (float32), or None when they are not
            needed and the fused kernel ran.
        """
        if self._flash_attention and return_attention_scores:
            # Keras MHA's error, word for word.
            raise ValueError(
                "Returning attention scores is not supported when flash "
                "attention is enabled. Please disable flash attention to access"
                " attention scores."
            )
        mask = attention_mask
        if mask is not None:
            mask = ops.cast(mask, "bool")
            while len(mask.shape) < 4:
                mask = ops.expand_dims(mask, -3)
        if use_causal_mask:
            rows = ops.arange(ops.shape(query)[1], dtype="int32")
            cols = ops.arange(ops.shape(key)[1], dtype="int32")
            mask = and_masks(mask, (cols[None, :] <= rows[:, None])[None, None])
        return self._core_attention(
            query, key, value, LogitStructure(allowed=mask), training, return_attention_scores
        )

    def _output(self, context, output_gate, state):
        """The output projection of `context` (after Keras' output gate)."""
        if output_gate is not None:
            context = ops.multiply(context, output_gate)
        return self._output_dense(context)

    def _extra_outputs(self, query, key, state):
        """A list of outputs to return after the attention weights."""
        return []


def _is_mask_only(structure):
    """Whether a `LogitStructure` adds nothing to Keras MHA but a mask."""
    return structure.scale == 1.0 and structure.bias is None and structure.top_k is None


_CALL_DOC = (
    "Attention of `query` over `value`; see the class docstring (Call "
    "arguments, Returns)."
)


def _forward_call(self, *args, **kwargs):
    return StructuredMultiHeadAttention.call(self, *args, **kwargs)


def _call_with_signature(structure_inputs):
    """A `call` for a class whose keyword-only inputs are `structure_inputs`.

    The base `call` takes them as `**structure_inputs`; Keras reads a layer's
    call signature to route masks and arguments, so each class gets its own
    copy of `_forward_call` whose signature names them one by one. (A copy
    of a module-level function rather than a closure, so that TensorFlow's
    AutoGraph can read its source.)
    """
    call = types.FunctionType(
        _forward_call.__code__, _forward_call.__globals__, "call"
    )
    base = inspect.signature(StructuredMultiHeadAttention.call)
    parameters = [p for p in base.parameters.values() if p.kind != p.VAR_KEYWORD]
    parameters += [
        inspect.Parameter(name, inspect.Parameter.KEYWORD_ONLY, default=default)
        for name, default in structure_inputs.items()
    ]
    call.__signature__ = base.replace(parameters=parameters)
    call.__doc__ = _CALL_DOC
    return call


StructuredMultiHeadAttention.call.__signature__ = _call_with_signature({}).__signature__
