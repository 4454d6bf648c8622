"""MUAN for visual question answering and for visual grounding.

Yu, Cui, Yu, Tao and Tian, "Multimodal Unified Attention Networks for
Vision-and-Language Interactions", 2019, arXiv:1908.04107 (Sec. III; its
Fig. 3). Both models embed the words (GloVe-sized embedding, then a
one-layer LSTM: `QuestionEncoder`) and run MUAN-L, L unified attention
blocks over `Z = [X; FC_y(Y)]` (`UnifiedAttentionStack`, Eqs. 7-8; the
gated self-attention of Eqs. 4-6, or plain attention with `qk_gate=False`,
the paper's Fig. 5a ablation). docs/gated_attention.md describes the
blocks, docs/vqa.md (section MUAN) and docs/grounding.md the models.

* `MUAN` (Sec. III-A): a learned `[ans]` token is put before the words and
  goes through the LSTM with them (as the openvqa code's `CLS` word); its
  output after the last block goes through one Dense to the answer logits.
* `MUANGrounding` (Sec. III-B): no `[ans]` token; each region's feature is
  concatenated with a learned projection of its 5-d box feature
  `[x1, y1, x2, y2, w h]` (the paper's footnote 3) before `FC_y`; two
  Dense layers on each region's output give its ranking score and its box
  deltas (Eq. 11), trained with `keras_structattn.tasks.grounding.heads`'s losses
  (Eqs. 12-14).

Hyper-parameter sets (`models/vqa/hparams_sets.py`): `muan_base`,
`muan_tiny`, `muan_tiny_nogate` (`model_type="vqa"`), and
`muan_grounding_base`, `muan_grounding_tiny` (`model_type="grounding"`),
all with `architecture="muan"`.
"""

import keras
import numpy as np
from keras import ops

from keras_structattn import checks
from keras_structattn.layers.blocks import LAYER_NORMS
from keras_structattn.layers.blocks import check_sizes
from keras_structattn.layers.blocks import sub_seed
from keras_structattn.layers.question_encoder import QuestionEncoder
from keras_structattn.layers.unified_attention import BLOCK_OPTIONS
from keras_structattn.layers.unified_attention import UnifiedAttentionStack
from keras_structattn.ops.box_geometry import box_position_features
from keras_structattn.ops.masked_softmax import MASKED_LOGIT
from keras_structattn.tasks.grounding import heads as grounding
from models.vqa import hparams_sets
from models.vqa.base import VisionLanguageModel
from models.vqa.base import VQAModel
from models.vqa.hparams_sets import NO_QUADRANT_MASK

VQA_INPUTS = ("question", "regions", "boxes", "region_mask")
GROUNDING_INPUTS = ("expression", "regions", "boxes", "region_mask")
# The hparam value of `mask_quadrants=None`.
# [x1, y1, x2, y2, area] (box_position_features).
BOX_FEATURE_SIZE = 5


def _check_inputs(inputs, names, model):
    if not isinstance(inputs, dict) or any(name not in inputs for name in names):
        received = sorted(inputs) if isinstance(inputs, dict) else type(inputs).__name__
        raise ValueError(
            f"{model} takes a dict with the keys {list(names)}. Received: {received}"
        )


