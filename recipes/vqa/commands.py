"""The commands of the VQA recipe (flags: `recipes.vqa`): `VQATask`, the
hooks of `recipes._vl.Task`, and `score`.

Status goes to stderr (`print`, which `recipes._cli.execute` points
there), results to stdout (`_cli.emit`).
"""

import collections
import os
import time

import keras
import numpy as np

from keras_structattn.data.word_vocab import WordVocab
from keras_structattn.metrics import evaluate_vqa
from keras_structattn.metrics import prepare_answer
from keras_structattn.metrics import write_vqa_scores_json
from keras_structattn.tasks.vqa import vqa as vqa_data
from keras_structattn.training import checkpoints as checkpoints_lib
from keras_structattn.training import dictionaries
from keras_structattn.training.losses import SoftTargetBinaryCrossEntropy
from models.vqa import build as vqa_models
from recipes import _cli
from recipes import _vl
from recipes import _world
from recipes import vqa
from recipes._run import write_json

BASELINE_NAME = "the majority answer of the question's type in the training split"


def run(args):
    """Runs `args.command`; returns what it returns."""
    if args.command == "score":
        return score(args)
    return VQATask(args, vqa.data_flags_given(args)).run()


class Encoded(_vl.RegionEncoded):
    """A split's questions and regions; soft answer scores as targets."""

    def batch(self, rows):
        """`(inputs, soft scores [B, num_answers])` of the records `rows`."""
        targets = vqa_data.soft_score_batch([self.split.records[i] for i in rows],
                                            self.trained.vocabs["answers"], prepare_answer)
        return self.inputs(rows), targets


def soft_accuracy(y_true, y_pred):
    """The soft score of the top answer (MCAN's training accuracy): a
    proxy of the VQA accuracy over the answer vocabulary."""
    top = keras.ops.argmax(y_pred, axis=-1)
    return keras.ops.take_along_axis(y_true, keras.ops.expand_dims(top, -1), axis=-1)[:, 0]


