"""Caption files: Karpathy's splits, COCO `captions_*.json`, split lists, batches.

The two formats real captioning data comes in:

* Karpathy's `dataset_coco.json` (Karpathy & Fei-Fei, 2015, "Deep
  Visual-Semantic Alignments for Generating Image Descriptions",
  arXiv:1412.2306): every image with its split and its five tokenised
  sentences. Its `restval` images (the part of COCO val2014 outside the 5,000
  val and 5,000 test images) are training images, so they are merged into
  `train`, and the report says how many.
* COCO captions (Lin et al., 2014, arXiv:1405.0312; Chen et al., 2015,
  "Microsoft COCO Captions", arXiv:1504.00325): `{"images": [{id,
  file_name}], "annotations": [{image_id, caption}]}`, as written by
  Shapes world too (docs/shapes_world.md), optionally restricted by a split
  list (a set of ids, or a text file of ids or file names: `read_split_list`).

Every malformed input is a one-line `ValueError` naming the file and the
image id, annotation index or line; nothing is dropped without a count: the
readers attach a `CaptionReport` (`.report`) to what they return.

`caption_ids` / `caption_batch` turn token lists into the tensor2tensor
training pairs `((features, decoder_inputs), targets)`: targets are the word
ids then EOS (1), padded with 0, and decoder inputs are targets shifted right
by one padding id (0 is also the start symbol; there is no BOS).

NumPy and the standard library only.
"""

import dataclasses
import operator
import os
import re

import numpy as np

from keras_structattn import checks
from keras_structattn.data.json_files import load_json
from keras_structattn.data.json_files import text_lines
from keras_structattn.data.json_files import top_list
from keras_structattn.decoding.tokens import EOS_ID
from keras_structattn.decoding.tokens import PAD_ID

KARPATHY_SPLITS = ("train", "restval", "val", "test")
IMAGES_WITHOUT_CAPTIONS = ("error", "skip")
# Karpathy's file names an image by its COCO id (`cocoid`); its Flickr files
# only have the index `imgid`; other conversions use `id`.
_KARPATHY_ID_KEYS = ("cocoid", "imgid", "id")
_WORD = re.compile(r"[^\W_]+")


def default_tokenize(text):
    """Lower-cases `text` and splits it on anything not a letter or a digit.

    A plain stand-in for the PTB tokenizer of the COCO evaluation code (it
    splits "man's" into "man", "s" where PTB gives "man", "'s").

    Args:
        text: a `str`.

    Returns:
        A list of `str` tokens (Unicode letters and digits).
    """
    return _WORD.findall(text.lower())


@dataclasses.dataclass
class ImageCaptions:
    """The captions of one image.

    Attributes:
        image_id: the int image id (COCO's `id`, Karpathy's `cocoid`).
        file_name: the image file name (for Karpathy's file,
            `filepath/filename` when `filepath` is given, e.g.
            `val2014/COCO_val2014_000000391895.jpg`).
        captions: the raw caption strings, as in the file.
        tokens: one token list per caption.
    """

    image_id: int
    file_name: str
    captions: list
    tokens: list


@dataclasses.dataclass
class CaptionReport:
    """What a caption reader read, kept and skipped.

    Attributes:
        path: the caption file.
        images_in_file: images listed in the file.
        images: images returned.
        captions: captions returned.
        splits: `{split: images returned}` (Karpathy's file).
        restval_merged: Karpathy `restval` images merged into `train`.
        outside_split: images of the file left out because the split list
            does not name them.
        skipped_without_captions: ids of images skipped for having no
            caption (`images_without_captions="skip"`).
        empty_captions: captions with no token (kept: their target is EOS).
    """

    path: str
    images_in_file: int = 0
    images: int = 0
    captions: int = 0
    splits: dict = dataclasses.field(default_factory=dict)
    restval_merged: int = 0
    outside_split: int = 0
    skipped_without_captions: list = dataclasses.field(default_factory=list)
    empty_captions: int = 0

    def describe(self):
        """One line: what was read, kept and skipped, and why."""
        parts = [
            f"{self.path}: {self.images} images, {self.captions} captions "
            f"(of {self.images_in_file} images in the file)"
        ]
        if self.splits:
            parts.append(", ".join(f"{k} {v}" for k, v in self.splits.items()))
        if self.restval_merged:
            parts.append(f"{self.restval_merged} restval images merged into train")
        if self.outside_split:
            parts.append(f"{self.outside_split} images outside the split list")
        if self.skipped_without_captions:
            parts.append(
                f"{len(self.skipped_without_captions)} images without captions skipped"
            )
        if self.empty_captions:
            parts.append(f"{self.empty_captions} captions with no token")
        return "; ".join(parts)


