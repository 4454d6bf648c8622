"""Captions of many images, decoded in batches of one shape."""

from keras import ops


def caption_images(generate, vocab, image_ids, features_of, batch_size):
    """Captions of `image_ids`, `batch_size` images a call of `generate`.

    The last batch is padded with its last image, so that one compiled
    program (`keras_structattn.decoding.seq2seq.compiled_generate`) decodes
    every batch.

    Args:
        generate: `generate(features)` -> `(ids [B, L], scores)`.
        vocab: the word vocabulary (`decode(ids)` -> a string).
        image_ids: the images, a sequence.
        features_of: `features_of(image_ids)` -> the encoder input of a batch.
        batch_size: images per batch.

    Returns:
        A list of caption strings, one per image, in order.
    """
    captions = []
    for begin in range(0, len(image_ids), batch_size):
        chunk = list(image_ids[begin:begin + batch_size])
        padded = chunk + [chunk[-1]] * (batch_size - len(chunk))
        ids = ops.convert_to_numpy(generate(features_of(padded))[0])[: len(chunk)]
        captions.extend(vocab.decode(row) for row in ids)
    return captions
