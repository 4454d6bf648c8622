"""TextVQA results for people: the score table of several answer columns
(`score_table`) and the picture of one question's attention
(`draw_question`)."""

import collections
import functools

import numpy as np

from keras_structattn.tasks import attention_maps

OCR_OUTLINE = (90, 90, 255)
COPY_OUTLINE = (230, 30, 30)
QUERY_OUTLINE = (20, 170, 20)

_RELATION_NAMES = {0: "unrelated to them", 1: "containing them", 2: "inside them",
                   3: "overlapping them", 12: "itself"}
_DIRECTION_NAMES = ("right", "low-right", "down", "low-left", "left", "up-left", "up",
                    "up-right")


def score_table(columns, records):
    """Text lines: TextVQA accuracy and ANLS (%) per question type, per
    answer source, then overall.

    Args:
        columns: `{title: TextVQAScores}` (`metrics.textvqa.evaluate_textvqa`),
            a pair of columns each.
        records: the scored `TextVQARecord`s.

    Returns:
        A list of str, the header first.
    """
    def mean(scores, ids, key):
        return 100.0 * float(np.mean([scores.per_question[q][key] for q in ids]))

    groups = collections.defaultdict(list)
    sources = collections.defaultdict(list)
    for r in records:
        groups[r.question_type or "all"].append(r.question_id)
        if r.answer_source:
            sources[f"[{r.answer_source}]"].append(r.question_id)
    width = max([16] + [len(k) for k in groups])
    lines = [f"{'question type':{width}s} {'questions':>9s}" + "".join(
        f" {t + ' acc':>14s} {t + ' anls':>14s}" for t in columns)]
    rows = [*sorted(groups.items()), *sorted(sources.items()),
            ("overall", [r.question_id for r in records])]
    for name, ids in rows:
        lines.append(f"{name:{width}s} {len(ids):9d}" + "".join(
            f" {mean(s, ids, 'accuracy'):14.2f} {mean(s, ids, 'anls'):14.2f}"
            for s in columns.values()))
    return lines


def relation_names(labels):
    """Short names of spatial relation labels (docs/graph_attention.md).

    Args:
        labels: ints 0..12.

    Returns:
        A str, e.g. "up/up-right of them" or "inside them / itself".
    """
    labels = sorted(labels)
    if all(4 <= label <= 11 for label in labels):
        return "/".join(_DIRECTION_NAMES[label - 4] for label in labels) + " of them"
    return " / ".join(_RELATION_NAMES.get(label) or _DIRECTION_NAMES[label - 4]
                      for label in labels)


def draw_question(model, hparams, inputs, record, answer, copied, image):
    """The picture of one question's answer.

    The image with its OCR boxes (copied tokens in red), lit by the first
    answer step's attention over the objects and OCR tokens (last layer,
    mean over heads); for SA-M4C, one panel per spatial head beside it: the
    boxes that head lets the copied token (else the first OCR token) attend
    to, lit by its attention weights. Needs Pillow.

    Args:
        model: the M4C / SA-M4C model (`models.textvqa.m4c.M4C`).
        hparams: its hparams.
        inputs: the model inputs of a batch of one question.
        record: the question's `TextVQARecord`.
        answer: the predicted answer (str).
        copied: the OCR positions the answer copies.
        image: the question's image (PIL).

    Returns:
        A PIL image.
    """
    weights = model.attention_maps(inputs)[0]  # [heads, L, L] of the last layer
    q, n = hparams.max_question_length, hparams.max_objects
    num_objects = int(inputs["object_mask"][0].sum())
    num_ocr = int(inputs["ocr_mask"][0].sum())
    ocr_boxes = inputs["ocr_boxes"][0][:num_ocr]
    boxes = np.concatenate([inputs["object_boxes"][0][:num_objects], ocr_boxes])
    keys = np.concatenate([np.arange(q, q + num_objects), np.arange(q + n, q + n + num_ocr)])
    first_step = q + n + hparams.max_ocr
    answer_weights = weights[:, first_step, keys].mean(axis=0)
    outlines = [(b, COPY_OUTLINE if i in copied else OCR_OUTLINE)
                for i, b in enumerate(ocr_boxes)]
    title = [f"Q: {record.question}", f"A: {answer}  (annotators: {record.answers[0]})"
             if record.answers else f"A: {answer}",
             "lit: 1st answer step's attention (last layer); red: copied"]
    picture = attention_maps.draw_region_weights(image, boxes, answer_weights, title,
                                                 outlines=outlines)
    if not model.spatial or not num_ocr:
        return picture
    token = copied[0] if copied and copied[0] < num_ocr else 0
    query = q + n + token
    labels = inputs["relations"][0][query, keys]
    panels = []
    for head, allowed_labels in enumerate(model.mmt_layers[-1].attention.head_relations):
        allowed = np.isin(labels, allowed_labels)
        head_weights = np.where(allowed, weights[head, query, keys], 0.0)
        panel_outlines = [(ocr_boxes[token], QUERY_OUTLINE)] + [
            (b, OCR_OUTLINE) for b, a in zip(boxes, allowed) if a]
        panels.append(attention_maps.draw_region_weights(
            image, boxes, head_weights,
            # Label (a, b) says where a lies seen from b: the query token
            # lies <relation> of each box its head allows.
            [f"head {head}: {int(allowed.sum())} boxes; the token is",
             relation_names(allowed_labels)],
            size=attention_maps.PANEL_SIZE, outlines=panel_outlines))
    grid = attention_maps.stacked([functools.reduce(attention_maps.beside, panels[i:i + 4])
                                   for i in range(0, len(panels), 4)])
    return attention_maps.beside(picture, grid)
