"""Vocabularies with the tensor2tensor id convention.

Id 0 is padding, 1 is EOS (end of sentence), 2 is UNK; there is no BOS (the
decoder starts from the padding id, as in tensor2tensor's "shift right").

* `SubwordVocab`: a SentencePiece model (unigram or BPE), trained in memory,
  lossless: `decode(encode(text)) == text` for text of known characters.
* `CharVocab`: one id per Unicode code point.

Both encode in Python (`encode` / `decode`) and inside a TensorFlow graph
(`tf_encode` / `tf_decode`, for `tf.data`), with identical ids, except that
TF-text's SentencePiece can break a tie between equally likely segmentations
the other way (seen for "10,000": 3 of Multi30k's 58,000 sentences); both
segmentations decode to the same text.
"""

import collections
import io
import json
import os

import sentencepiece as spm

from keras_structattn import checks
from keras_structattn.data._tensorflow import import_tensorflow_text
from keras_structattn.data._tensorflow import tf
from keras_structattn.decoding.tokens import EOS_ID
from keras_structattn.decoding.tokens import PAD_ID
from keras_structattn.decoding.tokens import UNK_ID

NUM_RESERVED_IDS = 3

SUBWORD_MODEL_TYPES = ("unigram", "bpe")

# What `decode` writes for UNK in a `CharVocab` (SentencePiece writes " ⁇ ").
CHAR_UNK_SURFACE = "\u2047"

_CHAR_VOCAB_FORMAT = "keras_structattn.CharVocab"


def _ids_to_list(ids):
    """Any 1-D sequence of ints (list, NumPy array, eager tensor) to a list."""
    if hasattr(ids, "numpy"):
        ids = ids.numpy()
    return [int(i) for i in ids]


def _until_eos(ids):
    """The ids before the first EOS, without padding."""
    out = []
    for i in _ids_to_list(ids):
        if i == EOS_ID:
            break
        if i != PAD_ID:
            out.append(i)
    return out


def _tf_until_eos(ids):
    """In-graph `_until_eos` for a batch: `[N, T]` dense or ragged -> ragged.

    Keeps, in each row, the non-padding ids before the first EOS.
    """
    if isinstance(ids, tf.RaggedTensor):
        # Padding is dropped anyway, so filling ragged rows with it is safe.
        ids = ids.to_tensor(default_value=PAD_ID)
    ids = tf.convert_to_tensor(ids)
    ids = tf.cast(ids, tf.int32)
    seen_eos = tf.cumsum(tf.cast(tf.equal(ids, EOS_ID), tf.int32), axis=-1) > 0
    keep = tf.logical_and(tf.logical_not(seen_eos), tf.not_equal(ids, PAD_ID))
    return tf.ragged.boolean_mask(ids, keep)


def _batched(fn, ids):
    """Applies a batch function `[N, T] -> [N]` to one sequence `[T]` too."""
    rank = ids.shape.rank
    if rank == 1:  # never ragged: a RaggedTensor has rank >= 2
        return fn(tf.expand_dims(ids, 0))[0]
    if rank != 2:
        raise ValueError(
            "Argument `ids` must have rank 1 (one sequence) or 2 (a batch). "
            f"Received: ids.shape={ids.shape}"
        )
    return fn(ids)


def _check_ids_in_range(ids, vocab_size):
    for i in ids:
        if not 0 <= i < vocab_size:
            raise ValueError(
                f"Argument `ids` must hold ids in [0, {vocab_size}). "
                f"Received: an id {i}"
            )


def _by_count(counts, min_count, what, plural):
    """The `(item, count)` pairs of `counts` seen `min_count` times or more,
    by descending count, ties in string order: the word and answer
    vocabularies' order.

    Raises:
        ValueError: if no item is left, naming the highest count; `what`
            and `plural` name the items ("word", "words").
    """
    kept = sorted(
        ((w, n) for w, n in counts.items() if n >= min_count), key=lambda x: (-x[1], x[0])
    )
    if not kept:
        most = max(counts.values(), default=0)
        raise ValueError(
            f"No {what} to build a vocabulary from: {len(counts)} distinct {plural}, the "
            f"most frequent seen {most} times, and min_count={min_count}."
        )
    return kept