class _UnifiedAttentionModel(VisionLanguageModel):
    """What both MUAN models share: the text encoder, the optional box
    feature, and the MUAN-L stack. Subclasses set `_text_key` and
    `_prepend_token` and add their heads."""

    architectures = ("muan",)
    _text_key = None
    _prepend_token = False

    def __init__(self, vocab_size, *, word_vectors=None, seed=None, **kwargs):
        hp = self._take_hparams(kwargs)
        super().__init__(**kwargs)
        checks.positive_int("vocab_size", vocab_size)
        check_sizes(
            hp.hidden_size, hp.num_heads, hp.filter_size, dropout=hp.dropout,
            attention_dropout=hp.attention_dropout,
        )
        checks.positive_int("num_blocks", hp.num_blocks)
        checks.positive_int("word_dim", hp.word_dim)
        checks.non_negative_int("gate_dim", hp.gate_dim)
        checks.one_of("mask_quadrants", hp.mask_quadrants, (NO_QUADRANT_MASK, "self", "co"))
        checks.one_of("layer_norm", hp.layer_norm, LAYER_NORMS)
        for name in ("gate_per_head", "share_gate_weights_across_heads", "qk_gate",
                     "modality_norm", "use_box_features"):
            checks.boolean(name, getattr(hp, name))
        checks.non_negative_int("box_feature_dim", hp.box_feature_dim)
        hp.gate_bias_init = float(hp.gate_bias_init)
        if seed is not None:
            checks.non_negative_int("seed", seed)
        hp.dropout, hp.attention_dropout = float(hp.dropout), float(hp.attention_dropout)
        # The hyper-parameters are attributes (`_constructor_config` reads them).
        for name, value in vars(hp).items():
            setattr(self, name, value)
        self.vocab_size = vocab_size
        self.seed = seed
        self.text_encoder = QuestionEncoder(
            vocab_size,
            hp.hidden_size,
            word_dim=hp.word_dim,
            embeddings=word_vectors,
            prepend_token=self._prepend_token,
            seed=sub_seed(seed, 0),
            name="text_encoder",
            dtype=self.dtype_policy,
        )
        # Built once the region features' width is known (`build`).
        self.box_projection = None
        # The stack's options are the hparams of the same names, but for
        # `gate_dim` (0: None, the head size), `mask_quadrants` ("none": None)
        # and `gate_bias_init` (the constant bias of FC_g; 0: the zeros of
        # the paper's and openvqa's default).
        options = {name: getattr(hp, name) for name in BLOCK_OPTIONS if hasattr(hp, name)}
        options.update(
            gate_bias_initializer=(keras.initializers.Constant(hp.gate_bias_init)
                                   if hp.gate_bias_init else None),
            gate_dim=hp.gate_dim or None,
            mask_quadrants=None if hp.mask_quadrants == NO_QUADRANT_MASK else hp.mask_quadrants,
        )
        self.stack = UnifiedAttentionStack(
            hp.num_blocks,
            hp.hidden_size,
            hp.num_heads,
            **options,
            seed=sub_seed(seed, 1),
            name="muan",
            dtype=self.dtype_policy,
        )

    # ---------------------------------------------------------- hparams

    # The constructor's hyper-parameters (all its arguments but the sizes
    # of the vocabularies and the word vectors) and their defaults.
    HPARAMS = hparams_sets.MUAN

    # ------------------------------------------------------------ layers

    def _build_box_projection(self, feature_dim):
        if self.use_box_features and self.box_projection is None:
            # Footnote 3: the 5-d box feature goes through an FC to the
            # width of the region feature, then the two are concatenated.
            width = self.box_feature_dim or feature_dim
            self.box_projection = keras.layers.Dense(
                width, name="box_projection", dtype=self.dtype_policy
            )
            self.box_projection.build((None, None, BOX_FEATURE_SIZE))

    def _visual_width(self, feature_dim):
        if not self.use_box_features:
            return feature_dim
        return feature_dim + (self.box_feature_dim or feature_dim)

    def _build_trunk(self, shapes):
        text_shape = tuple(shapes[self._text_key])
        region_shape = tuple(shapes["regions"])
        if len(text_shape) != 2 or len(region_shape) != 3 or region_shape[-1] is None:
            raise ValueError(
                f"{type(self).__name__} takes {self._text_key} [B, T] and regions [B, N, C] "
                f"with a known C. Received: {self._text_key}.shape={text_shape}, "
                f"regions.shape={region_shape}"
            )
        self.text_encoder.build(text_shape)
        self._build_box_projection(region_shape[-1])
        encoded = self.text_encoder.compute_output_shape(text_shape)
        visual = region_shape[:2] + (self._visual_width(region_shape[-1]),)
        self.stack.build(encoded, visual)
        return region_shape

    def _run_trunk(self, inputs, training, return_attention_scores=False):
        text_ids = ops.cast(inputs[self._text_key], "int32")
        text = self.text_encoder(text_ids)
        text_mask = self.text_encoder.question_mask(text_ids)
        regions = inputs["regions"]
        if self.use_box_features:
            box_features = self.box_projection(box_position_features(inputs["boxes"]))
            regions = ops.concatenate(
                [ops.cast(regions, box_features.dtype), box_features], axis=-1
            )
        region_mask = ops.cast(inputs["region_mask"], "bool")
        outputs = self.stack(
            text,
            regions,
            text_mask=text_mask,
            visual_mask=region_mask,
            training=training,
            return_attention_scores=return_attention_scores,
        )
        return outputs, text_mask, region_mask

    def _constructor_config(self):
        return dict(
            vocab_size=self.vocab_size,
            seed=self.seed,
            **{name: getattr(self, name) for name in self.HPARAMS},
        )


