"""A captioner's batches: the encoder input of images, with their captions."""

import numpy as np

from keras_structattn.data import image_features
from keras_structattn.decoding.tokens import EOS_ID
from keras_structattn.decoding.tokens import PAD_ID
from keras_structattn.tasks.captioning.coco_captions import caption_batch


def encoder_input(store, image_ids, kind, max_regions=None):
    """The encoder input of a batch of images.

    Args:
        store: a `keras_structattn.data.image_features.FeatureStore`.
        image_ids: B int image ids.
        kind: "grid" or "regions".
        max_regions: regions: as `image_features.region_batch` (a positive
            int gives every batch one static shape).

    Returns:
        float32 `[B, H, W, C]` for a grid, else a dict of "features"
        `[B, R, C]`, "boxes" `[B, R, 4]` and "mask" (bool `[B, R]`).
    """
    if kind == "grid":
        return image_features.grid_batch(store, image_ids)
    features, boxes, mask = image_features.region_batch(store, image_ids, max_regions)
    return {"features": features, "boxes": boxes, "mask": mask}


def zero_encoder_input(kind, feature_shape, regions=2):
    """An encoder input of one image of zeros, e.g. to build a captioner.

    Args:
        kind: "grid" or "regions".
        feature_shape: `[H, W, C]` for a grid; regions: `[..., C]`.
        regions: the regions of the image.

    Returns:
        What `encoder_input` returns for one image of that kind.
    """
    if kind == "grid":
        return np.zeros((1, *feature_shape), "float32")
    dim = feature_shape[-1]
    return {"features": np.zeros((1, regions, dim), "float32"),
            "boxes": np.zeros((1, regions, 4), "float32"),
            "mask": np.ones((1, regions), bool)}


def image_captions_batch(records, features, vocab, max_length, captions_per_image=5):
    """A batch of images, each with `captions_per_image` captions.

    Each image is encoded once for all of its captions (self-critical.pytorch's
    `seq_per_img`), a step about as many times cheaper as there are captions.

    Args:
        records: B `ImageCaptions` (their `tokens`).
        features: the encoder input of their images (`encoder_input`).
        vocab: a `WordVocab`.
        max_length: most words per caption (`caption_batch`).
        captions_per_image: N, each image's first N captions (cycled when
            it has fewer).

    Returns:
        `((features, decoder_inputs), targets)`, the ids int32
        `[B, N, max_length + 1]`.
    """
    tokens = [r.tokens[k % len(r.tokens)] for r in records for k in range(captions_per_image)]
    decoder_inputs, targets = caption_batch(tokens, vocab, max_length)
    shape = (len(records), captions_per_image, -1)
    return (features, decoder_inputs.reshape(shape)), targets.reshape(shape)


def teacher_forced_input(vocab, caption):
    """The decoder input that reproduces a caption, and its words.

    Args:
        vocab: a `WordVocab`.
        caption: a caption string (e.g. a generated one).

    Returns:
        `(decoder_inputs, words)`: int32 `[1, T]`, the caption's ids and EOS
        shifted right by one PAD, and its T words, `"<eos>"` last.
    """
    words = caption.split()
    targets = list(vocab.encode(words)) + [EOS_ID]
    return np.array([[PAD_ID] + targets[:-1]], "int32"), words + ["<eos>"]
