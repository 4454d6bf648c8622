"""RefCOCO referring expressions, box IoU and grounding targets.

The files are those of the `refer` toolkit (Yu et al., 2016, "Modeling
Context in Referring Expressions", arXiv:1608.00272; Kazemzadeh et al.,
2014, "ReferItGame", EMNLP), which Shapes world writes too
(docs/shapes_world.md):

* refs: a list of `{ref_id, ann_id, image_id, split, category_id,
  file_name, sent_ids, sentences: [{sent_id, raw, sent, tokens}]}`, as
  `refs(unc).p` (a Python pickle) in the original distribution or as JSON
  (Shapes world's `refs/refs.json`);
* instances: COCO detection JSON (`images` with `width`, `height`;
  `annotations` with `id`, `image_id`, `bbox` `[x, y, w, h]` in pixels).

`read_refs` gives one `RefExpression` per sentence with its target box;
`grounding_targets` turns the region boxes of a detector
(`keras_structattn.data.image_features.region_batch`) and the target box
into region targets, and `grounding_accuracy` is the usual "IoU above 0.5"
comprehension accuracy. NumPy and the standard library only.
"""

import collections
import os
import pickle
from typing import NamedTuple

import numpy as np

from keras_structattn import checks
from keras_structattn.data.json_files import _field
from keras_structattn.data.json_files import _Invalid
from keras_structattn.data.json_files import _skip_or_raise
from keras_structattn.data.json_files import load_json
from keras_structattn.tasks.vqa.vqa import tokenize_question

PICKLE_EXTENSIONS = (".p", ".pkl", ".pickle")
# A box may leave the image by this many pixels (rounding in the annotations).
BOX_TOLERANCE = 1.0


# A split the refer toolkit's files name by its parts: RefCOCO's and
# RefCOCO+'s test set is testA (people) + testB (other objects).
COMBINED_SPLITS = {"test": ("testA", "testB")}


class RefExpression(NamedTuple):
    """One referring expression (a sentence) and the box it refers to.

    Attributes:
        ref_id: the int ref id.
        sent_id: the int sentence id.
        image_id: the int image id.
        split: the ref's split name ("train", "val", "testA", ...).
        tokens: the sentence's `tokens`, lower-cased (or, when the record
            has none, `tokenize_question` of its `sent`, else of `raw`).
        sentence: the raw sentence (`raw`, else `sent`).
        box: the target box `(x1, y1, x2, y2)` in pixels (floats).
        image_size: `(width, height)` in pixels.
        ann_id: the int instance annotation id.
        category_id: the ref's int category id.
    """

    ref_id: int
    sent_id: int
    image_id: int
    split: str
    tokens: list
    sentence: str
    box: tuple
    image_size: tuple
    ann_id: int
    category_id: int

    def normalized_box(self):
        """`box` divided by the image size: coordinates in [0, 1], float32 `[4]`.

        The frame of the region boxes of `region_batch`.
        """
        w, h = self.image_size
        return (np.asarray(self.box, np.float64) / np.array([w, h, w, h])).astype(np.float32)

    def pixel_xywh(self, box):
        """A box of this expression's image from normalised `[x1, y1, x2, y2]`
        to COCO's pixel `[x, y, w, h]` (floats rounded to 2 decimals)."""
        w, h = self.image_size
        x1, y1, x2, y2 = (float(v) for v in np.asarray(box) * np.array([w, h, w, h]))
        return [round(x1, 2), round(y1, 2), round(x2 - x1, 2), round(y2 - y1, 2)]


def _load_refs(name):
    if not os.path.isfile(name):
        raise FileNotFoundError(f"No such refs file: {name!r}")
    if os.path.splitext(name)[1].lower() in PICKLE_EXTENSIONS:
        # The original RefCOCO refs are a pickle: unpickling runs code named
        # by the file, so only a trusted local file may be read this way.
        with open(name, "rb") as f:
            try:
                return pickle.load(f, encoding="latin1")
            except Exception as e:  # noqa: BLE001 - any unpickling failure
                raise ValueError(f"{name}: not a readable pickle ({e}).") from None
    return load_json(name, "RefCOCO refs")