def _save_json_vocab(path, format_name, key, entries):
    """Writes a vocabulary JSON file: its format tag, version 1, the
    reserved ids and the `entries` under `key`, one per line."""
    data = {
        "format": format_name,
        "version": 1,
        "reserved": {"pad": PAD_ID, "eos": EOS_ID, "unk": UNK_ID},
        key: entries,
    }
    with open(path, "w", encoding="utf-8") as f:
        json.dump(data, f, ensure_ascii=False, indent=0)
        f.write("\n")


def _check_texts(texts, source):
    """Checks that `texts` (a list) holds strings, one of them non-empty."""
    for text in texts:
        if not isinstance(text, str):
            raise ValueError(
                "Argument `texts` must hold strings. "
                f"Received: an item of type {type(text).__name__} ({text!r})"
            )
    if not any(texts):
        origin = f" from {source}" if source else ""
        if not texts:
            received = f"received no texts{origin}"
        elif len(texts) == 1:
            received = f"the one text{origin} is empty"
        else:
            received = f"the {len(texts)} texts{origin} are all empty"
        raise ValueError(
            f"No text to build a vocabulary from: {received}. Argument `texts` "
            "must hold at least one non-empty string."
        )


class SubwordVocab:
    """A SentencePiece subword vocabulary (tensor2tensor id convention).

    Ids: 0 `<pad>`, 1 `</s>` (EOS), 2 `<unk>`, then the subword pieces. The
    model is trained without normalisation (`identity` rule, extra
    whitespace kept), so encoding is lossless for characters seen in
    training: `decode(encode(text)) == text`. Clean text first (see
    `clean_text`) if you want non-ASCII spaces unified.

    Create one with `SubwordVocab.train(...)`, `SubwordVocab.load(path)` or
    `SubwordVocab(model_proto_bytes)`.

    Args:
        model_proto: the serialized SentencePiece `ModelProto` (`bytes`),
            which must use the ids above.

    Example:

    ```python
    vocab = SubwordVocab.train(texts, vocab_size=8000)
    ids = vocab.encode("Tom is here.")  # no EOS
    assert vocab.decode(ids + [EOS_ID, PAD_ID]) == "Tom is here."
    ragged = vocab.tf_encode(tf.constant(["Hi.", "Tom is here."]))
    ```
    """

    def __init__(self, model_proto):
        if not isinstance(model_proto, (bytes, bytearray)):
            raise ValueError(
                "Argument `model_proto` must be the bytes of a serialized "
                f"SentencePiece model. Received: type {type(model_proto).__name__}"
            )
        self._proto = bytes(model_proto)
        self._processor = spm.SentencePieceProcessor(model_proto=self._proto)
        reserved = (
            self._processor.pad_id(),
            self._processor.eos_id(),
            self._processor.unk_id(),
            self._processor.bos_id(),
        )
        if reserved != (PAD_ID, EOS_ID, UNK_ID, -1):
            raise ValueError(
                "Argument `model_proto` must be a SentencePiece model with "
                f"pad_id={PAD_ID}, eos_id={EOS_ID}, unk_id={UNK_ID} and no BOS "
                "(bos_id=-1). Received: (pad, eos, unk, bos) ids "
                f"{reserved}"
            )
        self._tokenizer = None  # tensorflow_text tokenizer, built on first use

    @classmethod
    def train(
        cls,
        texts,
        vocab_size,
        model_type="unigram",
        seed=0,
        character_coverage=1.0,
        *,
        source=None,
    ):
        """Trains a (joint) SentencePiece vocabulary in memory.

        Training is deterministic: one thread, no sentence sampling and a
        fixed random seed, so the same texts give the same model byte for
        byte. Pass source and target texts together for a joint vocabulary.

        Args:
            texts: iterable of `str` (sentences). Empty strings are skipped.
            vocab_size: total number of ids, the 3 reserved ones included.
            model_type: "unigram" (tensor2tensor-like, the default) or "bpe".
            seed: integer seed of SentencePiece's random generator.
            character_coverage: fraction of characters covered by the
                vocabulary, in (0, 1]; the rest map to UNK. 1.0 keeps every
                character of the training text.
            source: optional description of where `texts` come from (e.g.
                the corpus file), named in the error for texts with nothing
                to learn from (keyword-only).

        Returns:
            A `SubwordVocab`.

        Raises:
            ValueError: on an invalid argument, if `texts` holds no non-empty
                string (names `source`), or if `vocab_size` is too large for
                the texts (SentencePiece's message included).
        """
        checks.positive_int("vocab_size", vocab_size)
        checks.one_of("model_type", model_type, SUBWORD_MODEL_TYPES)
        checks.non_negative_int("seed", seed)
        if (
            isinstance(character_coverage, bool)
            or not isinstance(character_coverage, (int, float))
            or not 0 < character_coverage <= 1
        ):
            raise ValueError(
                "Argument `character_coverage` must be a number in (0, 1]. "
                f"Received: character_coverage={character_coverage!r}"
            )
        texts = list(texts)
        _check_texts(texts, source)
        # Empty lines carry nothing to learn from.
        texts = [t for t in texts if t]
        writer = io.BytesIO()
        # The seed is process-global in SentencePiece; set it right before.
        spm.set_random_generator_seed(seed)
        try:
            spm.SentencePieceTrainer.train(
                sentence_iterator=iter(texts),
                model_writer=writer,
                vocab_size=vocab_size,
                model_type=model_type,
                character_coverage=float(character_coverage),
                pad_id=PAD_ID,
                eos_id=EOS_ID,
                unk_id=UNK_ID,
                bos_id=-1,
                # Lossless: no NFKC, keep the text's whitespace as is.
                normalization_rule_name="identity",
                remove_extra_whitespaces=False,
                # Deterministic: one thread and every sentence (no sampling).
                num_threads=1,
                input_sentence_size=0,
                shuffle_input_sentence=False,
                # SentencePiece silently skips longer sentences by default.
                max_sentence_length=1 << 16,
                minloglevel=2,
            )
        except RuntimeError as e:
            if "vocab" in str(e).lower():
                raise ValueError(
                    f"Argument `vocab_size`={vocab_size} does not fit the texts: {e}"
                ) from None
            raise
        return cls(writer.getvalue())

    @classmethod
    def load(cls, path):
        """Loads a vocabulary saved by `save` (a SentencePiece `.model` file).

        Args:
            path: the file written by `save`.

        Returns:
            A `SubwordVocab`.
        """
        with open(path, "rb") as f:
            return cls(f.read())

    def save(self, path):
        """Writes the SentencePiece model proto to `path` (e.g. `*.model`).

        The file is a standard SentencePiece model, usable by any
        SentencePiece tool.

        Args:
            path: the file to write.
        """
        with open(path, "wb") as f:
            f.write(self._proto)

    @property
    def model_proto(self):
        """The serialized SentencePiece model (`bytes`)."""
        return self._proto

    @property
    def vocab_size(self):
        """Number of ids, the 3 reserved ones included."""
        return self._processor.get_piece_size()

    def id_to_piece(self, token_id):
        """The piece (`str`) of one id, e.g. `"▁Tom"`.

        Args:
            token_id: an id in `[0, vocab_size)`.

        Returns:
            The piece as a `str`.
        """
        return self._processor.id_to_piece(int(token_id))

    def encode(self, text):
        """Encodes a string into ids (without EOS).

        Args:
            text: a `str`.

        Returns:
            A list of int ids.
        """
        return self._processor.encode(text, out_type=int)

    def decode(self, ids):
        """Decodes ids up to the first EOS (excluded), ignoring padding.

        UNK ids decode to " ⁇ " (SentencePiece's surface for unknowns).

        Args:
            ids: 1-D sequence of ints (list, NumPy array or eager tensor).

        Returns:
            The decoded `str`.
        """
        ids = _until_eos(ids)
        _check_ids_in_range(ids, self.vocab_size)
        return self._processor.decode(ids)

    def _tf_tokenizer(self):
        if self._tokenizer is None:
            tensorflow_text = import_tensorflow_text()
            # Built eagerly even when first called inside a `tf.function` or
            # `Dataset.map`, so one tokenizer serves every graph.
            with tf.init_scope():
                self._tokenizer = tensorflow_text.SentencepieceTokenizer(
                    model=self._proto, out_type=tf.int32
                )
        return self._tokenizer

    def tf_encode(self, strings):
        """In-graph `encode`, usable in `tf.data` pipelines.

        Args:
            strings: a string tensor, shape `[N]` or a scalar.

        Returns:
            For `[N]` strings, an int32 `tf.RaggedTensor` `[N, None]`; for a
            scalar, an int32 `tf.Tensor` `[None]`. No EOS is appended.
        """
        return self._tf_tokenizer().tokenize(strings)

    def tf_decode(self, ids):
        """In-graph `decode`: stops at the first EOS, ignores padding.

        Args:
            ids: int tensor `[N, T]` (dense, e.g. padded model output, or
                ragged) or `[T]`.

        Returns:
            A string tensor `[N]`, or a scalar string for `[T]` input.
        """
        if not isinstance(ids, tf.RaggedTensor):
            ids = tf.convert_to_tensor(ids)

        def decode_batch(batch):
            return self._tf_tokenizer().detokenize(_tf_until_eos(batch))

        return _batched(decode_batch, ids)

    def __repr__(self):
        return f"SubwordVocab(vocab_size={self.vocab_size})"


