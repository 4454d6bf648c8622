"""Text data for translation recipes: corpora, vocabularies, tf.data batches.

Modules:
    parallel_text: reading parallel files and TSV pairs, cleaning, filtering.
    tatoeba: the embedded Tatoeba English–German corpus and its splits.
    vocab: subword (SentencePiece) and character vocabularies with the
        tensor2tensor ids (0 padding, 1 EOS, 2 UNK).
    batching: the bucketed `tf.data` pipeline of `((source, decoder_inputs),
        targets)` batches.
    recorded: those batches recorded once and replayed with NumPy alone.
    shapes_world: the generated vision-and-language dataset (captions,
        VQA, grounding, TextVQA) written in the real formats; NumPy only.
    coco_captions: caption files (Karpathy's splits, COCO captions, split
        lists) and caption id batches.
    word_vocab: `WordVocab`, the caption word vocabulary (same reserved ids).
    image_features: grid and region feature stores (per-image files, HDF5,
        `.npz`) and their padded batches.
    feature_extraction: grid features from image files with a
        `keras.applications` backbone (local weights only).
    vqa: VQA v2 questions, annotations and results, MCAN's question
        tokenizer, `AnswerVocab` and soft-score targets.
    word_vectors: GloVe / word2vec text vectors of a vocabulary's words.
    refcoco: RefCOCO refs with their boxes, box IoU, grounding targets
        and accuracy.
    phoc, textvqa: PHOC word vectors; the mmf TextVQA imdb, M4C's answer words and targets.

TensorFlow is imported on first use of an in-graph function, so the rest
works on machines without it.
"""

from keras_structattn.data import shapes_world
from keras_structattn.data.batching import bucket_batch_sizes
from keras_structattn.data.batching import bucket_boundaries
from keras_structattn.data.batching import make_translation_dataset
from keras_structattn.data.coco_captions import CaptionReport
from keras_structattn.data.coco_captions import ImageCaptions
from keras_structattn.data.coco_captions import caption_batch
from keras_structattn.data.coco_captions import caption_ids
from keras_structattn.data.coco_captions import read_coco_captions
from keras_structattn.data.coco_captions import read_karpathy
from keras_structattn.data.coco_captions import read_split_list
from keras_structattn.data.feature_extraction import extract_grid_features
from keras_structattn.data.image_features import FeatureStore
from keras_structattn.data.image_features import grid_batch
from keras_structattn.data.image_features import open_features
from keras_structattn.data.image_features import region_batch
from keras_structattn.data.image_features import select_images
from keras_structattn.data.parallel_text import FilterReport
from keras_structattn.data.parallel_text import clean_text
from keras_structattn.data.parallel_text import filter_pairs
from keras_structattn.data.parallel_text import read_lines
from keras_structattn.data.parallel_text import read_parallel_files
from keras_structattn.data.parallel_text import read_tsv_pairs
from keras_structattn.data.phoc import PHOC_DIM
from keras_structattn.data.phoc import phoc_batch
from keras_structattn.data.refcoco import RefExpression
from keras_structattn.data.refcoco import box_iou
from keras_structattn.data.refcoco import grounding_accuracy
from keras_structattn.data.refcoco import grounding_targets
from keras_structattn.data.refcoco import read_refs
from keras_structattn.data.shapes_world import generate as generate_shapes_world
from keras_structattn.data.tatoeba import group_references
from keras_structattn.data.tatoeba import load_tatoeba_en_de
from keras_structattn.data.tatoeba import split_of
from keras_structattn.data.textvqa import AnswerWordVocab
from keras_structattn.data.textvqa import ImdbReport
from keras_structattn.data.textvqa import TextVQARecord
from keras_structattn.data.textvqa import answer_scores
from keras_structattn.data.textvqa import answer_sequences
from keras_structattn.data.textvqa import m4c_targets
from keras_structattn.data.textvqa import read_imdb
from keras_structattn.data.textvqa import simple_word
from keras_structattn.data.vocab import CharVocab
from keras_structattn.data.vocab import SubwordVocab
from keras_structattn.data.vocab import load_vocab
from keras_structattn.data.vqa import AnswerVocab
from keras_structattn.data.vqa import VQARecord
from keras_structattn.data.vqa import question_batch
from keras_structattn.data.vqa import read_vqa
from keras_structattn.data.vqa import read_vqa_results
from keras_structattn.data.vqa import records_report
from keras_structattn.data.vqa import soft_score_batch
from keras_structattn.data.vqa import soft_scores
from keras_structattn.data.vqa import tokenize_question
from keras_structattn.data.word_vectors import read_word_vectors
from keras_structattn.data.word_vocab import WordVocab
from keras_structattn.tokens import EOS_ID
from keras_structattn.tokens import PAD_ID
from keras_structattn.tokens import UNK_ID
