"""M4C and SA-M4C for TextVQA: a multimodal transformer that reads and copies.

M4C (Hu et al., 2020, "Iterative Answer Prediction with Pointer-Augmented
Multimodal Transformers for TextVQA", CVPR, arXiv:1911.06258) and SA-M4C
(Kant et al., 2020, "Spatially Aware Multimodal Transformers for TextVQA",
ECCV, arXiv:2007.12146), as their released code wires them (mmf
`models/textvqa/m4c.py`, `yashkant/sam-textvqa`); docs/textvqa.md lists the
choices.

* Question: word embedding + learned positions, LayerNorm, dropout, then
  `num_text_layers` BERT layers over the question alone (M4C fine-tunes
  the first 3 layers of BERT-base; here they are trained from scratch,
  docs/textvqa.md).
* Objects (Sec. 3.1, Eq. 1): `LN(W_1 x^fr) + LN(W_2 x^b)`, dropout, with
  `x^fr` the L2-normalised detector feature and `x^b` the normalised box.
* OCR tokens (Eq. 2): `LN(W_3 x^ft + W_4 x^p + W_5 x^fr) + LN(W_6 x^b)`:
  one Dense over the host-built concatenation `[FastText; PHOC;
  appearance]` (each part L2-normalised by the input pipeline,
  `keras_structattn.tasks.textvqa.textvqa`), dropout.
* Multimodal transformer over `[question; objects; OCR; previous
  predictions]` (Sec. 3.2) with M4C's mask: every position sees the real
  question, object and OCR tokens; decoder position t also sees decoder
  positions <= t. BERT layers: post-norm, GELU, dropout 0.1. SA-M4C keeps
  `num_layers` such layers and stacks `num_spatial_layers` layers whose
  attention is `GraphMultiHeadAttention` over the spatial graph of the
  objects and OCR boxes (the `relations` input, built on the host by
  `keras_structattn.ops.textvqa_relations_numpy`; paper: 2 + 4 layers,
  context c = 3).
* Outputs at each of `num_steps` steps (Sec. 3.3, Eqs. 3-4): the vocabulary
  classifier `W z_t + b` and the dynamic pointer network
  `(W_q z_t + b_q)^T (W_k z_n + b_k) / sqrt(d)` over the OCR outputs
  `z_n` (padded OCR tokens at -10000): float32 scores `[B, S, V + T]`.
* Previous predictions (Sec. 3.3): a vocabulary word's embedding is its
  classifier row (tied) through a LayerNorm; a copied token's is its OCR
  input embedding through another; plus `LN(position + type)` (type 0
  vocabulary, 1 OCR); dropout.
* Loss: M4C's masked decoding BCE (`m4c_loss`): BCE over the `V + T`
  scores at every step, times the step mask, summed, divided by the
  number of unmasked steps (at least 1).

Decoding (`decode`, which `predict` runs on inputs without `previous`):
greedy, iteratively: the M4C mask makes the question, object and OCR
positions independent of the decoder, so they run once, and each step
runs one decoder position through every layer against cached keys and
values (the attention core's cache), which
gives the full teacher-forced pass's scores on the argmax path (tested).

Hyper-parameter sets (`models/textvqa/hparams_sets.py`,
`model_type="textvqa"`): `m4c_base` (Hu et al.'s 4 layers), `m4c_6n_base`
(Kant et al.'s 6-layer baseline), `sa_m4c_base`, and their Shapes world sizes
`m4c_tiny`, `m4c_6n_tiny`, `sa_m4c_tiny`.
"""

import keras
import numpy as np
from keras import ops

from keras_structattn import checks
from keras_structattn.layers.blocks import BlockBase
from keras_structattn.layers.blocks import check_sizes
from keras_structattn.layers.blocks import sub_seed
from keras_structattn.layers.dropout import Dropout
from keras_structattn.layers.graph_attention import GraphMultiHeadAttention
from keras_structattn.layers.structured_attention import StructuredMultiHeadAttention
from models.textvqa import hparams_sets
from models.textvqa.base import TextVQAModel
from models.textvqa.hparams_sets import ARCHITECTURES  # noqa: F401 (re-exported)
from models.textvqa.hparams_sets import MODEL_TYPE  # noqa: F401 (the recipe reads it here)

