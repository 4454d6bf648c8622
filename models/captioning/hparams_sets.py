"""The captioning family's hparams sets: `captioner_*`, `catt_captioner_*`
(and their twins `transformer_captioner_*`), `updown_*`.

Plain data (no Keras; `models.registry` collects `SETS`). Each model's
values are its constructor's defaults, written only here
(`TRANSFORMER_CAPTIONER`, `CATT_CAPTIONER`, `UPDOWN`: the models'
`HPARAMS`), its `model_type`, and the family's training values
(`captioning_training_defaults`, with the model's changes).
"""

from models._sets import model_set
from models._sets import sets_of
from models.translation.hparams_sets import TRANSFORMER
from models.translation.hparams_sets import TRANSFORMER_STACKS
from models.translation.hparams_sets import training_defaults


def captioning_training_defaults(**changes):
    """The training values of every captioning set: translation's
    (`training_defaults`) where `batch_size` counts *images* per batch (each
    with its captions), `max_length` is the longest caption in tokens (EOS
    included), and the learning rate warms up over 1,000 steps to a peak of
    about 1.4e-3 (hidden 512) or 2.8e-3 (hidden 128), for data sets far
    smaller than WMT.

    Args:
        **changes: values replacing the defaults.

    Returns:
        A dict, to merge into a set.
    """
    values = dict(
        learning_rate_constant=1.0,
        learning_rate_warmup_steps=1000,
        batch_size=16,  # images per batch, each with its captions
        max_length=32,
    )
    values.update(changes)
    return training_defaults(**values)


# The shared image input (`image_input.ImageInput`; Up-Down has no
# `grid_positions`).
_IMAGE = dict(encoder_input="regions", grid_height=8, grid_width=8)
_POSITIONED_IMAGE = dict(_IMAGE, grid_positions="learned")

# `TransformerCaptioner`'s constructor defaults: the paper's model (6 + 6
# layers of 512, 8 heads, an 8x8 grid): the translation Transformer's
# without `memory_height` (the grid's), areas in the encoder self and
# encoder-decoder attention.
TRANSFORMER_CAPTIONER = dict(
    {name: value for name, value in TRANSFORMER.items() if name != "memory_height"},
    area_attention_kinds="encoder_self,encdec",
    **dict(_POSITIONED_IMAGE, encoder_input="grid"),
)
# `CATTCaptioner`'s constructor defaults (the paper's, K = 500).
CATT_CAPTIONER = dict(
    TRANSFORMER_STACKS, dictionary_size=500, share_weights=True, **_POSITIONED_IMAGE
)
# `UpDownCaptioner`'s constructor defaults (Anderson et al., 2018).
UPDOWN = dict(
    hidden_size=1000,
    attention_size=512,
    dropout=0.5,
    shared_embedding_and_softmax_weights=False,
    **_IMAGE,
    dictionary_size=0,
    share_scorer=True,
)
# Up-Down's training: `WarmupRsqrtDecay(constant, warmup, hidden_size)`
# peaks at 0.5 / sqrt(1000 * 1000) = 5e-4, self-critical.pytorch's rate; no
# label smoothing and Adam's (0.9, 0.999, 1e-8), as there; 10 images of up
# to 17 tokens.
UPDOWN_TRAINING = dict(
    learning_rate_constant=0.5,
    learning_rate_warmup_steps=1000,
    label_smoothing=0.0,
    optimizer_adam_beta2=0.999,
    optimizer_adam_epsilon=1e-8,
    batch_size=10,
    max_length=17,
)

# CPU sizes, shared by the Transformer captioners.
_TINY = dict(num_hidden_layers=2, hidden_size=128, filter_size=512, num_heads=4)


def captioner_hparams(**changes):
    """`captioner_base` with `changes` applied."""
    return model_set("captioner", TRANSFORMER_CAPTIONER, captioning_training_defaults(),
                     **changes)


def catt_captioner_hparams(**changes):
    """`catt_captioner_base` with `changes` applied."""
    return model_set("catt_captioner", CATT_CAPTIONER, captioning_training_defaults(),
                     **changes)


