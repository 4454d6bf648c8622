"""VQA models of the MCAN family: MCAN and MCAN+PA.

* **MCAN** (Yu et al., 2019, "Deep Modular Co-Attention Networks for
  Visual Question Answering", CVPR, arXiv:1906.10770; code
  `MILVLG/mcan-vqa`), the encoder-decoder variant: the question (GloVe
  embedding + LSTM, `QuestionEncoder`) goes through L self-attention (SA)
  blocks, chained; the regions (bottom-up features, `Dense(C -> d)`)
  through L self-guided-attention (SGA) blocks, each guided by the *last*
  encoder output; each modality is reduced by an `AttentionFlattening`
  (AttFlat), the two summed and layer-normed, and a Dense gives one logit
  per answer (trained with a sigmoid BCE against soft scores:
  `keras_structattn.training.losses.SoftTargetBinaryCrossEntropy`).
* **MCAN+PA** (Mao, Yang, Lin, Xuan and Liu, 2022, "Positional Attention
  Guided Transformer-like Architecture for Visual Question Answering",
  IEEE TNNLS; code `waizei/PositionalMCAN`): the same network with each
  attention replaced by a positional one (Sec. III-A, Fig. 2): PWA in the
  encoder (Sec. III-C), POA (Sec. III-D, Eqs. 13-14) and PMA (Sec. III-E)
  in the decoder, the maps fused by Eq. 8; the head is Eqs. 1-3.

`MCAN` has the VQA family's interface (`VQAModel`, `models/vqa/base.py`);
`models.vqa.build.build_vqa_model` dispatches on `hparams.architecture`
(also `models.vqa.muan.MUAN` and `models.vqa.catt_vqa.CATTVQA`).

Hyper-parameter sets (`models/vqa/hparams_sets.py`, `model_type="vqa"`): `mcan_small`, `mcan_large`,
`mcan_pa_small`, and the CPU-sized `mcan_tiny`, `mcan_pa_tiny`. See
docs/vqa.md.
"""

import keras
import numpy as np
from keras import ops

from keras_structattn import checks
from keras_structattn.layers.attention_flattening import AttentionFlattening
from keras_structattn.layers.blocks import LAYER_NORMS
from keras_structattn.layers.blocks import check_sizes
from keras_structattn.layers.blocks import layer_normalization
from keras_structattn.layers.blocks import sub_seed
from keras_structattn.layers.mcan_blocks import MCANGuidedAttentionBlock
from keras_structattn.layers.mcan_blocks import MCANSelfAttentionBlock
from keras_structattn.layers.positional_attention import FUSIONS
from keras_structattn.layers.positional_attention import POA_VARIANTS
from keras_structattn.layers.question_encoder import QuestionEncoder
from keras_structattn.ops.box_geometry import box_position_features
from models.vqa import hparams_sets
from models.vqa.base import INPUT_KEYS
from models.vqa.base import VQAModel
from models.vqa.base import check_vqa_inputs

WORD_POSITION_INITS = ("normal", "uniform")


