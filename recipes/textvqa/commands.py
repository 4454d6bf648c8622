"""The commands of the TextVQA recipe (flags: `recipes.textvqa`).

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
from keras_structattn.metrics import textvqa as textvqa_metrics
from keras_structattn.ops import relation_tables
from keras_structattn.ops import spatial_graph
from keras_structattn.tasks.textvqa import textvqa as textvqa_data
from keras_structattn.tasks.textvqa.phoc import phoc
from keras_structattn.tasks.vqa.vqa import question_batch
from models.textvqa import m4c as m4c_models
from recipes import _cli
from recipes import _vl
from recipes import _world
from recipes._run import write_atomically
from recipes._run import write_json
from recipes.textvqa import PAPER_SETS
from recipes.textvqa import RUN_DEFAULTS
from recipes.textvqa import SPLITS
from recipes.textvqa import WORLD_SETS
from recipes.textvqa import data_flags_given
from recipes.textvqa.features import FeatureError
from recipes.textvqa.features import ImageFeatures

QUESTION_VOCAB = "question_vocab.json"
ANSWER_VOCAB = "answer_vocab.txt"
BASELINES = {
    "majority": "the majority answer of the question's type in the training split",
    "first_ocr": "the image's first OCR token",
}


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
    """One split: its records and where their features are."""

    def __init__(self, name, records, features, path):
        self.name, self.records, self.features, self.path = name, records, features, path


def read_split(name, path, args):
    """A `Split` from an imdb; entries whose features are missing or
    malformed are an error naming the file and question, or with
    --skip_invalid skipped and counted."""
    records, report = textvqa_data.read_imdb(path, skip_invalid=args.skip_invalid)
    print(f"[data] {name}: {report.summary()}")
    features = ImageFeatures(path, args.object_features, args.ocr_features)
    kept, skipped, first = [], 0, None
    for record in records:
        try:
            features.of(record)
        except FeatureError as error:
            if not args.skip_invalid:
                raise
            skipped, first = skipped + 1, first or str(error)
            continue
        kept.append(record)
    if skipped:
        print(f"[data] {name}: {skipped} questions skipped for their features (first: {first})")
    if not kept:
        raise ValueError(f"{path}: no question left to use")
    return Split(name, kept, features, path)


def load_splits(args, needed):
    """`{split: Split}` of the splits in `needed` that the data has
    (Shapes world generated or reused when no data flag is given)."""
    if data_flags_given(args):
        paths = {s: getattr(args, f"imdb_{s}") for s in SPLITS}
    else:
        folder = _world.ensure_world(args, tasks="textvqa", default_seed=RUN_DEFAULTS["seed"])
        paths = {s: os.path.join(folder, "textvqa", f"imdb_{s}.npy") for s in SPLITS}
    return {name: read_split(name, paths[name], args) for name in needed if paths.get(name)}


def question_tokens(record):
    return [t.lower() for t in record.question_tokens]


# ------------------------------------------------------------------- model


def resolve_run(args):
    """`(run, settings, hparams)` (see `_vl.resolve_run`)."""
    given = dict(model=args.model, graph=args.graph, hparams_set=args.hparams_set)
    run, settings, hparams = _vl.resolve_run(
        args, given, RUN_DEFAULTS, m4c_models.MODEL_TYPE,
        lambda s: (PAPER_SETS if data_flags_given(args) else WORLD_SETS)[s["model"]])
    if hparams.architecture != settings["model"]:
        raise _cli.UsageError(f"--hparams_set {settings['hparams_set']} is a "
                              f"{hparams.architecture} set, not {settings['model']}")
    if settings["model"] == "m4c" and settings["graph"] != "spatial":
        raise _cli.UsageError("--graph is for --model sa_m4c (M4C has no relation graph)")
    return run, settings, hparams


def dummy_inputs(hparams, spatial):
    n, t, q = hparams.max_objects, hparams.max_ocr, hparams.max_question_length
    inputs = {"question": np.ones((1, q), "int32"),
              "objects": np.zeros((1, n, hparams.object_feature_dim), "float32"),
              "object_boxes": np.zeros((1, n, 4), "float32"),
              "object_mask": np.ones((1, n), bool),
              "ocr": np.zeros((1, t, hparams.ocr_feature_dim), "float32"),
              "ocr_boxes": np.zeros((1, t, 4), "float32"),
              "ocr_mask": np.ones((1, t), bool),
              "previous": np.ones((1, hparams.num_steps), "int32")}
    if spatial:
        length = q + n + t + hparams.num_steps
        inputs["relations"] = np.zeros((1, length, length), "int32")
    return inputs


def build_model(hparams, question_vocab, answer_vocab, seed=None):
    """The model of `hparams`, built on a batch of zeros."""
    model = m4c_models.M4C.from_hparams(hparams, question_vocab.vocab_size, answer_vocab.size,
                                        seed=seed)
    model(dummy_inputs(hparams, model.spatial))
    return model


def _feature_dims(split, fasttext_dim):
    objects, _, ocr = split.features.of(split.records[0])
    return objects.shape[1], fasttext_dim + textvqa_phoc_dim() + ocr.shape[1]


def textvqa_phoc_dim():
    from keras_structattn.tasks.textvqa.phoc import PHOC_DIM

    return PHOC_DIM


def prepare_run(args, run, settings, hparams, splits, resuming, write=True):
    """The vocabularies, hparams and built model of a training run; a new
    run's files are committed once its model has been built, by the chief
    process only (`write`). `resuming`: whether the folder held the run
    when `resolve_run` read it (see `recipes.vqa.commands.prepare_run`)."""
    train_split = splits["train"]
    if resuming:
        question_vocab = WordVocab.load(run.file(QUESTION_VOCAB))
        answer_vocab = textvqa_data.AnswerWordVocab.from_file(run.file(ANSWER_VOCAB))
        print(f"[run] resuming {args.output_dir}: {settings['hparams_set']}")
    else:
        question_vocab = WordVocab.build([question_tokens(r) for r in train_split.records],
                                         min_count=1)
        if args.answer_vocab:
            answer_vocab = textvqa_data.AnswerWordVocab.from_file(args.answer_vocab)
        else:
            answer_vocab = textvqa_data.AnswerWordVocab.from_answers(
                [r.answers for r in train_split.records], min_count=hparams.min_answer_count)
        settings["fasttext"] = args.fasttext
        fasttext_dim = 0
        if args.fasttext:
            fasttext_dim = OcrWordVectors(args.fasttext, []).dim
        object_dim, ocr_dim = _feature_dims(train_split, fasttext_dim)
        # Fitted to the data where it needs less (Shapes world: 8 shapes,
        # questions of at most 13 words): padding would only cost time.
        most = max(len(train_split.features.of(r)[0]) for r in train_split.records[:2000])
        longest = max(len(question_tokens(r)) for r in train_split.records)
        fitted = [f"object_feature_dim={object_dim}", f"ocr_feature_dim={ocr_dim}",
                  f"max_objects={min(hparams.max_objects, max(1, most))}",
                  f"max_question_length={min(hparams.max_question_length, max(1, longest))}"]
        hparams = _vl.usage(hparams.parse(",".join(fitted)).parse, args.hparams)
    print(f"[hparams] {settings['hparams_set']}: {hparams}")
    keras.utils.set_random_seed(settings["seed"])
    model = build_model(hparams, question_vocab, answer_vocab, settings["seed"])
    if not resuming and write:
        run.commit(settings, {_vl.HPARAMS_FILE: hparams.to_json() + "\n",
                              QUESTION_VOCAB: question_vocab.save,
                              ANSWER_VOCAB: answer_vocab.save})
        print(f"[run] new run in {args.output_dir}: {question_vocab.vocab_size} question "
              f"word ids, {answer_vocab.size} answer words")
    return question_vocab, answer_vocab, hparams, model


def load_trained(args):
    """`(model, question_vocab, answer_vocab, settings, hparams)` with the
    weights to use."""
    run, settings, hparams = resolve_run(args)
    question_vocab = WordVocab.load(run.file(QUESTION_VOCAB))
    answer_vocab = textvqa_data.AnswerWordVocab.from_file(run.file(ANSWER_VOCAB))
    model = build_model(hparams, question_vocab, answer_vocab)
    weights = _vl.newest_weights(args)
    model.load_weights(weights)
    print(f"[model] weights {weights}")
    return model, question_vocab, answer_vocab, settings, hparams


# ------------------------------------------------------------------ batches


class OcrWordVectors:
    """The word vectors of OCR tokens from a local FastText / word2vec text
    file (read once for the tokens asked for)."""

    def __init__(self, path, tokens):
        from keras_structattn.data.word_vectors import read_word_vectors

        self.path = path
        words = sorted(set(tokens)) or ["</s>"]
        matrix, found = read_word_vectors(path, words)
        self.dim = matrix.shape[1]
        self.rows = {w: matrix[k] for k, w in enumerate(words) if found[k]}
        if tokens:
            print(f"[data] {path}: vectors for {len(self.rows)} of {len(set(tokens))} OCR "
                  "token types (the others get zeros)")

    def __call__(self, token):
        return self.rows.get(token, np.zeros(self.dim, np.float32))


def _unit(x):
    """Rows scaled to unit L2 norm (zero rows stay zero), as M4C's
    `F.normalize` of each OCR feature part."""
    norm = np.linalg.norm(x, axis=-1, keepdims=True)
    return (x / np.maximum(norm, 1e-12)).astype(np.float32)


def random_graph(labels, seed):
    """SA-M4C's random-graph control: every object/OCR pair's spatial label
    (0..12) replaced by a uniform draw from 0..12 (`spatial_graph.
    random_relations`), the implicit and blocked edges kept."""
    spatial = labels < relation_tables.NUM_SPATIAL_LABELS
    drawn = spatial_graph.random_relations(labels.shape, seed=seed)
    return np.where(spatial, drawn, labels).astype(np.int32)


class Encoded:
    """A split as model inputs, targets made per batch.

    Args:
        split: the `Split`.
        question_vocab, answer_vocab: the run's vocabularies.
        hparams: the run's hparams.
        settings: the run's settings (model, graph, seed, fasttext).
    """

    def __init__(self, split, question_vocab, answer_vocab, hparams, settings):
        self.split = split
        self.records = split.records
        self.hparams = hparams
        self.answer_vocab = answer_vocab
        self.spatial = settings["model"] == "sa_m4c"
        self.graph = settings.get("graph", "spatial")
        self.seed = settings["seed"]
        self.questions = question_batch([question_tokens(r) for r in self.records],
                                        question_vocab, hparams.max_question_length)
        self.word_vectors = None
        if settings.get("fasttext"):
            self.word_vectors = OcrWordVectors(
                settings["fasttext"],
                [t for r in self.records for t in r.ocr_tokens[: hparams.max_ocr]])
        self._phoc = {}
        self._targets = {}

    def __len__(self):
        return len(self.records)

    def _ocr_features(self, tokens, appearance):
        parts = []
        if self.word_vectors is not None:
            parts.append(_unit(np.stack([self.word_vectors(t) for t in tokens])))
        for t in tokens:
            if t not in self._phoc:
                self._phoc[t] = phoc(t)
        parts.append(_unit(np.stack([self._phoc[t] for t in tokens])))
        parts.append(_unit(appearance))
        return np.concatenate(parts, axis=1)

    def inputs(self, rows):
        """The model inputs (no `previous`) of the records `rows`."""
        h = self.hparams
        b, n, t = len(rows), h.max_objects, h.max_ocr
        out = {"question": self.questions[rows],
               "objects": np.zeros((b, n, h.object_feature_dim), np.float32),
               "object_boxes": np.zeros((b, n, 4), np.float32),
               "object_mask": np.zeros((b, n), bool),
               "ocr": np.zeros((b, t, h.ocr_feature_dim), np.float32),
               "ocr_boxes": np.zeros((b, t, 4), np.float32),
               "ocr_mask": np.zeros((b, t), bool)}
        for k, row in enumerate(rows):
            record = self.records[row]
            objects, boxes, appearance = self.split.features.of(record)
            m = min(len(objects), n)
            out["objects"][k, :m], out["object_boxes"][k, :m] = objects[:m], boxes[:m]
            out["object_mask"][k, :m] = True
            tokens = record.ocr_tokens[:t]
            if tokens:
                out["ocr"][k, : len(tokens)] = self._ocr_features(tokens,
                                                                   appearance[: len(tokens)])
                out["ocr_boxes"][k, : len(tokens)] = record.ocr_boxes[: len(tokens)]
                out["ocr_mask"][k, : len(tokens)] = True
        if self.spatial:
            out["relations"] = self.relations(out, rows)
        return out

    def relations(self, inputs, rows):
        """SA-M4C's relation labels of a batch, built on the host."""
        labels = spatial_graph.textvqa_relations_numpy(
            inputs["question"] != 0, inputs["object_boxes"], inputs["object_mask"],
            inputs["ocr_boxes"], inputs["ocr_mask"], self.hparams.num_steps,
            self.hparams.distance_threshold)
        if self.graph == "random":
            # One fixed random graph per question (seeded by the run and the row).
            labels = np.stack([random_graph(labels[k], [self.seed, int(row)])
                               for k, row in enumerate(rows)])
        return labels

    def _answer_targets(self, row):
        if row not in self._targets:
            record = self.records[row]
            self._targets[row] = textvqa_data.answer_sequences(
                record.answers, record.ocr_tokens, self.answer_vocab,
                max_ocr=self.hparams.max_ocr)
        return self._targets[row]

    def batch(self, rows, epoch=0):
        """`(inputs, scores [B, S, V + T], loss_mask [B, S])`: one answer
        sequence per question drawn for teacher forcing, seeded by the run,
        the epoch and the question (so a resumed run draws what an
        uninterrupted one would)."""
        inputs = self.inputs(rows)
        previous, scores, masks = [], [], []
        for row in rows:
            step0, sequences = self._answer_targets(row)
            sequence = None
            if sequences:
                rng = np.random.default_rng([self.seed, epoch, int(row)])
                sequence = sequences[int(rng.integers(len(sequences)))]
            p, s, m = textvqa_data.m4c_targets(
                step0, sequence, self.records[row].ocr_tokens, self.answer_vocab,
                num_steps=self.hparams.num_steps, max_ocr=self.hparams.max_ocr,
                all_copies=self.spatial)
            previous.append(p)
            scores.append(s)
            masks.append(m)
        inputs["previous"] = np.stack(previous)
        return inputs, np.stack(scores), np.stack(masks)

    def coverage(self):
        """The share of questions with at least one answer sequence (the
        others give no loss): the upper bound M4C's targets allow."""
        return float(np.mean([bool(self._answer_targets(r)[1]) for r in range(len(self))]))


