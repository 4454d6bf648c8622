"""Translation: corpora, bucketed batches, and translating sentences.

Modules:
    parallel_text: reading parallel files and TSV pairs, cleaning, filtering.
    tatoeba: the embedded Tatoeba English–German corpus (`tatoeba_en_de/`)
        and its splits.
    batching: the bucketed `tf.data` pipeline of `((source, decoder_inputs),
        targets)` batches.
    recorded: those batches recorded once and replayed with NumPy alone.
    translate: `translate_sentences` with a trained encoder-decoder model
        and its vocabulary (`keras_structattn.data.vocab`).

Multi-reference grouping for BLEU is `keras_structattn.metrics.text.group_references`.
"""

from keras_structattn.tasks.translation.batching import bucket_batch_sizes
from keras_structattn.tasks.translation.batching import bucket_boundaries
from keras_structattn.tasks.translation.batching import make_translation_dataset
from keras_structattn.tasks.translation.parallel_text import FilterReport
from keras_structattn.tasks.translation.parallel_text import clean_text
from keras_structattn.tasks.translation.parallel_text import filter_pairs
from keras_structattn.tasks.translation.parallel_text import read_lines
from keras_structattn.tasks.translation.parallel_text import read_parallel_files
from keras_structattn.tasks.translation.parallel_text import read_tsv_pairs
from keras_structattn.tasks.translation.tatoeba import load_tatoeba_en_de
from keras_structattn.tasks.translation.tatoeba import split_of
