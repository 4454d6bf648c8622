"""Translating sentences with a trained encoder-decoder model and its vocabulary.

    result = translate_sentences(model, vocab, sentences, max_length=48, beam_size=4)
    result.translations   # one string per sentence, in input order
    result.truncated      # how many sources were cut to fit `max_input_length`

The model has the decoding protocol of `keras_structattn.decoding.seq2seq`
(`encode`, `initial_cache`, `decode_step`, `vocab_size`); the vocabulary has
`encode` and `decode` (`keras_structattn.data.vocab`). Sources are tokenised
in Python (`vocab.encode`), so translating needs no TensorFlow, e.g. on the
JAX backend.

Sentences are translated in batches of similar length: sorted by token
count, cut into batches of `batch_size` rows, and each batch padded to
`batch_size` rows and to a multiple of `length_multiple` tokens. Every batch
then has one of a few shapes, and XLA compiles one decoding program per shape
(and per decode length).

`string_translator` does the same inside one TensorFlow graph (tokenising,
decoding, detokenising), as a `tf.Module` that `save_string_translator`
saves as a SavedModel.
"""

import os
import typing

import keras
import numpy as np

from keras_structattn import checks
from keras_structattn.decoding.seq2seq import compiled_generate
from keras_structattn.decoding.tokens import EOS_ID
from keras_structattn.decoding.tokens import PAD_ID


class Translations(typing.NamedTuple):
    """What `translate_sentences` returns.

    Attributes:
        translations: list of `str`, one per source sentence, in input order.
        truncated: the number of sources longer than `max_input_length - 1`
            tokens, whose tail was cut before translating (reported rather
            than dropped silently).
    """

    translations: list
    truncated: int


