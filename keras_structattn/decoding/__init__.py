"""Autoregressive decoding: beam search, greedy search and sampling (keras.ops only).

Each takes a `step_fn(ids, cache, index) -> (logits, new_cache)` and a cache
(a nested structure of tensors with a leading batch axis), run on any Keras
backend and compile with XLA.
"""

from keras_structattn.decoding.beam_search import beam_search
from keras_structattn.decoding.beam_search import length_penalty
from keras_structattn.decoding.greedy_search import greedy_search
from keras_structattn.decoding.sampling import sample_search
