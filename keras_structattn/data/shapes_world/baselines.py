"""Trivial baselines: the floor every Shapes world recipe has to beat.

- VQA: the train majority answer of the question's type; metric: VQA
  accuracy (official formula).
- TextVQA: the train majority answer of the question's type; metric: VQA
  accuracy.
- grounding: the biggest box of the scene; metric: accuracy at IoU >= 0.5.
- captioning: "a <size> <colour> <shape>" of the biggest shape; metrics:
  CIDEr-D and BLEU-4 (pycocoevalcap).

VQA accuracy of a prediction against 10 answers is the VQA evaluation's:
the mean over the 10 leave-one-out subsets of `min(1, matches / 3)`. The
answers here are canonical (lower case, digits, no punctuation or
articles), so the official normalisation would not change them; predictions
are only lower-cased and stripped. Caption scores use pycocoevalcap's
`Cider` (CIDEr-D, sigma 6, document frequencies from the evaluated
references) and `Bleu(4)` on whitespace tokens: the captions have no
punctuation, so this equals its PTB tokeniser's output (which needs Java).
Without pycocoevalcap, a unigram F1 is given instead (`caption_metric`
says which).
"""

import collections

import numpy as np

from keras_structattn.data.shapes_world.describe import NUMBER_WORDS


def normalize_answer(answer):
    """Lower case, single spaces: the comparison of `vqa_accuracy`.

    Args:
        answer: an answer (any value; converted with `str`).

    Returns:
        The normalised string.
    """
    return " ".join(str(answer).lower().split())


def vqa_accuracy(prediction, answers):
    """VQA accuracy in [0, 1] of one prediction against the human answers.

    Args:
        prediction: the predicted answer string.
        answers: the human answers (10 strings).

    Returns:
        A float in [0, 1].
    """
    prediction = normalize_answer(prediction)
    answers = [normalize_answer(a) for a in answers]
    scores = []
    for i in range(len(answers)):
        matches = sum(a == prediction for j, a in enumerate(answers) if j != i)
        scores.append(min(1.0, matches / 3.0))
    return sum(scores) / len(scores)


def _records(split, task):
    return [r for records in split.tasks[task] for r in records]


def _majority(records, key="question_type"):
    by_type = collections.defaultdict(collections.Counter)
    for r in records:
        by_type[r[key]][r["answer"]] += 1
    # Most common, then alphabetical, so ties are deterministic.
    return {t: min(c.items(), key=lambda kv: (-kv[1], kv[0]))[0] for t, c in by_type.items()}


def majority_baseline(train_records, eval_records):
    """Per-type majority answers of `train_records`, scored on `eval_records`.

    Args:
        train_records: VQA-like records (`question_type`, `answer`).
        eval_records: records with `question_type` and the 10 `answers`.

    Returns:
        `{"overall": %, "per_type": {type: %}, "answers": {type: answer}}`
        (types unseen in training get the overall majority answer).
    """
    majority = _majority(train_records)
    overall_answer = min(
        collections.Counter(r["answer"] for r in train_records).items(),
        key=lambda kv: (-kv[1], kv[0]),
    )[0] if train_records else ""
    per_type = collections.defaultdict(list)
    for r in eval_records:
        guess = majority.get(r["question_type"], overall_answer)
        per_type[r["question_type"]].append(vqa_accuracy(guess, [a for a, _ in r["answers"]]))
    scores = [s for v in per_type.values() for s in v]
    return {
        "overall": 100.0 * float(np.mean(scores)) if scores else float("nan"),
        "per_type": {t: 100.0 * float(np.mean(v)) for t, v in sorted(per_type.items())},
        "answers": dict(sorted(majority.items())),
    }


def box_iou(a, b):
    """IoU of two pixel boxes `(x1, y1, x2, y2)`.

    Args:
        a, b: the boxes.

    Returns:
        A float in [0, 1] (0 for two empty boxes).
    """
    iw = max(0, min(a[2], b[2]) - max(a[0], b[0]))
    ih = max(0, min(a[3], b[3]) - max(a[1], b[1]))
    inter = iw * ih
    union = (a[2] - a[0]) * (a[3] - a[1]) + (b[2] - b[0]) * (b[3] - b[1]) - inter
    return inter / union if union > 0 else 0.0


def _biggest(scene):
    """Index of the shape with the largest box (first on ties)."""
    areas = [(o.box[2] - o.box[0]) * (o.box[3] - o.box[1]) for o in scene.shapes]
    return int(np.argmax(areas))


def grounding_baseline(split):
    """Accuracy (%) at IoU >= 0.5 of always picking the biggest box, and
    the chance level of a uniformly random shape box.

    Args:
        split: a generated `Split` with the refs task.

    Returns:
        `{"accuracy": %, "random_box": %, "refs": count}`.
    """
    hits, chance = [], []
    for scene, refs in zip(split.scenes, split.tasks["refs"]):
        guess = scene.shapes[_biggest(scene)].box
        for r in refs:
            target = scene.shapes[r["target"]].box
            hits.append(box_iou(guess, target) >= 0.5)
            chance.append(np.mean([box_iou(o.box, target) >= 0.5 for o in scene.shapes]))
    return {
        "accuracy": 100.0 * float(np.mean(hits)) if hits else float("nan"),
        "random_box": 100.0 * float(np.mean(chance)) if chance else float("nan"),
        "refs": len(hits),
    }