class CaptionSplits(dict):
    """`{split: [ImageCaptions]}` with the reader's `CaptionReport` as `.report`."""

    def __init__(self, splits, report):
        super().__init__(splits)
        self.report = report


class CaptionRecords(list):
    """A list of `ImageCaptions` with the reader's `CaptionReport` as `.report`."""

    def __init__(self, records, report):
        super().__init__(records)
        self.report = report


@dataclasses.dataclass
class SplitList:
    """The images of a split list file (see `read_split_list`).

    Attributes:
        path: the file.
        ids: `{image id: line number}` of the lines holding an id.
        names: `{file name: line number}` of the lines holding a file name.
    """

    path: str
    ids: dict
    names: dict

    def __len__(self):
        return len(self.ids) + len(self.names)


def read_split_list(path):
    """Reads a split list: one image id or image file name per line.

    A line of ASCII digits is an image id (`391895`, `000000391895`); any
    other single word is a file name (`COCO_val2014_000000391895.jpg`, or
    its stem), matched against the base name of the caption file's
    `file_name` or its stem. Blank lines and `#` comments (whole-line or
    trailing) are ignored.

    Args:
        path: the text file (UTF-8).

    Returns:
        A `SplitList`.

    Raises:
        FileNotFoundError: if the file is missing.
        ValueError: naming the file and line, for a line of more than one
            word, invalid UTF-8, or a repeated image; for a file that names
            no image.
    """
    name, lines = text_lines(path, "split list")
    ids, names = {}, {}
    for number, line in lines:
        line = line.split("#", 1)[0].strip()
        if not line:
            continue
        words = line.split()
        if len(words) != 1:
            raise ValueError(
                f"{name}, line {number}: expected one image id (digits) or one image "
                f"file name per line, found {len(words)} words: {line[:80]!r}"
            )
        if line.isascii() and line.isdigit():
            table, key = ids, int(line)
        else:
            table, key = names, line
        if key in table:
            raise ValueError(
                f"{name}, line {number}: image {key!r} is already listed on line "
                f"{table[key]}."
            )
        table[key] = number
    if not ids and not names:
        raise ValueError(f"{name}: the split list names no image (only blank or # lines).")
    return SplitList(name, ids, names)


def _int_id(name, where, value, key):
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ValueError(
            f"{name}, {where}: {key!r} must be a non-negative integer image id; "
            f"found {value!r}."
        )
    return value


def _get(name, where, entry, key, kind=None):
    if not isinstance(entry, dict):
        raise ValueError(f"{name}, {where}: expected a JSON object, found {entry!r:.80}.")
    if key not in entry:
        raise ValueError(f"{name}, {where}: missing key {key!r}; keys: {sorted(entry)[:10]}.")
    value = entry[key]
    if kind is not None and not isinstance(value, kind):
        raise ValueError(
            f"{name}, {where}: {key!r} must be a {kind.__name__}; found {value!r:.80}."
        )
    return value


def _check_tokenize(tokenize):
    if tokenize is not None and not callable(tokenize):
        raise ValueError(
            f"Argument `tokenize` must be None or a function str -> list of str. "
            f"Received: tokenize={tokenize!r}"
        )


def _tokens_of(name, where, tokenize, raw):
    tokens = tokenize(raw)
    if not isinstance(tokens, (list, tuple)) or not all(isinstance(t, str) for t in tokens):
        raise ValueError(
            f"{name}, {where}: `tokenize` must return a list of str; "
            f"returned {tokens!r:.80} for {raw!r:.80}."
        )
    return list(tokens)