@keras.saving.register_keras_serializable(package="keras_structattn")
class MUAN(_UnifiedAttentionModel, VQAModel):
    """MUAN for VQA (Yu et al., 2019, arXiv:1908.04107, Sec. III-A).

    `QuestionEncoder(prepend_token=True)` gives the text
    `X = [[ans]; words]` `[B, T + 1, d]`; the regions `Y [B, N, C]` (with
    `use_box_features`, concatenated with a projection of their 5-d box
    feature) enter the first UA block, which forms `Z = [X; FC_y(Y)]` (with
    `modality_norm`, X and FC_y(Y) each layer-normed first, as the openvqa
    code does); after L blocks the `[ans]` token's output (row 0 of Z) goes
    through a Dense to the answer logits (no layer norm, as that code).
    Padded words and regions are masked as attention keys.

    Args:
        vocab_size: word ids (0 = padding).
        num_answers: the answer vocabulary's size k.
        hidden_size, num_heads, filter_size, num_blocks: d, h, the FFN
            width and L (the paper: 768, 8, 4d assumed, 10).
        dropout, attention_dropout: as in `UnifiedAttentionBlock` (0.1).
        word_dim: the word embedding's width (300 for GloVe).
        gate_dim: the gate's width d_g; 0 = the head size (the paper's 96).
        gate_per_head, share_gate_weights_across_heads, qk_gate: as in
            `GatedMultiHeadAttention` (`qk_gate=False`: no gate, Fig. 5a).
        gate_bias_init: the constant the bias of the gate's FC_g starts at
            (Eq. 5's M = sigmoid(FC_g(...))): 0 (default, the paper's and
            openvqa's zeros: M starts near 0.5, the logits scaled by about
            a quarter); e.g. 4 starts M near sigmoid(4) = 0.98, the plain
            attention's logits (`GatedMultiHeadAttention`'s
            `gate_bias_initializer`).
        mask_quadrants: `"none"`, `"self"` or `"co"` (Fig. 5b's ablations).
        layer_norm: `"keras"` or `"mcan"` (see `UnifiedAttentionBlock`).
        modality_norm: layer-normalize X and FC_y(Y) before concatenating
            them (the openvqa code; on by default here).
        use_box_features: concatenate a Dense projection of the regions'
            5-d box features `[x1, y1, x2, y2, w h]` to their features
            (off for VQA, as the paper and the openvqa code).
        box_feature_dim: that projection's width; 0 = the region features'
            width.
        word_vectors: None, or initial embeddings `[vocab_size, word_dim]`
            (GloVe rows; not in the config: the weights carry them).
        seed: int seed of the initializers and the dropouts.
        **kwargs: `keras.Model` arguments.

    Call arguments:
        inputs: a dict: `"question"` int `[B, T]` (0 = padding), `"regions"`
            float `[B, N, C]`, `"boxes"` float `[B, N, 4]` (normalised
            `[x1, y1, x2, y2]`; read only with `use_box_features`),
            `"region_mask"` bool `[B, N]` (True = a real region).
        training: whether dropout is active.

    Returns:
        float32 answer logits `[B, num_answers]`.
    """

    model_type = "vqa"
    architecture = "muan"
    _text_key = "question"
    _prepend_token = True

    def __init__(self, vocab_size, num_answers, **kwargs):
        super().__init__(vocab_size, **kwargs)
        checks.positive_int("num_answers", num_answers)
        self.num_answers = num_answers
        self.classifier = keras.layers.Dense(
            num_answers, name="classifier", dtype=self.dtype_policy
        )

    def build(self, input_shape):
        _check_inputs(input_shape, VQA_INPUTS, "MUAN")
        self._build_trunk(input_shape)
        self.classifier.build((None, self.hidden_size))
        self.built = True

    def call(self, inputs, training=None):
        _check_inputs(inputs, VQA_INPUTS, "MUAN")
        (text, _), _, _ = self._run_trunk(inputs, training)
        return ops.cast(self.classifier(text[:, 0]), "float32")

    def attention_maps(self, inputs):
        """Where the `[ans]` token looks in the last block (Fig. 6).

        Args:
            inputs: the `call` dict (NumPy or tensors), run without dropout.

        Returns:
            A dict of NumPy arrays: `"region_weights"` `[B, N]` and
            `"question_weights"` `[B, T]`, the `[ans]` token's attention
            over the regions and over the words (mean over the heads; 0 at
            padding); `"unified"` `[B, heads, S, S]`, the last block's whole
            attention (S = T + 1 + N, text first: split it with
            `layers.unified_attention.split_attention`); `"text_length"`,
            the int T + 1.
        """
        _check_inputs(inputs, VQA_INPUTS, "MUAN")
        (text, _, scores), _, _ = self._run_trunk(
            inputs, training=False, return_attention_scores=True
        )
        unified = ops.convert_to_numpy(ops.cast(scores[-1], "float32"))
        text_length = int(text.shape[1])
        ans_row = unified.mean(axis=1)[:, 0]
        return {
            "region_weights": ans_row[:, text_length:],
            "question_weights": ans_row[:, 1:text_length],
            "unified": unified,
            "text_length": text_length,
        }

    def get_config(self):
        config = super().get_config()
        config.update(num_answers=self.num_answers)
        return config


