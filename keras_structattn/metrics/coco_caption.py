"""The COCO caption evaluation (pycocoevalcap's `COCOEvalCap`) on the official
file formats, Java-free for everything but METEOR and SPICE.

`evaluate_captions(annotations, results)` reads a COCO captions file
(`captions_*.json`: `images`, `annotations` with `image_id` and `caption`)
and a results file (a list of `{"image_id", "caption"}`), tokenises both
with the Python PTB tokenizer (`ptb_tokenizer`), and scores the result
images as pycocoevalcap does after `cocoEval.params['image_id'] =
cocoRes.getImgIds()`: BLEU-1..4, METEOR, ROUGE-L, CIDEr-D and SPICE, under
pycocoevalcap's names (`Bleu_1` ... `SPICE`). METEOR and SPICE need Java
(`java_scorers`); when they cannot run they are listed in `not_computed`
with the reason, never reported as 0. See `docs/caption_metrics.md`.
"""

import dataclasses
import json
import math
import os

from keras_structattn.metrics import caption_scores
from keras_structattn.metrics import java_scorers
from keras_structattn.metrics.ptb_tokenizer import tokenize_captions

# pycocoevalcap's metric names, in the order its evaluator computes them.
METRICS = ("Bleu_1", "Bleu_2", "Bleu_3", "Bleu_4", "METEOR", "ROUGE_L", "CIDEr", "SPICE")
_BLEU = ("Bleu_1", "Bleu_2", "Bleu_3", "Bleu_4")
# The names `metrics=` takes (any case): a scorer or one metric of it.
_SELECTORS = {"bleu": _BLEU, "meteor": ("METEOR",), "rouge_l": ("ROUGE_L",),
              "rouge": ("ROUGE_L",), "cider": ("CIDEr",), "cider_d": ("CIDEr",),
              "spice": ("SPICE",)}
_SELECTORS.update({name.lower(): (name,) for name in METRICS})


@dataclasses.dataclass(frozen=True)
class CaptionScores:
    """The result of `evaluate_captions`.

    Attributes:
        scores: `{metric: corpus score}` for the metrics computed, in
            pycocoevalcap's order (its `COCOEvalCap.eval`).
        per_image: `{image_id: {"image_id": image_id, metric: score, ...}}`
            (its `imgToEval`), in the order the images were scored. SPICE's
            per-image value is its dict of categories, as in pycocoevalcap.
        not_computed: `{metric: "not computed: <reason>"}` for the metrics
            asked for that could not run (METEOR or SPICE without Java, ...).
        image_ids: the images scored, in order.
    """

    scores: dict
    per_image: dict
    not_computed: dict
    image_ids: list

    def to_json(self):
        """A JSON-ready dict: `scores`, `not_computed`, and `per_image` as a
        list (pycocoevalcap's `evalImgs`); NaN (a SPICE category with no
        tuples) becomes null."""
        return {"scores": _json_safe(dict(self.scores)), "not_computed": dict(self.not_computed),
                "per_image": [_json_safe(self.per_image[i]) for i in self.image_ids]}


def _json_safe(value):
    if isinstance(value, dict):
        return {k: _json_safe(v) for k, v in value.items()}
    if isinstance(value, float) and math.isnan(value):
        return None
    return value


def write_scores_json(path, scores):
    """Writes `scores.to_json()` to `path` (UTF-8, indented)."""
    with open(path, "w", encoding="utf-8") as f:
        json.dump(scores.to_json(), f, indent=1, ensure_ascii=False, allow_nan=False)
        f.write("\n")


def _load(source, what):
    """(data, name for messages) from a path or an already-loaded object."""
    if isinstance(source, (str, os.PathLike)):
        name = os.fspath(source)
        try:
            with open(name, encoding="utf-8") as f:
                return json.load(f), f"{what} file {name!r}"
        except json.JSONDecodeError as error:
            raise ValueError(f"{what} file {name!r}: not valid JSON ({error.msg} at line "
                             f"{error.lineno}, column {error.colno}).") from None
        except (OSError, UnicodeDecodeError) as error:
            raise ValueError(f"{what} file {name!r}: cannot be read "
                             f"({type(error).__name__}: {error}).") from None
    return source, what


def _references(annotations):
    data, name = _load(annotations, "annotations")
    if not isinstance(data, dict) or not isinstance(data.get("annotations"), list):
        raise ValueError(f"{name}: expected a COCO captions dict with an 'annotations' list, "
                         f"got {type(data).__name__}"
                         + (f" with keys {sorted(data)[:6]}" if isinstance(data, dict) else "")
                         + ".")
    references = {}
    images = data.get("images")
    if images is not None:
        if not isinstance(images, list):
            raise ValueError(f"{name}: 'images' must be a list, got {type(images).__name__}.")
        for i, image in enumerate(images):
            if not isinstance(image, dict) or "id" not in image:
                raise ValueError(f"{name}: images[{i}] must be a dict with an 'id', got "
                                 f"{image!r:.80}.")
            references.setdefault(image["id"], [])
    for i, ann in enumerate(data["annotations"]):
        if not isinstance(ann, dict) or "image_id" not in ann or "caption" not in ann:
            raise ValueError(f"{name}: annotations[{i}] must be a dict with 'image_id' and "
                             f"'caption', got {ann!r:.80}.")
        if not isinstance(ann["caption"], str):
            raise ValueError(f"{name}: annotations[{i}] (image_id {ann['image_id']!r}, id "
                             f"{ann.get('id')!r}): 'caption' must be a string, got "
                             f"{type(ann['caption']).__name__} {ann['caption']!r:.40}.")
        references.setdefault(ann["image_id"], []).append(ann["caption"])
    return references, name


