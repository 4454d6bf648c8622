"""keras_structattn: structured attention layers for Keras 3.

Subpackages:
    ops: backend-agnostic tensor functions (keras.ops only).
    layers: Keras layers, drop-ins for `keras.layers.MultiHeadAttention`.
"""

from keras_structattn import layers
from keras_structattn import ops

__version__ = "0.1.0"
