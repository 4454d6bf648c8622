"""The translation family's hparams sets: `transformer_*` and `lstm_*`.

Plain data (no Keras; `models.registry` collects `SETS`). Each model's
values are its constructor's defaults, written only here (`TRANSFORMER`,
`LSTM`: the models' `HPARAMS`), its `model_type`, and the recipe's training
values (`training_defaults`, with the model's changes).
"""

from models._sets import model_set
from models._sets import sets_of


def training_defaults(**changes):
    """Hyper-parameters every translation model's set carries (t2t names).

    They drive the recipe, not the model: label smoothing, the
    `constant * linear_warmup * rsqrt_decay * rsqrt(hidden_size)` learning
    rate, Adam, the batch size in tokens and the longest sequence. The
    captioning family starts from them too.

    Args:
        **changes: values replacing the defaults.

    Returns:
        A dict, to merge into a set.
    """
    values = dict(
        label_smoothing=0.1,
        learning_rate_constant=2.0,
        learning_rate_warmup_steps=8000,
        optimizer_adam_beta1=0.9,
        optimizer_adam_beta2=0.98,
        optimizer_adam_epsilon=1e-9,
        batch_size=4096,  # tokens per batch (source or target, padded)
        max_length=256,
    )
    values.update(changes)
    return values


# tensor2tensor's `transformer_base` sizes and dropouts (the Transformer
# captioners' too).
TRANSFORMER_STACKS = dict(
    hidden_size=512,
    filter_size=2048,
    num_hidden_layers=6,
    num_heads=8,
    layer_prepostprocess_dropout=0.1,
    attention_dropout=0.1,
    relu_dropout=0.1,
)
# Area attention's arguments (`MultiHeadAreaAttention`), off: areas of 1.
AREAS = dict(max_area_width=1, area_key_mode="mean", area_value_mode="sum")
# `Transformer`'s constructor defaults: tensor2tensor's `transformer_base`.
TRANSFORMER = dict(
    TRANSFORMER_STACKS,
    shared_embedding_and_softmax_weights=True,
    num_area_layers=0,
    area_attention_kinds="encoder_self,decoder_self,encdec",
    max_area_height=1,
    memory_height=1,
    **AREAS,
)
# `LSTMSeq2Seq`'s constructor defaults: t2t's `lstm_attention_base`.
LSTM = dict(
    hidden_size=1024,
    num_hidden_layers=2,
    num_heads=4,
    dropout=0.2,
    shared_embedding_and_softmax_weights=True,
    **AREAS,
)
LSTM_TRAINING = dict(learning_rate_constant=1.0, learning_rate_warmup_steps=1000)


def transformer_hparams(**changes):
    """`transformer_base` with `changes` applied."""
    return model_set("transformer", TRANSFORMER, training_defaults(), **changes)


def lstm_hparams(**changes):
    """`lstm_attention_base` with `changes` applied."""
    return model_set("lstm", LSTM, training_defaults(**LSTM_TRAINING), **changes)


def _transformer_sets():
    """`transformer_{tiny,small,base,big}`, each with an `_area` variant
    (area attention of width 3 in the first 2 layers)."""
    sizes = {
        "tiny": dict(num_hidden_layers=2, hidden_size=128, filter_size=512, num_heads=4),
        "small": dict(num_hidden_layers=2, hidden_size=256, filter_size=1024, num_heads=4),
        "base": dict(),
        "big": dict(
            hidden_size=1024, filter_size=4096, num_heads=16, layer_prepostprocess_dropout=0.3
        ),
    }
    area = dict(num_area_layers=2, max_area_width=3)
    for size, values in sizes.items():
        yield f"transformer_{size}", values
        yield f"transformer_{size}_area", dict(values, **area)


def _lstm_sets():
    """The paper's grid (Tables 2 and 4): cells x heads, regular and area
    (max area width 2), token and character level; t2t's
    `lstm_area_attention_base` and its regular twin (the defaults)."""
    for cells in (256, 512, 1024):
        for heads in (1, 4):
            for area in (False, True):
                for char in (False, True):
                    name = f"lstm_seq2seq_{cells}_h{heads}" + ("_area" if area else "")
                    name += "_char" if char else ""
                    values = dict(hidden_size=cells, num_heads=heads)
                    if area:
                        values["max_area_width"] = 2
                    if char:
                        values["max_length"] = 512
                    yield name, values
    yield "lstm_area_attention_base", dict(max_area_width=2)
    yield "lstm_attention_base", dict()


SETS = {
    **sets_of(transformer_hparams, _transformer_sets()),
    **sets_of(lstm_hparams, _lstm_sets()),
}