class VQATask(_vl.RegionTask):
    """VQA v2: MCAN, MCAN+PA, MUAN and Transformer(+CATT) answering from a
    fixed answer vocabulary (soft scores as MCAN), official accuracy."""

    MODEL_TYPE = "vqa"
    RUN_DEFAULTS, ARCHITECTURES = vqa.RUN_DEFAULTS, vqa.ARCHITECTURES
    WORLD_SETS, PAPER_SETS = vqa.WORLD_SETS, vqa.PAPER_SETS
    VOCAB_FILES = {"words": ("question_vocab.json", WordVocab.load),
                   "answers": ("answers.json", vqa_data.AnswerVocab.load)}
    TEXT_KEY, TEXT_LENGTH = "question", "max_question_length"

    # ----------------------------------------------------------------- data

    def read_split(self, name, questions, annotations, features):
        """A `Split` from its files; questions whose image has no features
        are an error naming the image and the store, or skipped and counted."""
        records, report = vqa_data.read_vqa(questions, annotations,
                                            skip_invalid=self.args.skip_invalid)
        print(f"[data] {name}: {vqa_data.records_report(report)}")
        return super().read_split(name, records, features,
                                  lambda r: f"question {r.question_id}, {questions}")

    def load_splits(self, needed):
        """`{split: Split}` of the splits in `needed` that the data has
        (Shapes world generated or reused when no data flag is given)."""
        args, splits = self.args, {}
        if not self.data_given:
            folder = _world.ensure_world(args, tasks="vqa", default_seed=vqa.RUN_DEFAULTS["seed"])
        for name in needed:
            if self.data_given:
                paths = (getattr(args, f"questions_{name}"), getattr(args, f"annotations_{name}"),
                         getattr(args, f"{name}_features") or args.features)
            else:
                paths = (os.path.join(folder, "vqa", f"questions_{name}.json"),
                         os.path.join(folder, "vqa", f"annotations_{name}.json"),
                         _world.features_path(folder, name))
            if paths[0] is None:
                continue
            if paths[2] is None:
                raise _cli.UsageError(f"--questions_{name} needs features: give --features or "
                                      f"--{name}_features")
            splits[name] = self.read_split(name, *paths)
        return splits

    def no_split(self, name):
        return (f"no annotated {name} questions: give --questions_{name} and "
                f"--annotations_{name}")

    def predict_records(self):
        return self.read_split("questions", self.args.questions, None, self.args.features)

    # ---------------------------------------------------------------- model

    def new_vocabs(self, splits, settings, hparams):
        """The training questions' words; the answers counted over the
        training and validation annotations, as MCAN counts VQA v2's train
        + val (`--min_answer_count`)."""
        answers = vqa_data.AnswerVocab.build(
            [r.multiple_choice_answer for name in ("train", "val") if name in splits
             for r in splits[name].records if r.multiple_choice_answer is not None],
            min_count=settings["min_answer_count"], normalize=prepare_answer)
        return {"words": self.word_vocab(splits["train"]), "answers": answers}

    def describe_vocabs(self, vocabs, settings):
        return (f"{vocabs['words'].vocab_size} word ids, {len(vocabs['answers'])} answers "
                f"(seen >= {settings['min_answer_count']} times)")

    def new_model(self, hparams, vocabs, word_vectors, seed):
        return vqa_models.build_vqa_model(hparams, vocabs["words"].vocab_size,
                                          len(vocabs["answers"]), word_vectors=word_vectors,
                                          seed=seed)

    def compile(self, model, hparams, per_epoch, replicas):
        _vl.compile_model(model, hparams, per_epoch, self.args, replicas,
                          loss=SoftTargetBinaryCrossEntropy(), metrics=[soft_accuracy])

    def encode(self, split, trained):
        return Encoded(self, split, trained)

    def before_training(self, trained, train_set):
        """CATT: the dictionaries set to K-means centres of the training
        split's embedded words and regions (the paper's initialisation), or
        left at uniform(0, 0.01) with --dictionary_init uniform, before the
        first epoch. A run with a checkpoint gets its trained dictionaries
        from it; one killed before its first checkpoint fits the same
        centres again (the K-means is seeded by the run's seed)."""
        model, settings = trained.model, trained.settings
        if not dictionaries.has_dictionaries(model):
            return
        try:
            checkpoints_lib.latest_checkpoint(os.path.join(self.args.output_dir,
                                                           _vl.CHECKPOINTS))
            return  # resuming: the checkpoint holds the dictionaries
        except FileNotFoundError:
            pass
        init = settings.get("dictionary_init") or vqa.RUN_DEFAULTS["dictionary_init"]
        start = time.time()
        batches = (train_set.inputs(np.arange(b, min(len(train_set), b + 256)))
                   for b in range(0, len(train_set), 256))
        report = dictionaries.fit_dictionaries(model, batches, init=init, seed=settings["seed"])
        if not report:
            print("[dictionaries] uniform(0, 0.01) (--dictionary_init uniform: the paper's "
                  "'w/o Init')")
        for name, values in report.items():
            print(f"[dictionaries] {name}: K-means of {values['rows']} training vectors, "
                  f"inertia {values['inertia']:.4g} ({time.time() - start:.1f} s)")

    # ---------------------------------------------------------- predicting

    def decode(self, trained, split, rows, inputs, outputs):
        """The top answer of each question (strings)."""
        logits = keras.ops.convert_to_numpy(outputs)[: len(rows)]
        return [trained.vocabs["answers"].answer(int(i)) for i in logits.argmax(-1)]

    def accuracy(self, trained, split):
        chosen = split.head(_vl.VALIDATION_LIMIT)
        return evaluate_vqa(official_annotations(chosen.records),
                            self.results(chosen, self.predict_split(trained, chosen))).overall

    def report(self, split, splits, predicted, trained):
        """The official accuracy per type next to the per-type majority
        baseline, and on the questions of a --world_bias confounder."""
        args, records = self.args, split.records
        results = self.results(split, predicted)
        annotations = official_annotations(records)
        columns = {"model": evaluate_vqa(annotations, results, normalization=args.normalization)}
        if "train" in splits:
            per_type, overall = _vl.majority_answers(
                (r.question_type, r.multiple_choice_answer) for r in splits["train"].records)
            baseline = self.results(split, [per_type.get(r.question_type, overall)
                                            for r in records])
            columns["baseline"] = evaluate_vqa(annotations, baseline,
                                               normalization=args.normalization)
            print(f"[eval] baseline: {BASELINE_NAME}")
        scores_path = self.output_file(f"{args.split}_scores.json")
        conflict = bias_conflict_accuracy(columns, records)
        if conflict is None:
            write_vqa_scores_json(columns["model"], scores_path)
        else:  # the official dict, plus the confounder's split under its own key
            write_json(scores_path, dict(columns["model"].to_official(),
                                         biasConflict=conflict["model"]))
        if "baseline" in columns:
            write_vqa_scores_json(columns["baseline"],
                                  self.output_file(f"{args.split}_baseline_scores.json"))
        for record, answer in list(zip(records, predicted))[:5]:
            print(f"  {record.question} -> {answer} (annotators: "
                  f"{record.multiple_choice_answer})")
        lines = accuracy_table(columns, records)
        if conflict is not None:
            lines += bias_conflict_table(conflict)
        return results, columns["model"], lines

    # ------------------------------------------------------------ pictures

    def draw(self, trained, encoded, k, answer, image, attention_maps):
        """Where the model looks: the regions shaded by their attention
        weight (AttFlat, MUAN's answer token, or the [CLS] token's IS
        cross-attention for Transformer(+CATT)); beside them, for MUAN the
        four quadrants of the last block's unified attention (Fig. 6), for
        CATT the CS attention over the image and word dictionaries."""
        record = encoded.split.records[k]
        inputs = encoded.inputs(np.array([k]))
        maps = trained.model.attention_maps(inputs)
        count = int(inputs["region_mask"][0].sum())
        title = [f"Q: {record.question}", f"A: {answer}"
                 + (f"  (annotators: {record.multiple_choice_answer})"
                    if record.multiple_choice_answer else "")]
        if "vision_dictionary_weights" in maps:
            title.append("IS-ATT: [CLS] over the regions (last cross layer)")
        picture = attention_maps.draw_region_weights(
            image, inputs["boxes"][0][:count], maps["region_weights"][0][:count], title)
        if "vision_dictionary_weights" in maps:  # CATT: CS-ATT over the dictionaries
            picture = attention_maps.beside(picture, attention_maps.draw_dictionary_weights(
                {"image dictionary (mean over the regions, 1st vision layer)":
                 maps["vision_dictionary_weights"][0],
                 "word dictionary ([CLS], 1st language layer)":
                 maps["language_dictionary_weights"][0]}, picture.height))
        if "unified" in maps:
            words = ["[ans]"] + record.tokens[: trained.hparams.max_question_length]
            picture = attention_maps.beside(picture, attention_maps.draw_quadrants(
                maps["unified"][0], maps["text_length"], words, count))
        return picture, record.question_id, f"{record.question}\t{answer}"


