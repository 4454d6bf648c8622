"""A word vocabulary for captions, with the tensor2tensor ids.

Id 0 is padding, 1 EOS, 2 UNK (`keras_structattn.decoding.tokens`), then the words
seen at least `min_count` times, most frequent first (ties alphabetical), as
in the captioning literature (e.g. Xu et al., 2015, "Show, Attend and Tell",
arXiv:1502.03044, and Anderson et al., 2018, arXiv:1707.07998, which keep
the words seen at least 5 times in the COCO training captions).

NumPy-free and TensorFlow-free: captions are tokenised when read
(`keras_structattn.tasks.captioning.coco_captions`), so the vocabulary only maps words.
"""

import collections
import json
import os

from keras_structattn import checks
from keras_structattn.data.vocab import NUM_RESERVED_IDS
from keras_structattn.data.vocab import _by_count
from keras_structattn.data.vocab import _check_ids_in_range
from keras_structattn.data.vocab import _save_json_vocab
from keras_structattn.data.vocab import _until_eos
from keras_structattn.decoding.tokens import EOS_ID
from keras_structattn.decoding.tokens import PAD_ID
from keras_structattn.decoding.tokens import UNK_ID

PAD_WORD = "<pad>"
EOS_WORD = "</s>"
UNK_WORD = "<unk>"
RESERVED_WORDS = (PAD_WORD, EOS_WORD, UNK_WORD)

_FORMAT = "keras_structattn.WordVocab"


def _check_words(words, where):
    """Checks a word list: distinct non-empty strings without spaces or reserved words."""
    seen = set()
    for word in words:
        if not isinstance(word, str) or not word or word != word.strip() or " " in word:
            raise ValueError(
                f"{where}: words must be non-empty strings without spaces. Received: {word!r}"
            )
        if word in RESERVED_WORDS:
            raise ValueError(f"{where}: {word!r} is a reserved word ({list(RESERVED_WORDS)}).")
        if word in seen:
            raise ValueError(f"{where}: the word {word!r} is listed twice.")
        seen.add(word)


