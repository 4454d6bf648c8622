"""Keras layers of structured attention."""

from keras_structattn.layers.area_attention import MultiHeadAreaAttention
