"""Shapes world caption scores beyond COCO's: facts, template groups, floors.

On Shapes world every image's scene is known and every reference records
the template group it comes from (`keras_structattn.data.shapes_world.
captions`), so a captioner is scored three ways side by side with its
floors (`keras_structattn.data.shapes_world.baselines.caption_floors`):

- the COCO metrics (`keras_structattn.metrics.evaluate_captions`);
- fact precision / recall / F1 of the colour, shape, size, count and
  relation claims its captions make, checked against the scenes
  (`keras_structattn.data.shapes_world.claims`);
- CIDEr-D per template group: each group's references alone, over the
  images that have one, which tells which template a caption copies;
- CHAIR-style colour-shape hallucination rates
  (`keras_structattn.data.shapes_world.hallucination`).

See docs/captioning.md, "Scores that see facts".
"""

import collections

from keras_structattn import metrics
from keras_structattn.data.shapes_world import claims
from keras_structattn.data.shapes_world import hallucination

# The metrics of the floors and oracles.
QUICK_METRICS = ("Bleu", "ROUGE_L", "CIDEr")
# A model beats a floor when its score is at least this many times the floor's.
MARGIN = 1.10


def references_by_image(annotations):
    """`{image_id: [reference caption, ...]}` of a COCO captions dict."""
    out = collections.defaultdict(list)
    for a in annotations["annotations"]:
        out[int(a["image_id"])].append(a["caption"])
    return dict(out)


def cider_by_group(annotations, results):
    """CIDEr-D of `results` against each template group's references alone.

    Args:
        annotations: a Shapes world COCO captions dict (each annotation has
            its "group").
        results: `[{"image_id", "caption"}]`.

    Returns:
        `{group: CIDEr-D}` over the result images with a reference of that
        group (document frequencies from those references), groups sorted.
    """
    captioned = {int(r["image_id"]) for r in results}
    out = {}
    for group in sorted({a["group"] for a in annotations["annotations"]}):
        kept = [a for a in annotations["annotations"]
                if a["group"] == group and int(a["image_id"]) in captioned]
        images = {int(a["image_id"]) for a in kept}
        if not images:
            continue
        subset = dict(annotations, annotations=kept,
                      images=[i for i in annotations["images"] if int(i["id"]) in images])
        scored = metrics.evaluate_captions(
            subset, [r for r in results if int(r["image_id"]) in images], metrics=["CIDEr"])
        out[group] = scored.scores["CIDEr"]
    return out


def score_captioners(annotations, outputs, scenes, bias=None, models=()):
    """Every captioner's scores, as the recipe saves them.

    Args:
        annotations: the split's Shapes world COCO captions dict.
        outputs: `{name: [{"image_id", "caption"}]}`, the models' and the
            floors' captions.
        scenes: the split's scene records (`scenes_<split>.json`'s "scenes").
        bias: the world's `(shape, colour)` confounder, or None.
        models: the names scored with every COCO metric; the others (floors,
            oracles) get BLEU, ROUGE-L and CIDEr-D only (METEOR's Java takes
            seconds a captioner).

    Returns:
        `{name: {"scores", "not_computed", "fact_f1", "facts",
        "cider_by_group", "hallucination"}}`.
    """
    references = references_by_image(annotations)
    facts = claims.scene_facts(scenes)
    pairs = {int(s["image_id"]): {(o["color"], o["shape"]) for o in s["shapes"]}
             for s in scenes}
    out = {}
    for name, results in outputs.items():
        coco = metrics.evaluate_captions(
            annotations, results, metrics=None if name in models else QUICK_METRICS)
        captions = {int(r["image_id"]): r["caption"] for r in results}
        fact = claims.fact_scores(captions, references, facts)
        out[name] = {
            "scores": dict(coco.scores), "not_computed": dict(coco.not_computed),
            "fact_f1": fact["f1"], "facts": fact,
            "cider_by_group": cider_by_group(annotations, results),
            "hallucination": hallucination.hallucination_rates(captions, pairs, bias),
        }
    return out


def is_floor(name):
    """Whether an entry is a floor to beat: not a model, not an oracle."""
    return name.startswith(("constant", "biggest_shape")) and "oracle" not in name


def verdict(entries, model):
    """Whether `model` beats every floor by `MARGIN`, on CIDEr-D and fact F1.

    Args:
        entries: `score_captioners`' dict.
        model: the model's entry name.

    Returns:
        `(beats, lines)`: a bool and result lines naming the best floor of
        each measure.
    """
    floors = [name for name in entries if is_floor(name)]
    if not floors:
        return None, []
    beats, lines = True, []
    for label, value in (("CIDEr-D", lambda e: e["scores"]["CIDEr"]),
                         ("fact F1", lambda e: e["fact_f1"])):
        best = max(floors, key=lambda name: value(entries[name]))
        mine, floor = value(entries[model]), value(entries[best])
        ok = mine >= MARGIN * floor
        beats &= ok
        ratio = f"{mine / floor:.2f}x" if floor > 0 else "-"
        lines.append(f"{model} {label} {mine:.4f} vs best floor {best} {floor:.4f}: {ratio} "
                     f"({'beats' if ok else 'does not beat'} it by {MARGIN - 1:.0%})")
    return beats, lines