BOX_DIM = 4
# The answer vocabulary's reserved indices (mmf's M4C answer processor).
PAD, BOS, EOS = 0, 1, 2
# mmf's additive mask of padded OCR tokens in the pointer scores.
_OCR_PADDING_SCORE = -10000.0


@keras.saving.register_keras_serializable(package="keras_structattn")
class M4CLayer(BlockBase):
    """One BERT layer of the multimodal transformer, plain or spatially aware.

    Post-norm: `x = LN(x + Dropout(Att(x)))`, `x = LN(x + Dropout(FFN(x)))`
    with a GELU feed-forward (BERT; Devlin et al., 2019, arXiv:1810.04805).
    With `spatial=True` the attention is `GraphMultiHeadAttention` (SA-M4C,
    Kant et al., 2020, arXiv:2007.12146, Sec. 3.2): each of the 12 heads
    follows its own spatial relations (context `context_size`).

    Args:
        hidden_size, filter_size, num_heads: d, the FFN width, heads.
        spatial: use the relation graph (then `num_heads` must be 12, one
            head per relation, unless `head_relations` is given).
        context_size: SA-M4C's c (3).
        head_relations: optional explicit per-head label lists.
        attention_dropout, layer_dropout, layer_norm_epsilon, seed: as
            `BlockBase`.
        **kwargs: base layer arguments.

    Call arguments:
        x: `[B, L, d]`.
        attention_mask: bool `[B, L, L]` (True = may attend).
        relations: int `[B, L, L]` labels (spatial layers only; see
            `keras_structattn.ops.textvqa_relations`).
        training: whether dropout is active.

    Returns:
        `[B, L, d]`.
    """

    normalize_first = False

    def __init__(self, hidden_size, filter_size, num_heads, *, spatial=False, context_size=3,
                 head_relations=None, **kwargs):
        super().__init__(hidden_size, filter_size, num_heads, **kwargs)
        self.spatial = checks.boolean("spatial", spatial)
        self.context_size = context_size
        self.head_relations = head_relations
        common = dict(num_heads=num_heads, key_dim=hidden_size // num_heads,
                      dropout=self.attention_dropout, seed=self._next_seed(),
                      name="attention", dtype=self.dtype_policy)
        if spatial:
            self.attention = GraphMultiHeadAttention(
                context_size=context_size, head_relations=head_relations, **common)
        else:
            self.attention = StructuredMultiHeadAttention(**common)
        self.attention_residual = self._residual("attention_residual")
        self.ffn = self._feed_forward("ffn", activation="gelu")
        self.ffn_residual = self._residual("ffn_residual")

    def build(self, input_shape):
        self.attention.build(input_shape, input_shape)
        self.attention_residual.build(input_shape)
        self.ffn.build(input_shape)
        self.ffn_residual.build(input_shape)

    def _structure(self, relations):
        if not self.spatial:
            return {}
        if relations is None:
            raise ValueError("A spatial M4CLayer needs `relations` (int labels [B, L, L]).")
        return {"relations": relations}

    def _after_attention(self, x, y, training):
        x = self.attention_residual(x, y, training=training)
        y = self.ffn(self.ffn_residual.sublayer_input(x), training=training)
        return self.ffn_residual(x, y, training=training)

    def call(self, x, attention_mask=None, relations=None, training=None,
             return_attention_scores=False):
        result = self.attention(
            x, x, attention_mask=attention_mask, training=training,
            return_attention_scores=return_attention_scores, **self._structure(relations))
        y, weights = result if return_attention_scores else (result, None)
        x = self._after_attention(x, y, training)
        return (x, weights) if return_attention_scores else x

    def memory_cache(self, x, decode_length):
        """The cache of a decoding: the projected keys and values of the
        positions before the decoder (`x`, this layer's input there), then
        `decode_length` empty slots."""
        memory = self.attention.project_memory(x)
        empty = self.attention.empty_cache(ops.shape(x)[0], decode_length, memory.dtype)
        return ops.concatenate([memory, empty], axis=2)

    def call_cached(self, x, cache, index, attention_mask, relations=None):
        """One decoder position `x` `[B, 1, d]` at sequence position `index`,
        against `cache`; the mask and relations are that position's rows
        `[B, 1, L]`. Returns `(y, cache)`."""
        y, cache = self.attention(
            x, x, attention_mask=attention_mask, cache=cache, cache_update_index=index,
            **self._structure(relations))
        return self._after_attention(x, y, False), cache

    def get_config(self):
        config = super().get_config()
        config.update(spatial=self.spatial, context_size=self.context_size,
                      head_relations=self.head_relations)
        return config


