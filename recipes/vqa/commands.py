"""The commands of the VQA recipe (flags: `recipes.vqa`).

Each command is `command(args)` with the parsed flags; `run(args)` picks
it. Status goes to stderr (`print`, which `recipes._cli.execute` points
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
from recipes._run import write_atomically
from recipes._run import write_json
from recipes.vqa import ARCHITECTURES
from recipes.vqa import PAPER_SETS
from recipes.vqa import RUN_DEFAULTS
from recipes.vqa import WORLD_SETS
from recipes.vqa import data_flags_given

QUESTION_VOCAB = "question_vocab.json"
ANSWER_VOCAB = "answers.json"
BASELINE_NAME = "the majority answer of the question's type in the training split"


def run(args):
    """Runs `args.command`; returns what it returns."""
    return {
        "train": train,
        "evaluate": evaluate,
        "predict": predict,
        "score": score,
        "visualize": visualize,
    }[args.command](args)


# -------------------------------------------------------------------- data


class Split:
    """One split: its question records and region feature store."""

    def __init__(self, name, records, store, file_names=None):
        self.name = name
        self.records = records
        self.store = store
        self.file_names = file_names or {}


def _paths(args, folder, split):
    """`(questions, annotations, features)` of a split (None where absent)."""
    if folder is not None:
        return (os.path.join(folder, "vqa", f"questions_{split}.json"),
                os.path.join(folder, "vqa", f"annotations_{split}.json"),
                _world.features_path(folder, split))
    return (getattr(args, f"questions_{split}"), getattr(args, f"annotations_{split}"),
            getattr(args, f"{split}_features") or args.features)


def read_split(name, questions, annotations, features, skip_invalid):
    """A `Split` from its files; questions whose image has no features are an
    error naming the image and the store, or skipped and counted."""
    records, report = vqa_data.read_vqa(questions, annotations, skip_invalid=skip_invalid)
    print(f"[data] {name}: {vqa_data.records_report(report)}")
    store = _vl.open_regions(features)
    kept = [r for r in records if r.image_id in store]
    missing = len(records) - len(kept)
    if missing:
        first = next(r for r in records if r.image_id not in store)
        if not skip_invalid:
            raise ValueError(
                f"{features}: no features for image {first.image_id} (question "
                f"{first.question_id}, {questions}); {missing} questions lack features "
                "(--skip_invalid skips and counts them)")
        print(f"[data] {name}: {missing} questions skipped: their images have no features "
              f"in {features} (first: image {first.image_id})")
    return Split(name, kept, store)


def load_splits(args, needed):
    """The splits in `needed` that the data has.

    Shapes world is generated (or reused from DIR/shapes_world) when no
    data flag is given.

    Returns:
        `{split: Split}` (a split the data does not have is left out).
    """
    folder = None
    if not data_flags_given(args):
        folder = _world.ensure_world(args, tasks="vqa", default_seed=RUN_DEFAULTS["seed"])
    splits = {}
    for name in needed:
        questions, annotations, features = _paths(args, folder, name)
        if questions is None:
            continue
        if features is None:
            raise _cli.UsageError(f"--questions_{name} needs features: give --features or "
                                  f"--{name}_features")
        splits[name] = read_split(name, questions, annotations, features, args.skip_invalid)
    return splits


# ------------------------------------------------------------------- model


def resolve_run(args):
    """`(run, settings, hparams)` (see `_vl.resolve_run`)."""
    given = dict(model=args.model, hparams_set=args.hparams_set,
                 min_answer_count=args.min_answer_count, dictionary_init=args.dictionary_init)
    run, settings, hparams = _vl.resolve_run(
        args, given, RUN_DEFAULTS, "vqa",
        lambda s: (PAPER_SETS if data_flags_given(args) else WORLD_SETS)[s["model"]])
    architecture = ARCHITECTURES.get(settings["model"], settings["model"])
    if hparams.architecture != architecture:
        raise _cli.UsageError(f"--hparams_set {settings['hparams_set']} is a "
                              f"{hparams.architecture} set, not {settings['model']}")
    return run, settings, hparams


def fit_new_dictionaries(args, model, train_set, settings):
    """CATT: the dictionaries set to K-means centres of the training split's
    embedded words and regions (the paper's initialisation), or left at
    uniform(0, 0.01) with --dictionary_init uniform, before the first
    epoch. A run with a checkpoint gets its trained dictionaries from it;
    one killed before its first checkpoint fits the same centres again (the
    K-means is seeded by the run's seed)."""
    if not dictionaries.has_dictionaries(model):
        return
    try:
        checkpoints_lib.latest_checkpoint(os.path.join(args.output_dir, _vl.CHECKPOINTS))
        return  # resuming: the checkpoint holds the dictionaries
    except FileNotFoundError:
        pass
    init = settings.get("dictionary_init") or RUN_DEFAULTS["dictionary_init"]
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


def new_hparams(args, settings, hparams, train_split, word_dim):
    """A new run's hparams: the set's, fitted to the data (regions, word
    vectors' width), then --hparams."""
    fitted = [f"max_regions={_vl.max_regions_of(train_split.store, hparams.max_regions)}"]
    if word_dim is not None:
        fitted.append(f"word_dim={word_dim}")
    hparams = _vl.usage(hparams.parse(",".join(fitted)).parse, args.hparams)
    _vl.decay_epochs(hparams)  # checked before the run is written
    return hparams


def build_model(hparams, question_vocab, answers, word_vectors=None, seed=None):
    """The model of `hparams`, built on a batch of zeros."""
    model = vqa_models.build_vqa_model(hparams, question_vocab.vocab_size, len(answers),
                            word_vectors=word_vectors, seed=seed)
    model(dummy_inputs(hparams))
    return model


def dummy_inputs(hparams, batch=1, feature_dim=None):
    n, t = hparams.max_regions, hparams.max_question_length
    return {"question": np.ones((batch, t), "int32"),
            "regions": np.zeros((batch, n, feature_dim or hparams.feature_dim), "float32"),
            "boxes": np.zeros((batch, n, 4), "float32"),
            "region_mask": np.ones((batch, n), bool)}


def prepare_run(args, run, settings, hparams, splits, resuming, write=True):
    """The vocabularies, hparams and built model of a training run; a new
    run's files are committed once its model has been built (by the chief
    process only: `write`). `resuming`: whether the folder held the run when
    `resolve_run` read it (read once, so that a process that sees the
    chief's new files appear still builds the run `resolve_run` resolved).

    The answers are counted over the training and validation annotations,
    as MCAN counts VQA v2's train + val (`--min_answer_count`); the words
    are the training questions'."""
    train_split = splits["train"]
    word_vectors = None
    if resuming:
        question_vocab = WordVocab.load(run.file(QUESTION_VOCAB))
        answers = vqa_data.AnswerVocab.load(run.file(ANSWER_VOCAB))
        print(f"[run] resuming {args.output_dir}: {settings['hparams_set']}")
    else:
        question_vocab = WordVocab.build([r.tokens for r in train_split.records], min_count=1)
        answers = vqa_data.AnswerVocab.build(
            [r.multiple_choice_answer for name in ("train", "val") if name in splits
             for r in splits[name].records if r.multiple_choice_answer is not None],
            min_count=settings["min_answer_count"], normalize=prepare_answer)
        if args.word_vectors:
            word_vectors = _vl.read_word_vectors(args.word_vectors, question_vocab)
        hparams = new_hparams(args, settings, hparams, train_split,
                              None if word_vectors is None else word_vectors.shape[1])
        hparams = hparams.parse(f"feature_dim={int(train_split.store.feature_dim)}")
    print(f"[hparams] {settings['hparams_set']}: {hparams}")
    keras.utils.set_random_seed(settings["seed"])
    model = build_model(hparams, question_vocab, answers, word_vectors, settings["seed"])
    if not resuming and write:
        run.commit(settings, {_vl.HPARAMS_FILE: hparams.to_json() + "\n",
                              QUESTION_VOCAB: question_vocab.save, ANSWER_VOCAB: answers.save})
        print(f"[run] new run in {args.output_dir}: {question_vocab.vocab_size} word ids, "
              f"{len(answers)} answers (seen >= {settings['min_answer_count']} times)")
    return question_vocab, answers, hparams, model


def load_trained(args):
    """`(model, question_vocab, answers, settings, hparams)` with the
    weights to use."""
    run, settings, hparams = resolve_run(args)
    question_vocab = WordVocab.load(run.file(QUESTION_VOCAB))
    answers = vqa_data.AnswerVocab.load(run.file(ANSWER_VOCAB))
    model = build_model(hparams, question_vocab, answers)
    weights = _vl.newest_weights(args)
    model.load_weights(weights)
    print(f"[model] weights {weights}")
    return model, question_vocab, answers, settings, hparams


# ------------------------------------------------------------------ batches


class Encoded:
    """A split's questions as arrays: word ids and image ids (targets are
    made per batch)."""

    def __init__(self, split, question_vocab, hparams, answers=None):
        self.split = split
        self.hparams = hparams
        self.answers = answers
        self.questions = vqa_data.question_batch(
            [r.tokens for r in split.records], question_vocab, hparams.max_question_length)
        self.image_ids = [r.image_id for r in split.records]

    def __len__(self):
        return len(self.split.records)

    def inputs(self, rows):
        inputs = _vl.region_inputs(self.split.store, [self.image_ids[i] for i in rows],
                                   self.hparams.max_regions)
        inputs["question"] = self.questions[rows]
        return inputs

    def batch(self, rows):
        """`(inputs, soft scores [B, num_answers])` of the records `rows`."""
        targets = vqa_data.soft_score_batch([self.split.records[i] for i in rows],
                                            self.answers, prepare_answer)
        return self.inputs(rows), targets


def soft_accuracy(y_true, y_pred):
    """The soft score of the top answer (MCAN's training accuracy): a
    proxy of the VQA accuracy over the answer vocabulary."""
    top = keras.ops.argmax(y_pred, axis=-1)
    return keras.ops.take_along_axis(y_true, keras.ops.expand_dims(top, -1), axis=-1)[:, 0]


# ------------------------------------------------------------------ train


def train(args):
    """Trains to --epochs (resuming from the newest checkpoint) on the
    --distribute replicas, then evaluates on --split."""
    replicas = _vl.replicas_of(args)  # first: before any TensorFlow op
    run, settings, hparams = resolve_run(args)
    resuming = run.holds_run
    batch_size = _vl.global_batch_size(args, hparams, replicas)
    needed = tuple(dict.fromkeys(("train", "val") if args.no_eval
                                 else ("train", "val", args.split)))
    splits = load_splits(args, needed)
    if "train" not in splits:
        raise _cli.UsageError("give training questions: --questions_train and "
                              "--annotations_train")
    with replicas.scope():  # the model, its optimizer, metrics and checkpoint
        question_vocab, answers, hparams, model = prepare_run(
            args, run, settings, hparams, splits, resuming, write=replicas.is_chief)
        epochs = args.epochs or hparams.epochs
        train_set = Encoded(splits["train"], question_vocab, hparams, answers)
        per_epoch = _vl.steps_per_epoch(len(train_set), batch_size)
        _vl.compile_model(model, hparams, per_epoch, args, replicas,
                          loss=SoftTargetBinaryCrossEntropy(), metrics=[soft_accuracy])
        print(f"[model] {settings['model']}: {model.count_params():,} parameters")
        fit_new_dictionaries(args, model, train_set, settings)
        validation = None
        if "val" in splits:
            val_set = Encoded(splits["val"], question_vocab, hparams, answers)
            validation = _vl.validation_batches(len(val_set), batch_size, val_set.batch,
                                                replicas)
        print(f"[train] {len(train_set)} questions, {per_epoch} batches of {batch_size} per "
              f"epoch, {epochs} epochs")
        start = time.time()
        def accuracy_of(model):
            val = splits["val"]
            chosen = Split(val.name, val.records[:_vl.VALIDATION_LIMIT], val.store)
            predicted = answer_questions((model, question_vocab, answers, settings, hparams),
                                         chosen, args)
            return evaluate_vqa(official_annotations(chosen.records),
                                [{"question_id": r.question_id, "answer": a}
                                 for r, a in zip(chosen.records, predicted)]).overall

        _vl.fit_resumable(
            model, args,
            lambda step: _vl.epoch_batches(len(train_set), batch_size, settings["seed"],
                                           train_set.batch, start=step,
                                           replicas=replicas),
            per_epoch, epochs, validation, replicas,
            _vl.accuracy_hook("val" if "val" in splits else None, accuracy_of))
    print(f"[train] done ({time.time() - start:.0f} s in this command)")
    _vl.write_train_summary(run, replicas)
    if _vl.evaluates_after_training(args, replicas):
        trained = _vl.model_to_evaluate(
            (model, question_vocab, answers, settings, hparams), replicas)
        return evaluate(args, trained=trained, splits=splits)
    return model


# --------------------------------------------------------------- predicting


def answer_questions(trained, split, args, question_vocab=None):
    """The predicted answer of every question of `split` (strings)."""
    model, question_vocab, answers, _, hparams = trained
    encoded = Encoded(split, question_vocab, hparams)
    size = args.predict_batch_size
    predicted = []
    for begin in range(0, len(encoded), size):
        rows = np.arange(begin, min(len(encoded), begin + size))
        # Padded to the batch size: one compiled program for every batch.
        padded = np.concatenate([rows, np.full(size - len(rows), rows[-1])])
        logits = keras.ops.convert_to_numpy(model.predict_on_batch(encoded.inputs(padded)))
        predicted.extend(answers.answer(int(i)) for i in logits[: len(rows)].argmax(-1))
    return predicted


def official_annotations(records):
    """VQA v2 annotation dicts of `records` (what the official evaluation reads)."""
    return [{"question_id": r.question_id, "image_id": r.image_id,
             "question_type": r.question_type, "answer_type": r.answer_type,
             "multiple_choice_answer": r.multiple_choice_answer,
             "answers": [{"answer": a, "answer_id": k + 1} for k, a in enumerate(r.answers)]}
            for r in records]


def majority_answers(records):
    """The most common `multiple_choice_answer` of each question type (ties:
    alphabetical) and over all questions."""
    by_type = collections.defaultdict(collections.Counter)
    for r in records:
        by_type[r.question_type][r.multiple_choice_answer] += 1
    overall = collections.Counter(r.multiple_choice_answer for r in records)

    def top(counter):
        return min(counter.items(), key=lambda kv: (-kv[1], kv[0]))[0]

    return {t: top(c) for t, c in by_type.items()}, top(overall)


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


def evaluate(args, trained=None, splits=None):
    """Answers the --split questions and scores them with the official VQA
    accuracy, next to the per-type majority baseline.

    Returns:
        The model's `VQAScores`.
    """
    trained = trained or load_trained(args)
    wanted = (args.split, "train")
    if splits is None or any(s not in splits for s in wanted):
        splits = load_splits(args, tuple(dict.fromkeys(wanted)))
    if args.split not in splits or not splits[args.split].records[0].answers:
        raise _cli.UsageError(f"no annotated {args.split} questions: give "
                              f"--questions_{args.split} and --annotations_{args.split}")
    split = splits[args.split]
    start = time.time()
    predicted = answer_questions(trained, split, args)
    print(f"[eval] {len(predicted)} {args.split} questions answered in "
          f"{time.time() - start:.0f} s")
    results = [{"question_id": r.question_id, "answer": a}
               for r, a in zip(split.records, predicted)]
    annotations = official_annotations(split.records)
    columns = {"model": evaluate_vqa(annotations, results,
                                                  normalization=args.normalization)}
    if "train" in splits:
        per_type, overall = majority_answers(splits["train"].records)
        baseline = [{"question_id": r.question_id,
                     "answer": per_type.get(r.question_type, overall)} for r in split.records]
        columns["baseline"] = evaluate_vqa(annotations, baseline,
                                                        normalization=args.normalization)
        print(f"[eval] baseline: {BASELINE_NAME}")
    write_json(os.path.join(args.output_dir, f"{args.split}_results.json"), results)
    scores_path = os.path.join(args.output_dir, f"{args.split}_scores.json")
    conflict = bias_conflict_accuracy(columns, split.records)
    if conflict is None:
        write_vqa_scores_json(columns["model"], scores_path)
    else:  # the official dict, plus the confounder's split under its own key
        write_json(scores_path, dict(columns["model"].to_official(),
                                     biasConflict=conflict["model"]))
    if "baseline" in columns:
        write_vqa_scores_json(
            columns["baseline"],
            os.path.join(args.output_dir, f"{args.split}_baseline_scores.json"))
    for record, answer in list(zip(split.records, predicted))[:5]:
        print(f"  {record.question} -> {answer} (annotators: {record.multiple_choice_answer})")
    for line in accuracy_table(columns, split.records):
        _cli.emit(line)
    if conflict is not None:
        for line in bias_conflict_table(conflict):
            _cli.emit(line)
    return columns["model"]


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


def predict(args):
    """Answers every question of --questions (features: --features)."""
    trained = load_trained(args)
    split = read_split("questions", args.questions, None, args.features, args.skip_invalid)
    predicted = answer_questions(trained, split, args)
    results = [{"question_id": r.question_id, "answer": a}
               for r, a in zip(split.records, predicted)]
    if args.output_file:
        write_json(args.output_file, results)
        print(f"[predict] {len(results)} answers -> {args.output_file}")
    else:
        for result in results:
            _cli.emit(f"{result['question_id']}\t{result['answer']}")
    return results


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


# ---------------------------------------------------------------- pictures


def visualize(args):
    """PNGs of where the model looks: the regions shaded by their attention
    weight (AttFlat, MUAN's answer token, or the [CLS] token's IS
    cross-attention for Transformer(+CATT)); beside them, for MUAN the four
    quadrants of the last block's unified attention (Fig. 6), for CATT the
    CS attention over the image and word dictionaries."""
    from keras_structattn.tasks import attention_maps

    trained = load_trained(args)
    model, question_vocab, answers, settings, hparams = trained
    splits = load_splits(args, (args.split,))
    if args.split not in splits:
        raise _cli.UsageError(f"no {args.split} questions to visualize")
    split = splits[args.split]
    chosen = Split(split.name, split.records[: args.num_questions], split.store)
    predicted = answer_questions(trained, chosen, args)
    image_ids = [r.image_id for r in chosen.records]
    if data_flags_given(args):
        if not args.images:
            raise _cli.UsageError("visualize needs --images, the folder of the split's images")
        images = _world.images_by_id(args.images, image_ids)
    else:
        images = _world.scene_images(_world.folder_of(args), split.name, image_ids)
    encoded = Encoded(chosen, question_vocab, hparams)
    folder = os.path.join(args.output_dir, "attention")
    os.makedirs(folder, exist_ok=True)
    written = []
    for k, (record, answer, image) in enumerate(zip(chosen.records, predicted, images)):
        inputs = encoded.inputs(np.array([k]))
        maps = model.attention_maps(inputs)
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
            words = ["[ans]"] + record.tokens[: hparams.max_question_length]
            picture = attention_maps.beside(picture, attention_maps.draw_quadrants(
                maps["unified"][0], maps["text_length"], words, count))
        path = os.path.join(folder, f"{record.question_id}.png")
        write_atomically(path, lambda partial, p=picture: p.save(partial, format="PNG"))
        written.append(path)
        _cli.emit(f"{path}\t{record.question}\t{answer}")
    print(f"[visualize] {len(written)} questions -> {folder}")
    return written
