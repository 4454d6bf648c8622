"""The VQA family's hparams sets: MCAN (`mcan_*`), MCAN+PA (`mcan_pa_*`),
MUAN (`muan_*`, and MUAN's grounding sets `muan_grounding_*`) and
Transformer+CATT (`catt_vqa_*`).

Plain data (no Keras; `models.registry` collects `SETS`). Every set is
`model_type="vqa"` (the grounding sets: `"grounding"`) with an
`architecture` (`build.build_vqa_model` dispatches on it), its model's
values, and the family's training values written once here:
`vqa_training_defaults` (and `TINY_TRAINING`, the CPU-sized sets' changes).
"""

import math

from models._sets import derive

MODEL_TYPE = "vqa"


def vqa_training_defaults(**changes):
    """Training and data hyper-parameters every VQA set carries.

    MCAN's (B.5 of the specs; MCAN code `cfgs/base_cfgs.py`): Adam (0.9,
    0.98, 1e-9), batch 64, 13 epochs, the rate at 1/4, 2/4, 3/4 of the base
    over 3 warm-up epochs, x0.2 at the start of epochs 10 and 12
    (`keras_structattn.training.schedules.StepWarmupDecay`); questions of up to 14
    tokens, up to 100 regions of 2048-d features.

    Args:
        **changes: values replacing the defaults.

    Returns:
        A dict, to merge into a set.
    """
    values = dict(
        learning_rate=1e-4,
        optimizer_adam_beta1=0.9,
        optimizer_adam_beta2=0.98,
        optimizer_adam_epsilon=1e-9,
        batch_size=64,
        epochs=13,
        warmup_epochs=3,
        decay_epochs="10,12",
        decay_rate=0.2,
        max_question_length=14,
        max_regions=100,
        feature_dim=2048,
    )
    values.update(changes)
    return values


# The CPU-sized (Shapes world) sets' training changes: a higher rate, one
# warm-up epoch, up to 16 regions of 32-d features.
TINY_TRAINING = dict(learning_rate=1e-3, warmup_epochs=1, feature_dim=32, max_regions=16)


def _vqa_set(architecture, model_values, **training_changes):
    return dict(model_type=MODEL_TYPE, architecture=architecture, **model_values,
                **vqa_training_defaults(**training_changes))


# ---------------------------------------------------------------- MCAN(+PA)

# MCAN-small (with the MCAN+PA fields).
MCAN = dict(
    hidden_size=512,
    num_heads=8,
    filter_size=2048,
    num_encoder_layers=6,
    num_decoder_layers=6,
    word_dim=300,
    flat_mlp_size=512,
    flat_glimpses=1,
    flat_output_size=1024,
    dropout=0.1,
    layer_norm="mcan",
    layer_norm_epsilon=1e-6,
    pa_fusion="scaled_sum",
    pa_object_variant="paper",
    pa_object_fusion="",  # "": the variant's fusion
    pa_geometry_dim=64,
    pa_word_position_init="normal",
)


def mcan_hparams(architecture="mcan", **changes):
    """MCAN-small's set (with the MCAN+PA fields), `changes` applied."""
    return derive(_vqa_set(architecture, MCAN), **changes)


_MCAN_LARGE = dict(hidden_size=1024, filter_size=4096, flat_output_size=2048, learning_rate=5e-5)
# MCAN's 13-epoch schedule stretched to 48 epochs for the tiny pair: on the
# default Shapes world (9.5k questions) 13 epochs stop while MCAN is still
# learning (58% test accuracy, val accuracy rising), and MCAN's schedule
# scaled by 48/13 (warm-up 1 -> 4 epochs, decays at 10, 12 -> 37, 44) reaches
# about 81% in under 10 minutes on 2 cores (docs/vqa.md, "The default run").
TINY_MCAN_SCHEDULE = dict(epochs=48, warmup_epochs=4, decay_epochs="37,44")
_MCAN_TINY = dict(
    hidden_size=64, num_heads=4, filter_size=256, num_encoder_layers=2,
    num_decoder_layers=2, word_dim=64, flat_mlp_size=64, flat_output_size=128,
    **dict(TINY_TRAINING, **TINY_MCAN_SCHEDULE),
)


def mcan_small():
    """MCAN-small (Yu et al., 2019): d 512, 8 heads, 6 + 6 layers."""
    return mcan_hparams()