def m4c_attention_mask(question_mask, object_mask, ocr_mask, num_steps):
    """M4C's attention mask over `[question; objects; OCR; decoder]`.

    Every query may attend to the real question, object and OCR tokens;
    decoder queries also to decoder positions up to their own (mmf's
    `_get_mask`); no other query sees the decoder.

    Args:
        question_mask, object_mask, ocr_mask: bool `[B, Lq]`, `[B, No]`,
            `[B, T]`.
        num_steps: S, the decoding steps.

    Returns:
        bool `[B, L, L]`, `L = Lq + No + T + S`.
    """
    encoder = ops.concatenate([ops.cast(m, "bool") for m in
                               (question_mask, object_mask, ocr_mask)], axis=1)
    length_encoder = encoder.shape[1]
    length = length_encoder + num_steps
    batch = ops.shape(encoder)[0]
    rows = np.arange(length)[:, None]
    cols = np.arange(length)[None, :]
    decoder_part = (rows >= length_encoder) & (cols >= length_encoder) & (cols <= rows)
    keys = ops.concatenate([encoder, ops.zeros((batch, num_steps), "bool")], axis=1)
    keys = ops.broadcast_to(keys[:, None, :], (batch, length, length))
    return ops.logical_or(keys, ops.convert_to_tensor(decoder_part)[None])


def m4c_loss(targets, scores, loss_mask):
    """M4C's decoding loss (mmf's `M4CDecodingBCEWithMaskLoss`).

    Args:
        targets: float `[B, S, V + T]` soft targets.
        scores: float `[B, S, V + T]` logits.
        loss_mask: float `[B, S]`, 1 at the steps that count.

    Returns:
        float32 scalar: `sum(BCE * mask) / max(sum(mask), 1)`.
    """
    targets = ops.cast(targets, "float32")
    scores = ops.cast(scores, "float32")
    mask = ops.cast(loss_mask, "float32")
    # Stable BCE with logits: max(x, 0) - x z + log(1 + exp(-|x|)).
    losses = (ops.relu(scores) - scores * targets
              + ops.log1p(ops.exp(-ops.abs(scores))))
    total = ops.sum(losses * mask[:, :, None])
    return total / ops.maximum(ops.sum(mask), 1.0)