# ------------------------------------------------------------------ train


def compile_model(model, hparams, args, per_epoch, replicas=None):
    """Adam under M4C's warm-up and step decay, gradients clipped to the
    global norm `clip_norm` (mmf's `max_grad_l2_norm`), --jit under
    `replicas` (`_vl.jit_flag`). The warm-up and decay steps are fractions
    of the run's budget (`_vl.schedule_steps`)."""
    from keras_structattn.training.schedules import LinearWarmupMultiStepDecay

    scale = _vl.schedule_steps(args, hparams, per_epoch)
    decay_steps = ",".join(str(max(1, round(int(s) * scale)))
                           for s in str(hparams.decay_steps).split(",") if s.strip())
    model.compile(
        optimizer=keras.optimizers.Adam(
            LinearWarmupMultiStepDecay(hparams.learning_rate,
                                       max(1, round(hparams.warmup_steps * scale)),
                                       hparams.warmup_factor, decay_steps,
                                       hparams.decay_rate),
            beta_1=hparams.optimizer_adam_beta1, beta_2=hparams.optimizer_adam_beta2,
            epsilon=hparams.optimizer_adam_epsilon, global_clipnorm=hparams.clip_norm),
        jit_compile=_vl.jit_flag(args, replicas))


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
        raise _cli.UsageError("give the training questions: --imdb_train")
    with replicas.scope():  # the model, its optimizer, metrics and checkpoint
        question_vocab, answer_vocab, hparams, model = prepare_run(
            args, run, settings, hparams, splits, resuming, write=replicas.is_chief)
        epochs = args.epochs or hparams.epochs
        train_set = Encoded(splits["train"], question_vocab, answer_vocab, hparams, settings)
        per_epoch = _vl.steps_per_epoch(len(train_set), batch_size)
        compile_model(model, hparams, args, per_epoch, replicas)
        print(f"[model] {settings['model']}"
              f"{' (random graph)' if settings.get('graph') == 'random' else ''}: "
              f"{model.count_params():,} parameters")
        print(f"[data] {100 * train_set.coverage():.1f}% of the training questions have an "
              "answer the vocabulary and OCR tokens can write (the others give no loss)")
        validation = None
        if "val" in splits:
            val_set = Encoded(splits["val"], question_vocab, answer_vocab, hparams, settings)
            validation = _vl.validation_batches(len(val_set), batch_size, val_set.batch,
                                                replicas)
        print(f"[train] {len(train_set)} questions, {per_epoch} batches of {batch_size} per "
              f"epoch, {epochs} epochs")
        start = time.time()
        def accuracy_of(model):
            val = splits["val"]
            predicted = answer_questions(
                (model, question_vocab, answer_vocab, settings, hparams), val, args)
            return textvqa_metrics.evaluate_textvqa(
                _annotations(val.records),
                [{"question_id": r.question_id, "answer": a}
                 for r, (a, _) in zip(val.records, predicted)], anls_mode=args.anls).accuracy

        _vl.fit_resumable(
            model, args,
            lambda step: _vl.epoch_batches(len(train_set), batch_size, settings["seed"],
                                           train_set.batch, start=step, with_epoch=True,
                                           replicas=replicas),
            per_epoch, epochs, validation, replicas,
            _vl.accuracy_hook("val" if "val" in splits else None, accuracy_of))
    print(f"[train] done ({time.time() - start:.0f} s in this command)")
    _vl.write_train_summary(run, replicas)
    if _vl.evaluates_after_training(args, replicas):
        trained = _vl.model_to_evaluate(
            (model, question_vocab, answer_vocab, settings, hparams), replicas)
        return evaluate(args, trained=trained, splits=splits)
    return model


