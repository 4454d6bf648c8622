"""Keras layers of structured attention."""

from keras_structattn.layers.area_attention import MultiHeadAreaAttention
from keras_structattn.layers.graph_attention import GraphMultiHeadAttention
