"""Positional multi-head attention (MCAN+PA).

Mao, Yang, Lin, Xuan and Liu, "Positional Attention Guided Transformer-like
Architecture for Visual Question Answering", IEEE TNNLS, 2022; the geometry
map follows Relation Networks (Hu et al., 2018, arXiv:1711.11575).

A raw *positional* attention map, computed from where the tokens are, is
fused with the raw *semantic* map of ordinary multi-head attention before
the softmax. Positions enter only the logits, never the values:

    A_sem = Q K^T / sqrt(d_h)                         (per head)
    A_pos = P_q W_q^p (P_k W_k^p)^T / sqrt(d_h)       position vectors
          = E(R(box_i, box_j)) W_G (+ b_G)            boxes (Eqs. 13-14)
    A     = softmax(fuse(A_sem, A_pos))

with three fusions (`fusion`):

* `"scaled_sum"` (default): `(A_sem + A_pos) / sqrt(2)`, the paper's Eq. 8.
* `"relation_network"`: `A_sem + log(max(A_pos, 1e-6))`, Relation Networks
  and the paper's PA* ablation: `softmax(w exp(A_sem))`,
  `w = max(A_pos, 1e-6)`.
* `"add"`: `A_sem + relu(A_pos)`, the released code's object
  self-attention (one `w_G` for all heads: `share_geometry_weights=True`).

(`relation_network` clips at 1e-6 rather than applying a ReLU first: the
same numbers, since `log(max(relu(x), 1e-6)) = log(max(x, 1e-6))`.)
See docs/positional_attention.md for what the released code does
differently from the paper; `positional_object_attention(variant=
"released")` reproduces it.
"""

import math

import keras
from keras import ops

from keras_structattn import checks
from keras_structattn.layers._attention_core import LogitStructure
from keras_structattn.layers.structured_attention import StructuredMultiHeadAttention
from keras_structattn.ops import box_geometry

# None: no positions (Keras MHA, with its weights and no others).
POSITION_TYPES = ("vectors", "boxes", None)
FUSIONS = ("scaled_sum", "relation_network", "add")
# Relation Networks' floor of the geometry weight before the log.
RELATION_NETWORK_FLOOR = 1e-6
_SQRT_HALF = 1.0 / math.sqrt(2.0)


