"""The commands of the TextVQA recipe (flags: `recipes.textvqa`):
`TextVQATask`, the hooks of `recipes._vl.Task`, and `score`.

Status goes to stderr (`print`, which `recipes._cli.execute` points
there), results to stdout (`_cli.emit`).
"""

import collections
import os

import keras
import numpy as np

from keras_structattn.data.word_vocab import WordVocab
from keras_structattn.metrics import textvqa as textvqa_metrics
from keras_structattn.ops import relation_tables
from keras_structattn.ops import spatial_graph
from keras_structattn.tasks.textvqa import textvqa as textvqa_data
from keras_structattn.tasks.textvqa.phoc import PHOC_DIM
from keras_structattn.tasks.textvqa.phoc import phoc
from keras_structattn.tasks.vqa.vqa import question_batch
from models.textvqa import m4c as m4c_models
from recipes import _cli
from recipes import _replicas
from recipes import _vl
from recipes import _world
from recipes import textvqa
from recipes.textvqa.features import FeatureError
from recipes.textvqa.features import ImageFeatures

BASELINES = {
    "majority": "the majority answer of the question's type in the training split",
    "first_ocr": "the image's first OCR token",
}


def run(args):
    """Runs `args.command`; returns what it returns."""
    if args.command == "score":
        return score(args)
    return TextVQATask(args, textvqa.data_flags_given(args)).run()


def question_tokens(record):
    return [t.lower() for t in record.question_tokens]


