"""TextVQA: `TextVQAModel` (`base.py`), M4C and SA-M4C (`m4c.py`); sets in
`hparams_sets.py`. Import the modules themselves (this file imports nothing:
see `models/__init__.py`)."""
