"""A likelihood probe of a captioner's reliance on a shape -> colour confounder.

CATT (Yang et al., 2021, "Causal Attention for Vision-Language Tasks",
arXiv:2103.03493) is meant to stop a captioner from saying what the
training set's correlations suggest rather than what the image shows
(Table 2: "a red circle" for a circle of another colour, where most
training circles are red). Counting such claims in generated captions
(CHAIR, `keras_structattn.data.shapes_world.hallucination`) degenerates:
a model that names no colour is never wrong, and how many colours a model
states at all swings from seed to seed.

This probe asks the model instead, teacher-forced, independent of what it
chooses to say: on the *conflict* images (the biased shape present, never
in the biased colour), at every reference caption's colour word directly
before the biased shape's word ("a small **blue** circle"), how much more
likely is the true colour than the biased one,

    log p(true colour | image, words before) - log p(biased colour | ...).

Positive values prefer the image; a model that follows the confounder has
negative ones. `colour_log_odds` averages it over those positions (and
reports the share where the biased colour is the more likely).
"""

import numpy as np
from keras import ops

from keras_structattn.data.shapes_world.describe import PLURALS
from keras_structattn.data.shapes_world.describe import SHAPE_WORDS
from keras_structattn.data.shapes_world.scenes import COLOR_NAMES
from keras_structattn.decoding.tokens import EOS_ID
from keras_structattn.decoding.tokens import PAD_ID


def conflict_images(scenes, bias):
    """The image ids of the conflict images of a split.

    Args:
        scenes: the split's scenes (`scenes_<split>.json`'s "scenes":
            dicts with `image_id` and `shapes`, each with `shape`, `color`).
        bias: `(shape, colour)` of the confounder.

    Returns:
        A set of int image ids: scenes with a shape `shape`, none of colour
        `colour`.
    """
    shape, colour = bias
    out = set()
    for scene in scenes:
        kinds = [o["color"] for o in scene["shapes"] if o["shape"] == shape]
        if kinds and colour not in kinds:
            out.add(int(scene["image_id"]))
    return out


def probe_positions(tokens, bias):
    """The positions of the colour words directly before the biased shape.

    Args:
        tokens: a caption's words.
        bias: `(shape, colour)`.

    Returns:
        A list of `(position, colour word)`.
    """
    shape = bias[0]
    nouns = set(SHAPE_WORDS[shape]) | {PLURALS[w] for w in SHAPE_WORDS[shape]}
    return [(i - 1, tokens[i - 1]) for i in range(1, len(tokens))
            if tokens[i] in nouns and tokens[i - 1] in COLOR_NAMES]


def colour_log_odds(logits_of, records, scenes, bias, vocab, max_length=None,
                    batch_images=32):
    """The probe over a split (see the module docstring).

    Args:
        logits_of: `logits_of(image_ids, decoder_inputs)` -> float logits
            `[B, K, T, V]` of the teacher-forced captions `[B, K, T]` of
            those images (the model, called without dropout).
        records: the split's `ImageCaptions` (`image_id`, `tokens`).
        scenes: the split's scenes (`conflict_images`).
        bias: `(shape, colour)` of the confounder.
        vocab: the model's `WordVocab`.
        max_length: captions are cut to this many words, as in training
            (None: whole).
        batch_images: images per call of `logits_of`.

    Returns:
        A dict: `images` (conflict images with a probed position),
        `positions` (probed colour words), `log_odds` (mean of log p(true)
        - log p(biased)), `biased_preferred` (share of positions where the
        biased colour is the likelier), `p_true` and `p_biased` (mean
        probabilities); the values are None without a position.
    """
    biased = vocab.encode([bias[1]])[0]
    conflict = conflict_images(scenes, bias)
    chosen = []
    for record in records:
        if record.image_id not in conflict:
            continue
        captions = [list(t[:max_length]) for t in record.tokens]
        probes = [(k, position, vocab.encode([word])[0])
                  for k, tokens in enumerate(captions)
                  for position, word in probe_positions(tokens, bias)]
        if probes:
            chosen.append((captions, record.image_id, probes))
    margins, p_true, p_biased = [], [], []
    for start in range(0, len(chosen), batch_images):
        part = chosen[start:start + batch_images]
        count = max(len(captions) for captions, _, _ in part)
        length = max(len(t) for captions, _, _ in part for t in captions) + 1
        inputs = np.full((len(part), count, length), PAD_ID, "int32")
        for b, (captions, _, _) in enumerate(part):
            for k, tokens in enumerate(captions):
                ids = list(vocab.encode(tokens)) + [EOS_ID]
                inputs[b, k, 1:len(ids)] = ids[:-1]
        logits = logits_of([image_id for _, image_id, _ in part], inputs)
        log_probs = ops.convert_to_numpy(ops.log_softmax(ops.cast(logits, "float32"), axis=-1))
        for b, (_, _, probes) in enumerate(part):
            for k, position, true in probes:
                row = log_probs[b, k, position]
                margins.append(float(row[true] - row[biased]))
                p_true.append(float(np.exp(row[true])))
                p_biased.append(float(np.exp(row[biased])))

    def mean(values):
        return float(np.mean(values)) if values else None

    return {
        "images": len(chosen),
        "positions": len(margins),
        "log_odds": mean(margins),
        "biased_preferred": mean([m < 0 for m in margins]),
        "p_true": mean(p_true),
        "p_biased": mean(p_biased),
    }
