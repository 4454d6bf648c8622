"""Transformer+CATT for VQA: LXMERT-style layers with causal attention, from scratch.

Yang et al., "Causal Attention for Vision-Language Tasks", CVPR 2021,
arXiv:2103.03493: CATT (Eqs. 6-7: in-sample attention over the sample,
cross-sample attention over a global dictionary) in LXMERT's three
encoders (Tan and Bansal, 2019, "LXMERT: Learning Cross-Modality Encoder
Representations from Transformers", arXiv:1908.07490, Sec. 2), as the
released LXMERT+CATT code (`yangxuntu/lxmertcatt`) wires them, here small
and trained from scratch (no pre-training). docs/vqa.md (section
"Transformer+CATT") lists every choice against the released code.

* Words: `[CLS]` + the question's ids, embedded (`word_dim`, projected to
  d when it differs) plus learned positions, LayerNorm, dropout (BERT's
  embedding). Regions: `(LN(W_f f) + LN(W_b box)) / 2`, dropout (LXMERT's
  `VisualFeatEncoder`).
* Language and vision single-modality layers: `CATTEncoderBlock`s (IS and
  CS streams, shared weights: the code's `ft_same`); the first block of
  each attends (CS) to its dictionary (`K = dictionary_size` entries, a
  word and an image dictionary in the hidden space), the later ones to the
  previous CS output.
* Cross-modality layers (`CATTCrossModalityLayer`, LXMERT's `LXRTXLayer`):
  one cross-attention module used in both directions, then self-attention
  and FFN per modality; the CS pair `(L_C, V_C)` goes through the same
  layer with the same weights (`g2g`, `ft_same`).
* Top: `L_out = W [L; L_C]` (one Linear 2d -> d, no activation), pooled
  `tanh(W_p L_out[:, 0])` (the `[CLS]` row), head `Dense(2d) -> GELU ->
  LayerNorm -> Dense(num_answers)`: float32 logits, trained with a
  sigmoid BCE against soft scores (`SoftTargetBinaryCrossEntropy`).

`dictionary_size=0` gives the non-CATT twin ("Transformer"): the same
layers, no CS stream, no dictionaries, no fusion Linear: the pooler reads
the IS stream. Its weights are exactly the CATT model's minus the two
dictionaries and the fusion Linear, and its output equals the CATT
model's IS stream with the same weights (tested).

Hyper-parameter sets (`models/vqa/hparams_sets.py`, `model_type="vqa"`,
`architecture="catt"`):
`catt_vqa_tiny`, `catt_vqa_tiny_nocatt` (Shapes world on a CPU),
`catt_vqa_small`, `catt_vqa_small_nocatt`.
"""

import keras
import numpy as np
from keras import ops

from keras_structattn import checks
from keras_structattn.layers.blocks import BlockBase
from keras_structattn.layers.blocks import check_sizes
from keras_structattn.layers.blocks import sub_seed
from keras_structattn.layers.catt_transformer import CATTEncoderBlock
from keras_structattn.layers.dropout import Dropout
from keras_structattn.layers.global_dictionary import GlobalDictionary
from keras_structattn.layers.global_dictionary import uniform_dictionary_initializer
from keras_structattn.layers.structured_attention import StructuredMultiHeadAttention
from models.vqa import hparams_sets
from models.vqa.base import VQAModel
from models.vqa.base import check_vqa_inputs
from models.vqa.hparams_sets import CATT_ARCHITECTURE

ARCHITECTURE = CATT_ARCHITECTURE
BOX_DIM = 4  # LXMERT's box feature: the normalised [x1, y1, x2, y2]


def _key_mask(mask):
    """`[B, S]` bool -> the `[B, 1, S]` attention mask of those keys."""
    return ops.cast(mask, "bool")[:, None, :]