@keras.saving.register_keras_serializable(package="keras_structattn")
class MUANGrounding(_UnifiedAttentionModel):
    """MUAN for visual grounding (Yu et al., 2019, arXiv:1908.04107,
    Sec. III-B).

    The expression's words (no `[ans]` token) and the region proposals,
    by default each concatenated with a projection of its 5-d box feature
    (footnote 3), go through MUAN-L; on each region's output one Dense
    gives its ranking score and another its box deltas `[dx, dy, dw, dh]`
    (Eq. 11; `keras_structattn.ops.box_coding`).

    Args:
        vocab_size: word ids (0 = padding).
        use_box_features: default True here (the paper's grounding setup).
        **kwargs: the other arguments of `MUAN` (but `num_answers`).

    Call arguments:
        inputs: a dict: `"expression"` int `[B, T]` (0 = padding),
            `"regions"` `[B, N, C]`, `"boxes"` `[B, N, 4]` (normalised
            `[x1, y1, x2, y2]`), `"region_mask"` bool `[B, N]`.
        training: whether dropout is active.

    Returns:
        A dict: `"scores"` float32 `[B, N]` ranking logits (padding regions
        `MASKED_LOGIT`, so a softmax gives them 0) and `"box_deltas"`
        float32 `[B, N, 4]`. Train with
        `compile(loss={"scores": grounding.RankLoss(), "box_deltas":
        grounding.BoxRegressionLoss()}, loss_weights={"scores":
        hparams.rank_weight, "box_deltas": hparams.regression_weight})`.
    """

    model_type = "grounding"
    architecture = "muan"
    _text_key = "expression"
    _prepend_token = False

    HPARAMS = hparams_sets.MUAN_GROUNDING

    def __init__(self, vocab_size, **kwargs):
        super().__init__(vocab_size, **kwargs)
        self.score_head = keras.layers.Dense(1, name="score_head", dtype=self.dtype_policy)
        self.box_head = keras.layers.Dense(4, name="box_head", dtype=self.dtype_policy)

    @classmethod
    def from_hparams(cls, hparams, vocab_size, *, word_vectors=None, seed=None):
        """The model of a `muan_grounding_*` hparams set (see `MUAN`)."""
        cls.check_hparams(hparams)
        return cls(vocab_size, word_vectors=word_vectors, seed=seed,
                   **cls.hparams_arguments(hparams))

    def build(self, input_shape):
        _check_inputs(input_shape, GROUNDING_INPUTS, "MUANGrounding")
        self._build_trunk(input_shape)
        self.score_head.build((None, None, self.hidden_size))
        self.box_head.build((None, None, self.hidden_size))
        self.built = True

    def call(self, inputs, training=None):
        _check_inputs(inputs, GROUNDING_INPUTS, "MUANGrounding")
        (_, visual), _, region_mask = self._run_trunk(inputs, training)
        scores = ops.cast(self.score_head(visual)[..., 0], "float32")
        return {
            "scores": ops.where(region_mask, scores, MASKED_LOGIT),
            "box_deltas": ops.cast(self.box_head(visual), "float32"),
        }

    def predict_boxes(self, outputs, boxes):
        """The top-scoring region's box refined by its deltas, clipped to
        [0, 1] (`keras_structattn.tasks.grounding.heads.predict_boxes`).

        Args:
            outputs: the dict `call` returns.
            boxes: the proposals `[B, N, 4]`.

        Returns:
            `(boxes [B, 4] float32, index [B] int32)`.
        """
        return grounding.predict_boxes(outputs["scores"], outputs["box_deltas"], boxes)

    def attention_maps(self, inputs):
        """The last block's unified attention and, as in the paper's Fig. 7,
        the weight of each word and region by column-wise max pooling.

        Args:
            inputs: the `call` dict, run without dropout.

        Returns:
            A dict of NumPy arrays: `"unified"` `[B, heads, S, S]` (the last
            block, S = T + N), `"text_length"` (the int T);
            `"word_weights"` `[B, T]` and `"region_weights"` `[B, N]`: for
            each key, the largest weight any real query gives it (the mean
            over heads, max over the rows of real words and regions; 0 at
            padding); `"block_word_weights"` `[B, L, T]` and
            `"block_region_weights"` `[B, L, N]`: the same for every block
            (Fig. 7 shows blocks 1, 3, 6 and 9).
        """
        _check_inputs(inputs, GROUNDING_INPUTS, "MUANGrounding")
        (text, _, scores), text_mask, region_mask = self._run_trunk(
            inputs, training=False, return_attention_scores=True
        )
        text_length = int(text.shape[1])
        real = np.concatenate(
            [ops.convert_to_numpy(text_mask), ops.convert_to_numpy(region_mask)], axis=1
        )
        blocks = np.stack(
            [ops.convert_to_numpy(ops.cast(s, "float32")) for s in scores], axis=1
        )  # [B, L, heads, S, S]
        rows = blocks.mean(axis=2)  # [B, L, S(query), S(key)]
        rows = np.where(real[:, None, :, None], rows, 0.0)
        columns = rows.max(axis=2)  # [B, L, S(key)]
        return {
            "unified": blocks[:, -1],
            "text_length": text_length,
            "word_weights": columns[:, -1, :text_length],
            "region_weights": columns[:, -1, text_length:],
            "block_word_weights": columns[..., :text_length],
            "block_region_weights": columns[..., text_length:],
        }