class TextVQATask(_vl.Task):
    """TextVQA: M4C and SA-M4C decode the answer word by word, from the
    answer vocabulary or by copying an OCR token; TextVQA accuracy and
    ANLS."""

    MODEL_TYPE = m4c_models.MODEL_TYPE
    RUN_DEFAULTS = textvqa.RUN_DEFAULTS
    WORLD_SETS, PAPER_SETS = textvqa.WORLD_SETS, textvqa.PAPER_SETS
    VOCAB_FILES = {"words": ("question_vocab.json", WordVocab.load),
                   "answers": ("answer_vocab.txt", textvqa_data.AnswerWordVocab.from_file)}
    WITH_EPOCH = True  # one of a question's answer sequences drawn per epoch

    def check_run(self, settings):
        if settings["model"] == "m4c" and settings["graph"] != "spatial":
            raise _cli.UsageError("--graph is for --model sa_m4c (M4C has no relation graph)")

    # ----------------------------------------------------------------- data

    def read_split(self, name, path):
        """A `Split` from an imdb; entries whose features are missing or
        malformed are an error naming the file and question, or with
        --skip_invalid skipped and counted."""
        args = self.args
        records, report = textvqa_data.read_imdb(path, skip_invalid=args.skip_invalid)
        print(f"[data] {name}: {report.summary()}")
        features = ImageFeatures(path, args.object_features, args.ocr_features)

        def problem(record):
            try:
                features.of(record)
            except FeatureError as error:
                return str(error)
            return None

        kept = _vl.with_features(name, records, problem, args.skip_invalid)
        if not kept:
            raise ValueError(f"{path}: no question left to use")
        return _vl.Split(name, kept, features)

    def load_splits(self, needed):
        """`{split: Split}` of the splits in `needed` that the data has
        (Shapes world generated or reused when no data flag is given)."""
        if self.data_given:
            paths = {s: getattr(self.args, f"imdb_{s}") for s in textvqa.SPLITS}
        else:
            folder = _world.ensure_world(self.args, tasks="textvqa",
                                         default_seed=textvqa.RUN_DEFAULTS["seed"])
            paths = {s: os.path.join(folder, "textvqa", f"imdb_{s}.npy")
                     for s in textvqa.SPLITS}
        return {name: self.read_split(name, paths[name]) for name in needed if paths.get(name)}

    def no_split(self, name):
        return f"no annotated {name} questions: give --imdb_{name}"

    def predict_records(self):
        return self.read_split("questions", self.args.imdb)

    def tokens(self, record):
        return question_tokens(record)

    # ---------------------------------------------------------------- model

    def new_vocabs(self, splits, settings, hparams):
        """The training questions' words; --answer_vocab, else the training
        answers' words."""
        records = splits["train"].records
        if self.args.answer_vocab:
            answers = textvqa_data.AnswerWordVocab.from_file(self.args.answer_vocab)
        else:
            answers = textvqa_data.AnswerWordVocab.from_answers(
                [r.answers for r in records], min_count=hparams.min_answer_count)
        return {"words": self.word_vocab(splits["train"]), "answers": answers}

    def describe_vocabs(self, vocabs, settings):
        return (f"{vocabs['words'].vocab_size} question word ids, {vocabs['answers'].size} "
                "answer words")

    def new_hparams(self, splits, settings, hparams, vocabs):
        """A new run's hparams: the features' widths, fewer objects and
        question words where the data has fewer (Shapes world: 8 shapes,
        questions of at most 13 words: padding would only cost time), then
        --hparams. --fasttext becomes a run setting."""
        train = splits["train"]
        settings["fasttext"] = self.args.fasttext
        fasttext_dim = OcrWordVectors(self.args.fasttext, []).dim if self.args.fasttext else 0
        objects, _, ocr = train.store.of(train.records[0])
        most = max(len(train.store.of(r)[0]) for r in train.records[:2000])
        longest = max(len(question_tokens(r)) for r in train.records)
        fitted = [f"object_feature_dim={objects.shape[1]}",
                  f"ocr_feature_dim={fasttext_dim + PHOC_DIM + ocr.shape[1]}",
                  f"max_objects={min(hparams.max_objects, max(1, most))}",
                  f"max_question_length={min(hparams.max_question_length, max(1, longest))}"]
        return _cli.usage(hparams.parse(",".join(fitted)).parse, self.args.hparams), None

    def new_model(self, hparams, vocabs, word_vectors, seed):
        return m4c_models.M4C.from_hparams(hparams, vocabs["words"].vocab_size,
                                           vocabs["answers"].size, seed=seed)

    def dummy_inputs(self, hparams, model):
        n, t, q = hparams.max_objects, hparams.max_ocr, hparams.max_question_length
        inputs = {"question": np.ones((1, q), "int32"),
                  "objects": np.zeros((1, n, hparams.object_feature_dim), "float32"),
                  "object_boxes": np.zeros((1, n, 4), "float32"),
                  "object_mask": np.ones((1, n), bool),
                  "ocr": np.zeros((1, t, hparams.ocr_feature_dim), "float32"),
                  "ocr_boxes": np.zeros((1, t, 4), "float32"),
                  "ocr_mask": np.ones((1, t), bool),
                  "previous": np.ones((1, hparams.num_steps), "int32")}
        if model.spatial:
            length = q + n + t + hparams.num_steps
            inputs["relations"] = np.zeros((1, length, length), "int32")
        return inputs

    def compile(self, model, hparams, per_epoch, replicas):
        compile_model(model, hparams, self.args, per_epoch, replicas)

    def model_name(self, settings):
        return settings["model"] + (" (random graph)" if settings.get("graph") == "random"
                                    else "")

    def before_training(self, trained, train_set):
        print(f"[data] {100 * train_set.coverage():.1f}% of the training questions have an "
              "answer the vocabulary and OCR tokens can write (the others give no loss)")

    def encode(self, split, trained):
        return Encoded(split, trained)

    # ---------------------------------------------------------- predicting

    def decode(self, trained, split, rows, inputs, outputs):
        """`(answer, copied OCR positions)` of each question: greedy
        decoding (compiled, one program for every batch)."""
        indices = keras.ops.convert_to_numpy(outputs)
        return [m4c_models.answer_text(
            indices[k], trained.vocabs["answers"].words,
            split.records[row].ocr_tokens[: trained.hparams.max_ocr])
            for k, row in enumerate(rows)]

    def results(self, split, predicted):
        return super().results(split, [answer for answer, _ in predicted])

    def scores(self, split, answers):
        return textvqa_metrics.evaluate_textvqa(
            [{"question_id": r.question_id, "answers": list(r.answers)} for r in split.records],
            super().results(split, answers), anls_mode=self.args.anls)

    def accuracy(self, trained, split):
        return self.scores(split, [a for a, _ in self.predict_split(trained, split)]).accuracy

    def report(self, split, splits, predicted, trained):
        """TextVQA accuracy and ANLS per question type and answer source,
        next to the majority and first-OCR-token baselines."""
        records = split.records
        answers = [answer for answer, _ in predicted]
        columns = {"model": self.scores(split, answers)}
        baselines = {"first_ocr": [r.ocr_tokens[0] if r.ocr_tokens else "" for r in records]}
        if "train" in splits:
            per_type, overall = _vl.majority_answers(
                (r.question_type, a) for r in splits["train"].records for a in r.answers)
            baselines = {"majority": [per_type.get(r.question_type, overall) for r in records],
                         **baselines}
        for name, baseline in baselines.items():
            columns[name] = self.scores(split, baseline)
            print(f"[eval] baseline {name}: {BASELINES[name]}")
        textvqa_metrics.write_textvqa_scores_json(
            columns["model"], self.output_file(f"{self.args.split}_scores.json"))
        for record, answer in list(zip(records, answers))[:5]:
            print(f"  {record.question} -> {answer} (annotators: {record.answers[0]})")
        return self.results(split, predicted), columns["model"], score_table(columns, records)

    # ------------------------------------------------------------ pictures

    def real_images(self, records):
        return [_world.read_images(self.args.images, [f"{r.image_name or r.image_id}.jpg"],
                                   [r.image_id])[0] for r in records]

    def draw(self, trained, encoded, k, prediction, image, attention_maps):
        """The image with its OCR boxes (copied tokens in red), lit by the
        first answer step's attention over the objects and OCR tokens (last
        layer, mean over heads); for SA-M4C, one panel per spatial head: the
        boxes that head lets the copied token (else the first OCR token)
        attend to, lit by its attention weights."""
        record = encoded.records[k]
        answer, copied = prediction
        inputs, _, _ = encoded.batch(np.array([k]))
        picture = draw_question(trained.model, trained.hparams, inputs, record, answer, copied,
                                image, attention_maps)
        return picture, record.question_id, f"{record.question}\t{answer}"


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
        split: the `Split` (its store: `ImageFeatures`).
        trained: the run's `Trained` (vocabularies, hparams, settings:
            model, graph, seed, fasttext).
    """

    def __init__(self, split, trained):
        settings, hparams = trained.settings, trained.hparams
        self.split = split
        self.records = split.records
        self.hparams = hparams
        self.answer_vocab = trained.vocabs["answers"]
        self.spatial = settings["model"] == "sa_m4c"
        self.graph = settings.get("graph", "spatial")
        self.seed = settings["seed"]
        self.questions = question_batch([question_tokens(r) for r in self.records],
                                        trained.vocabs["words"], hparams.max_question_length)
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
            objects, boxes, appearance = self.split.store.of(record)
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
    `replicas` (`_replicas.jit_flag`). The warm-up and decay steps are fractions
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
        jit_compile=_replicas.jit_flag(args, replicas))


# ------------------------------------------------------------------ scores


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