# --------------------------------------------------------------- predicting


def answer_questions(trained, split, args):
    """`[(answer, copied OCR positions)]` of every question of `split`:
    greedy decoding (compiled, one program for every batch)."""
    model, question_vocab, answer_vocab, settings, hparams = trained
    encoded = Encoded(split, question_vocab, answer_vocab, hparams, settings)
    size = args.predict_batch_size
    answers = []
    for begin in range(0, len(encoded), size):
        rows = np.arange(begin, min(len(encoded), begin + size))
        padded = np.concatenate([rows, np.full(size - len(rows), rows[-1])])
        indices = keras.ops.convert_to_numpy(model.predict_on_batch(encoded.inputs(padded)))
        for k, row in enumerate(rows):
            answers.append(m4c_models.answer_text(
                indices[k], answer_vocab.words,
                encoded.records[row].ocr_tokens[: hparams.max_ocr]))
    return answers


def majority_answers(records):
    """The most common answer of each question type (ties: alphabetical)
    and over all questions, from every human answer."""
    by_type = collections.defaultdict(collections.Counter)
    overall = collections.Counter()
    for r in records:
        for a in r.answers:
            by_type[r.question_type][a] += 1
            overall[a] += 1

    def top(counter):
        return min(counter.items(), key=lambda kv: (-kv[1], kv[0]))[0] if counter else ""

    return {t: top(c) for t, c in by_type.items()}, top(overall)


