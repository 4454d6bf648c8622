"""VQA results for people: the official annotations of records, the
accuracy table of several answer columns, the bias-conflict split of a
confounded Shapes world, the majority-answer baseline and the picture of
where a model looks."""

import collections

import numpy as np

from keras_structattn.tasks import attention_maps


def official_annotations(records):
    """The VQA v2 annotation dicts of records, as the official evaluation
    (`metrics.evaluate_vqa`) reads them.

    Args:
        records: `VQARecord`s with answers.

    Returns:
        A list of dicts.
    """
    return [{"question_id": r.question_id, "image_id": r.image_id,
             "question_type": r.question_type, "answer_type": r.answer_type,
             "multiple_choice_answer": r.multiple_choice_answer,
             "answers": [{"answer": a, "answer_id": k + 1} for k, a in enumerate(r.answers)]}
            for r in records]


def majority_answers(pairs):
    """The majority baseline's answers.

    Args:
        pairs: `(question type, answer)` pairs of the training split.

    Returns:
        `(per_type, overall)`: `{question type: its most common answer}`
        and the most common answer over all (ties: alphabetical first).
    """
    by_type = collections.defaultdict(collections.Counter)
    overall = collections.Counter()
    for kind, answer in pairs:
        by_type[kind][answer] += 1
        overall[answer] += 1

    def top(counter):
        return min(counter.items(), key=lambda kv: (-kv[1], kv[0]))[0] if counter else ""

    return {t: top(c) for t, c in by_type.items()}, top(overall)


def accuracy_table(columns, records):
    """Text lines: the accuracy (%) per question type, then per answer type
    (in brackets), then overall.

    Args:
        columns: `{title: VQAScores}`, one column each.
        records: the scored `VQARecord`s.

    Returns:
        A list of str, the header first.
    """
    titles = list(columns)
    counts = collections.Counter(r.question_type for r in records)
    answer_counts = collections.Counter(r.answer_type for r in records)
    width = max([16] + [len(k) for k in counts] + [len(k) + 2 for k in answer_counts])
    lines = [f"{'question type':{width}s} {'questions':>9s}"
             + "".join(f" {t:>9s}" for t in titles)]

    def row(name, count, values):
        return f"{name:{width}s} {count:9d}" + "".join(f" {v:9.2f}" for v in values)

    for kind in sorted(counts):
        lines.append(row(kind, counts[kind],
                         [columns[t].per_question_type[kind] for t in titles]))
    for kind in sorted(answer_counts):
        lines.append(row(f"[{kind}]", answer_counts[kind],
                         [columns[t].per_answer_type[kind] for t in titles]))
    lines.append(row("overall", len(records), [columns[t].overall for t in titles]))
    return lines


def bias_conflict_accuracy(columns, records):
    """The accuracy on the questions whose annotation says `bias_conflict`
    (leaning on the training split's confounder gives a wrong answer,
    Shapes world's `--world_bias`) and on the others.

    Args:
        columns: `{title: VQAScores}`.
        records: the scored `VQARecord`s.

    Returns:
        None when a record does not say; else `{title: {"conflict": %,
        "others": %, "conflict_questions": n, "other_questions": n}}`, the
        mean of the official per-question accuracies rounded to 2 decimals
        as the official code rounds (None for an empty group).
    """
    if not records or any(r.bias_conflict is None for r in records):
        return None
    groups = {True: [r.question_id for r in records if r.bias_conflict],
              False: [r.question_id for r in records if not r.bias_conflict]}
    out = {}
    for title, scores in columns.items():
        per_question = scores.per_question_exact

        def mean(ids, per_question=per_question):
            return round(float(np.mean([per_question[q] for q in ids])), 2) if ids else None

        out[title] = {"conflict": mean(groups[True]), "others": mean(groups[False]),
                      "conflict_questions": len(groups[True]),
                      "other_questions": len(groups[False])}
    return out


def bias_conflict_table(conflict):
    """Text lines of `bias_conflict_accuracy`'s result (under the
    `accuracy_table`)."""
    titles = list(conflict)
    first = conflict[titles[0]]
    lines = [f"{'bias (--world_bias)':20s} {'questions':>9s}"
             + "".join(f" {t:>9s}" for t in titles)]
    for key, count, label in (("conflict", "conflict_questions", "[bias conflict]"),
                              ("others", "other_questions", "[bias other]")):
        values = ["-" if conflict[t][key] is None else f"{conflict[t][key]:.2f}"
                  for t in titles]
        lines.append(f"{label:20s} {first[count]:9d}" + "".join(f" {v:>9s}" for v in values))
    return lines


def draw_answer(maps, inputs, record, answer, max_question_length, image):
    """Where a VQA model looks: the regions shaded by their attention
    weight; beside them, for MUAN the four quadrants of the last block's
    unified attention (Fig. 6), for CATT the CS attention over the image and
    word dictionaries. Needs Pillow.

    Args:
        maps: the model's `attention_maps(inputs)` (`region_weights`, and
            `unified` / `vision_dictionary_weights` where it has them).
        inputs: the region model's inputs of a batch of one question.
        record: the question's `VQARecord`.
        answer: the predicted answer.
        max_question_length: the question words the model reads.
        image: the question's image (PIL).

    Returns:
        A PIL image.
    """
    count = int(inputs["region_mask"][0].sum())
    title = [f"Q: {record.question}", f"A: {answer}"
             + (f"  (annotators: {record.multiple_choice_answer})"
                if record.multiple_choice_answer else "")]
    catt = "vision_dictionary_weights" in maps
    if catt:
        title.append("IS-ATT: [CLS] over the regions (last cross layer)")
    picture = attention_maps.draw_region_weights(
        image, inputs["boxes"][0][:count], maps["region_weights"][0][:count], title)
    if catt:  # CS-ATT over the dictionaries
        picture = attention_maps.beside(picture, attention_maps.draw_dictionary_weights(
            {"image dictionary (mean over the regions, 1st vision layer)":
             maps["vision_dictionary_weights"][0],
             "word dictionary ([CLS], 1st language layer)":
             maps["language_dictionary_weights"][0]}, picture.height))
    if "unified" in maps:
        words = ["[ans]"] + record.tokens[:max_question_length]
        picture = attention_maps.beside(picture, attention_maps.draw_quadrants(
            maps["unified"][0], maps["text_length"], words, count))
    return picture