def _int(where, entry, key):
    value = _field(where, entry, key, int)
    if value < 0:
        raise _Invalid("bad_id", f"{where}: {key!r} must be non-negative; found {value}.")
    return value


def _number(where, value, what):
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not np.isfinite(value):
        raise _Invalid("bad_type", f"{where}: {what} must be a finite number; found {value!r:.80}.")
    return float(value)


def _instances(name):
    data = load_json(name, "COCO instances")
    if not isinstance(data, dict):
        raise ValueError(f"{name}: expected a COCO instances JSON object.")
    tables = {}
    for key in ("images", "annotations"):
        if not isinstance(data.get(key), list):
            raise ValueError(f"{name}: expected a list {key!r} (COCO instances).")
    images = {}
    for index, entry in enumerate(data["images"]):
        where = f"{name}, images[{index}]"
        try:
            if not isinstance(entry, dict):
                raise _Invalid("bad_type", f"{where}: expected a JSON object.")
            image_id = _int(where, entry, "id")
            where = f"{where} (image id {image_id})"
            for key in ("width", "height"):
                if key not in entry:
                    raise _Invalid("missing_key", f"{where}: missing key {key!r}.")
            size = tuple(_number(where, entry[k], repr(k)) for k in ("width", "height"))
        except _Invalid as e:
            raise ValueError(str(e)) from None
        if min(size) <= 0:
            raise ValueError(f"{where}: non-positive image size {size}.")
        images[image_id] = size
    tables["images"] = images
    annotations = {}
    for index, entry in enumerate(data["annotations"]):
        where = f"{name}, annotations[{index}]"
        try:
            if not isinstance(entry, dict):
                raise _Invalid("bad_type", f"{where}: expected a JSON object.")
            ann_id = _int(where, entry, "id")
            where = f"{name}, ann_id {ann_id} (annotations[{index}])"
            image_id = _int(where, entry, "image_id")
            bbox = _field(where, entry, "bbox", list)
            if len(bbox) != 4:
                raise _Invalid("bad_box", f"{where}: 'bbox' must be [x, y, w, h]; found {bbox}.")
            bbox = tuple(_number(where, v, "'bbox' values") for v in bbox)
        except _Invalid as e:
            raise ValueError(str(e)) from None
        annotations[ann_id] = (image_id, bbox, where)
    tables["annotations"] = annotations
    return tables


def _sentences(where, entry):
    """`[(sent_id, tokens, sentence)]` in `sent_ids` order."""
    sent_ids = _field(where, entry, "sent_ids", list)
    sentences = _field(where, entry, "sentences", list)
    by_id = {}
    for k, sentence in enumerate(sentences):
        at = f"{where}, sentences[{k}]"
        if not isinstance(sentence, dict):
            raise _Invalid("bad_type", f"{at}: expected an object, found {sentence!r:.80}.")
        sent_id = _int(at, sentence, "sent_id")
        raw = sentence.get("raw", sentence.get("sent"))
        if not isinstance(raw, str):
            raise _Invalid("missing_key", f"{at}: needs a string 'raw' or 'sent'.")
        tokens = sentence.get("tokens")
        if tokens is None:
            text = sentence.get("sent", raw)
            tokens = tokenize_question(text if isinstance(text, str) else raw)
        elif not isinstance(tokens, list) or not all(isinstance(t, str) for t in tokens):
            raise _Invalid("bad_type", f"{at}: 'tokens' must be a list of strings.")
        else:
            tokens = [t.lower() for t in tokens]
        by_id[sent_id] = (tokens, raw)
    out = []
    for sent_id in sent_ids:
        if isinstance(sent_id, bool) or not isinstance(sent_id, int):
            raise _Invalid("bad_id", f"{where}: 'sent_ids' must hold ints; found {sent_id!r}.")
        if sent_id not in by_id:
            raise _Invalid(
                "sentence_missing", f"{where}: sent_id {sent_id} of 'sent_ids' has no sentence."
            )
        out.append((sent_id, *by_id.pop(sent_id)))
    if by_id:
        raise _Invalid(
            "sentence_missing",
            f"{where}: sentences {sorted(by_id)[:5]} are not listed in 'sent_ids'.",
        )
    return out