def baseline_answers(splits, records):
    """`{name: [answer]}` of the trivial baselines over `records`."""
    out = {"first_ocr": [r.ocr_tokens[0] if r.ocr_tokens else "" for r in records]}
    if "train" in splits:
        per_type, overall = majority_answers(splits["train"].records)
        out = {"majority": [per_type.get(r.question_type, overall) for r in records], **out}
    return out


def score_table(columns, records):
    """Result lines: TextVQA accuracy and ANLS (%) per question type, per
    answer source, overall; a pair of columns per `{title: TextVQAScores}`."""
    def mean(scores, ids, key):
        return 100.0 * float(np.mean([scores.per_question[q][key] for q in ids]))

    groups = collections.defaultdict(list)
    for r in records:
        groups[r.question_type or "all"].append(r.question_id)
    sources = collections.defaultdict(list)
    for r in records:
        if r.answer_source:
            sources[f"[{r.answer_source}]"].append(r.question_id)
    width = max([16] + [len(k) for k in groups])
    header = f"{'question type':{width}s} {'questions':>9s}" + "".join(
        f" {t + ' acc':>14s} {t + ' anls':>14s}" for t in columns)
    lines = [header]
    rows = [*sorted(groups.items()), *sorted(sources.items()),
            ("overall", [r.question_id for r in records])]
    for name, ids in rows:
        lines.append(f"{name:{width}s} {len(ids):9d}" + "".join(
            f" {mean(s, ids, 'accuracy'):14.2f} {mean(s, ids, 'anls'):14.2f}"
            for s in columns.values()))
    return lines


