"""`build_vqa_model`: the VQA model of an hparams set, by its `architecture`.

It imports every VQA model; no model imports it (no import circle).
"""

from keras_structattn import checks
from models.vqa.base import ARCHITECTURES
from models.vqa.catt_vqa import CATTVQA
from models.vqa.mcan import MCAN
from models.vqa.muan import MUAN

MODEL_CLASSES = {"mcan": MCAN, "mcan_pa": MCAN, "muan": MUAN, "catt": CATTVQA}


def build_vqa_model(hparams, vocab_size, num_answers, *, word_vectors=None, seed=None):
    """The VQA model of an hparams set, by `hparams.architecture`.

    Args:
        hparams: a `model_type="vqa"` `HParams` with `architecture` in
            ("mcan", "mcan_pa", "muan", "catt").
        vocab_size: the question vocabulary size.
        num_answers: the answer vocabulary size.
        word_vectors: optional `[vocab_size, word_dim]` initial embeddings.
        seed: int seed.

    Returns:
        An unbuilt `keras.Model` with the VQA interface (`models/vqa/base.py`).
    """
    checks.one_of("architecture", hparams.architecture, ARCHITECTURES)
    return MODEL_CLASSES[hparams.architecture].from_hparams(
        hparams, vocab_size, num_answers, word_vectors=word_vectors, seed=seed
    )