def read_refs(refs_path, instances_path, *, splits=None, skip_invalid=False):
    """Reads RefCOCO refs with their target boxes.

    Args:
        refs_path: the refs file: a pickle (`.p`, `.pkl`, `.pickle`, read
            with `pickle.load`, so it must be a trusted local file) or JSON.
        instances_path: the COCO instances JSON.
        splits: None (every split) or the split names to keep (a str or a
            collection of str); refs of other splits are counted under
            "outside_splits" (keyword-only). The refer toolkit's names:
            RefCOCO and RefCOCO+ test on `testA` and `testB` and have no
            `test`; asked for `test`, a file without one gives its testA and
            testB refs, as split "test" (`COMBINED_SPLITS`).
        skip_invalid: False (default) raises on the first malformed ref;
            True skips it and counts it in the report. Malformed instances
            always raise.

    Returns:
        `(expressions, report)`: a list of `RefExpression`, one per sentence
        in ref then `sent_ids` order, and a `collections.Counter` with
        "refs_in_file", "refs" and "sentences" (returned), "outside_splits",
        "split/<name>" (sentences returned per split) and one
        "skipped/<reason>" per skipped ref; reasons: "bad_type",
        "missing_key", "bad_id", "duplicate_ref_id", "duplicate_sent_id",
        "unknown_ann_id", "unknown_image", "image_id_mismatch", "bad_box",
        "sentence_missing".

    Raises:
        FileNotFoundError: if a file is missing.
        ValueError: naming the file and the ref_id / ann_id (or list index),
            for an unreadable file, a ref whose ann_id is not in the
            instances, an image missing from the instances' images, a box of
            non-positive size or more than 1 px outside its image, sent_ids
            without a sentence (or the reverse), duplicate ids, or a split
            name in `splits` that no ref has (naming the splits found).
    """
    checks.boolean("skip_invalid", skip_invalid)
    if splits is not None:
        splits = {splits} if isinstance(splits, str) else set(splits)
        if not splits or not all(isinstance(s, str) for s in splits):
            raise ValueError(
                f"Argument `splits` must be None or split names (str). Received: {splits!r}"
            )
    name = os.fspath(refs_path)
    iname = os.fspath(instances_path)
    refs = _load_refs(name)
    if not isinstance(refs, list):
        raise ValueError(f"{name}: expected a list of refs; found a {type(refs).__name__}.")
    combined = {}  # {part: the split asked for}, for a file without that split
    if splits is not None:
        in_file = {e.get("split") for e in refs if isinstance(e, dict)}
        for split, parts in COMBINED_SPLITS.items():
            if split in splits and split not in in_file and set(parts) & in_file:
                combined.update({part: split for part in parts if part not in splits})
                splits = (splits - {split}) | (set(parts) & in_file)
    tables = _instances(iname)
    images, annotations = tables["images"], tables["annotations"]
    report = collections.Counter(refs_in_file=len(refs), refs=0, sentences=0, outside_splits=0)
    seen_refs, seen_sents, found_splits = {}, {}, set()
    out = []
    for index, entry in enumerate(refs):
        where = f"{name}, refs[{index}]"
        try:
            if not isinstance(entry, dict):
                raise _Invalid("bad_type", f"{where}: expected an object, found {entry!r:.80}.")
            ref_id = _int(where, entry, "ref_id")
            where = f"{name}, ref_id {ref_id} (refs[{index}])"
            if ref_id in seen_refs:
                raise _Invalid(
                    "duplicate_ref_id",
                    f"{where}: duplicate ref_id (also refs[{seen_refs[ref_id]}]).",
                )
            seen_refs[ref_id] = index
            split = _field(where, entry, "split", str)
            found_splits.add(split)
            if splits is not None and split not in splits:
                report["outside_splits"] += 1
                continue
            ann_id = _int(where, entry, "ann_id")
            image_id = _int(where, entry, "image_id")
            category_id = _int(where, entry, "category_id")
            sentences = _sentences(where, entry)
            if ann_id not in annotations:
                raise _Invalid("unknown_ann_id", f"{where}: ann_id {ann_id} is not in {iname}.")
            ann_image, (x, y, w, h), ann_where = annotations[ann_id]
            if ann_image != image_id:
                raise _Invalid(
                    "image_id_mismatch",
                    f"{where}: image_id {image_id}, but {ann_where} is on image {ann_image}.",
                )
            if image_id not in images:
                raise _Invalid(
                    "unknown_image", f"{where}: image_id {image_id} is not in {iname}'s images."
                )
            width, height = images[image_id]
            x2, y2 = x + w, y + h
            if w <= 0 or h <= 0:
                raise _Invalid("bad_box", f"{where}: {ann_where} has a box of size {w} x {h}.")
            t = BOX_TOLERANCE
            if x < -t or y < -t or x2 > width + t or y2 > height + t:
                raise _Invalid(
                    "bad_box",
                    f"{where}: {ann_where} box ({x}, {y}, {x2}, {y2}) leaves the "
                    f"{width:g} x {height:g} image by more than {t:g} px.",
                )
            for sent_id, _, _ in sentences:
                if sent_id in seen_sents:
                    raise _Invalid(
                        "duplicate_sent_id",
                        f"{where}: sent_id {sent_id} also belongs to ref_id {seen_sents[sent_id]}.",
                    )
        except _Invalid as e:
            _skip_or_raise(e, skip_invalid, report)
            continue
        for sent_id, tokens, sentence in sentences:
            seen_sents[sent_id] = ref_id
            out.append(
                RefExpression(
                    ref_id, sent_id, image_id, split, tokens, sentence,
                    (x, y, x2, y2), (width, height), ann_id, category_id,
                )
            )
        report["refs"] += 1
        report[f"split/{split}"] += len(sentences)
    if splits is not None and splits - found_splits:
        raise ValueError(
            f"{name}: no ref of split(s) {sorted(splits - found_splits)}; splits in the file: "
            f"{sorted(found_splits)}."
        )
    report["sentences"] = len(out)
    if combined:
        out = [r._replace(split=combined.get(r.split, r.split)) for r in out]
        for part, split in combined.items():
            report[f"split/{split}"] += report.pop(f"split/{part}", 0)
    return out, report