def mcan_large():
    """MCAN-large: d 1024, FFN 4096, AttFlat output 2048, rate 5e-5 (the
    MCAN code's; it also accumulates gradients over 2 batches of 64)."""
    return mcan_hparams(**_MCAN_LARGE)


def mcan_pa_small():
    """MCAN+PA (Mao et al., 2022) on MCAN-small."""
    return mcan_hparams("mcan_pa")


def mcan_tiny():
    """A CPU-sized MCAN (d 64, 4 heads, 2 + 2 layers)."""
    return mcan_hparams(**_MCAN_TINY)


def mcan_pa_tiny():
    """A CPU-sized MCAN+PA (d 64, 4 heads, 2 + 2 layers)."""
    return mcan_hparams("mcan_pa", **_MCAN_TINY)


# --------------------------------------------------------------------- MUAN

# The paper's base learning rate, 1.5e-2 / sqrt(d L) (Sec. IV-B), for
# d = 768, L = 10: 1.71e-4 (the openvqa code rounds it to 1.7e-4).
PAPER_LEARNING_RATE = 1.5e-2 / math.sqrt(768 * 10)
# MUAN's training changes: the paper's Adam beta2 0.99 and base rate.
MUAN_TRAINING = dict(learning_rate=PAPER_LEARNING_RATE, optimizer_adam_beta2=0.99)
NO_QUADRANT_MASK = "none"

MUAN = dict(
    hidden_size=768,
    num_heads=8,
    filter_size=3072,
    num_blocks=10,
    dropout=0.1,
    attention_dropout=0.1,
    word_dim=300,
    gate_dim=0,
    gate_per_head=True,
    share_gate_weights_across_heads=True,
    qk_gate=True,
    gate_bias_init=0.0,
    mask_quadrants=NO_QUADRANT_MASK,
    layer_norm="keras",
    modality_norm=True,
    use_box_features=False,
    box_feature_dim=0,
)
# `MUANGrounding`'s: box features on (the paper's grounding setup).
MUAN_GROUNDING = dict(MUAN, use_box_features=True)
_MUAN_TINY = dict(hidden_size=64, num_heads=4, filter_size=256, num_blocks=4, word_dim=64,
                  **TINY_TRAINING)


def muan_base():
    """MUAN-10 of the paper (d 768, h 8, d_g = 96 = d/h) for VQA-v2: 14
    question words, up to 100 regions of 2048-d features."""
    return _vqa_set("muan", MUAN, **MUAN_TRAINING)


def muan_tiny():
    """A CPU-sized MUAN (d 64, h 4, L 4) for the Shapes world."""
    return derive(muan_base(), **_MUAN_TINY)


def muan_tiny_nogate():
    """`muan_tiny` without the gate (the paper's Fig. 5a ablation)."""
    return derive(muan_tiny(), qk_gate=False)


# MUAN at d 128 for the gate comparison (benchmarks/muan_gate_seeds.py):
# the tiny set's d_h = 16 is far below the paper's 96, so the gate's
# bilinear pooling works in 16 dimensions; here 4 heads of d_h = d_g = 32,
# 2 blocks (Fig. 5a's smallest depth, L = 2: the gated model leads there
# too; 4 blocks at 22-32 s an epoch on one CPU core put a converged run
# at 25-50 minutes, too long for 15 runs). Trained on MCAN's schedule stretched to 48 epochs, as
# the tiny MCAN pair (13 epochs stopped it still learning), at the paper's
# rate rule 1.5e-2 / sqrt(d L) = 9.4e-4 (Yu et al., 2019, Sec. IV-B).
_MUAN_D128 = dict(hidden_size=128, num_heads=4, filter_size=512, num_blocks=2, word_dim=128,
                  **dict(TINY_TRAINING, learning_rate=1.5e-2 / math.sqrt(128 * 2),
                         **TINY_MCAN_SCHEDULE))
# A gate bias the sigmoid starts near 1 at: sigmoid(4) = 0.982, so the two
# gates scale the logits by 0.96 rather than about 0.25, while the
# sigmoid's slope there (0.018) still lets the gate move.
HIGH_GATE_BIAS = 4.0


def muan_d128():
    """MUAN at d 128 (h 4, d_h 32, L 2) for the Shapes world gate comparison."""
    return derive(muan_base(), **_MUAN_D128)


