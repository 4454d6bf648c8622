"""The model zoo, one package per family.

* `models.translation`: `Seq2Seq` (base), `Transformer`, `LSTMSeq2Seq`.
* `models.captioning`: `Captioner` (base), `TransformerCaptioner` (areas),
  `CATTCaptioner`, `UpDownCaptioner` (+CATT), the image input.
* `models.vqa`: `VQAModel` (base), MCAN and MCAN+PA, MUAN (and
  `MUANGrounding`), Transformer+CATT (`CATTVQA`); `build_vqa_model`.
* `models.textvqa`: `TextVQAModel` (base), M4C and SA-M4C.

Each family declares its hyper-parameter sets in `hparams_sets.py` (plain
data, no Keras); `models.registry` collects every family's sets.

The package `__init__` files import nothing, so that `models.registry` (and
a recipe's `--list_hparams_sets`) stays free of Keras and TensorFlow.
"""