def _boxes(name, boxes):
    array = np.asarray(boxes, np.float64)
    if array.ndim != 2 or array.shape[-1] != 4:
        raise ValueError(
            f"Argument `{name}` must have shape [N, 4] (x1, y1, x2, y2). "
            f"Received: shape {array.shape}"
        )
    if not np.all(np.isfinite(array)):
        raise ValueError(f"Argument `{name}` holds non-finite values.")
    return array


def _iou(a, b):
    """IoU of broadcast boxes `[..., 4]` (float64; 0 where the union is 0)."""
    iw = np.clip(np.minimum(a[..., 2], b[..., 2]) - np.maximum(a[..., 0], b[..., 0]), 0, None)
    ih = np.clip(np.minimum(a[..., 3], b[..., 3]) - np.maximum(a[..., 1], b[..., 1]), 0, None)
    inter = iw * ih
    area_a = np.clip(a[..., 2] - a[..., 0], 0, None) * np.clip(a[..., 3] - a[..., 1], 0, None)
    area_b = np.clip(b[..., 2] - b[..., 0], 0, None) * np.clip(b[..., 3] - b[..., 1], 0, None)
    union = area_a + area_b - inter
    return np.divide(inter, union, out=np.zeros_like(inter), where=union > 0)


def box_iou(boxes_a, boxes_b):
    """Pairwise IoU of two sets of boxes `(x1, y1, x2, y2)`.

    Boxes with x2 < x1 or y2 < y1 count as empty. Two boxes whose union is
    empty have IoU 0 (never NaN).

    Args:
        boxes_a: `[N, 4]`.
        boxes_b: `[M, 4]`, in the same frame (pixels or normalised).

    Returns:
        float32 `[N, M]` in [0, 1].
    """
    a = _boxes("boxes_a", boxes_a)
    b = _boxes("boxes_b", boxes_b)
    return _iou(a[:, None, :], b[None, :, :]).astype(np.float32)