def padded_length(length, multiple=8):
    """`length` rounded up to a multiple of `multiple`.

    Args:
        length: a non-negative int.
        multiple: a positive int.

    Returns:
        The smallest multiple of `multiple` that is `>= length`.
    """
    return -(-length // multiple) * multiple


def translate_sentences(
    model,
    vocab,
    sentences,
    *,
    max_length,
    max_input_length=None,
    beam_size=4,
    alpha=0.6,
    extra_length=20,
    batch_size=64,
    length_multiple=8,
):
    """Translates sentences in length-sorted, fixed-shape batches.

    Each source is encoded with `vocab.encode`, cut to `max_input_length -
    1` tokens and ended with EOS, so that it is at most `max_input_length`
    tokens long (by default `max_length`, as in training). A batch decodes
    at most `min(padded source length + extra_length, max_length)` target
    tokens (targets were at most `max_length` tokens in training): beam
    search, or greedy search for `beam_size=1`. An empty (or all-space)
    sentence translates to an empty string, with no decoding.

    Args:
        model: an encoder-decoder model with the decoding protocol of
            `keras_structattn.decoding.seq2seq`.
        vocab: the vocabulary of sources and targets (`encode`, `decode`).
        sentences: sequence of source strings.
        max_length: longest target, in tokens, EOS included; and the longest
            source unless `max_input_length` is given.
        max_input_length: longest source, in tokens, EOS included (default
            `max_length`). Models with sinusoidal positions (the Transformer)
            or none (the LSTM) read longer sources than they were trained on.
        beam_size: beam width; 1 for greedy search.
        alpha: GNMT length-penalty exponent of beam search.
        extra_length: decode at most the padded source length plus this
            many tokens.
        batch_size: rows per batch (the last batch is padded to it too).
        length_multiple: batches are padded to a multiple of this many
            tokens.

    Returns:
        A `Translations`: the translations in input order and the number of
        truncated sources (cut to `max_input_length - 1` tokens).

    Raises:
        ValueError: on an invalid argument (names it).
    """
    checks.positive_int("max_length", max_length)
    if max_input_length is None:
        max_input_length = max_length
    checks.positive_int("max_input_length", max_input_length)
    checks.positive_int("beam_size", beam_size)
    checks.non_negative_int("extra_length", extra_length)
    checks.positive_int("batch_size", batch_size)
    checks.positive_int("length_multiple", length_multiple)
    sentences = list(sentences)
    for i, sentence in enumerate(sentences):
        if not isinstance(sentence, str):
            raise ValueError(
                "Argument `sentences` must hold strings. Received: "
                f"sentences[{i}] of type {type(sentence).__name__}"
            )
    out = [""] * len(sentences)
    todo = [i for i, sentence in enumerate(sentences) if sentence.strip()]
    encoded = {i: vocab.encode(sentences[i]) for i in todo}
    truncated = sum(len(ids) > max_input_length - 1 for ids in encoded.values())
    encoded = {i: ids[: max_input_length - 1] + [EOS_ID] for i, ids in encoded.items()}
    order = sorted(todo, key=lambda i: len(encoded[i]))
    programs = {}
    for start in range(0, len(order), batch_size):
        rows = order[start : start + batch_size]
        length = padded_length(max(len(encoded[i]) for i in rows), length_multiple)
        batch = np.full((batch_size, length), PAD_ID, "int32")
        for r, i in enumerate(rows):
            batch[r, : len(encoded[i])] = encoded[i]
        decode_length = min(length + extra_length, max_length)
        if decode_length not in programs:
            programs[decode_length] = compiled_generate(
                model, max_decode_length=decode_length, beam_size=beam_size, alpha=alpha
            )
        ids, _ = programs[decode_length](batch)
        ids = keras.ops.convert_to_numpy(ids)
        for r, i in enumerate(rows):
            out[i] = vocab.decode(ids[r].tolist())
    return Translations(out, int(truncated))


def string_translator(model, vocab, *, max_length, beam_size=4, alpha=0.6):
    """A `tf.Module` translating a batch of raw strings in one graph.

    For `tf.saved_model.save`: the SentencePiece tokenizer, the model and
    the detokenizer are all in the graph, so the SavedModel maps strings to
    strings with no Python code. Sources are tokenised in-graph (TF-text),
    cut to `max_length - 1` tokens and ended with EOS, then decoded with at
    most `max_length` target tokens (fixed-size decoding buffers). Needs
    the TensorFlow backend.

    Args:
        model: an encoder-decoder model with the decoding protocol of
            `keras_structattn.decoding.seq2seq`, on the TensorFlow backend.
        vocab: a `keras_structattn.data.vocab.SubwordVocab`.
        max_length: longest source and target, in tokens, EOS included.
        beam_size: beam width; 1 for greedy search.
        alpha: GNMT length-penalty exponent of beam search.

    Returns:
        A `tf.Module` with three functions of a string tensor `[N]`:
        `translate_ids` (int32 `[N, max_length]`: EOS, then 0s),
        `__call__` (the translations, a string tensor `[N]`) and `serve`
        (`{"translations": ...}`, for a `serving_default` signature).

    Raises:
        ValueError: if `vocab` is not a `SubwordVocab`, or on an invalid
            argument (names it).
    """
    import tensorflow as tf

    from keras_structattn.data.vocab import SubwordVocab
    from keras_structattn.decoding.seq2seq import generate

    if not isinstance(vocab, SubwordVocab):
        raise ValueError(
            "Argument `vocab` must be a SubwordVocab: only SentencePiece "
            f"vocabularies export. Received: {vocab!r}"
        )
    checks.positive_int("max_length", max_length)
    checks.positive_int("beam_size", beam_size)

    class StringTranslator(tf.Module):
        def __init__(self):
            super().__init__()
            self.model = model
            # Tracked, so that the tokenizer's resource is saved too.
            self.tokenizer = vocab._tf_tokenizer()

        @tf.function(input_signature=[tf.TensorSpec([None], tf.string)])
        def translate_ids(self, sentences):
            """Output token ids `[N, max_length]` (EOS, then 0s)."""
            ids = self.tokenizer.tokenize(sentences)[:, : max_length - 1]
            eos = tf.fill([tf.shape(sentences)[0], 1], tf.constant(EOS_ID, ids.dtype))
            ids = tf.concat([ids, tf.RaggedTensor.from_tensor(eos)], axis=1).to_tensor()
            out, _ = generate(
                self.model, tf.cast(ids, tf.int32),
                max_decode_length=max_length, beam_size=beam_size, alpha=alpha,
            )
            return out

        @tf.function(input_signature=[tf.TensorSpec([None], tf.string)])
        def __call__(self, sentences):
            return vocab.tf_decode(self.translate_ids(sentences))

        @tf.function(input_signature=[tf.TensorSpec([None], tf.string, name="sentences")])
        def serve(self, sentences):
            """`__call__` with a named output, as serving signatures have."""
            return {"translations": self(sentences)}

    return StringTranslator()


def save_string_translator(path, model, vocab, **kwargs):
    """Saves `string_translator(model, vocab, **kwargs)` as a SavedModel.

    The SavedModel has a `serving_default` signature (raw source strings
    in, `{"translations": ...}` out); loading it needs `import
    tensorflow_text`. It is written beside `path` and swapped in whole, so
    a reader never sees a half-written one.

    Args:
        path: the SavedModel folder (replaced if it exists).
        model, vocab, **kwargs: the arguments of `string_translator`.

    Returns:
        `path`.
    """
    import shutil

    import tensorflow as tf

    translator = string_translator(model, vocab, **kwargs)
    folder, name = os.path.split(os.path.abspath(path))
    partial, old = (os.path.join(folder, f".{kind}.{name}") for kind in ("partial", "old"))
    shutil.rmtree(partial, ignore_errors=True)
    tf.saved_model.save(translator, partial, signatures={
        "serving_default": translator.serve.get_concrete_function(),
    })
    if os.path.exists(path):
        os.replace(path, old)
    os.replace(partial, path)
    shutil.rmtree(old, ignore_errors=True)
    return path
