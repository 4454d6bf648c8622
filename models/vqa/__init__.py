"""Visual question answering (and MUAN's grounding model): `VQAModel`
(`base.py`), MCAN and MCAN+PA (`mcan.py`), MUAN (`muan.py`), Transformer+CATT
(`catt_vqa.py`); `build.build_vqa_model` dispatches on `architecture`; sets in
`hparams_sets.py`. Import the modules themselves (this file imports nothing:
see `models/__init__.py`)."""
