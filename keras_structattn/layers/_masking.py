"""Keras-mask plumbing shared by the layers.

Keras 3 keeps the implicit mask of a tensor in a private attribute; its own
`MultiHeadAttention` reads and writes it through these backend helpers, which
are not exported under `keras.*`. We pin `keras<4`, so importing them from
`keras.src` is safe, and keeping the import in one place makes a future move
a one-line change.
"""

from keras.src.backend import get_keras_mask  # noqa: F401
from keras.src.backend import set_keras_mask  # noqa: F401