# ------------------------------------------------------------------ scores


def official_annotations(records):
    """VQA v2 annotation dicts of `records` (what the official evaluation reads)."""
    return [{"question_id": r.question_id, "image_id": r.image_id,
             "question_type": r.question_type, "answer_type": r.answer_type,
             "multiple_choice_answer": r.multiple_choice_answer,
             "answers": [{"answer": a, "answer_id": k + 1} for k, a in enumerate(r.answers)]}
            for r in records]


def accuracy_table(columns, records):
    """Result lines: accuracy (%) per question type, then per answer type,
    then overall, one column per `{title: VQAScores}`."""
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
    """The accuracy (%) on the questions whose annotation says
    `bias_conflict` (leaning on the training split's confounder gives a
    wrong answer) and on the others, per column; None when the annotations
    do not say (a world without --world_bias, real data).

    Returns:
        `{title: {"conflict": %, "others": %, "conflict_questions": n,
        "other_questions": n}}`, the mean of the official per-question
        accuracies (unrounded, then rounded to 2 decimals as the official
        code rounds).
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
    """Result lines of `bias_conflict_accuracy`, under the accuracy table."""
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


def score(args):
    """Scores a VQA results file with the official VQA accuracy."""
    records, report = vqa_data.read_vqa(args.questions, args.annotations)
    print(f"[score] {vqa_data.records_report(report)}")
    results = vqa_data.read_vqa_results(args.results,
                                        question_ids={r.question_id for r in records})
    try:
        scores = evaluate_vqa(official_annotations(records), results,
                              normalization=args.normalization)
    except ValueError as error:  # the results do not cover the questions
        raise ValueError(f"{args.results}: {error}") from None
    if args.output:
        write_vqa_scores_json(scores, args.output)
        print(f"[score] overall, per answer type, per question type and per question "
              f"-> {args.output}")
    for line in accuracy_table({"accuracy": scores}, records):
        _cli.emit(line)
    return scores