def _annotations(records):
    return [{"question_id": r.question_id, "answers": list(r.answers)} for r in records]


def evaluate(args, trained=None, splits=None):
    """Answers the --split questions and scores them (TextVQA accuracy and
    ANLS) next to the baselines.

    Returns:
        The model's `TextVQAScores`.
    """
    trained = trained or load_trained(args)
    wanted = (args.split, "train")
    if splits is None or any(s not in splits for s in wanted if s != "train"):
        splits = load_splits(args, tuple(dict.fromkeys(wanted)))
    if args.split not in splits or not splits[args.split].records[0].answers:
        raise _cli.UsageError(f"no annotated {args.split} questions: give --imdb_{args.split}")
    split = splits[args.split]
    start = time.time()
    predicted = answer_questions(trained, split, args)
    print(f"[eval] {len(predicted)} {args.split} questions answered in "
          f"{time.time() - start:.0f} s")
    annotations = _annotations(split.records)
    results = [{"question_id": r.question_id, "answer": a}
               for r, (a, _) in zip(split.records, predicted)]
    columns = {"model": textvqa_metrics.evaluate_textvqa(annotations, results,
                                                         anls_mode=args.anls)}
    for name, answers in baseline_answers(splits, split.records).items():
        columns[name] = textvqa_metrics.evaluate_textvqa(
            annotations, [{"question_id": r.question_id, "answer": a}
                          for r, a in zip(split.records, answers)], anls_mode=args.anls)
        print(f"[eval] baseline {name}: {BASELINES[name]}")
    write_json(os.path.join(args.output_dir, f"{args.split}_results.json"), results)
    textvqa_metrics.write_textvqa_scores_json(
        columns["model"], os.path.join(args.output_dir, f"{args.split}_scores.json"))
    for record, (answer, _) in list(zip(split.records, predicted))[:5]:
        print(f"  {record.question} -> {answer} (annotators: {record.answers[0]})")
    for line in score_table(columns, split.records):
        _cli.emit(line)
    return columns["model"]