@keras.saving.register_keras_serializable(package="keras_structattn")
class PositionalMultiHeadAttention(StructuredMultiHeadAttention):
    """Multi-head attention whose logits also see the tokens' positions.

    A drop-in for `keras.layers.MultiHeadAttention` with position inputs.
    With `position_type="vectors"` the call takes `query_positions` and
    `key_positions` (`[B, T, P]`, `[B, S, P]`: learned word-position
    embeddings, projected box features, ...), projected per head by their own
    `W_q^p`, `W_k^p` (`P -> num_heads x key_dim`, with bias iff `use_bias`)
    into the positional map `A_pos`. Positions that are the same for every
    example (word positions) can be given once, `[1, T, P]`: they are then
    projected, and `A_pos` computed, once per batch instead of once per
    example. With `position_type="boxes"` it takes
    `query_boxes` and `key_boxes` (`[B, T, 4]`, `[B, S, 4]`, `[x1, y1, x2,
    y2]`), and `A_pos` is the geometry map `E(R_ij) W_G + b_G` of Relation
    Networks: the relative geometry `R_ij` of the two boxes
    (`ops.box_geometry.relative_geometry`), its sinusoidal embedding `E`
    (`geometry_dim` channels) and a per-head (or shared) weight `W_G`. The
    embedding is float32 and never materialised whole
    (`ops.box_geometry.geometry_logits`). `A_pos` is fused with the semantic
    map as `fusion` says (module docstring). With `position_type=None`
    the layer takes no positions and builds no positional weights: it is
    `keras.layers.MultiHeadAttention`, with its weights (a Keras MHA's
    `get_weights()` loads into it and back).

    For self-attention, `key_positions` / `key_boxes` may be left out (the
    query's are used). A query row with no allowed key outputs zeros before
    the output projection (so the projection's bias), never NaN; logits and
    the softmax are float32 under mixed precision.

    With a zero positional map the layer is Keras MHA with the same weights,
    apart from the fusion: `"add"` exactly; `"relation_network"` exactly
    (a constant log 1e-6 on every logit); `"scaled_sum"` with the semantic
    logits divided by sqrt(2), i.e. Keras MHA whose query kernel and bias
    are scaled by 1 / sqrt(2).

    Args:
        num_heads: number of attention heads.
        key_dim: size of each head for query and key (also for the
            positional projections).
        position_type: `"vectors"` (default), `"boxes"` (above), or None
            (no positions: Keras MHA; the fusion and the position and
            `geometry_*` arguments are then unused). A `"vectors"` or
            `"boxes"` layer builds its positional weights whether or not a
            call gives positions, so that its weights do not depend on its
            calls (and the files saved with them keep loading).
        fusion: `"scaled_sum"` (Eq. 8), `"relation_network"` or `"add"`.
        position_dim: the width P of position vectors (default: the
            query's width). Vectors only.
        geometry_dim: the geometry embedding width (multiple of 8; 64 in
            both papers). Boxes only, like every `geometry_*` argument.
        geometry_wavelength, geometry_scale: the embedding's wavelength
            (1000) and scale (100).
        geometry_ordering: `"sin_cos"` (MCAN+PA's code) or `"per_feature"`
            (Relation Networks' code); the order of `W_G`'s rows.
        size_ratio: `"key_over_query"` (Eq. 14, `log(w_j / w_i)`) or
            `"query_over_key"` (the released code).
        box_size_offset: added to box widths and heights (1.0 = the
            released code's pixel "+1", 0 = boxes as they are).
        geometry_clip: floor of `|dx| / w_i` and `|dy| / h_i` (1e-3).
        share_geometry_weights: one `W_G` column for all heads (the
            released code) instead of one per head (the paper's Eq. 6).
        remat_geometry: recompute the geometry map in the backward pass
            instead of keeping its pairwise embedding (`[dim / 2, B Nq Nk]`
            float32). That saves memory where the embedding would be kept
            (TensorFlow without XLA); under XLA it saves nothing and costs
            time (measurements: docs/positional_attention.md).
        **kwargs: the other arguments of `keras.layers.MultiHeadAttention`
            (`value_dim`, `dropout`, `use_bias`, `output_shape`,
            initializers, regularizers, constraints, `use_gate`, `seed`,
            ...); the positional weights use the same initializers,
            regularizers and constraints. `attention_axes` must be None.

    Call arguments:
        query, value, key, query_mask, value_mask, key_mask, attention_mask,
        return_attention_scores, training, use_causal_mask: as in
            `keras.layers.MultiHeadAttention` (boolean masks, True = may
            attend).
        query_positions, key_positions: keyword-only; position vectors
            (vectors type), `[B or 1, T or S, P]`.
        query_boxes, key_boxes: keyword-only; boxes (boxes type),
            `[B or 1, T or S, 4]`, `[x1, y1, x2, y2]` with `x1 <= x2` and
            `y1 <= y2`, normalised or in pixels (the geometry is invariant
            to scale; `box_size_offset` is in the boxes' unit). With
            `box_size_offset=0` every box but all-zero padding rows must
            have a positive width and height (the geometry divides by
            them). Checked where the values are known (eager calls: a
            ValueError names the box); compiled code does not check, and
            takes sizes below 1e-6 as 1e-6, so reversed or zero-size boxes
            give finite, meaningless logits. With no positions at all the
            layer is `keras.layers.MultiHeadAttention` with the same
            weights (no positional map, no fusion).
        return_raw_scores: keyword-only; also return the raw maps
            `(A_sem, A_pos)`, each float32 `[B, num_heads, T, S]`, before
            fusion and masking (`A_pos` zeros without positions).
        cache, cache_update_index: keyword-only; as in
            `StructuredMultiHeadAttention` (positions then cover the query's
            new rows and the whole cache).

    Returns:
        `[B, T, output_dim]`; then the fused attention weights
        `[B, num_heads, T, S]` (float32) if `return_attention_scores`; then
        `A_sem` and `A_pos` if `return_raw_scores`; then the cache if one
        was given.
    """

    structure_inputs = {
        "query_positions": None,
        "key_positions": None,
        "query_boxes": None,
        "key_boxes": None,
        "return_raw_scores": False,
    }

    def __init__(
        self,
        num_heads,
        key_dim,
        position_type="vectors",
        fusion="scaled_sum",
        position_dim=None,
        geometry_dim=64,
        geometry_wavelength=1000.0,
        geometry_scale=100.0,
        geometry_ordering="sin_cos",
        size_ratio="key_over_query",
        box_size_offset=0.0,
        geometry_clip=1e-3,
        share_geometry_weights=False,
        remat_geometry=False,
        **kwargs,
    ):
        super().__init__(num_heads=num_heads, key_dim=key_dim, **kwargs)
        # Boxes must reach the geometry in float32: its angles are 100 x
        # log-ratios, so float16 coordinates would move them by tenths of a
        # radian. So this layer does not cast its inputs to the compute dtype
        # (its dense sublayers still cast theirs), and its geometry weights
        # are not autocast either. Without positions it casts as Keras MHA.
        self.autocast = position_type is None
        checks.one_of("position_type", position_type, POSITION_TYPES)
        checks.one_of("fusion", fusion, FUSIONS)
        if position_dim is not None:
            checks.positive_int("position_dim", position_dim)
        box_geometry.check_embedding_options(
            geometry_dim, geometry_wavelength, geometry_scale, geometry_ordering
        )
        box_geometry.check_geometry_options(size_ratio, box_size_offset, geometry_clip)
        checks.boolean("share_geometry_weights", share_geometry_weights)
        checks.boolean("remat_geometry", remat_geometry)
        if share_geometry_weights and position_type != "boxes":
            raise ValueError(
                "Argument `share_geometry_weights=True` needs position_type='boxes' "
                f"(it shares the geometry weight W_G). Received: position_type={position_type!r}"
            )
        if position_dim is not None and position_type != "vectors":
            raise ValueError(
                "Argument `position_dim` is the width of position vectors and needs "
                f"position_type='vectors'. Received: position_type={position_type!r}"
            )
        self._position_type = position_type
        self._fusion = fusion
        self._position_dim = position_dim
        self._geometry = dict(
            geometry_dim=geometry_dim,
            geometry_wavelength=float(geometry_wavelength),
            geometry_scale=float(geometry_scale),
            geometry_ordering=geometry_ordering,
            size_ratio=size_ratio,
            box_size_offset=float(box_size_offset),
            geometry_clip=float(geometry_clip),
            share_geometry_weights=share_geometry_weights,
            remat_geometry=remat_geometry,
        )

    @property
    def position_type(self):
        return self._position_type

    @property
    def fusion(self):
        return self._fusion

    def get_config(self):
        config = super().get_config()
        config.update(
            position_type=self._position_type,
            fusion=self._fusion,
            position_dim=self._position_dim,
            **self._geometry,
        )
        return config

    def build(self, query_shape, value_shape, key_shape=None):
        super().build(query_shape, value_shape, key_shape)
        if self._position_type is None:
            return
        # After Keras MHA's weights, in this order, as every version of the
        # layer has built them (files saved with positions keep loading).
        common = self._get_common_kwargs_for_sublayer()
        if self._position_type == "vectors":
            width = self._position_dim or query_shape[-1]
            for name in ("position_query", "position_key"):
                dense = keras.layers.EinsumDense(
                    "btp,pnh->btnh",
                    output_shape=(None, self._num_heads, self._key_dim),
                    bias_axes="nh" if self._use_bias else None,
                    name=name,
                    **common,
                )
                dense.build((None, None, width))
                setattr(self, f"_{name}_dense", dense)
            return
        # Float32 variables (the variable dtype), like the geometry itself.
        heads = 1 if self._geometry["share_geometry_weights"] else self._num_heads
        self.geometry_kernel = self.add_weight(
            name="geometry_kernel",
            shape=(self._geometry["geometry_dim"], heads),
            initializer=common["kernel_initializer"],
            regularizer=common["kernel_regularizer"],
            constraint=common["kernel_constraint"],
            autocast=False,
        )
        self.geometry_bias = None
        if self._use_bias:
            self.geometry_bias = self.add_weight(
                name="geometry_bias",
                shape=(heads,),
                initializer=common["bias_initializer"],
                regularizer=common["bias_regularizer"],
                constraint=common["bias_constraint"],
                autocast=False,
            )

    def _check_inputs(self, query, value, key, state):
        state["positions"] = self._positions(
            query,
            value if value is not None else key,
            *(state[name] for name in ("query_positions", "key_positions",
                                       "query_boxes", "key_boxes")),
        )

    def _logit_structure(self, query, key, allowed, state):
        positional = None
        if state["positions"] is not None:
            positional = self._positional_logits(*state["positions"])  # [B, N or 1, T, S]
        state["positional"] = positional
        if positional is None:
            return LogitStructure(allowed=allowed)
        scale, bias = self._fuse(positional)
        return LogitStructure(allowed=allowed, scale=scale, bias=bias)

    def _extra_outputs(self, query, key, state):
        if not state["return_raw_scores"]:
            return []
        scaled = ops.multiply(query, ops.cast(self._inverse_sqrt_key_dim, query.dtype))
        semantic = ops.cast(ops.einsum(self._dot_product_equation, key, scaled), "float32")
        positional = state["positional"]
        if positional is None:
            positional = ops.zeros_like(semantic)
        return [semantic, ops.broadcast_to(positional, ops.shape(semantic))]

    def _positions(self, query, value, query_positions, key_positions, query_boxes, key_boxes):
        """Checks the position inputs; returns `(query's, key's)`, or None
        when none is given (then the layer is plain multi-head attention)."""
        vectors = self._position_type == "vectors"
        names = ("query_positions", "key_positions", "query_boxes", "key_boxes")
        inputs = (query_positions, key_positions, query_boxes, key_boxes)
        if self._position_type is None:
            for name, tensor in zip(names, inputs):
                if tensor is not None:
                    raise ValueError(
                        f"Argument `{name}` needs position_type='vectors' or 'boxes': "
                        "this layer has position_type=None (no positions, no "
                        "positional weights)."
                    )
            return None
        wanted, other = (names[:2], names[2:]) if vectors else (names[2:], names[:2])
        given = dict(zip(names, inputs))
        for name in other:
            if given[name] is not None:
                raise ValueError(
                    f"Argument `{name}` does not apply to position_type="
                    f"{self._position_type!r}, which takes `{wanted[0]}` and `{wanted[1]}`."
                )
        query_pos, key_pos = given[wanted[0]], given[wanted[1]]
        if query_pos is None:
            if key_pos is not None:
                raise ValueError(
                    f"Argument `{wanted[1]}` needs `{wanted[0]}`: positions of the queries "
                    "and the keys together, or none (plain multi-head attention)."
                )
            return None
        key_name = wanted[1]
        if key_pos is None:
            key_pos, key_name = query_pos, wanted[0]
        for name, tensor, like, what in (
            (wanted[0], query_pos, query, "query"),
            (key_name, key_pos, value, "key"),
        ):
            if len(tensor.shape) != 3 or (not vectors and tensor.shape[-1] != 4):
                raise ValueError(
                    f"Argument `{name}` must be {'[B, L, P]' if vectors else 'boxes [B, L, 4]'}. "
                    f"Received: shape {tuple(tensor.shape)}"
                )
            lengths = (tensor.shape[1], like.shape[1])
            if None not in lengths and lengths[0] != lengths[1]:
                raise ValueError(
                    f"Argument `{name}` must have one row per {what} token. Received: "
                    f"shape {tuple(tensor.shape)} for {what}s of shape {tuple(like.shape)}"
                )
            batches = (tensor.shape[0], like.shape[0])
            if None not in batches and batches[0] not in (1, batches[1]):
                raise ValueError(
                    f"Argument `{name}` must have the {what}s' batch size {batches[1]} or 1 "
                    f"(the same positions for every example). Received: shape "
                    f"{tuple(tensor.shape)}"
                )
            # (Key boxes left out are the query's, checked once.) Here rather
            # than in the geometry alone: under JAX, `remat_geometry` traces
            # the geometry even in eager calls.
            if not vectors and (what == "query" or key_pos is not query_pos):
                box_geometry.check_box_values(name, tensor, self._geometry["box_size_offset"])
        return query_pos, key_pos

    def _positional_logits(self, query_pos, key_pos):
        """The raw positional map, float32 `[B, N or 1, T, S]`."""
        if self._position_type == "vectors":
            query_pos = self._position_query_dense(query_pos)
            key_pos = self._position_key_dense(key_pos)
            query_pos = ops.multiply(
                query_pos, ops.cast(self._inverse_sqrt_key_dim, query_pos.dtype)
            )
            return ops.cast(ops.einsum(self._dot_product_equation, key_pos, query_pos), "float32")
        geometry = self._geometry

        def logits(query_boxes, key_boxes, kernel, bias):
            return box_geometry.geometry_logits(
                query_boxes,
                key_boxes,
                kernel,
                bias,
                wavelength=geometry["geometry_wavelength"],
                scale=geometry["geometry_scale"],
                ordering=geometry["geometry_ordering"],
                size_ratio=geometry["size_ratio"],
                size_offset=geometry["box_size_offset"],
                clip=geometry["geometry_clip"],
            )

        kernel = ops.convert_to_tensor(self.geometry_kernel)
        bias = ops.zeros((kernel.shape[-1],)) if self.geometry_bias is None else (
            ops.convert_to_tensor(self.geometry_bias)
        )
        if self._geometry["remat_geometry"]:
            logits = keras.remat(logits)
        return logits(query_pos, key_pos, kernel, bias)

    def _fuse(self, positional):
        """`(logit_scale, logit_bias)`: the fused logits are
        `logit_scale * A_sem + logit_bias`."""
        if self._fusion == "scaled_sum":
            return _SQRT_HALF, positional * _SQRT_HALF
        if self._fusion == "relation_network":
            return 1.0, ops.log(ops.maximum(positional, RELATION_NETWORK_FLOOR))
        return 1.0, ops.relu(positional)