def read_karpathy(path, *, tokenize=None, images_without_captions="error"):
    """Reads Karpathy's caption splits (`dataset_coco.json` and the like).

    The file (Karpathy & Fei-Fei, 2015, arXiv:1412.2306) is `{"images":
    [{"split", "cocoid" (or "imgid" / "id"), "filename", "filepath"?,
    "sentences": [{"tokens", "raw"}]}], "dataset"}`. The `restval` split
    is merged into `train` (113,287 training images for COCO), as in
    every paper that uses these splits; `report.restval_merged` counts it.

    Args:
        path: the JSON file.
        tokenize: None to use the file's `tokens` (lower-cased), or a
            function `str -> list of str` applied to each `raw` sentence
            (keyword-only).
        images_without_captions: "error" (default) or "skip" (skipped
            images are listed in the report).

    Returns:
        A `CaptionSplits`: `{split: [ImageCaptions]}` for the splits
        present ("train", "val", "test"), in file order, with `.report`.

    Raises:
        FileNotFoundError: if the file is missing.
        ValueError: naming the file and the image id (or `images[i]`) for
            malformed JSON (with its line), a missing key, an unknown
            split, a duplicate image id, or an image without sentences.
    """
    _check_tokenize(tokenize)
    checks.one_of("images_without_captions", images_without_captions, IMAGES_WITHOUT_CAPTIONS)
    name = os.fspath(path)
    images = top_list(name, load_json(name, "Karpathy's caption splits"), "images",
                      "Karpathy's caption splits")
    report = CaptionReport(name, images_in_file=len(images))
    splits = {}
    seen = {}
    for index, entry in enumerate(images):
        where = f"images[{index}]"
        if not isinstance(entry, dict):
            raise ValueError(f"{name}, {where}: expected a JSON object, found {entry!r:.80}.")
        id_key = next((k for k in _KARPATHY_ID_KEYS if k in entry), None)
        if id_key is None:
            raise ValueError(
                f"{name}, {where}: missing the image id (one of {list(_KARPATHY_ID_KEYS)}); "
                f"keys: {sorted(entry)[:10]}."
            )
        image_id = _int_id(name, where, entry[id_key], id_key)
        where = f"image id {image_id} ({where})"
        if image_id in seen:
            raise ValueError(
                f"{name}, {where}: duplicate image id (also images[{seen[image_id]}])."
            )
        seen[image_id] = index
        split = _get(name, where, entry, "split", str)
        if split not in KARPATHY_SPLITS:
            raise ValueError(
                f"{name}, {where}: unknown split {split!r}; allowed: {list(KARPATHY_SPLITS)}."
            )
        file_name = _get(name, where, entry, "filename", str)
        if entry.get("filepath"):
            file_name = f"{entry['filepath']}/{file_name}"
        sentences = _get(name, where, entry, "sentences", list)
        if not sentences:
            if images_without_captions == "skip":
                report.skipped_without_captions.append(image_id)
                continue
            raise ValueError(
                f"{name}, {where}: the image has no sentences (pass "
                "images_without_captions='skip' to skip such images)."
            )
        captions, token_lists = [], []
        for k, sentence in enumerate(sentences):
            at = f"{where}, sentences[{k}]"
            raw = _get(name, at, sentence, "raw", str)
            if tokenize is None:
                tokens = _get(name, at, sentence, "tokens", list)
                if not all(isinstance(t, str) for t in tokens):
                    raise ValueError(f"{name}, {at}: 'tokens' must hold strings.")
                tokens = [t.lower() for t in tokens]
            else:
                tokens = _tokens_of(name, at, tokenize, raw)
            report.empty_captions += not tokens
            captions.append(raw)
            token_lists.append(tokens)
        if split == "restval":
            report.restval_merged += 1
            split = "train"
        splits.setdefault(split, []).append(
            ImageCaptions(image_id, file_name, captions, token_lists)
        )
        report.images += 1
        report.captions += len(captions)
    ordered = {s: splits[s] for s in ("train", "val", "test") if s in splits}
    report.splits = {s: len(v) for s, v in ordered.items()}
    return CaptionSplits(ordered, report)


