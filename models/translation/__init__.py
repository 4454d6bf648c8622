"""Translation: `Seq2Seq` (`base.py`), `Transformer`, `LSTMSeq2Seq`; sets in
`hparams_sets.py`. Import the modules themselves (this file imports nothing:
see `models/__init__.py`)."""
