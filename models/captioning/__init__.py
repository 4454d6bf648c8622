"""Image captioning: `Captioner` (`base.py`), `TransformerCaptioner` (area
attention), `CATTCaptioner`, `UpDownCaptioner` (+CATT) and the image input
(`image_input.py`); sets in `hparams_sets.py`. Import the modules themselves
(this file imports nothing: see `models/__init__.py`)."""
