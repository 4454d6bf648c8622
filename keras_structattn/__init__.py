"""keras_structattn: structured attention layers for Keras 3.

The library core, lowest layer first (a module imports only from the
layers before it):
    checks: the argument checks every part shares (imports nothing here).
    ops: backend-agnostic tensor functions (keras.ops only).
    layers: Keras layers, drop-ins for `keras.layers.MultiHeadAttention`.
    decoding: beam search, greedy search and sampling; the reserved token ids.

Around it (not imported by `import keras_structattn`):
    data: data shared by the tasks (feature stores, vocabularies, JSON files,
        the generated ShapesWorld dataset).
    metrics: BLEU/chrF, COCO caption, VQA and TextVQA scores.
    tasks: per-task data and helpers (translation, captioning, vqa, textvqa,
        grounding).
    training: hyper-parameters, checkpoints, schedules, losses, distribution,
        self-critical training, CATT dictionary fitting.
"""

from keras_structattn import layers
from keras_structattn import ops

__version__ = "0.1.0"