def predict(args):
    """Answers every question of --imdb."""
    trained = load_trained(args)
    split = read_split("questions", args.imdb, args)
    predicted = answer_questions(trained, split, args)
    results = [{"question_id": r.question_id, "answer": a}
               for r, (a, _) in zip(split.records, predicted)]
    if args.output_file:
        write_json(args.output_file, results)
        print(f"[predict] {len(results)} answers -> {args.output_file}")
    else:
        for result in results:
            _cli.emit(f"{result['question_id']}\t{result['answer']}")
    return results


def score(args):
    """Scores a results file with the TextVQA accuracy and ANLS."""
    annotations = textvqa_metrics.read_textvqa_annotations(args.annotations)
    results = textvqa_metrics.read_textvqa_results(
        args.results, question_ids={a["question_id"] for a in annotations})
    try:
        scores = textvqa_metrics.evaluate_textvqa(annotations, results, anls_mode=args.anls)
    except ValueError as error:  # the results do not cover the questions
        raise ValueError(f"{args.results}: {error}") from None
    if args.output:
        textvqa_metrics.write_textvqa_scores_json(scores, args.output)
        print(f"[score] accuracy, ANLS and per-question scores -> {args.output}")
    _cli.emit(f"questions\t{len(annotations)}")
    _cli.emit(f"accuracy\t{scores.accuracy:.4f}")
    _cli.emit(f"anls\t{scores.anls:.4f}")
    return scores