def grounding_targets(region_boxes, region_mask, gt_box, *, target="iou", threshold=0.5):
    """Region targets of referring expressions: IoU with the target box.

    Each real region's target is its IoU with the ground-truth box,
    normalised to sum to 1 over the real regions (a soft version of the
    "best proposal" label of, e.g., MAttNet, Yu et al., 2018,
    arXiv:1801.08186). When no region overlaps the target box at all, all
    the mass goes to `best_region`: the region of highest IoU, ties (so
    the all-zero case) broken by the smallest distance between box centres,
    then by the lowest index.

    Args:
        region_boxes: `[N, 4]` or `[B, N, 4]`, `(x1, y1, x2, y2)`.
        region_mask: `[N]` or `[B, N]`, True for real regions (padding rows
            get 0 everywhere).
        gt_box: `[4]` or `[B, 4]`, in the same frame as `region_boxes` (use
            `RefExpression.normalized_box()` with `region_batch` boxes).
        target: "iou" (above: the IoUs normalised to sum to 1, the
            default) or "paper": MUAN's Sec. III-B (arXiv:1908.04107,
            after Eq. 12): `s*_i` = the IoU if it is above `threshold`,
            else 0, then a softmax over the real regions. A softmax of
            values in [0, 1] is nearly flat (the best of 8 proposals gets at
            most e / (e + 7) = 0.28, of 100 at most 0.027), which is why it
            is not the default (docs/grounding.md).
        threshold: the IoU threshold eta of `target="paper"`.

    Returns:
        A dict of NumPy arrays, with a leading `B` axis only for batched
        inputs: "iou" float32 `[B, N]` (0 at padding),
        "target_distribution" float32 `[B, N]` (sums to 1 over the real
        regions), "best_region" int32 `[B]`.

    Raises:
        ValueError: for mismatched shapes, or an example without a real
            region (naming its row).
    """
    boxes = np.asarray(region_boxes, np.float64)
    mask = np.asarray(region_mask)
    gt = np.asarray(gt_box, np.float64)
    batched = boxes.ndim == 3
    if not batched:
        boxes, mask, gt = boxes[None], mask[None], gt[None]
    if boxes.ndim != 3 or boxes.shape[-1] != 4:
        raise ValueError(
            f"Argument `region_boxes` must have shape [N, 4] or [B, N, 4]. "
            f"Received: shape {np.shape(region_boxes)}"
        )
    if mask.shape != boxes.shape[:2] or mask.dtype != bool:
        raise ValueError(
            f"Argument `region_mask` must be bool with shape {list(boxes.shape[:2])} "
            f"(region_boxes' first axes). Received: {mask.dtype} {list(np.shape(region_mask))}"
        )
    if gt.shape != (boxes.shape[0], 4):
        raise ValueError(
            f"Argument `gt_box` must have shape {[boxes.shape[0], 4] if batched else [4]}. "
            f"Received: shape {list(np.shape(gt_box))}"
        )
    if not (np.all(np.isfinite(boxes[mask])) and np.all(np.isfinite(gt))):
        raise ValueError("Arguments `region_boxes` (real rows) and `gt_box` must be finite.")
    empty = np.flatnonzero(~mask.any(axis=1))
    if empty.size:
        raise ValueError(
            f"Argument `region_mask` has no real region in example(s) {empty[:5].tolist()}."
        )
    iou = np.where(mask, _iou(np.where(mask[..., None], boxes, 0.0), gt[:, None, :]), 0.0)
    centre = (boxes[..., :2] + boxes[..., 2:]) / 2
    distance = np.linalg.norm(centre - ((gt[:, :2] + gt[:, 2:]) / 2)[:, None], axis=-1)
    # lexsort's last key is the primary one; padding sorts last (key 1).
    order = [
        np.lexsort((np.arange(boxes.shape[1]), distance[b], -iou[b], ~mask[b]))[0]
        for b in range(boxes.shape[0])
    ]
    best = np.asarray(order, np.int32)
    total = iou.sum(axis=1, keepdims=True)
    one_hot = np.eye(boxes.shape[1])[best]
    if target == "paper":
        kept = np.where(mask, np.where(iou > threshold, iou, 0.0), -np.inf)
        exp = np.where(mask, np.exp(kept - kept.max(axis=1, keepdims=True)), 0.0)
        target = exp / exp.sum(axis=1, keepdims=True)
    elif target == "iou":
        target = np.where(total > 0, iou / np.where(total > 0, total, 1.0), one_hot)
    else:
        raise ValueError(f"Argument `target` must be 'iou' or 'paper'. Received: {target!r}")
    out = {
        "iou": iou.astype(np.float32),
        "target_distribution": target.astype(np.float32),
        "best_region": best,
    }
    if not batched:
        out = {k: v[0] for k, v in out.items()}
    return out