def muan_d128_nogate():
    """`muan_d128` without the gate (Fig. 5a's ablation)."""
    return derive(muan_d128(), qk_gate=False)


def muan_d128_gate_bias():
    """`muan_d128` with the gate's bias starting at `HIGH_GATE_BIAS` (M near 1 at
    initialisation: the gate's function apart from its initial scaling)."""
    return derive(muan_d128(), gate_bias_init=HIGH_GATE_BIAS)


def muan_grounding_base():
    """MUAN-10 for RefCOCO/+/g (Sec. IV-B): expressions of up to 15 words,
    100 proposals of 2048-d features each concatenated with a 2048-d
    projection of its box feature, lambda = 0.5."""
    values = _vqa_set("muan", MUAN_GROUNDING, **MUAN_TRAINING)
    del values["max_question_length"]  # expressions: max_expression_length
    return dict(values, model_type="grounding", max_expression_length=15,
                rank_weight=1.0, regression_weight=0.5)


def muan_grounding_tiny():
    """A CPU-sized `muan_grounding_base` (d 64, h 4, L 4)."""
    return derive(muan_grounding_base(), **_MUAN_TINY)


# ------------------------------------------------------------ Transformer+CATT

CATT_ARCHITECTURE = "catt"
# LXMERT's layer structure scaled down (d 512, 8 heads, FFN 2048; 6
# language, 3 vision, 3 cross layers against LXMERT's 768/12/3072 and
# 9/5/5), K = 500 for both dictionaries (the paper's).
CATT_VQA = dict(
    hidden_size=512,
    num_heads=8,
    filter_size=2048,
    num_language_layers=6,
    num_vision_layers=3,
    num_cross_layers=3,
    dictionary_size=500,
    word_dim=512,
    dropout=0.1,
    layer_norm_epsilon=1e-12,
)


def catt_vqa_hparams(**changes):
    """`catt_vqa_small`'s set, `changes` applied: trained from scratch with
    the VQA family's schedule (`vqa_training_defaults`: Adam, warm-up, step
    decay) at rate 1e-4, not LXMERT's fine-tuning of a pre-trained model."""
    return derive(_vqa_set(CATT_ARCHITECTURE, CATT_VQA), **changes)


# K scaled to Shapes world, as the captioners' (models/captioning/
# hparams_sets.py, `_WORLD_DICTIONARY`): the paper's K = 500 summarises
# VQA-v2's regions and words, but Shapes world has 48 kinds of shape and a
# few dozen question words, and 500 entries outnumbered the distinct word
# vectors (332 on the confounded world), so K-means centres were copies
# of single rows rather than summaries of the data.
_CATT_VQA_TINY = dict(
    hidden_size=128, num_heads=4, filter_size=256, num_language_layers=2,
    num_vision_layers=2, num_cross_layers=2, word_dim=128, dictionary_size=64,
    **dict(TINY_TRAINING, learning_rate=5e-4, epochs=4, decay_epochs="5"),
)


def catt_vqa_small():
    """Transformer+CATT (LXMERT-style, from scratch): d 512, 6/3/3 layers, K 500."""
    return catt_vqa_hparams()


def catt_vqa_small_nocatt():
    """`catt_vqa_small`'s non-CATT twin ("Transformer"): no dictionaries, no CS stream."""
    return catt_vqa_hparams(dictionary_size=0)


def catt_vqa_tiny():
    """A CPU-sized Transformer+CATT for Shapes world: d 128, 4 heads, 2/2/2 layers, K 64."""
    return catt_vqa_hparams(**_CATT_VQA_TINY)


def catt_vqa_tiny_nocatt():
    """`catt_vqa_tiny`'s non-CATT twin."""
    return catt_vqa_hparams(**dict(_CATT_VQA_TINY, dictionary_size=0))


SETS = {
    function.__name__: function
    for function in (
        mcan_small, mcan_large, mcan_pa_small, mcan_tiny, mcan_pa_tiny,
        muan_base, muan_tiny, muan_tiny_nogate, muan_d128, muan_d128_nogate,
        muan_d128_gate_bias, muan_grounding_base, muan_grounding_tiny,
        catt_vqa_small, catt_vqa_small_nocatt, catt_vqa_tiny, catt_vqa_tiny_nocatt,
    )
}