def updown_hparams(**changes):
    """`updown_base` with `changes` applied."""
    return model_set("updown_captioner", UPDOWN,
                     captioning_training_defaults(**UPDOWN_TRAINING), **changes)


def _captioner_sets():
    """`captioner_{tiny,small,base}` (base: the paper's 6+6 layers x 512, 8
    heads), each with `_area2x2` and `_area3x3` variants: area attention in
    the encoder self-attention and the encoder-decoder attention of the
    first layers, a third of them as in the paper (Li et al., 2019, Sec.
    4.3: the first 2 of 6), at least one: 2 of base's 6, 1 of small's 3 and
    1 of tiny's 2."""
    sizes = {
        "tiny": (_TINY, 1),
        "small": (dict(num_hidden_layers=3, hidden_size=256, filter_size=1024, num_heads=4), 1),
        "base": (dict(), 2),
    }
    for size, (values, area_layers) in sizes.items():
        yield f"captioner_{size}", values
        for side in (2, 3):
            area = dict(num_area_layers=area_layers, max_area_width=side, max_area_height=side)
            yield f"captioner_{size}_area{side}x{side}", dict(values, **area)


# Shapes world's dictionaries: K scaled to the data. The paper's K = 500
# summarises COCO (about 10,000 words, 80 object classes in 36 regions of
# 120,000 images); Shapes world has 48 kinds of shape (4 shapes x 6 colours
# x 2 sizes) and a vocabulary of 40-140 words, so 64 entries cover each
# kind with room for positions, where 500 or 1,000 outnumbered the distinct
# word vectors (docs/catt_attention.md).
_WORLD_DICTIONARY = dict(dictionary_size=64)


# The CPU-sized CATT captioner and its twin peak at 0.25 / sqrt(200 * 128) =
# 1.6e-3 (with the recipe's 200 warm-up steps on Shapes world): at the 6.3e-3
# of `learning_rate_constant` 1.0 the twin on region features stalled at
# validation CIDEr-D 0.5 (test 0.46, below the biggest-shape caption's 0.88),
# while at 1.6e-3 it passed 1.1 within 2,000 steps (docs/captioning.md).
_CATT_TINY_TRAINING = dict(learning_rate_constant=0.25)


def _catt_captioner_sets():
    """`catt_captioner_{base,tiny}` and their twins
    `transformer_captioner_{base,tiny}` (`dictionary_size=0`)."""
    tiny = dict(_TINY, **_WORLD_DICTIONARY, **_CATT_TINY_TRAINING)
    for size, values in {"tiny": tiny, "base": dict()}.items():
        yield f"catt_captioner_{size}", values
        yield f"transformer_captioner_{size}", dict(values, dictionary_size=0)


# CPU sizes for Shapes world, for runs of a few hundred steps of 16 images
# x 5 captions: a shorter warm-up to a peak of 0.25 / sqrt(100 * 128) =
# 2.2e-3. The scorer is 32 wide: BUTD+CATT's CS branch scores every
# dictionary entry for every word (B * T * K * attention_size tanh's), and
# at 64 with K = 1000 that made a CPU step about 2.5x slower
# (docs/captioning.md); both sets keep the same sizes so that they compare.
_UPDOWN_TINY = dict(
    hidden_size=128,
    attention_size=32,
    dropout=0.3,
    learning_rate_constant=0.25,
    learning_rate_warmup_steps=100,
    batch_size=16,
)
_UPDOWN_SETS = {
    "updown_base": dict(),
    "updown_catt_base": dict(dictionary_size=1000),
    "updown_tiny": _UPDOWN_TINY,
    "updown_catt_tiny": dict(_UPDOWN_TINY, **_WORLD_DICTIONARY),
}

SETS = {
    **sets_of(captioner_hparams, _captioner_sets()),
    **sets_of(catt_captioner_hparams, _catt_captioner_sets()),
    **sets_of(updown_hparams, _UPDOWN_SETS),
}