def _split_selection(name, split_ids):
    """`(ids, names, describe(key))` of a split argument, or None."""
    if split_ids is None:
        return None
    if isinstance(split_ids, (str, os.PathLike)):
        split_ids = read_split_list(split_ids)
    if isinstance(split_ids, SplitList):
        lines = {**split_ids.ids, **split_ids.names}
        return (
            set(split_ids.ids),
            set(split_ids.names),
            lambda key: f"{split_ids.path}, line {lines[key]}",
        )
    if isinstance(split_ids, (dict, bytes)) or not hasattr(split_ids, "__iter__"):
        raise ValueError(
            "Argument `split_ids` must be None, a set of int image ids, a `SplitList` "
            f"or the path of a split list file. Received: {split_ids!r:.80}"
        )
    ids = set()
    for value in split_ids:
        try:
            ids.add(operator.index(value))
        except TypeError:
            raise ValueError(
                f"Argument `split_ids` must hold int image ids. Received: {value!r}"
            ) from None
    if not ids:
        raise ValueError("Argument `split_ids` is empty: it selects no image.")
    return ids, set(), lambda key: "argument `split_ids`"


def read_coco_captions(
    path, *, split_ids=None, tokenize=None, images_without_captions="error"
):
    """Reads a COCO captions file (`captions_train2014.json` and the like).

    The format (Chen et al., 2015, arXiv:1504.00325) is `{"images": [{id,
    file_name, ...}], "annotations": [{image_id, caption, ...}]}`; other
    keys are ignored. Captions keep the file's order within each image.

    Args:
        path: the JSON file.
        split_ids: None (every image), a set of int image ids, a `SplitList`
            or the path of a split list file (`read_split_list`). Images of
            the file outside it are counted in `report.outside_split`; an
            id or name of the split that is not in the file is an error.
        tokenize: a function `str -> list of str`; default
            `default_tokenize` (lower-case, split on non-alphanumerics).
        images_without_captions: "error" (default) or "skip" (skipped
            images are listed in the report).

    Returns:
        A `CaptionRecords` (a list of `ImageCaptions` in the order of the
        file's `images`) with `.report`.

    Raises:
        FileNotFoundError: if a file is missing.
        ValueError: naming the file and the image id, annotation index or
            split-list line, for malformed JSON (with its line), a missing
            key, a duplicate image id, an annotation of an image not in
            `images`, an image with no caption, or a split entry not in the
            file.
    """
    _check_tokenize(tokenize)
    checks.one_of("images_without_captions", images_without_captions, IMAGES_WITHOUT_CAPTIONS)
    tokenize = default_tokenize if tokenize is None else tokenize
    name = os.fspath(path)
    data = load_json(name, "COCO captions")
    images = top_list(name, data, "images", "COCO captions")
    annotations = top_list(name, data, "annotations", "COCO captions")
    records, index_of = [], {}
    for index, entry in enumerate(images):
        where = f"images[{index}]"
        image_id = _int_id(name, where, _get(name, where, entry, "id"), "id")
        if image_id in index_of:
            raise ValueError(
                f"{name}, image id {image_id} ({where}): duplicate image id "
                f"(also images[{index_of[image_id]}])."
            )
        file_name = _get(name, f"image id {image_id} ({where})", entry, "file_name", str)
        index_of[image_id] = index
        records.append(ImageCaptions(image_id, file_name, [], []))
    report = CaptionReport(name, images_in_file=len(records))
    for index, entry in enumerate(annotations):
        where = f"annotations[{index}]"
        image_id = _int_id(name, where, _get(name, where, entry, "image_id"), "image_id")
        caption = _get(name, f"{where} (image id {image_id})", entry, "caption", str)
        if image_id not in index_of:
            raise ValueError(
                f"{name}, {where}: image id {image_id} is not in the file's 'images'."
            )
        records[index_of[image_id]].captions.append(caption)

    selection = _split_selection(name, split_ids)
    if selection is not None:
        ids, names, origin = selection
        for image_id in sorted(ids):
            if image_id not in index_of:
                raise ValueError(f"{origin(image_id)}: image id {image_id} is not in {name}.")
        if names:
            by_name = {}
            for record in records:
                base = os.path.basename(record.file_name)
                by_name.setdefault(base, record.image_id)
                by_name.setdefault(os.path.splitext(base)[0], record.image_id)
            for file_name in sorted(names):
                if file_name not in by_name:
                    raise ValueError(
                        f"{origin(file_name)}: image file name {file_name!r} is not in {name}."
                    )
                ids.add(by_name[file_name])
        kept = [r for r in records if r.image_id in ids]
        report.outside_split = len(records) - len(kept)
        records = kept

    out = []
    for record in records:
        if not record.captions:
            if images_without_captions == "skip":
                report.skipped_without_captions.append(record.image_id)
                continue
            raise ValueError(
                f"{name}, image id {record.image_id}: the image has no caption in "
                "'annotations' (pass images_without_captions='skip' to skip such images)."
            )
        where = f"image id {record.image_id}"
        record.tokens = [_tokens_of(name, where, tokenize, c) for c in record.captions]
        report.empty_captions += sum(not t for t in record.tokens)
        report.captions += len(record.captions)
        out.append(record)
    report.images = len(out)
    return CaptionRecords(out, report)