class WordVocab:
    """A caption word vocabulary: 0 `<pad>`, 1 `</s>` (EOS), 2 `<unk>`, then words.

    Create one with `WordVocab.build(token_lists, min_count=5)`,
    `WordVocab.load(path)` or `WordVocab(words)`.

    Args:
        words: the distinct words in id order; `words[i]` gets id `i + 3`.
            The reserved surfaces `<pad>`, `</s>`, `<unk>` are not words
            (they encode to UNK).

    Example:

    ```python
    vocab = WordVocab.build([["a", "red", "circle"], ["a", "square"]], min_count=1)
    ids = vocab.encode("a red square")  # [3, 4, 5]; no EOS
    vocab.decode(ids + [EOS_ID, PAD_ID])  # "a red square"
    ```
    """

    def __init__(self, words):
        words = list(words)
        _check_words(words, "Argument `words`")
        if not words:
            raise ValueError("Argument `words` is empty: a vocabulary needs at least one word.")
        self._words = words
        self._ids = {w: i + NUM_RESERVED_IDS for i, w in enumerate(words)}

    @classmethod
    def build(cls, token_lists, min_count=5):
        """Builds the vocabulary of the words of tokenised captions.

        Args:
            token_lists: an iterable of token lists (lists of `str`), e.g.
                the `tokens` of every training caption.
            min_count: words seen fewer times are left out (they encode to
                UNK); a positive int.

        Returns:
            A `WordVocab`: words by descending count, ties alphabetical.

        Raises:
            ValueError: if `min_count` is not a positive int, a token is not
                a non-empty string without spaces, or no word is seen
                `min_count` times (names the most frequent word's count).
        """
        checks.positive_int("min_count", min_count)
        counts = collections.Counter()
        for index, tokens in enumerate(token_lists):
            if isinstance(tokens, str):
                raise ValueError(
                    "Argument `token_lists` must hold token lists, not strings. "
                    f"Received: item {index} = {tokens!r:.80}"
                )
            counts.update(tokens)
        for token in counts:
            if not isinstance(token, str) or not token or " " in token or token != token.strip():
                raise ValueError(
                    "Argument `token_lists` must hold non-empty string tokens without "
                    f"spaces. Received: a token {token!r}"
                )
        for word in RESERVED_WORDS:
            counts.pop(word, None)
        return cls([w for w, _ in _by_count(counts, min_count, "word", "words")])

    @classmethod
    def load(cls, path):
        """Loads a vocabulary written by `save`.

        Args:
            path: the JSON file.

        Returns:
            A `WordVocab`.

        Raises:
            FileNotFoundError: if the file is missing.
            ValueError: naming the file, if it is not a `WordVocab` file.
        """
        name = os.fspath(path)
        if not os.path.isfile(name):
            raise FileNotFoundError(f"No such file: {name!r}")
        with open(name, "rb") as f:
            raw = f.read()
        try:
            data = json.loads(raw.decode("utf-8"))
        except UnicodeDecodeError as e:
            raise ValueError(f"{name}: not a WordVocab file (not valid UTF-8: {e}).") from None
        except json.JSONDecodeError as e:
            raise ValueError(
                f"{name}, line {e.lineno}: not a WordVocab JSON file ({e.msg})."
            ) from None
        if not isinstance(data, dict) or data.get("format") != _FORMAT:
            raise ValueError(f'{name}: not a WordVocab file (expected "format": "{_FORMAT}").')
        reserved = data.get("reserved")
        if reserved != {"pad": PAD_ID, "eos": EOS_ID, "unk": UNK_ID}:
            raise ValueError(
                f"{name}: the reserved ids must be pad {PAD_ID}, eos {EOS_ID}, unk {UNK_ID}; "
                f"found {reserved!r}."
            )
        words = data.get("words")
        if not isinstance(words, list) or not words:
            raise ValueError(f"{name}: 'words' must be a non-empty list of strings.")
        _check_words(words, name)
        return cls(words)

    def save(self, path):
        """Writes the vocabulary to `path` as JSON (one word per line).

        Args:
            path: the file to write (e.g. `vocab.json`).
        """
        _save_json_vocab(path, _FORMAT, "words", self._words)

    @property
    def words(self):
        """The words in id order (`words[i]` has id `i + 3`)."""
        return list(self._words)

    @property
    def vocab_size(self):
        """Number of ids, the 3 reserved ones included."""
        return NUM_RESERVED_IDS + len(self._words)

    def id_to_word(self, token_id):
        """The word of one id: `<pad>`, `</s>`, `<unk>` for the reserved ids.

        Args:
            token_id: an int in `[0, vocab_size)`.

        Returns:
            A `str`.
        """
        _check_ids_in_range([int(token_id)], self.vocab_size)
        token_id = int(token_id)
        if token_id < NUM_RESERVED_IDS:
            return RESERVED_WORDS[token_id]
        return self._words[token_id - NUM_RESERVED_IDS]

    def encode(self, tokens_or_text):
        """Encodes words into ids (no EOS); unknown words give UNK (2).

        Args:
            tokens_or_text: a list of `str` tokens, or a `str` of tokens
                separated by whitespace (already tokenised: it is not
                lower-cased or split on punctuation).

        Returns:
            A list of int ids.
        """
        if isinstance(tokens_or_text, str):
            tokens = tokens_or_text.split()
        else:
            tokens = list(tokens_or_text)
        for token in tokens:
            if not isinstance(token, str):
                raise ValueError(
                    "Argument `tokens_or_text` must be a str or a list of str. "
                    f"Received: a token of type {type(token).__name__} ({token!r:.80})"
                )
        return [self._ids.get(t, UNK_ID) for t in tokens]

    def decode(self, ids):
        """Decodes ids up to the first EOS (excluded), skipping padding.

        Args:
            ids: a 1-D sequence of ints (list, NumPy array or eager tensor).

        Returns:
            The words joined by single spaces; UNK ids give `<unk>`.

        Raises:
            ValueError: for an id outside `[0, vocab_size)`.
        """
        ids = _until_eos(ids)
        _check_ids_in_range(ids, self.vocab_size)
        return " ".join(
            UNK_WORD if i == UNK_ID else self._words[i - NUM_RESERVED_IDS] for i in ids
        )

    def __len__(self):
        return self.vocab_size

    def __repr__(self):
        shown = ", ".join(repr(w) for w in self._words[:5])
        more = ", ..." if len(self._words) > 5 else ""
        return f"WordVocab(vocab_size={self.vocab_size}, words=[{shown}{more}])"