@keras.saving.register_keras_serializable(package="keras_structattn")
class CATTCrossModalityLayer(BlockBase):
    """One LXMERT cross-modality layer (post-norm), for the IS or the CS pair.

    LXMERT's `LXRTXLayer` (Tan and Bansal, 2019, arXiv:1908.07490,
    Sec. 2.2; the layer of the released LXMERT+CATT code):

        L' = LN(L + CrossAtt(L -> V)),   V' = LN(V + CrossAtt(V -> L))
        L'' = LN(L' + SelfAtt_L(L')),    V'' = LN(V' + SelfAtt_V(V'))
        out = LN(L'' + FFN_L(L'')),      LN(V'' + FFN_V(V''))

    with ONE cross-attention module (and its residual norm) serving both
    directions, and each modality's own self-attention and FFN. Both
    directions read the layer's inputs. CATT runs the CS pair `(L_C, V_C)`
    through the same layer with the same weights (`cross_type="g2g"`,
    `ft_same` in the code): call the layer once per pair.

    Args:
        hidden_size, filter_size, num_heads: d, the FFN width, heads.
        update_vision: False leaves out the vision side (the V -> L
            cross-attention, vision self-attention and FFN) and returns
            `vision` unchanged: for the top layer of a VQA model, which
            reads the language stream alone (LXMERT's VQA head reads the
            pooled `[CLS]`; trained from scratch, the vision side of the
            top layer would get no gradient).
        activation: of the FFNs (GELU in LXMERT).
        attention_dropout, relu_dropout, layer_dropout,
            layer_norm_epsilon, seed: as `BlockBase`.
        **kwargs: base layer arguments.

    Call arguments:
        language: `[B, T, d]`; vision: `[B, N, d]`.
        language_mask: bool `[B, T]`; vision_mask: bool `[B, N]` (True =
            real; the keys' masks, as LXMERT).
        training: whether dropout is active.
        return_attention_scores: also return the language -> vision
            cross-attention weights `[B, heads, T, N]` (float32).

    Returns:
        `(language, vision)` (then the weights).
    """

    normalize_first = False
    _STREAMS = ("language", "vision")

    def __init__(self, hidden_size, filter_size, num_heads, *, update_vision=True,
                 activation="gelu", **kwargs):
        super().__init__(hidden_size, filter_size, num_heads, **kwargs)
        self.update_vision = checks.boolean("update_vision", update_vision)
        self.activation = keras.activations.get(activation)
        self.cross_attention = self._attention("cross_attention")
        self.cross_attention_residual = self._residual("cross_attention_residual")
        for stream in self._streams():
            setattr(self, f"{stream}_self_attention", self._attention(f"{stream}_self_attention"))
            setattr(self, f"{stream}_self_attention_residual",
                    self._residual(f"{stream}_self_attention_residual"))
            setattr(self, f"{stream}_ffn", self._feed_forward(f"{stream}_ffn", self.activation))
            setattr(self, f"{stream}_ffn_residual", self._residual(f"{stream}_ffn_residual"))

    def _streams(self):
        return self._STREAMS if self.update_vision else self._STREAMS[:1]

    def _attention(self, name):
        return StructuredMultiHeadAttention(
            self.num_heads, self.hidden_size // self.num_heads,
            dropout=self.attention_dropout, seed=self._next_seed(), name=name,
            dtype=self.dtype_policy,
        )

    def build(self, language_shape, vision_shape):
        self._check_width("language", language_shape)
        self._check_width("vision", vision_shape)
        self.cross_attention.build(language_shape, vision_shape)
        self.cross_attention_residual.build(language_shape)
        for stream, shape in zip(self._streams(), (language_shape, vision_shape)):
            getattr(self, f"{stream}_self_attention").build(shape, shape)
            for part in ("self_attention_residual", "ffn", "ffn_residual"):
                getattr(self, f"{stream}_{part}").build(shape)

    def call(self, language, vision, language_mask, vision_mask, training=None,
             return_attention_scores=False):
        language_keys, vision_keys = _key_mask(language_mask), _key_mask(vision_mask)
        attended, scores = self.cross_attention(
            language, vision, attention_mask=vision_keys, training=training,
            return_attention_scores=True)
        updates = [("language", language, attended, language_keys)]
        if self.update_vision:
            looked = self.cross_attention(vision, language, attention_mask=language_keys,
                                          training=training)
            updates.append(("vision", vision, looked, vision_keys))
        outputs = []
        for stream, x, y, keys in updates:
            x = self.cross_attention_residual(x, y, training=training)
            y = getattr(self, f"{stream}_self_attention")(
                x, x, attention_mask=keys, training=training)
            x = getattr(self, f"{stream}_self_attention_residual")(x, y, training=training)
            y = getattr(self, f"{stream}_ffn")(x, training=training)
            outputs.append(getattr(self, f"{stream}_ffn_residual")(x, y, training=training))
        if not self.update_vision:
            outputs.append(vision)
        if return_attention_scores:
            return outputs[0], outputs[1], scores
        return outputs[0], outputs[1]

    def compute_output_shape(self, language_shape, vision_shape, *args, **kwargs):
        return tuple(language_shape), tuple(vision_shape)

    def get_config(self):
        config = super().get_config()
        config.update(update_vision=self.update_vision,
                      activation=keras.activations.serialize(self.activation))
        return config