def coco_annotations(records):
    """Caption records as a COCO captions dict (the references to score against).

    Args:
        records: `ImageCaptions`.

    Returns:
        `{"images": [{"id", "file_name"}], "annotations": [{"id",
        "image_id", "caption"}]}`, the annotations numbered from 0 in
        order (`keras_structattn.metrics.evaluate_captions` reads it).
    """
    pairs = [(r.image_id, c) for r in records for c in r.captions]
    return {
        "images": [{"id": r.image_id, "file_name": r.file_name} for r in records],
        "annotations": [{"id": k, "image_id": i, "caption": c}
                        for k, (i, c) in enumerate(pairs)],
    }


def coco_results(image_ids, captions):
    """Captions in the COCO results format.

    Args:
        image_ids: the images' ids; one that reads as an int (a feature
            file's `"42"`) becomes one, any other is kept as a string.
        captions: one caption string per image.

    Returns:
        `[{"image_id", "caption"}]`, in order.
    """
    def json_id(image_id):
        try:
            return int(image_id)
        except (TypeError, ValueError):
            return str(image_id)

    return [{"image_id": json_id(i), "caption": c} for i, c in zip(image_ids, captions)]


def caption_ids(tokens, vocab, max_length):
    """The target ids of one caption: its first `max_length` words, then EOS.

    Args:
        tokens: a list of `str` tokens.
        vocab: a `WordVocab` (anything with `encode(list of str)`).
        max_length: most words kept (a positive int); the result has at most
            `max_length + 1` ids.

    Returns:
        A list of int ids ending with EOS (1); unknown words are UNK (2).
    """
    checks.positive_int("max_length", max_length)
    return list(vocab.encode(list(tokens))[:max_length]) + [EOS_ID]


def caption_batch(token_lists, vocab, max_length):
    """Padded decoder inputs and targets of a batch of captions.

    Args:
        token_lists: a list of B token lists.
        vocab: a `WordVocab`.
        max_length: most words per caption; both arrays have
            `max_length + 1` columns (the words and EOS).

    Returns:
        `(decoder_inputs, targets)`, int32 `[B, max_length + 1]`: `targets`
        row b is `caption_ids(token_lists[b], ...)` padded with PAD (0), and
        `decoder_inputs` is `targets` shifted right by one PAD (the
        tensor2tensor start symbol), its last column dropped.
    """
    checks.positive_int("max_length", max_length)
    token_lists = list(token_lists)
    if not token_lists:
        raise ValueError("Argument `token_lists` is empty: a batch needs at least one caption.")
    targets = np.full((len(token_lists), max_length + 1), PAD_ID, np.int32)
    for row, tokens in enumerate(token_lists):
        ids = caption_ids(tokens, vocab, max_length)
        targets[row, : len(ids)] = ids
    decoder_inputs = np.full_like(targets, PAD_ID)
    decoder_inputs[:, 1:] = targets[:, :-1]
    return decoder_inputs, targets