def biggest_boxes(region_boxes):
    """The biggest-proposal baseline: the biggest box of each image.

    Args:
        region_boxes: one `[N, 4]` array `(x1, y1, x2, y2)` per image.

    Returns:
        float32 `[len(region_boxes), 4]`.
    """
    out = []
    for boxes in region_boxes:
        areas = (boxes[:, 2] - boxes[:, 0]) * (boxes[:, 3] - boxes[:, 1])
        out.append(boxes[int(np.argmax(areas))])
    return np.asarray(out, np.float32)


def grounding_accuracy(pred_boxes, gt_boxes, threshold=0.5, *, strict=True):
    """Comprehension accuracy: the share of predicted boxes matching the target.

    A prediction is correct when its IoU with the target box is above
    `threshold`: strictly (`IoU > 0.5`) by default, as in most RefCOCO
    evaluations; `strict=False` counts `IoU >= threshold`, as the `refer`
    toolkit's comprehension script does (the two differ only at equality).

    Args:
        pred_boxes: `[B, 4]` predicted boxes `(x1, y1, x2, y2)`.
        gt_boxes: `[B, 4]` target boxes, same frame.
        threshold: the IoU threshold, a number in [0, 1).
        strict: True for `>`, False for `>=` (keyword-only).

    Returns:
        `(accuracy, correct)`: a Python float in [0, 1] and bool `[B]`.
    """
    checks.boolean("strict", strict)
    if isinstance(threshold, bool) or not isinstance(threshold, (int, float)) or not (
        0 <= threshold < 1
    ):
        raise ValueError(
            f"Argument `threshold` must be a number in [0, 1). Received: threshold={threshold!r}"
        )
    pred = _boxes("pred_boxes", pred_boxes)
    gt = _boxes("gt_boxes", gt_boxes)
    if pred.shape != gt.shape or not len(pred):
        raise ValueError(
            "Arguments `pred_boxes` and `gt_boxes` must have the same non-empty shape [B, 4]. "
            f"Received: {list(pred.shape)} and {list(gt.shape)}"
        )
    iou = _iou(pred, gt)
    correct = iou > threshold if strict else iou >= threshold
    return float(correct.mean()), correct