class CharVocab:
    """A character (Unicode code point) vocabulary, tensor2tensor ids.

    Ids: 0 padding, 1 EOS, 2 UNK, then the characters sorted by descending
    frequency in the texts it was built from (ties by code point). Unknown
    characters encode to UNK (2), which decodes to "⁇" (U+2047).

    Create one with `CharVocab.build(texts)`, `CharVocab.load(path)` or
    `CharVocab(chars)`.

    Args:
        chars: sequence of distinct single characters; `chars[i]` gets id
            `i + 3`.
    """

    def __init__(self, chars):
        chars = list(chars)
        for c in chars:
            if not isinstance(c, str) or len(c) != 1:
                raise ValueError(
                    "Argument `chars` must hold single characters (code points). "
                    f"Received: {c!r}"
                )
        if len(set(chars)) != len(chars):
            duplicates = sorted(c for c, n in collections.Counter(chars).items() if n > 1)
            raise ValueError(
                f"Argument `chars` must hold distinct characters. Received duplicates: "
                f"{duplicates[:10]!r}"
            )
        self._chars = chars
        self._ids = {c: i + NUM_RESERVED_IDS for i, c in enumerate(chars)}
        self._table = None  # tf lookup tables, built on first use
        self._surfaces = None

    @classmethod
    def build(cls, texts, min_count=1, *, source=None):
        """Builds the vocabulary of the characters of `texts`.

        Args:
            texts: iterable of `str`.
            min_count: characters seen fewer times are left out (-> UNK).
            source: optional description of where `texts` come from (e.g.
                the corpus file), named in the error for texts with no
                character (keyword-only).

        Returns:
            A `CharVocab`.

        Raises:
            ValueError: if `min_count` is not a positive integer, or `texts`
                holds a non-string or no non-empty string (names `source`).
        """
        checks.positive_int("min_count", min_count)
        texts = list(texts)
        _check_texts(texts, source)
        counts = collections.Counter()
        for text in texts:
            counts.update(text)
        kept = [(c, n) for c, n in counts.items() if n >= min_count]
        kept.sort(key=lambda item: (-item[1], ord(item[0])))
        return cls([c for c, _ in kept])

    @classmethod
    def load(cls, path):
        """Loads a vocabulary saved by `save` (JSON).

        Args:
            path: the file written by `save`.

        Returns:
            A `CharVocab`.
        """
        with open(path, encoding="utf-8") as f:
            try:
                data = json.load(f)
            except json.JSONDecodeError as e:
                raise ValueError(f"{os.fspath(path)}: not a CharVocab JSON file ({e}).") from None
        if not isinstance(data, dict) or data.get("format") != _CHAR_VOCAB_FORMAT:
            raise ValueError(
                f"{os.fspath(path)}: not a CharVocab file (expected "
                f'"format": "{_CHAR_VOCAB_FORMAT}").'
            )
        return cls(data["chars"])

    def save(self, path):
        """Writes the vocabulary to `path` as JSON (e.g. `*.json`).

        Args:
            path: the file to write.
        """
        _save_json_vocab(path, _CHAR_VOCAB_FORMAT, "chars", self._chars)

    @property
    def chars(self):
        """The characters, in id order (`chars[i]` has id `i + 3`)."""
        return list(self._chars)

    @property
    def vocab_size(self):
        """Number of ids, the 3 reserved ones included."""
        return NUM_RESERVED_IDS + len(self._chars)

    def encode(self, text):
        """Encodes a string into ids, one per code point (no EOS).

        Args:
            text: a `str`.

        Returns:
            A list of int ids.
        """
        return [self._ids.get(c, UNK_ID) for c in text]

    def decode(self, ids):
        """Decodes ids up to the first EOS (excluded), ignoring padding.

        Args:
            ids: 1-D sequence of ints (list, NumPy array or eager tensor).

        Returns:
            The decoded `str`; UNK ids give "⁇" (U+2047).
        """
        ids = _until_eos(ids)
        _check_ids_in_range(ids, self.vocab_size)
        return "".join(
            CHAR_UNK_SURFACE if i == UNK_ID else self._chars[i - NUM_RESERVED_IDS]
            for i in ids
        )

    def _tf_tables(self):
        if self._table is None:
            with tf.init_scope():  # see SubwordVocab._tf_tokenizer
                keys = tf.constant(self._chars, dtype=tf.string)
                values = tf.range(NUM_RESERVED_IDS, self.vocab_size, dtype=tf.int64)
                self._table = tf.lookup.StaticHashTable(
                    tf.lookup.KeyValueTensorInitializer(keys, values),
                    default_value=tf.constant(UNK_ID, tf.int64),
                )
                self._surfaces = tf.constant(
                    ["", "", CHAR_UNK_SURFACE] + self._chars, dtype=tf.string
                )
        return self._table, self._surfaces

    def tf_encode(self, strings):
        """In-graph `encode`, usable in `tf.data` pipelines.

        Args:
            strings: a string tensor, shape `[N]` or a scalar (UTF-8).

        Returns:
            For `[N]` strings, an int32 `tf.RaggedTensor` `[N, None]`; for a
            scalar, an int32 `tf.Tensor` `[None]`. No EOS is appended.
        """
        table, _ = self._tf_tables()
        chars = tf.strings.unicode_split(strings, "UTF-8")

        def lookup(flat):
            return tf.cast(table.lookup(flat), tf.int32)

        if isinstance(chars, tf.RaggedTensor):
            return tf.ragged.map_flat_values(lookup, chars)
        return lookup(chars)

    def tf_decode(self, ids):
        """In-graph `decode`: stops at the first EOS, ignores padding.

        Args:
            ids: int tensor `[N, T]` (dense or ragged) or `[T]`.

        Returns:
            A string tensor `[N]`, or a scalar string for `[T]` input.
        """
        _, surfaces = self._tf_tables()
        if not isinstance(ids, tf.RaggedTensor):
            ids = tf.convert_to_tensor(ids)

        def decode_batch(batch):
            kept = _tf_until_eos(batch)
            pieces = tf.ragged.map_flat_values(tf.gather, surfaces, kept)
            return tf.strings.reduce_join(pieces, axis=-1)

        return _batched(decode_batch, ids)

    def __repr__(self):
        return f"CharVocab(vocab_size={self.vocab_size})"


def load_vocab(path):
    """Loads a `SubwordVocab` or a `CharVocab` saved with `save`.

    Dispatches on the file's content: a `CharVocab` is JSON, anything else
    is read as a SentencePiece model.

    Args:
        path: the saved file.

    Returns:
        A `SubwordVocab` or a `CharVocab`.

    Raises:
        FileNotFoundError: if the file is missing.
        ValueError: if it is neither kind of vocabulary.
    """
    if not os.path.isfile(path):
        raise FileNotFoundError(f"No such file: {os.fspath(path)!r}")
    with open(path, "rb") as f:
        head = f.read(1)
    if head == b"{":
        return CharVocab.load(path)
    try:
        return SubwordVocab.load(path)
    except (RuntimeError, OSError) as e:
        raise ValueError(
            f"{os.fspath(path)}: neither a CharVocab JSON file nor a SentencePiece model ({e})."
        ) from None
