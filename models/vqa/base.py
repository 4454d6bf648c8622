"""`VisionLanguageModel` and `VQAModel`: the bases of the VQA family.

The common interface of the library's VQA models (`mcan.MCAN`,
`muan.MUAN`, `catt_vqa.CATTVQA`): `call(inputs)` with `inputs` a dict
`{"question": int32 [B, T] (0 = pad), "regions": float32 [B, N, C],
"boxes": float32 [B, N, 4] normalised [x1, y1, x2, y2] (zeros at padding),
"region_mask": bool [B, N] (True = real)}` (`INPUT_KEYS`,
`check_vqa_inputs`) returns float32 logits `[B, num_answers]`;
`attention_maps(inputs)`; `from_hparams(hparams, vocab_size, num_answers,
*, word_vectors=None, seed=None)` of a `model_type="vqa"` set whose
`architecture` is one of the class's. `build.build_vqa_model` dispatches
on `hparams.architecture`. The sets and the family's training values are in
`hparams_sets.py`.

MUAN's grounding model (`muan.MUANGrounding`) shares the
`VisionLanguageModel` part (the checks of its set, the constructor
arguments read from it, the Keras config).
"""

import keras

from models._sets import take_hparams
from models.vqa.hparams_sets import MODEL_TYPE

ARCHITECTURES = ("mcan", "mcan_pa", "muan", "catt")
INPUT_KEYS = ("question", "regions", "boxes", "region_mask")


def check_vqa_inputs(inputs, model_name):
    """Checks that `inputs` is the VQA input dict; returns its four values."""
    if not isinstance(inputs, dict) or any(key not in inputs for key in INPUT_KEYS):
        keys = sorted(inputs) if isinstance(inputs, dict) else type(inputs).__name__
        raise ValueError(
            f"{model_name} takes a dict with keys {INPUT_KEYS} (question [B, T], regions "
            f"[B, N, C], boxes [B, N, 4], region_mask [B, N]). Received: {keys}"
        )
    return tuple(inputs[key] for key in INPUT_KEYS)


class VisionLanguageModel(keras.Model):
    """Base of the family's models: what an hparams set gives them.

    A subclass sets `model_type`, `architectures` (the sets' `architecture`
    values it builds) and either `HPARAMS` (its constructor's
    hyper-parameters and their defaults, data of `hparams_sets`; its
    constructor takes them with `_take_hparams`) or `_MODEL_HPARAMS` (its
    constructor's arguments read from the set), and keeps its constructor's
    arguments in `self._config` (or overrides `_constructor_config`).
    """

    model_type = None
    architectures = ()
    HPARAMS = {}
    _MODEL_HPARAMS = ()

    @classmethod
    def _take_hparams(cls, kwargs):
        """Pops the `HPARAMS` from a constructor's `kwargs` (`take_hparams`)."""
        return take_hparams(cls.HPARAMS, kwargs)

    @classmethod
    def check_hparams(cls, hparams):
        """Raises ValueError unless `hparams` is a set of this class."""
        if hparams.model_type != cls.model_type or hparams.architecture not in cls.architectures:
            raise ValueError(
                f"{cls.__name__}.from_hparams expects a {cls.model_type} hparams set with "
                f"architecture {' or '.join(repr(a) for a in cls.architectures)}. "
                f"Received: model_type={hparams.model_type!r}, "
                f"architecture={hparams.architecture!r}"
            )

    @classmethod
    def hparams_arguments(cls, hparams):
        """The constructor's keyword arguments of the set `hparams`."""
        return {name: getattr(hparams, name) for name in cls._MODEL_HPARAMS or cls.HPARAMS}

    def _constructor_config(self):
        return self._config

    def get_config(self):
        config = super().get_config()
        config.update(self._constructor_config())
        return config

    @classmethod
    def from_config(cls, config):
        return cls(**config)


class VQAModel(VisionLanguageModel):
    """Base of the VQA models (see the module docstring)."""

    model_type = MODEL_TYPE

    @classmethod
    def from_hparams(cls, hparams, vocab_size, num_answers, *, word_vectors=None, seed=None):
        """The model of a VQA hparams set of the class's architecture.

        Args:
            hparams: a `keras_structattn.training.hparams.HParams` with
                `model_type="vqa"` and an `architecture` of the class's.
            vocab_size: the question vocabulary size.
            num_answers: the answer vocabulary size.
            word_vectors: optional `[vocab_size, word_dim]` initial rows
                (GloVe).
            seed: int seed.

        Returns:
            An unbuilt model.
        """
        cls.check_hparams(hparams)
        return cls(vocab_size, num_answers, word_vectors=word_vectors, seed=seed,
                   **cls.hparams_arguments(hparams))

    # What the word-position table is, for `_check_length`'s message.
    _position_table = "the word-position table"

    def _check_length(self, length):
        """Raises ValueError for questions longer than `max_question_length`
        (a static `length`; None passes)."""
        if length is not None and length > self.max_question_length:
            raise ValueError(
                f"Questions of {length} tokens are longer than max_question_length="
                f"{self.max_question_length} ({self._position_table}); truncate them or "
                "raise max_question_length.")
