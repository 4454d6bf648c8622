"""TextVQA data: the mmf imdb, M4C's answers, PHOC word vectors.

Modules:
    textvqa: the mmf TextVQA imdb, M4C's answer words and targets.
    phoc: PHOC word vectors of OCR tokens.
    features: the questions' object and OCR features (`ImageFeatures`),
        M4C's OCR token features, SA-M4C's random graph.
    batches: M4C / SA-M4C model inputs and targets (`M4CBatches`).
    report: the score table and the attention picture of an answer.

The scores are `keras_structattn.metrics.textvqa`.
"""

from keras_structattn.tasks.textvqa.phoc import PHOC_DIM
from keras_structattn.tasks.textvqa.phoc import phoc_batch
from keras_structattn.tasks.textvqa.textvqa import AnswerWordVocab
from keras_structattn.tasks.textvqa.textvqa import ImdbReport
from keras_structattn.tasks.textvqa.textvqa import TextVQARecord
from keras_structattn.tasks.textvqa.textvqa import answer_scores
from keras_structattn.tasks.textvqa.textvqa import answer_sequences
from keras_structattn.tasks.textvqa.textvqa import m4c_targets
from keras_structattn.tasks.textvqa.textvqa import read_imdb
from keras_structattn.tasks.textvqa.textvqa import simple_word
