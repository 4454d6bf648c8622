"""Evaluation metrics.

text: corpus BLEU and chrF through sacreBLEU, with a variable number of
references per segment.
"""

from keras_structattn.metrics.text import BleuResult
from keras_structattn.metrics.text import ChrfResult
from keras_structattn.metrics.text import corpus_bleu
from keras_structattn.metrics.text import corpus_chrf