def _is_only(block, x, padding_mask, training):
    """A `CATTEncoderBlock`'s in-sample stream alone (the twin's layer).

    The block's own IS path: its `CATTAttention` with no dictionary is
    plain multi-head attention with the same weights, then the same
    residual norms and FFN (`CATTEncoderBlock.call` without the CS stream).
    """
    y = block.self_attention(x, x, value_mask=padding_mask, training=training)
    z = block._residual_add(x, y, "self_attention", "is", training)
    return block._apply_feed_forward(z, "is", training)


@keras.saving.register_keras_serializable(package="keras_structattn")
class CATTVQA(VQAModel):
    """Transformer+CATT VQA model (LXMERT-style, from scratch); or its twin.

    See the module docstring for the architecture and docs/vqa.md for the
    choices made against the released LXMERT+CATT code.

    Initialisation: Keras defaults (Glorot uniform kernels, zero biases,
    uniform(-0.05, 0.05) embeddings), not BERT's N(0, 0.02); the
    dictionaries start at uniform(0, 0.01) (the released code's, the
    paper's "w/o Init") until `keras_structattn.training.dictionaries.
    fit_dictionaries` sets them to K-means centres (the recipe does, for a
    new run).

    Args:
        vocab_size: question word ids (0 = padding); the `[CLS]` token gets
            the extra id `vocab_size`.
        num_answers: the answer vocabulary size.
        hidden_size, num_heads, filter_size: d, heads, FFN width.
        num_language_layers, num_vision_layers, num_cross_layers: the three
            encoders' depths (LXMERT: 9, 5, 5).
        dictionary_size: K of the word and of the image dictionary (500 in
            the paper); 0 = the non-CATT twin.
        word_dim: the word embedding's width (a Dense projects it to d
            when it differs).
        max_question_length: the longest question (the position table has
            one more row, for `[CLS]`).
        dropout: hidden and attention dropout (0.1, BERT's).
        layer_norm_epsilon: 1e-12 (BERT's).
        word_vectors: optional `[vocab_size, word_dim]` initial embeddings
            (not in the config).
        seed: int seed of the dropouts.
        **kwargs: `keras.Model` arguments.

    Call arguments:
        inputs: the VQA input dict (`models.vqa`): `question` int `[B, T]`,
            `regions` `[B, N, C]`, `boxes` `[B, N, 4]`, `region_mask` bool
            `[B, N]`.
        training: whether dropout is active.

    Returns:
        float32 logits `[B, num_answers]`.
    """

    architectures = (ARCHITECTURE,)
    # The constructor's hyper-parameters, read from an hparams set, and their
    # defaults: the sets' (`hparams_sets.CATT_VQA`) at LXMERT's sizes, with
    # the questions' longest length.
    HPARAMS = dict(
        hparams_sets.CATT_VQA,
        hidden_size=768, num_heads=12, filter_size=3072, word_dim=768,
        num_language_layers=9, num_vision_layers=5, num_cross_layers=5,
        max_question_length=hparams_sets.vqa_training_defaults()["max_question_length"],
    )
    architecture = ARCHITECTURE

    def __init__(self, vocab_size, num_answers, *, word_vectors=None, seed=None, **kwargs):
        hp = self._take_hparams(kwargs)
        super().__init__(**kwargs)
        check_sizes(hp.hidden_size, hp.num_heads, hp.filter_size, dropout=hp.dropout)
        for name, value in (("vocab_size", vocab_size), ("num_answers", num_answers),
                            ("num_language_layers", hp.num_language_layers),
                            ("num_vision_layers", hp.num_vision_layers),
                            ("num_cross_layers", hp.num_cross_layers), ("word_dim", hp.word_dim),
                            ("max_question_length", hp.max_question_length)):
            checks.positive_int(name, value)
        checks.non_negative_int("dictionary_size", hp.dictionary_size)
        hp.dropout = float(hp.dropout)
        hp.layer_norm_epsilon = float(hp.layer_norm_epsilon)
        self._config = dict(vocab_size=vocab_size, num_answers=num_answers, **vars(hp), seed=seed)
        self.vocab_size = vocab_size
        self.num_answers = num_answers
        self.hidden_size = hp.hidden_size
        self.dictionary_size = hp.dictionary_size
        self.max_question_length = hp.max_question_length
        self.catt = hp.dictionary_size > 0
        seeds = iter(range(1000))

        def next_seed():
            return sub_seed(seed, next(seeds))

        policy = dict(dtype=self.dtype_policy)
        epsilon = hp.layer_norm_epsilon
        initializer = "uniform"
        if word_vectors is not None:
            word_vectors = np.asarray(word_vectors, "float32")
            if word_vectors.shape != (vocab_size, hp.word_dim):
                raise ValueError(
                    f"Argument `word_vectors` must be [vocab_size, hp.word_dim] = [{vocab_size}, "
                    f"{hp.word_dim}]. Received: word_vectors.shape={word_vectors.shape}")
            cls_row = np.random.default_rng(seed).uniform(-0.05, 0.05, (1, hp.word_dim))
            initializer = keras.initializers.Constant(
                np.concatenate([word_vectors, cls_row.astype("float32")]))
        # Ids 0..vocab_size-1 are the question's; vocab_size is [CLS].
        self.word_embedding = keras.layers.Embedding(
            vocab_size + 1, hp.word_dim, embeddings_initializer=initializer,
            name="word_embedding", **policy)
        self.word_projection = None
        if hp.word_dim != hp.hidden_size:
            self.word_projection = keras.layers.Dense(
                hp.hidden_size, name="word_projection", **policy)
        self.word_positions = keras.layers.Embedding(
            hp.max_question_length + 1, hp.hidden_size, name="word_positions", **policy)
        self.word_norm = keras.layers.LayerNormalization(
            epsilon=epsilon, name="word_norm", **policy)
        self.word_dropout = Dropout(hp.dropout, seed=next_seed(), **policy)
        self.region_projection = keras.layers.Dense(
            hp.hidden_size, name="region_projection", **policy)
        self.region_norm = keras.layers.LayerNormalization(
            epsilon=epsilon, name="region_norm", **policy)
        self.box_projection = keras.layers.Dense(hp.hidden_size, name="box_projection", **policy)
        self.box_norm = keras.layers.LayerNormalization(
            epsilon=epsilon, name="box_norm", **policy)
        self.region_dropout = Dropout(hp.dropout, seed=next_seed(), **policy)
        block = dict(share_weights=True, activation="gelu", attention_dropout=hp.dropout,
                     layer_dropout=hp.dropout, relu_dropout=0.0, layer_norm_epsilon=epsilon,
                     **policy)
        self.language_blocks = [
            CATTEncoderBlock(hp.hidden_size, hp.filter_size, hp.num_heads, seed=next_seed(),
                             name=f"language_{i}", **block)
            for i in range(hp.num_language_layers)]
        self.vision_blocks = [
            CATTEncoderBlock(hp.hidden_size, hp.filter_size, hp.num_heads, seed=next_seed(),
                             name=f"vision_{i}", **block)
            for i in range(hp.num_vision_layers)]
        del block["share_weights"]
        # The top layer updates the language side alone: the head reads it.
        self.cross_layers = [
            CATTCrossModalityLayer(hp.hidden_size, hp.filter_size, hp.num_heads, seed=next_seed(),
                                   update_vision=i < hp.num_cross_layers - 1,
                                   name=f"cross_{i}", **block)
            for i in range(hp.num_cross_layers)]
        self.language_dictionary = self.vision_dictionary = self.language_fusion = None
        if self.catt:
            self.language_dictionary = GlobalDictionary(
                hp.dictionary_size, hp.hidden_size, initializer=uniform_dictionary_initializer(),
                name="language_dictionary", **policy)
            self.vision_dictionary = GlobalDictionary(
                hp.dictionary_size, hp.hidden_size, initializer=uniform_dictionary_initializer(),
                name="vision_dictionary", **policy)
            # The released code's one Linear [L; L_C] -> d at the top.
            self.language_fusion = keras.layers.Dense(
                hp.hidden_size, name="language_fusion", **policy)
        self.pooler = keras.layers.Dense(hp.hidden_size, activation="tanh", name="pooler", **policy)
        self.head_hidden = keras.layers.Dense(
            2 * hp.hidden_size, activation="gelu", name="head_hidden", **policy)
        self.head_norm = keras.layers.LayerNormalization(
            epsilon=epsilon, name="head_norm", **policy)
        self.classifier = keras.layers.Dense(num_answers, name="classifier", **policy)

    # -------------------------------------------------------------- Keras

    def build(self, input_shape):
        shapes = {key: tuple(input_shape[key]) for key in input_shape}
        batch, length = shapes["question"]
        regions = shapes["regions"]
        if len(regions) != 3 or regions[-1] is None:
            raise ValueError(f"CATTVQA takes regions [B, N, C] with a known C. "
                             f"Received: regions.shape={regions}")
        self._check_length(length)
        d = self.hidden_size
        words = (batch, None if length is None else length + 1, d)
        objects = (regions[0], regions[1], d)
        self.word_embedding.build((batch, length))
        if self.word_projection is not None:
            self.word_projection.build(words[:2] + (self._config["word_dim"],))
        self.word_positions.build((length,))
        self.word_norm.build(words)
        self.region_projection.build(regions)
        self.region_norm.build(objects)
        self.box_projection.build(regions[:2] + (BOX_DIM,))
        self.box_norm.build(objects)
        dictionary = (self.dictionary_size, d)
        for blocks, shape in ((self.language_blocks, words), (self.vision_blocks, objects)):
            for i, block in enumerate(blocks):
                block.build(shape, dictionary if self.catt and i == 0 else shape)
        for layer in self.cross_layers:
            layer.build(words, objects)
        if self.catt:
            self.language_fusion.build(words[:2] + (2 * d,))
        self.pooler.build((batch, d))
        self.head_hidden.build((batch, d))
        self.head_norm.build((batch, 2 * d))
        self.classifier.build((batch, 2 * d))
        self.built = True

    # ----------------------------------------------------------- forward

    def embed(self, inputs, training=None):
        """The first layers' inputs: `(words [B, T+1, d], word_mask [B, T+1],
        regions [B, N, d], region_mask [B, N])`, `[CLS]` first."""
        question, regions, boxes, region_mask = check_vqa_inputs(inputs, "CATTVQA")
        self._check_length(question.shape[1])
        question = ops.cast(question, "int32")
        batch, length = ops.shape(question)[0], question.shape[1]
        ids = ops.concatenate(
            [ops.full((batch, 1), self.vocab_size, "int32"), question], axis=1)
        word_mask = ops.concatenate(
            [ops.ones((batch, 1), "bool"), ops.not_equal(question, 0)], axis=1)
        words = self.word_embedding(ids)
        if self.word_projection is not None:
            words = self.word_projection(words)
        words = words + self.word_positions(ops.arange(length + 1))[None]
        words = self.word_dropout(self.word_norm(words), training=training)
        features = self.region_norm(self.region_projection(regions))
        places = self.box_norm(self.box_projection(ops.cast(boxes, features.dtype)))
        objects = self.region_dropout((features + places) / 2.0, training=training)
        return words, word_mask, objects, ops.cast(region_mask, "bool")

    def streams(self, inputs, training=None, return_maps=False):
        """The encoders' outputs before the fusion Linear.

        Returns:
            A dict: `"language"` `[B, T+1, d]` and `"vision"` `[B, N, d]`,
            the IS streams, and with CATT `"language_cs"`, `"vision_cs"`,
            the CS streams; with `return_maps`, also `"cross_scores"` and
            (CATT) `"cross_cs_scores"`, the last cross layer's language ->
            vision weights of each pair `[B, heads, T+1, N]`.
        """
        words, word_mask, objects, region_mask = self.embed(inputs, training)
        out = {}
        if self.catt:
            language, language_cs = words, self.language_dictionary(words)
            for block in self.language_blocks:
                language, language_cs = block(
                    language, language_cs, padding_mask=word_mask, training=training)
            vision, vision_cs = objects, self.vision_dictionary(objects)
            for block in self.vision_blocks:
                vision, vision_cs = block(
                    vision, vision_cs, padding_mask=region_mask, training=training)
        else:
            language, vision = words, objects
            for block in self.language_blocks:
                language = _is_only(block, language, word_mask, training)
            for block in self.vision_blocks:
                vision = _is_only(block, vision, region_mask, training)
        for layer in self.cross_layers:
            language, vision, scores = layer(
                language, vision, word_mask, region_mask, training=training,
                return_attention_scores=True)
            out["cross_scores"] = scores
            if self.catt:
                # The CS pair through the same layer (g2g, shared weights).
                language_cs, vision_cs, scores = layer(
                    language_cs, vision_cs, word_mask, region_mask, training=training,
                    return_attention_scores=True)
                out["cross_cs_scores"] = scores
        out.update(language=language, vision=vision)
        if self.catt:
            out.update(language_cs=language_cs, vision_cs=vision_cs)
        if not return_maps:
            out = {k: v for k, v in out.items() if not k.endswith("scores")}
        return out

    def call(self, inputs, training=None):
        out = self.streams(inputs, training=training)
        language = out["language"]
        if self.catt:
            language = self.language_fusion(
                ops.concatenate([language, out["language_cs"]], axis=-1))
        pooled = self.pooler(language[:, 0])
        hidden = self.head_norm(self.head_hidden(pooled))
        return ops.cast(self.classifier(hidden), "float32")

    # ------------------------------------------------------- dictionaries

    def global_dictionaries(self):
        """`{"language": GlobalDictionary, "vision": GlobalDictionary}` ({} for the twin)."""
        if not self.catt:
            return {}
        return {"language": self.language_dictionary, "vision": self.vision_dictionary}

    def dictionary_samples(self, inputs):
        """What each dictionary is fitted to (K-means, the paper's init): the
        embedded words, `[CLS]` included, and the embedded regions, as the
        first language and vision layers see them (no dropout), padding left
        out: `{"language": [n_words, d], "vision": [n_regions, d]}` NumPy."""
        words, word_mask, objects, region_mask = self.embed(inputs, training=False)

        def real(values, mask):
            values = np.asarray(ops.convert_to_numpy(ops.cast(values, "float32")))
            return values[np.asarray(ops.convert_to_numpy(mask), bool)]

        return {"language": real(words, word_mask), "vision": real(objects, region_mask)}

    # ------------------------------------------------------------ pictures

    def attention_maps(self, inputs):
        """Where the model looks, for pictures.

        Args:
            inputs: the VQA input dict, run without dropout.

        Returns:
            A dict of NumPy float32 arrays: `"region_weights"` `[B, N]`, the
            `[CLS]` token's IS cross-attention over the regions in the last
            cross layer (mean over heads; 0 at padding); with CATT also
            `"cs_region_weights"` `[B, N]`, the same row of the CS pair
            (over the CS vision stream, aligned with the regions);
            `"vision_dictionary_weights"` `[B, K]`, the first vision
            layer's CS-ATT over the image dictionary, mean over heads and
            real regions; `"language_dictionary_weights"` `[B, K]`, the
            `[CLS]` token's CS-ATT over the word dictionary in the first
            language layer (mean over heads); `"language_dictionary_scores"`
            `[B, heads, T+1, K]`, that layer's CS weights of every word.
        """
        out = self.streams(inputs, training=False, return_maps=True)

        def numpy(x):
            return np.asarray(ops.convert_to_numpy(ops.cast(x, "float32")))

        maps = {"region_weights": numpy(out["cross_scores"]).mean(axis=1)[:, 0]}
        if not self.catt:
            return maps
        maps["cs_region_weights"] = numpy(out["cross_cs_scores"]).mean(axis=1)[:, 0]
        words, word_mask, objects, region_mask = self.embed(inputs, training=False)
        first = {}
        for name, block, x, mask, dictionary in (
                ("language", self.language_blocks[0], words, word_mask,
                 self.language_dictionary),
                ("vision", self.vision_blocks[0], objects, region_mask,
                 self.vision_dictionary)):
            _, (_, cs_scores) = block.self_attention(
                x, x, dictionary=dictionary(x), value_mask=mask,
                return_attention_scores=True)
            first[name] = numpy(cs_scores)  # [B, heads, S, K]
        mask = numpy(region_mask)[:, :, None]
        per_region = first["vision"].mean(axis=1)  # [B, N, K]
        maps["vision_dictionary_weights"] = (per_region * mask).sum(1) / np.maximum(
            mask.sum(1), 1.0)
        maps["language_dictionary_weights"] = first["language"].mean(axis=1)[:, 0]
        maps["language_dictionary_scores"] = first["language"]
        return maps