def _results(results, references, annotations_name):
    data, name = _load(results, "results")
    if not isinstance(data, list):
        raise ValueError(f"{name}: expected a list of {{'image_id', 'caption'}}, got "
                         f"{type(data).__name__}.")
    if not data:
        raise ValueError(f"{name}: no results.")
    captions = {}
    where = {}
    for i, item in enumerate(data):
        if not isinstance(item, dict) or "image_id" not in item or "caption" not in item:
            raise ValueError(f"{name}: result {i} must be a dict with 'image_id' and "
                             f"'caption', got {item!r:.80}.")
        image_id, caption = item["image_id"], item["caption"]
        if not isinstance(caption, str):
            raise ValueError(f"{name}: result {i} (image_id {image_id!r}): 'caption' must be a "
                             f"string, got {type(caption).__name__} {caption!r:.40}.")
        try:
            known = bool(references.get(image_id))
        except TypeError:  # an unhashable id
            known = False
        if not known:
            raise ValueError(f"{name}: result {i} has image_id {image_id!r}, which has no "
                             f"reference caption in the {annotations_name}.")
        if image_id in captions:
            raise ValueError(f"{name}: results {where[image_id]} and {i} are both for image_id "
                             f"{image_id!r}; give one caption per image.")
        captions[image_id] = caption
        where[image_id] = i
    return captions, name


def _selected(metrics):
    if metrics is None:
        return list(METRICS)
    if isinstance(metrics, str):
        metrics = [metrics]
    chosen = set()
    for metric in metrics:
        key = metric.lower() if isinstance(metric, str) else None
        if key not in _SELECTORS:
            raise ValueError(f"metrics: unknown metric {metric!r}; allowed: Bleu (all four), "
                             f"{', '.join(METRICS)} (any case).")
        chosen.update(_SELECTORS[key])
    return [m for m in METRICS if m in chosen]


def evaluate_captions(annotations, results, *, metrics=None, image_ids=None):
    """The COCO caption metrics of a results file, as pycocoevalcap computes them.

    Same numbers as `COCOEvalCap(coco, coco.loadRes(results))` with
    `params['image_id'] = cocoRes.getImgIds()` then `evaluate()`, without
    Java for the tokenizer, BLEU, ROUGE-L and CIDEr-D. The images are
    ordered as pycocotools orders them (the annotation file's `images`
    order), and both sets of captions are tokenised as the two batches
    pycocoevalcap tokenises.

    Args:
        annotations: a COCO captions dict (`{"images": [...], "annotations":
            [{"image_id", "caption"}, ...]}`) or the path of such a JSON file.
        results: a list of `{"image_id", "caption"}` (one per image) or the
            path of such a JSON file.
        metrics: None for all of `METRICS`, or a list of names among "Bleu"
            (the four BLEUs), "Bleu_1".."Bleu_4", "METEOR", "ROUGE_L",
            "CIDEr", "SPICE" (any case).
        image_ids: None to score every result image, or the ids to score (in
            this order); each needs one result and references. CIDEr-D's
            document frequencies come from the scored images only.

    Returns:
        A `CaptionScores` (`scores`, `per_image`, `not_computed`,
        `image_ids`).

    Raises:
        ValueError: one line naming the file and the index or id at fault: a
            file that is not JSON or not in the COCO format, a caption that is
            not a string, a result for an image without references, two
            results for one image, an unknown metric.
    """
    wanted = _selected(metrics)
    references, annotations_name = _references(annotations)
    captions, results_name = _results(results, references, annotations_name)
    if image_ids is None:
        # pycocotools: the annotation images that have a result, in file order.
        order = [i for i in references if i in captions]
    else:
        order = list(image_ids)
        for image_id in order:
            if image_id not in captions:
                raise ValueError(f"image_ids: {image_id!r} has no caption in the "
                                 f"{results_name}.")
        if len(set(order)) != len(order):
            raise ValueError("image_ids: an image id is listed twice.")
    gts = tokenize_captions({i: references[i] for i in order})
    res = tokenize_captions({i: [captions[i]] for i in order})

    scores, per_image_scores, not_computed = {}, {}, {}
    if any(m in wanted for m in _BLEU):
        corpus, per_image = caption_scores.bleu(gts, res, 4)
        for k, name in enumerate(_BLEU):
            if name in wanted:
                scores[name] = float(corpus[k])
                per_image_scores[name] = per_image[k]
    java_metrics = {"METEOR": (java_scorers.meteor_unavailable, java_scorers.meteor),
                    "SPICE": (java_scorers.spice_unavailable, java_scorers.spice)}
    for name in ("METEOR", "ROUGE_L", "CIDEr", "SPICE"):
        if name not in wanted:
            continue
        if name in java_metrics:
            unavailable, scorer = java_metrics[name]
            reason = unavailable()
            if reason is not None:
                not_computed[name] = reason
                continue
            try:
                corpus, per_image = scorer(gts, res)
            except RuntimeError as error:
                not_computed[name] = java_scorers.NOT_COMPUTED + str(error)
                continue
        elif name == "ROUGE_L":
            corpus, per_image = caption_scores.rouge_l(gts, res)
        else:
            corpus, per_image = caption_scores.cider_d(gts, res)
        scores[name] = float(corpus)
        per_image_scores[name] = per_image

    per_image = {}
    for column, image_id in enumerate(order):
        entry = {"image_id": image_id}
        for name in METRICS:
            if name in per_image_scores:
                value = per_image_scores[name][column]
                entry[name] = value if isinstance(value, dict) else float(value)
        per_image[image_id] = entry
    return CaptionScores(scores=scores, per_image=per_image, not_computed=not_computed,
                         image_ids=order)
