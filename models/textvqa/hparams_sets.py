"""The TextVQA family's hparams sets: M4C (`m4c_*`) and SA-M4C (`sa_m4c_*`).

Plain data (no Keras; `models.registry` collects `SETS`): `model_type=
"textvqa"` and an `architecture`, "m4c" or "sa_m4c" (SA-M4C: spatial layers
after the plain ones).
"""

from models._sets import derive

MODEL_TYPE = "textvqa"
ARCHITECTURES = ("m4c", "sa_m4c")
# `M4C`'s constructor hyper-parameters and defaults (the class's `HPARAMS`).
M4C = dict(
    max_ocr=50,
    num_steps=12,
    hidden_size=768,
    num_heads=12,
    filter_size=3072,
    num_text_layers=3,
    num_layers=4,
    num_spatial_layers=0,
    context_size=3,
    max_question_length=20,
    dropout=0.1,
    layer_norm_epsilon=1e-12,
)


def m4c_hparams(architecture="m4c", **changes):
    """M4C's set (Hu et al., 2020, Sec. 4 and the released config),
    `changes` applied.

    d 768, 12 heads, FFN 3072, a 3-layer question encoder, 4 multimodal
    layers (SA-M4C: 2 plain + 4 spatial, c = 3), 12 decoding steps, 50 OCR
    tokens, 100 objects, questions of up to 20 tokens; Adam at 1e-4 with a
    linear warm-up from 0.2x over 1000 iterations and x0.1 at 14k and 19k
    of 24k iterations (about 89 epochs of TextVQA's 34,602 training
    questions at batch 128), gradients clipped to global norm 0.25; answer
    words seen at least once in the training answers form the vocabulary
    when no file is given (M4C ships a fixed 5k vocabulary).
    """
    values = dict(
        model_type=MODEL_TYPE,
        architecture=architecture,
        **M4C,
        distance_threshold=0.5,
        max_objects=100,
        # Faster R-CNN fc7 (2048); FastText 300 + PHOC 604 + fc7 2048 (M4C's
        # 50 always-zero order dims are left out: they feed nothing).
        object_feature_dim=2048,
        ocr_feature_dim=2952,
        learning_rate=1e-4,
        warmup_steps=1000,
        warmup_factor=0.2,
        decay_steps="14000,19000",
        decay_rate=0.1,
        clip_norm=0.25,
        optimizer_adam_beta1=0.9,
        optimizer_adam_beta2=0.999,
        optimizer_adam_epsilon=1e-8,
        batch_size=128,
        epochs=89,
        min_answer_count=1,
        # Detector boxes are noisy already; the recipe sets it on Shapes
        # world, whose boxes are exact (`features.detector_boxes`).
        box_jitter=0.0,
        # M4C feeds its OCR order vectors as zeros (`features.ocr_features`).
        ocr_order_vectors=False,
    )
    if architecture == "sa_m4c":
        values.update(num_layers=2, num_spatial_layers=4, batch_size=96)
    return derive(values, **changes)


# Shapes world on a CPU: 12 heads (one per spatial relation) of 8.
_TINY = dict(hidden_size=96, filter_size=256, num_text_layers=1, max_objects=8,
             max_ocr=9, learning_rate=1e-3, warmup_steps=100, decay_steps="100000",
             # A cap: the recipe trains Shapes world with early stopping and a
             # time limit (recipes.textvqa.WORLD_TRAINING).
             clip_norm=1.0, batch_size=32, epochs=100, dropout=0.1,
             # Shapes world's answer noise makes one-off misspellings.
             min_answer_count=5,
             # Its answers have at most 3 words: 3 steps and </s>.
             num_steps=4,
             # Without the OCR reading order, M4C stops after one word (docs/textvqa.md).
             ocr_order_vectors=True)


def m4c_base():
    """M4C as Hu et al. (2020) train it on TextVQA: d 768, 4 layers, 12
    steps. Not the baseline SA-M4C is compared with (`m4c_6n_base`)."""
    return m4c_hparams()


def m4c_6n_base():
    """M4C† 6N of Kant et al. (2020, arXiv:2007.12146, Table 2): M4C with 6
    plain layers, the depth and parameters of `sa_m4c_base` (2 plain + 4
    spatial), trained as it is (batch 96): the paper's baseline for
    SA-M4C, so that only the spatial attention differs."""
    return m4c_hparams(num_layers=6, batch_size=96)


def sa_m4c_base():
    """SA-M4C's layers as in the paper (2 plain + 4 spatial) with the
    released config's context c = 3 (`share3`); the paper finds c = 2 best
    (docs/graph_attention.md)."""
    return m4c_hparams("sa_m4c")


def m4c_tiny():
    """A CPU-sized M4C for Shapes world: d 96, 12 heads of 8, 4 layers (M4C's
    depth)."""
    return m4c_hparams(**dict(_TINY, num_layers=4))


def m4c_6n_tiny():
    """`m4c_6n_base` at `m4c_tiny`'s size: 6 plain layers, the depth and
    parameters of `sa_m4c_tiny`."""
    return m4c_hparams(**dict(_TINY, num_layers=6))


def sa_m4c_tiny():
    """`m4c_tiny`'s SA-M4C with the paper's layers: 2 plain + 4 spatial
    (c = 3)."""
    return m4c_hparams("sa_m4c", **dict(_TINY, num_layers=2, num_spatial_layers=4))


SETS = {function.__name__: function for function in (
    m4c_base, m4c_6n_base, sa_m4c_base, m4c_tiny, m4c_6n_tiny, sa_m4c_tiny)}