def positional_word_attention(num_heads, key_dim, **kwargs):
    """PWA: word self-attention with learned word-position vectors (Eq. 8).

    Call it as `layer(words, words, query_positions=P)` with `P` the
    position embeddings of the words (MCAN+PA: `keras.layers.Embedding(14,
    d)` of the indices 0..13), best given once as `[1, L, d]` (the same for
    every sentence; computed once per batch).
    """
    kwargs.setdefault("position_type", "vectors")
    kwargs.setdefault("fusion", "scaled_sum")
    return PositionalMultiHeadAttention(num_heads, key_dim, **kwargs)


def positional_multimodal_attention(num_heads, key_dim, **kwargs):
    """PMA: objects (queries) attend to words, with box and word positions.

    Call it as `layer(objects, words, query_positions=B, key_positions=P)`
    with `B` the projected 5-d box features
    (`Dense(d)(ops.box_geometry.box_position_features(boxes, image_size))`)
    and `P` the word-position embeddings.
    """
    kwargs.setdefault("position_type", "vectors")
    kwargs.setdefault("fusion", "scaled_sum")
    return PositionalMultiHeadAttention(num_heads, key_dim, **kwargs)


# The object self-attention variants: arguments of the layer.
POA_VARIANTS = {
    # The paper: Eqs. 13-14 per head (Eq. 6), fused by Eq. 8.
    "paper": dict(fusion="scaled_sum", size_ratio="key_over_query", box_size_offset=0.0),
    # waizei/PositionalMCAN: one ReLU w_G for all heads added to the logits,
    # the code's query/key size ratio and pixel "+1" on normalised boxes.
    "released": dict(
        fusion="add",
        share_geometry_weights=True,
        size_ratio="query_over_key",
        box_size_offset=1.0,
    ),
    # Relation Networks (and the paper's PA* ablation): per-head
    # log(max(w_G, 1e-6)) + A_sem, in that code's channel order.
    "relation_network": dict(
        fusion="relation_network",
        size_ratio="query_over_key",
        geometry_ordering="per_feature",
    ),
}


def positional_object_attention(num_heads, key_dim, variant="paper", **kwargs):
    """POA: object self-attention with the box-geometry map.

    Call it as `layer(objects, objects, query_boxes=boxes)`.

    Args:
        num_heads, key_dim: as in the layer.
        variant: `"paper"`, `"released"` or `"relation_network"`
            (`POA_VARIANTS`); Relation Networks' pixel "+1" is left out
            (pass `box_size_offset=1.0` for pixel boxes).
        **kwargs: layer arguments, overriding the variant's.
    """
    checks.one_of("variant", variant, tuple(POA_VARIANTS))
    arguments = dict(POA_VARIANTS[variant], position_type="boxes")
    arguments.update(kwargs)
    return PositionalMultiHeadAttention(num_heads, key_dim, **arguments)