@keras.saving.register_keras_serializable(package="keras_structattn")
class M4C(TextVQAModel):
    """M4C, or SA-M4C with `num_spatial_layers > 0`; see the module docstring.

    Args:
        question_vocab_size: question word ids (0 = padding).
        answer_vocab_size: V, the answer vocabulary (`<pad>` 0, `<s>` 1,
            `</s>` 2, ...).
        max_ocr: T, the OCR tokens per image (50).
        num_steps: S, the decoding steps (12).
        hidden_size, num_heads, filter_size: d, heads, FFN width (768, 12,
            3072).
        num_text_layers: the question encoder's layers (3).
        num_layers: plain multimodal layers (M4C 4; SA-M4C 2).
        num_spatial_layers: spatially aware layers on top (SA-M4C 4).
        context_size: SA-M4C's c (3).
        max_question_length: the position table's length (20).
        dropout: hidden and attention dropout (0.1).
        layer_norm_epsilon: 1e-12 (BERT's).
        seed: int seed of the dropouts.
        **kwargs: `keras.Model` arguments.

    Call arguments:
        inputs: a dict: `question` int `[B, Lq]` (0 = padding); `objects`
            `[B, No, Co]`, `object_boxes` `[B, No, 4]`, `object_mask` bool
            `[B, No]`; `ocr` `[B, T, Ct]` (the host-built token features),
            `ocr_boxes` `[B, T, 4]`, `ocr_mask` bool `[B, T]`; `previous`
            int `[B, S]` (the previous prediction at each step, `<s>`
            first; index `V + n` = OCR token n); SA-M4C also `relations`
            int `[B, L, L]` (`L = Lq + No + T + S`). Without `previous`
            the model decodes (`decode`): what `predict` runs.
        training: whether dropout is active.

    Returns:
        float32 scores `[B, S, V + T]`; without `previous`, the greedy
        decoding's int32 indices `[B, S]`.
    """

    # The constructor's hyper-parameters, read from an hparams set, and
    # their defaults (M4C's).
    HPARAMS = hparams_sets.M4C

    def __init__(self, question_vocab_size, answer_vocab_size, *, seed=None, **kwargs):
        hp = self._take_hparams(kwargs)
        super().__init__(**kwargs)
        check_sizes(hp.hidden_size, hp.num_heads, hp.filter_size, dropout=hp.dropout)
        for name, value in (("question_vocab_size", question_vocab_size),
                            ("max_ocr", hp.max_ocr), ("num_steps", hp.num_steps),
                            ("num_text_layers", hp.num_text_layers),
                            ("max_question_length", hp.max_question_length)):
            checks.positive_int(name, value)
        checks.non_negative_int("num_layers", hp.num_layers)
        checks.non_negative_int("num_spatial_layers", hp.num_spatial_layers)
        if answer_vocab_size <= EOS:
            raise ValueError("Argument `answer_vocab_size` must count <pad>, <s> and </s> "
                             f"(> 2). Received: answer_vocab_size={answer_vocab_size}")
        if hp.num_layers + hp.num_spatial_layers < 1:
            raise ValueError("The multimodal transformer needs at least one layer. Received: "
                             f"num_layers={hp.num_layers}, "
                             f"num_spatial_layers={hp.num_spatial_layers}")
        hp.dropout = float(hp.dropout)
        hp.layer_norm_epsilon = float(hp.layer_norm_epsilon)
        self._config = dict(question_vocab_size=question_vocab_size,
                            answer_vocab_size=answer_vocab_size, **vars(hp), seed=seed)
        self.answer_vocab_size = answer_vocab_size
        self.max_ocr = hp.max_ocr
        self.num_steps = hp.num_steps
        self.hidden_size = hp.hidden_size
        self.max_question_length = hp.max_question_length
        self.spatial = hp.num_spatial_layers > 0
        seeds = iter(range(1000))

        def next_seed():
            return sub_seed(seed, next(seeds))

        policy = dict(dtype=self.dtype_policy)
        epsilon = hp.layer_norm_epsilon

        def norm(name):
            return keras.layers.LayerNormalization(epsilon=epsilon, name=name, **policy)

        def dense(name, units=hp.hidden_size, **extra):
            return keras.layers.Dense(units, name=name, **policy, **extra)

        layer = dict(attention_dropout=hp.dropout, layer_dropout=hp.dropout, relu_dropout=0.0,
                     layer_norm_epsilon=epsilon, **policy)
        # Question encoder (BERT's embeddings and layers, from scratch).
        self.word_embedding = keras.layers.Embedding(
            question_vocab_size, hp.hidden_size, name="word_embedding", **policy)
        self.word_positions = keras.layers.Embedding(
            hp.max_question_length, hp.hidden_size, name="word_positions", **policy)
        self.word_norm = norm("word_norm")
        self.word_dropout = Dropout(hp.dropout, seed=next_seed(), **policy)
        self.text_layers = [M4CLayer(hp.hidden_size, hp.filter_size, hp.num_heads, seed=next_seed(),
                                     name=f"text_{i}", **layer)
                            for i in range(hp.num_text_layers)]
        # Objects and OCR tokens (Eqs. 1-2).
        self.object_projection, self.object_norm = dense("object_projection"), norm("object_norm")
        self.object_box_projection = dense("object_box_projection")
        self.object_box_norm = norm("object_box_norm")
        self.object_dropout = Dropout(hp.dropout, seed=next_seed(), **policy)
        self.ocr_projection, self.ocr_norm = dense("ocr_projection"), norm("ocr_norm")
        self.ocr_box_projection = dense("ocr_box_projection")
        self.ocr_box_norm = norm("ocr_box_norm")
        self.ocr_dropout = Dropout(hp.dropout, seed=next_seed(), **policy)
        # Previous predictions.
        self.answer_norm = norm("answer_embedding_norm")
        self.copy_norm = norm("copy_embedding_norm")
        self.step_positions = keras.layers.Embedding(
            hp.num_steps, hp.hidden_size, name="step_positions", **policy)
        self.step_types = keras.layers.Embedding(2, hp.hidden_size, name="step_types", **policy)
        self.step_norm = norm("step_norm")
        self.step_dropout = Dropout(hp.dropout, seed=next_seed(), **policy)
        # The multimodal transformer.
        self.mmt_layers = [
            M4CLayer(hp.hidden_size, hp.filter_size, hp.num_heads, spatial=i >= hp.num_layers,
                     context_size=hp.context_size, seed=next_seed(), name=f"mmt_{i}", **layer)
            for i in range(hp.num_layers + hp.num_spatial_layers)]
        # Outputs.
        self.classifier = dense("classifier", answer_vocab_size)
        self.pointer_query = dense("pointer_query")
        self.pointer_key = dense("pointer_key")

    # -------------------------------------------------------------- Keras

    def build(self, input_shape):
        shapes = {key: tuple(input_shape[key]) for key in input_shape}
        batch, length = shapes["question"]
        if length is not None and length > self.max_question_length:
            raise ValueError(f"Questions of {length} tokens are longer than "
                             f"max_question_length={self.max_question_length}")
        for key in ("objects", "ocr"):
            if len(shapes[key]) != 3 or shapes[key][-1] is None:
                raise ValueError(f"M4C takes {key} [B, N, C] with a known C. "
                                 f"Received: {key}.shape={shapes[key]}")
        if shapes["ocr"][1] not in (None, self.max_ocr):
            raise ValueError(f"M4C takes ocr [B, max_ocr={self.max_ocr}, C]. "
                             f"Received: ocr.shape={shapes['ocr']}")
        d = self.hidden_size
        words = (batch, length, d)
        self.word_embedding.build((batch, length))
        self.word_positions.build((length,))
        self.word_norm.build(words)
        for layer in self.text_layers:
            layer.build(words)
        for kind, shape in (("object", shapes["objects"]), ("ocr", shapes["ocr"])):
            hidden = shape[:2] + (d,)
            getattr(self, f"{kind}_projection").build(shape)
            getattr(self, f"{kind}_norm").build(hidden)
            getattr(self, f"{kind}_box_projection").build(shape[:2] + (BOX_DIM,))
            getattr(self, f"{kind}_box_norm").build(hidden)
        steps = (batch, self.num_steps, d)
        self.answer_norm.build((self.answer_vocab_size, d))
        self.copy_norm.build(shapes["ocr"][:2] + (d,))
        self.step_positions.build((self.num_steps,))
        self.step_types.build((batch, self.num_steps))
        self.step_norm.build(steps)
        for layer in self.mmt_layers:
            layer.build((batch, None, d))
        self.classifier.build(steps)
        self.pointer_query.build(steps)
        self.pointer_key.build(shapes["ocr"][:2] + (d,))
        self.built = True

    # ---------------------------------------------------------- embedding

    def _embed_question(self, question, training):
        mask = ops.not_equal(question, 0)
        length = question.shape[1]
        x = self.word_embedding(question) + self.word_positions(ops.arange(length))[None]
        x = self.word_dropout(self.word_norm(x), training=training)
        key_mask = ops.broadcast_to(mask[:, None, :], (ops.shape(question)[0], length, length))
        for layer in self.text_layers:
            x = layer(x, attention_mask=key_mask, training=training)
        return x, mask

    def _embed_boxes(self, kind, features, boxes, training):
        x = getattr(self, f"{kind}_norm")(getattr(self, f"{kind}_projection")(features))
        b = getattr(self, f"{kind}_box_norm")(getattr(self, f"{kind}_box_projection")(boxes))
        return getattr(self, f"{kind}_dropout")(x + b, training=training)

    def encoder_inputs(self, inputs, training=None):
        """`(x, masks, ocr_embedding)`: the question, object and OCR
        embeddings side by side `[B, Lq + No + T, d]`, their masks
        `(question, objects, OCR)` and the OCR input embedding (what a
        copied token's previous-prediction embedding reads)."""
        question, question_mask = self._embed_question(inputs["question"], training)
        # The detector features are L2-normalised (M4C's `F.normalize`),
        # in float32; the OCR parts come normalised from the pipeline.
        objects = ops.cast(inputs["objects"], "float32")
        objects = objects / ops.maximum(
            ops.sqrt(ops.sum(objects * objects, axis=-1, keepdims=True)), 1e-12)
        objects = self._embed_boxes("object", objects, inputs["object_boxes"], training)
        ocr = self._embed_boxes("ocr", inputs["ocr"], inputs["ocr_boxes"], training)
        masks = (question_mask, ops.cast(inputs["object_mask"], "bool"),
                 ops.cast(inputs["ocr_mask"], "bool"))
        x = ops.concatenate([question, ops.cast(objects, question.dtype),
                             ops.cast(ocr, question.dtype)], axis=1)
        return x, masks, ocr

    def embed_previous(self, previous, ocr_embedding, positions, training=None):
        """The embeddings of previous predictions `[B, s]` at step
        `positions` (`[s]` ints): tied classifier rows for vocabulary
        words, the OCR input embedding for copied tokens, plus
        `LN(position + type)`."""
        vocab = self.answer_vocab_size
        answers = self.answer_norm(ops.transpose(self.classifier.kernel))  # [V, d]
        copies = self.copy_norm(ocr_embedding)  # [B, T, d]
        is_copy = ops.greater_equal(previous, vocab)
        word = ops.take(answers, ops.clip(previous, 0, vocab - 1), axis=0)
        token = ops.clip(previous - vocab, 0, self.max_ocr - 1)
        copied = ops.take_along_axis(copies, token[:, :, None], axis=1)
        raw = ops.where(is_copy[:, :, None], ops.cast(copied, word.dtype), word)
        extra = self.step_positions(positions)[None] + self.step_types(
            ops.cast(is_copy, "int32"))
        return self.step_dropout(raw + self.step_norm(extra), training=training)

    def _scores(self, decoded, ocr_outputs, ocr_mask):
        """float32 `[B, s, V + T]`: vocabulary scores, then pointer scores."""
        vocab = ops.cast(self.classifier(decoded), "float32")
        query = ops.cast(self.pointer_query(decoded), "float32")
        key = ops.cast(self.pointer_key(ocr_outputs), "float32")
        pointer = ops.einsum("bsd,btd->bst", query, key) / float(np.sqrt(self.hidden_size))
        pointer = pointer + (1.0 - ops.cast(ocr_mask, "float32"))[:, None, :] * _OCR_PADDING_SCORE
        return ops.concatenate([vocab, pointer], axis=-1)

    def _relations(self, inputs):
        if not self.spatial:
            return None
        if "relations" not in inputs:
            raise ValueError("SA-M4C needs `relations` in its inputs (int labels [B, L, L]; "
                             "keras_structattn.ops.textvqa_relations_numpy).")
        return inputs["relations"]

    # --------------------------------------------------------------- call

    def call(self, inputs, training=None, return_attention_scores=False):
        if "previous" not in inputs:  # inference: `predict` decodes
            return self.decode(inputs)
        x, masks, ocr_embedding = self.encoder_inputs(inputs, training)
        steps = self.embed_previous(inputs["previous"], ocr_embedding,
                                    ops.arange(self.num_steps), training)
        x = ops.concatenate([x, ops.cast(steps, x.dtype)], axis=1)
        mask = m4c_attention_mask(*masks, self.num_steps)
        relations = self._relations(inputs)
        weights = []
        for layer in self.mmt_layers:
            if return_attention_scores:
                x, w = layer(x, attention_mask=mask, relations=relations, training=training,
                             return_attention_scores=True)
                weights.append(w)
            else:
                x = layer(x, attention_mask=mask, relations=relations, training=training)
        begin_ocr = masks[0].shape[1] + masks[1].shape[1]
        ocr_outputs = x[:, begin_ocr:begin_ocr + self.max_ocr]
        scores = self._scores(x[:, -self.num_steps:], ocr_outputs, masks[2])
        return (scores, weights) if return_attention_scores else scores

    def compute_loss(self, x=None, y=None, y_pred=None, sample_weight=None, training=True):
        """`m4c_loss(y, y_pred, sample_weight)`: the sample weight is the
        step mask `[B, S]` (None: every step counts), plus the layers'
        regularisation losses."""
        if sample_weight is None:
            sample_weight = ops.ones(ops.shape(y_pred)[:2], "float32")
        loss = m4c_loss(y, y_pred, sample_weight)
        if self.losses:
            loss = loss + ops.cast(ops.sum(self.losses), "float32")
        return loss

    # ----------------------------------------------------------- decoding

    def decode(self, inputs, return_scores=False):
        """Greedy decoding with cached keys and values (no dropout).

        Args:
            inputs: the call's inputs without `previous`.
            return_scores: also return each step's scores.

        Returns:
            int32 `[B, S]`: the argmax index at every step (`< V` a
            vocabulary word, `V + n` OCR token n); the caller stops at
            `</s>` (`answer_text`). With `return_scores`, also the float32
            scores `[B, S, V + T]` of the steps.
        """
        if not self.built:
            shapes = {key: tuple(ops.shape(value)) for key, value in inputs.items()}
            shapes["previous"] = (shapes["question"][0], self.num_steps)
            self.build(shapes)
        x, masks, ocr_embedding = self.encoder_inputs(inputs, training=False)
        length_encoder = x.shape[1]
        mask = m4c_attention_mask(*masks, self.num_steps)
        relations = self._relations(inputs)
        encoder_mask = mask[:, :length_encoder, :length_encoder]
        encoder_relations = None if relations is None else \
            relations[:, :length_encoder, :length_encoder]
        caches = []
        for layer in self.mmt_layers:
            caches.append(layer.memory_cache(x, self.num_steps))
            x = layer(x, attention_mask=encoder_mask, relations=encoder_relations,
                      training=False)
        begin_ocr = masks[0].shape[1] + masks[1].shape[1]
        ocr_outputs = x[:, begin_ocr:begin_ocr + self.max_ocr]
        batch = ops.shape(x)[0]
        previous = ops.full((batch, 1), BOS, "int32")
        predicted, step_scores = [], []
        # Unrolled: S (12) static steps, each a static slice of the masks.
        for t in range(self.num_steps):
            position = length_encoder + t
            h = ops.cast(self.embed_previous(previous, ocr_embedding, ops.array([t])), x.dtype)
            row_relations = None if relations is None else relations[:, position:position + 1]
            for k, layer in enumerate(self.mmt_layers):
                h, caches[k] = layer.call_cached(h, caches[k], position,
                                                 mask[:, position:position + 1], row_relations)
            scores = self._scores(h, ocr_outputs, masks[2])
            previous = ops.cast(ops.argmax(scores, axis=-1), "int32")
            predicted.append(previous)
            step_scores.append(scores)
        predicted = ops.concatenate(predicted, axis=1)
        if return_scores:
            return predicted, ops.concatenate(step_scores, axis=1)
        return predicted

    def attention_maps(self, inputs):
        """The last layer's attention weights `[B, heads, L, L]` (float32,
        NumPy) of a teacher-forced pass: for the pictures."""
        _, weights = self(inputs, training=False, return_attention_scores=True)
        return keras.ops.convert_to_numpy(weights[-1])


def answer_text(indices, vocab_words, ocr_tokens):
    """The answer string of one decoded row (mmf's prediction format).

    Stops at `</s>`; a vocabulary index gives its word (`<pad>` and `<s>`,
    which an undertrained model may emit, give none: they are no words of
    an answer), `V + n` gives OCR token n; words are joined by spaces and
    " 's" becomes "'s".

    Args:
        indices: the row's `[S]` decoded indices.
        vocab_words: the answer vocabulary's words (V of them).
        ocr_tokens: the image's OCR tokens (the model's inputs' order).

    Returns:
        `(text, copied)`: the answer and the OCR positions it copied.
    """
    words, copied = [], []
    vocab = len(vocab_words)
    for index in (int(i) for i in indices):
        if index == EOS:
            break
        if index >= vocab:
            n = index - vocab
            words.append(ocr_tokens[n] if n < len(ocr_tokens) else "")
            copied.append(n)
        elif index not in (PAD, BOS):
            words.append(vocab_words[index])
    return " ".join(w for w in words if w).replace(" 's", "'s"), copied