# ---------------------------------------------------------------- pictures


def visualize(args):
    """PNGs per question: the image with its OCR boxes (copied tokens in
    red), lit by the first answer step's attention over the objects and
    OCR tokens (last layer, mean over heads); for SA-M4C, one panel per
    spatial head: the boxes that head lets the copied token (else the first
    OCR token) attend to, lit by its attention weights."""
    from keras_structattn.tasks import attention_maps

    trained = load_trained(args)
    model, question_vocab, answer_vocab, settings, hparams = trained
    splits = load_splits(args, (args.split,))
    split = splits[args.split]
    chosen = Split(split.name, split.records[: args.num_questions], split.features, split.path)
    predicted = answer_questions(trained, chosen, args)
    encoded = Encoded(chosen, question_vocab, answer_vocab, hparams, settings)
    if data_flags_given(args):
        if not args.images:
            raise _cli.UsageError("visualize needs --images, the folder of the split's images")
        images = [_world.read_images(args.images, [f"{r.image_name or r.image_id}.jpg"],
                                     [r.image_id])[0] for r in chosen.records]
    else:
        images = _world.scene_images(_world.folder_of(args), split.name,
                                     [r.image_id for r in chosen.records])
    folder = os.path.join(args.output_dir, "attention")
    os.makedirs(folder, exist_ok=True)
    written = []
    for k, (record, (answer, copied), image) in enumerate(
            zip(chosen.records, predicted, images)):
        inputs, _, _ = encoded.batch(np.array([k]))
        picture = draw_question(model, hparams, inputs, record, answer, copied, image,
                                attention_maps)
        path = os.path.join(folder, f"{record.question_id}.png")
        write_atomically(path, lambda partial, p=picture: p.save(partial, format="PNG"))
        written.append(path)
        _cli.emit(f"{path}\t{record.question}\t{answer}")
    print(f"[visualize] {len(written)} questions -> {folder}")
    return written


OCR_OUTLINE = (90, 90, 255)
COPY_OUTLINE = (230, 30, 30)
QUERY_OUTLINE = (20, 170, 20)


def draw_question(model, hparams, inputs, record, answer, copied, image, attention_maps):
    """The picture of one question (see `visualize`)."""
    weights = model.attention_maps(inputs)[0]  # [heads, L, L] of the last layer
    q, n = hparams.max_question_length, hparams.max_objects
    num_objects = int(inputs["object_mask"][0].sum())
    num_ocr = int(inputs["ocr_mask"][0].sum())
    object_boxes = inputs["object_boxes"][0][:num_objects]
    ocr_boxes = inputs["ocr_boxes"][0][:num_ocr]
    boxes = np.concatenate([object_boxes, ocr_boxes])
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
    layer = model.mmt_layers[-1].attention
    panels = []
    for head, allowed_labels in enumerate(layer.head_relations):
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
    rows = [panels[i:i + 4] for i in range(0, len(panels), 4)]
    grid = attention_maps.stacked([_row(attention_maps, row) for row in rows])
    return attention_maps.beside(picture, grid)


def _row(attention_maps, panels):
    picture = panels[0]
    for panel in panels[1:]:
        picture = attention_maps.beside(picture, panel)
    return picture


_RELATION_NAMES = {0: "unrelated to them", 1: "containing them", 2: "inside them",
                   3: "overlapping them", 12: "itself"}
_DIRECTION_NAMES = ("right", "low-right", "down", "low-left", "left", "up-left", "up",
                    "up-right")


def relation_names(labels):
    """Short names of spatial labels (docs/graph_attention.md)."""
    labels = sorted(labels)
    if all(4 <= label <= 11 for label in labels):
        return "/".join(_DIRECTION_NAMES[label - 4] for label in labels) + " of them"
    return " / ".join(_RELATION_NAMES.get(label) or _DIRECTION_NAMES[label - 4]
                      for label in labels)