@keras.saving.register_keras_serializable(package="keras_structattn")
class MCAN(VQAModel):
    """MCAN (encoder-decoder) for VQA; with `positional=True`, MCAN+PA.

    Question: `QuestionEncoder` (embedding `word_dim`, trainable GloVe rows
    when given, LSTM(d) over every step) -> `num_encoder_layers` SA blocks.
    Regions: `Dense(d)` -> `num_decoder_layers` SGA blocks guided by the
    last SA output. Head: `AttFlat` of each modality (padding masked),
    `LN(f_question + f_regions)` (MCAN's layer norm; MCAN+PA's Eq. 2), then
    `Dense(num_answers)`: float32 logits (MCAN+PA's Eq. 3 without the
    sigmoid, which the loss applies).

    With `positional=True` (MCAN+PA, Mao et al., 2022, Sec. III):
    word positions are `Embedding(max_question_length, d)` of the word
    index 0..T-1 (Sec. III-C; shared by PWA and PMA's keys, given once as
    `[1, T, d]`); the regions' PMA query positions are `Dense(5 -> d)` of
    the 5-d box feature `[x1, y1, x2, y2, area]` (Sec. III-E); POA reads
    the boxes (Sec. III-D). Each SA is then PWA, each SGA is POA + PMA.

    Padded words (id 0) and regions (`region_mask` False) are masked as
    attention keys and in AttFlat; their own rows are computed and ignored,
    as in MCAN's code. The LSTM runs over the padding after the words, so
    the logits do not depend on what is in padded slots.

    Initialisation: Keras defaults (Glorot uniform kernels, zero biases;
    the LSTM's orthogonal recurrent kernel and unit forget bias), not the
    PyTorch defaults of the MCAN code; word positions N(0, 1) as PyTorch's
    `nn.Embedding` in the MCAN+PA code (`pa_word_position_init`).

    Args:
        vocab_size: question vocabulary size (0 = padding).
        num_answers: the answer vocabulary size (3129 for VQA-v2).
        hidden_size: d (512 small, 1024 large).
        num_heads: 8.
        filter_size: the FFN width (4d).
        num_encoder_layers, num_decoder_layers: 6 and 6.
        word_dim: the word embedding width (300: GloVe).
        max_question_length: the longest question (14); the size of the
            word-position table with `positional`.
        flat_mlp_size, flat_glimpses, flat_output_size: AttFlat's MLP width
            (512), glimpses (1) and output width (1024 small, 2048 large).
        dropout: every dropout (attention weights, residuals, FFN, AttFlat):
            0.1.
        layer_norm: `"mcan"` (MCAN's: unbiased std plus epsilon) or
            `"keras"`.
        layer_norm_epsilon: 1e-6.
        positional: MCAN+PA.
        pa_fusion: the fusion of PWA and PMA: `"scaled_sum"` (Eq. 8),
            `"relation_network"` (the paper's PA* ablation) or `"add"`.
        pa_object_variant: POA's variant: `"paper"` (default), `"released"`
            (the released code) or `"relation_network"`
            (docs/positional_attention.md).
        pa_object_fusion: None or "" (the variant's fusion) or a fusion for POA.
        pa_geometry_dim: POA's geometry embedding width (64).
        pa_word_position_init: `"normal"` (N(0, 1), PyTorch's embedding
            init in the released code) or `"uniform"` (Keras' +-0.05).
        word_vectors: None, or a NumPy `[vocab_size, word_dim]` matrix of
            initial embeddings (GloVe). Not in the config (the weights carry
            the trained embeddings).
        seed: int seed of the dropouts and of the question encoder's
            initializers (other initial weights follow Keras' global seed,
            `keras.utils.set_random_seed`).
        **kwargs: `keras.Model` arguments (`name`, `dtype`).

    Call arguments:
        inputs: the VQA input dict (module docstring).
        training: whether dropout is active.

    Returns:
        float32 logits `[B, num_answers]`.
    """

    architectures = ("mcan", "mcan_pa")
    _position_table = "the word-position table of MCAN+PA; MCAN truncates them"
    # The constructor's hyper-parameters, read from an hparams set, and their
    # defaults: MCAN-small's, with the questions' longest length.
    HPARAMS = dict(
        hparams_sets.MCAN,
        max_question_length=hparams_sets.vqa_training_defaults()["max_question_length"],
    )

    def __init__(self, vocab_size, num_answers, *, positional=False, word_vectors=None,
                 seed=None, **kwargs):
        hp = self._take_hparams(kwargs)
        super().__init__(**kwargs)
        check_sizes(hp.hidden_size, hp.num_heads, hp.filter_size, dropout=hp.dropout)
        for name, value in (
            ("vocab_size", vocab_size),
            ("num_answers", num_answers),
            ("num_encoder_layers", hp.num_encoder_layers),
            ("num_decoder_layers", hp.num_decoder_layers),
            ("max_question_length", hp.max_question_length),
        ):
            checks.positive_int(name, value)
        checks.one_of("layer_norm", hp.layer_norm, LAYER_NORMS)
        checks.boolean("positional", positional)
        checks.one_of("pa_fusion", hp.pa_fusion, FUSIONS)
        checks.one_of("pa_object_variant", hp.pa_object_variant, tuple(POA_VARIANTS))
        hp.pa_object_fusion = hp.pa_object_fusion or None  # "": the variant's
        if hp.pa_object_fusion is not None:
            checks.one_of("pa_object_fusion", hp.pa_object_fusion, FUSIONS)
        checks.one_of("pa_word_position_init", hp.pa_word_position_init, WORD_POSITION_INITS)
        hp.dropout, hp.layer_norm_epsilon = float(hp.dropout), float(hp.layer_norm_epsilon)
        self._config = dict(vocab_size=vocab_size, num_answers=num_answers, **vars(hp),
                            positional=positional, seed=seed)
        self.hidden_size = hp.hidden_size
        self.num_answers = num_answers
        self.max_question_length = hp.max_question_length
        self.positional = positional
        self.seed = seed
        seeds = iter(range(101))

        def next_seed():
            return sub_seed(seed, next(seeds))

        policy = dict(dtype=self.dtype_policy)
        self.question_encoder = QuestionEncoder(
            vocab_size, hp.hidden_size, word_dim=hp.word_dim, embeddings=word_vectors,
            seed=next_seed(), name="question_encoder", **policy,
        )
        self.region_projection = keras.layers.Dense(
            hp.hidden_size, name="region_projection", **policy
        )
        block = dict(
            filter_size=hp.filter_size, dropout=hp.dropout, positional=positional,
            fusion=hp.pa_fusion, layer_norm=hp.layer_norm, layer_norm_epsilon=hp.layer_norm_epsilon,
            **policy,
        )
        self.encoder_blocks = [
            MCANSelfAttentionBlock(
                hp.hidden_size, hp.num_heads, seed=next_seed(), name=f"encoder_{i}", **block
            )
            for i in range(hp.num_encoder_layers)
        ]
        self.decoder_blocks = [
            MCANGuidedAttentionBlock(
                hp.hidden_size, hp.num_heads, object_variant=hp.pa_object_variant,
                object_fusion=hp.pa_object_fusion, geometry_dim=hp.pa_geometry_dim,
                seed=next_seed(), name=f"decoder_{i}", **block,
            )
            for i in range(hp.num_decoder_layers)
        ]
        flat = dict(dropout=hp.dropout, **policy)
        self.question_flatten = AttentionFlattening(
            hp.flat_mlp_size, hp.flat_glimpses, hp.flat_output_size, seed=next_seed(),
            name="question_flatten", **flat,
        )
        self.region_flatten = AttentionFlattening(
            hp.flat_mlp_size, hp.flat_glimpses, hp.flat_output_size, seed=next_seed(),
            name="region_flatten", **flat,
        )
        self.fusion_norm = layer_normalization(
            hp.layer_norm, hp.layer_norm_epsilon, name="fusion_norm", **policy
        )
        self.classifier = keras.layers.Dense(num_answers, name="classifier", **policy)
        self.word_positions = self.box_projection = None
        if positional:
            if hp.pa_word_position_init == "normal":
                initializer = keras.initializers.RandomNormal(stddev=1.0, seed=next_seed())
            else:
                initializer = keras.initializers.RandomUniform(-0.05, 0.05, seed=next_seed())
            self.word_positions = keras.layers.Embedding(
                hp.max_question_length, hp.hidden_size, embeddings_initializer=initializer,
                name="word_positions", **policy,
            )
            self.box_projection = keras.layers.Dense(
                hp.hidden_size, name="box_projection", **policy
            )

    # ------------------------------------------------------------ hparams

    @classmethod
    def hparams_arguments(cls, hparams):
        """The constructor's arguments of an `mcan_*` / `mcan_pa_*` set
        (`VQAModel.from_hparams`): MCAN+PA is `positional=True`."""
        values = super().hparams_arguments(hparams)
        return dict(values, positional=hparams.architecture == "mcan_pa")

    # -------------------------------------------------------------- Keras

    def build(self, input_shape):
        shapes = {key: tuple(input_shape[key]) for key in INPUT_KEYS}
        batch, length = shapes["question"]
        regions = shapes["regions"]
        if len(regions) != 3 or regions[-1] is None:
            raise ValueError(
                f"MCAN takes regions [B, N, C] with a known C. Received: {regions}"
            )
        self._check_length(length)
        d = self.hidden_size
        words, objects = (batch, length, d), (regions[0], regions[1], d)
        self.question_encoder.build((batch, length))
        self.region_projection.build(regions)
        for block in self.encoder_blocks:
            block.build(words)
        for block in self.decoder_blocks:
            block.build(objects, words)
        self.question_flatten.build(words)
        self.region_flatten.build(objects)
        flat = (batch, self.question_flatten.output_size)
        self.fusion_norm.build(flat)
        self.classifier.build(flat)
        if self.positional:
            self.word_positions.build((length,))
            self.box_projection.build((regions[0], regions[1], 5))
        self.built = True

    def _forward(self, inputs, training=None, return_maps=False):
        question, regions, boxes, region_mask = check_vqa_inputs(inputs, "MCAN")
        self._check_length(question.shape[1])
        question_mask = self.question_encoder.question_mask(question)
        region_mask = ops.cast(region_mask, "bool")
        words = self.question_encoder(question, training=training)
        objects = self.region_projection(regions)
        encoder, decoder = {}, {}
        if self.positional:
            length = ops.shape(question)[1]
            word_positions = self.word_positions(ops.arange(length))[None]  # [1, T, d]
            box_features = box_position_features(boxes)  # [B, N, 5] float32
            encoder = dict(positions=word_positions)
            decoder = dict(
                boxes=ops.cast(boxes, "float32"),
                positions=self.box_projection(box_features),
                guide_positions=word_positions,
            )
        for block in self.encoder_blocks:
            words = block(words, question_mask, training=training, **encoder)
        for block in self.decoder_blocks:
            objects = block(objects, words, region_mask, question_mask, training=training,
                            **decoder)
        question_summary, question_weights = self.question_flatten(
            words, question_mask, training=training, return_attention_scores=True
        )
        region_summary, region_weights = self.region_flatten(
            objects, region_mask, training=training, return_attention_scores=True
        )
        fused = self.fusion_norm(question_summary + region_summary)
        logits = ops.cast(self.classifier(fused), "float32")
        if return_maps:
            return logits, question_weights, region_weights
        return logits

    def call(self, inputs, training=None):
        return self._forward(inputs, training=training)

    def attention_maps(self, inputs):
        """AttFlat's weights, for pictures.

        Args:
            inputs: the VQA input dict.

        Returns:
            A dict of NumPy float32 arrays: `"region_weights"` `[B, N]` and
            `"question_weights"` `[B, T]`, the AttFlat weights of the regions
            and of the words, averaged over the glimpses (zeros at padding).
        """
        _, question_weights, region_weights = self._forward(
            inputs, training=False, return_maps=True
        )
        return {
            "region_weights": np.asarray(ops.convert_to_numpy(ops.mean(region_weights, -1))),
            "question_weights": np.asarray(
                ops.convert_to_numpy(ops.mean(question_weights, -1))
            ),
        }
