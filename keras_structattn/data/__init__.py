"""Data pieces shared by the tasks: feature stores, vocabularies, JSON files.

The per-task readers and batches are in `keras_structattn.tasks`
(translation, captioning, vqa, textvqa, grounding); the modules here are
the ones several tasks use:

Modules:
    json_files: reading JSON files with clear errors, atomic writes, and the
        record checks (`_Invalid`, `_field`, `_record_id`) of the readers
        and metrics that validate official JSON records.
    vocab: subword (SentencePiece) and character vocabularies with the
        tensor2tensor ids (0 padding, 1 EOS, 2 UNK, from
        `keras_structattn.decoding.tokens`).
    word_vocab: `WordVocab`, the word vocabulary of captions and questions
        (same reserved ids).
    word_vectors: GloVe / word2vec text vectors of a vocabulary's words.
    image_features: grid and region feature stores (per-image files, HDF5,
        `.npz`) and their padded batches.
    feature_extraction: grid features from image files with a
        `keras.applications` backbone (local weights only).
    shapes_world: the generated vision-and-language dataset (captions,
        VQA, grounding, TextVQA) written in the real formats; NumPy only.

TensorFlow is imported on first use of an in-graph function, so the rest
works on machines without it.
"""

from keras_structattn.data import shapes_world
from keras_structattn.data.feature_extraction import extract_grid_features
from keras_structattn.data.image_features import FeatureStore
from keras_structattn.data.image_features import grid_batch
from keras_structattn.data.image_features import open_features
from keras_structattn.data.image_features import region_batch
from keras_structattn.data.image_features import select_images
from keras_structattn.data.shapes_world import generate as generate_shapes_world
from keras_structattn.data.vocab import CharVocab
from keras_structattn.data.vocab import SubwordVocab
from keras_structattn.data.vocab import load_vocab
from keras_structattn.data.word_vectors import read_word_vectors
from keras_structattn.data.word_vocab import WordVocab
from keras_structattn.decoding.tokens import EOS_ID
from keras_structattn.decoding.tokens import PAD_ID
from keras_structattn.decoding.tokens import UNK_ID