def biggest_caption(scene):
    """The "describe the biggest shape" caption of a scene.

    Args:
        scene: a `Scene`.

    Returns:
        `"a <size> <colour> <shape>"`.
    """
    o = scene.shapes[_biggest(scene)]
    return f"a {o.size} {o.color} {o.shape}"


def baseline_captions(split):
    """The "describe the biggest shape" captions of a split's images.

    Args:
        split: a generated `Split`.

    Returns:
        `[{"image_id", "caption"}]`, in the COCO results format.
    """
    return [{"image_id": scene.image_id, "caption": biggest_caption(scene)}
            for scene in split.scenes]


def _most_frequent(captions):
    """The most frequent caption, then the first alphabetically (deterministic)."""
    return min(collections.Counter(captions).items(), key=lambda kv: (-kv[1], kv[0]))[0]


def count_caption(scene):
    """The count caption of a scene's true count, "five shapes on a dark
    background": an oracle (it reads the scene), not a floor."""
    n = len(scene.shapes)
    return f"{NUMBER_WORDS[n]} {'shape' if n == 1 else 'shapes'} on a dark background"


def caption_floors(train, split):
    """The captions of the captioning floors and oracles on a split.

    Blind floors, from the training references alone: `constant`, the most
    frequent training caption for every image, and `constant_<group>`, the
    most frequent training caption of each template group (`captions.GROUPS`).
    Floors that look at the image: `biggest_shape` ("a <size> <colour>
    <shape>" of the biggest shape, what a detector and one template give).
    Oracles, reading the ground-truth scene: `oracle_count`, the count
    caption of the true count.

    Args:
        train: the generated training `Split` (captions task).
        split: the generated `Split` to caption.

    Returns:
        `{name: [{"image_id", "caption"}]}`, in the COCO results format, in
        the order above.
    """
    by_group = collections.defaultdict(list)
    for captions in train.tasks["captions"]:
        for c in captions:
            by_group[c["group"]].append(c["caption"])
    constants = {"constant": _most_frequent([c for cs in by_group.values() for c in cs])}
    constants.update({f"constant_{g}": _most_frequent(by_group[g]) for g in sorted(by_group)})
    out = {name: [{"image_id": s.image_id, "caption": text} for s in split.scenes]
           for name, text in constants.items()}
    out["biggest_shape"] = baseline_captions(split)
    out["oracle_count"] = [{"image_id": s.image_id, "caption": count_caption(s)}
                           for s in split.scenes]
    return out


def _unigram_f1(hypothesis, references):
    hyp = collections.Counter(hypothesis.split())
    best = 0.0
    for ref in references:
        ref = collections.Counter(ref.split())
        common = sum((hyp & ref).values())
        if common:
            p, r = common / sum(hyp.values()), common / sum(ref.values())
            best = max(best, 2 * p * r / (p + r))
    return best


def caption_baseline(split):
    """CIDEr-D and BLEU-4 of "describe the biggest shape" captions.

    Args:
        split: a generated `Split` with the captions task.

    Returns:
        A dict with `"CIDEr"` and `"BLEU_4"` (pycocoevalcap), or
        `"unigram_f1"` when pycocoevalcap is not installed; the metric
        used is in `"caption_metric"`.
    """
    gts, res = {}, {}
    for scene, captions in zip(split.scenes, split.tasks["captions"]):
        gts[scene.image_id] = [c["caption"] for c in captions]
        res[scene.image_id] = [biggest_caption(scene)]
    if not gts:
        return {"caption_metric": "none", "images": 0}
    try:
        from pycocoevalcap.bleu.bleu import Bleu
        from pycocoevalcap.cider.cider import Cider
    except ImportError:
        f1 = np.mean([_unigram_f1(res[k][0], gts[k]) for k in gts])
        return {"caption_metric": "unigram_f1", "unigram_f1": float(f1), "images": len(gts)}
    cider, _ = Cider().compute_score(gts, res)
    bleu, _ = Bleu(4).compute_score(gts, res, verbose=0)
    return {
        "caption_metric": "pycocoevalcap",
        "CIDEr": float(cider),
        "BLEU_4": float(bleu[3]),
        "images": len(gts),
        "example": res[next(iter(res))][0],
    }


def trivial_baselines(world, train="train", evaluate="test"):
    """The trivial baselines of every generated task.

    Majority answers come from `train` (or from `evaluate` itself when
    there is no train split, noted as `prior_split`); scores are on
    `evaluate` (falls back to "val", then "train", if absent).

    Args:
        world: a `ShapesWorld`.
        train: the split the majority answers come from.
        evaluate: the split the baselines are scored on.

    Returns:
        A dict per task, see the module docstring.
    """
    if evaluate not in world.splits:
        evaluate = next(s for s in ("test", "val", "train") if s in world.splits)
    prior = train if train in world.splits else evaluate
    out = {"evaluate_split": evaluate, "prior_split": prior}
    ev, tr = world.splits[evaluate], world.splits[prior]
    if "vqa" in world.tasks:
        out["vqa"] = majority_baseline(_records(tr, "vqa"), _records(ev, "vqa"))
    if "textvqa" in world.tasks:
        out["textvqa"] = majority_baseline(_records(tr, "textvqa"), _records(ev, "textvqa"))
    if "refs" in world.tasks:
        out["refs"] = grounding_baseline(ev)
    if "captions" in world.tasks:
        out["captions"] = caption_baseline(ev)
    return out
