"""`TextVQAModel`: the base of the TextVQA family (M4C and SA-M4C).

What its models share: the `model_type="textvqa"` sets (`hparams_sets.py`,
`architecture` "m4c" or "sa_m4c"), `from_hparams(hparams,
question_vocab_size, answer_vocab_size, *, seed=None)` reading the
constructor's arguments (`_MODEL_HPARAMS`) from a set, and the Keras config
(the constructor's arguments, kept in `self._config`).

Inputs (`m4c.M4C`): a dict of the question ids, the object and OCR
features and boxes with their masks, the OCR tokens' embeddings, and the
previous answer tokens while decoding (see `M4C`).
"""

import keras

from models._sets import take_hparams
from models.textvqa.hparams_sets import ARCHITECTURES
from models.textvqa.hparams_sets import MODEL_TYPE


class TextVQAModel(keras.Model):
    """Base of the TextVQA models (see the module docstring)."""

    model_type = MODEL_TYPE
    architectures = ARCHITECTURES
    # The constructor's hyper-parameters and their defaults (data of
    # `hparams_sets`).
    HPARAMS = {}

    @classmethod
    def _take_hparams(cls, kwargs):
        """Pops the `HPARAMS` from a constructor's `kwargs` (`take_hparams`)."""
        return take_hparams(cls.HPARAMS, kwargs)

    @classmethod
    def from_hparams(cls, hparams, question_vocab_size, answer_vocab_size, *, seed=None):
        """The model of an `m4c_*` / `sa_m4c_*` hparams set."""
        if hparams.model_type != cls.model_type:
            raise ValueError(f"{cls.__name__}.from_hparams expects a {cls.model_type} hparams "
                             f"set. Received: model_type={hparams.model_type!r}")
        values = {name: getattr(hparams, name) for name in cls.HPARAMS}
        return cls(question_vocab_size, answer_vocab_size, seed=seed, **values)

    def get_config(self):
        config = super().get_config()
        config.update(self._config)
        return config

    @classmethod
    def from_config(cls, config):
        return cls(**config)
