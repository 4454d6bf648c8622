"""The commands of the TextVQA recipe (flags: `recipes.textvqa`):
`TextVQATask`, the hooks of `recipes._vl.Task`, and `score`. Status goes
to stderr, results to stdout (`_cli.emit`).
"""

import os

import keras
import numpy as np

from keras_structattn.data.feature_extraction import read_images
from keras_structattn.data.word_vocab import WordVocab
from keras_structattn.metrics import textvqa as textvqa_metrics
from keras_structattn.tasks.textvqa import batches as m4c_batches
from keras_structattn.tasks.textvqa import features as textvqa_features
from keras_structattn.tasks.textvqa import ocr_stores
from keras_structattn.tasks.textvqa import report as textvqa_report
from keras_structattn.tasks.textvqa import textvqa as textvqa_data
from keras_structattn.tasks.textvqa.phoc import PHOC_DIM
from keras_structattn.tasks.vqa.report import majority_answers
from keras_structattn.tasks.vqa.vqa import question_batch
from keras_structattn.training.schedules import LinearWarmupMultiStepDecay
from models.textvqa import m4c as m4c_models
from recipes import _cli
from recipes import _vl
from recipes import textvqa

# The detector-like error of Shapes world's boxes (`features.detector_boxes`):
# each edge moved by 5% of the box's side (standard deviation), about the
# localisation error of a good detector (docs/textvqa.md, "Detected boxes").
WORLD_BOX_JITTER = 0.05
BASELINES = {
    "majority": "the majority answer of the question's type in the training split",
    "first_ocr": "the image's first OCR token",
}


class TextVQATask(_vl.Task):
    """TextVQA: M4C and SA-M4C decode the answer word by word, from the
    answer vocabulary or by copying an OCR token; TextVQA accuracy and
    ANLS."""

    RECIPE, MODEL_TYPE, WORLD_TASKS = textvqa, m4c_models.MODEL_TYPE, "textvqa"
    VOCAB_FILES = {"words": ("question_vocab.json", WordVocab.load),
                   "answers": ("answer_vocab.txt", textvqa_data.AnswerWordVocab.from_file)}
    WITH_EPOCH = True  # one of a question's answer sequences drawn per epoch
    NAME_IDS = True  # Open Images ids ("0054c91397f2fe05"), feature files named by them

    def check_run(self, settings):
        if settings["model"] == "m4c" and settings["graph"] != "spatial":
            raise _cli.UsageError("--graph is for --model sa_m4c (M4C has no relation graph)")

    def read_split(self, name, path):
        """A `Split` from an imdb, its entries with features (`with_features`)."""
        args = self.args
        records, report = textvqa_data.read_imdb(path, skip_invalid=args.skip_invalid)
        print(f"[data] {name}: {report.summary()}")
        objects = (self.open_store(args.object_features, records) if args.object_features
                   else None)
        features = textvqa_features.ImageFeatures(
            path, objects, self.open_ocr(args.ocr_features) if args.ocr_features else None)
        kept = _vl.with_features(name, records, features.problem, args.skip_invalid)
        if not kept:
            raise ValueError(f"{path}: no question left to use")
        return _vl.Split(name, kept, features)

    def open_ocr(self, path):
        """The OCR features at `path` (layout detected), opened once per
        command."""
        if path not in self._stores:
            store = ocr_stores.OcrFeatures(path)
            print(f"[data] OCR features: {store.describe()}")
            self._stores[path] = store
        return self._stores[path]

    def load_splits(self, needed):
        """`{split: Split}` of the splits in `needed` that the data has."""
        if self.data_given:
            paths = {s: getattr(self.args, f"imdb_{s}") for s in textvqa.SPLITS}
        else:
            folder = self.world_folder()
            paths = {s: os.path.join(folder, "textvqa", f"imdb_{s}.npy")
                     for s in textvqa.SPLITS}
        return {name: self.read_split(name, paths[name]) for name in needed if paths.get(name)}

    def no_split(self, name):
        return f"no annotated {name} questions: give --imdb_{name}"

    def predict_records(self):
        return self.read_split("questions", self.args.imdb)

    def tokens(self, record):
        return [t.lower() for t in record.question_tokens]

    def new_vocabs(self, splits, settings, hparams):
        """The training questions' words; --answer_vocab, else the training
        answers' words."""
        if self.args.answer_vocab:
            answers = textvqa_data.AnswerWordVocab.from_file(self.args.answer_vocab)
        else:
            answers = textvqa_data.AnswerWordVocab.from_answers(
                [r.answers for r in splits["train"].records], min_count=hparams.min_answer_count)
        return {"words": self.word_vocab(splits["train"]), "answers": answers}

    def describe_vocabs(self, vocabs, settings):
        return (f"{vocabs['words'].vocab_size} question word ids, {vocabs['answers'].size} "
                "answer words")

    def new_hparams(self, splits, settings, hparams, vocabs):
        """A new run's hparams: the features' widths, fewer objects and
        question words where the data has fewer (Shapes world: padding would
        only cost time), then --hparams; --fasttext becomes a run setting."""
        train = splits["train"]
        settings["fasttext"] = self.args.fasttext
        fasttext_dim = (textvqa_features.OcrWordVectors(self.args.fasttext, []).dim
                        if self.args.fasttext else 0)
        objects, _, ocr = train.store.of(train.records[0])
        wanted = _cli.usage(hparams.parse, self.args.hparams)  # --hparams may add order vectors
        order_dim = wanted.max_ocr if getattr(wanted, "ocr_order_vectors", False) else 0
        most = max(len(train.store.of(r)[0]) for r in train.records[:2000])
        longest = max(len(self.tokens(r)) for r in train.records)
        fitted = [f"object_feature_dim={objects.shape[1]}",
                  f"ocr_feature_dim={fasttext_dim + PHOC_DIM + ocr.shape[1] + order_dim}",
                  f"max_objects={min(hparams.max_objects, max(1, most))}",
                  f"max_question_length={min(hparams.max_question_length, max(1, longest))}"]
        if not self.data_given:  # Shapes world's boxes are exact: detect them
            fitted.append(f"box_jitter={WORLD_BOX_JITTER}")
        return _cli.usage(hparams.parse(",".join(fitted)).parse, self.args.hparams), None

    def new_model(self, hparams, vocabs, word_vectors, seed):
        return m4c_models.M4C.from_hparams(hparams, vocabs["words"].vocab_size,
                                           vocabs["answers"].size, seed=seed)

    def dummy_inputs(self, hparams, model):
        return m4c_batches.dummy_inputs(hparams, model.spatial)

    def encode(self, split, trained):
        settings, hparams = trained.settings, trained.hparams
        word_vectors = None
        if settings.get("fasttext"):
            tokens = [t for r in split.records for t in r.ocr_tokens[: hparams.max_ocr]]
            word_vectors = textvqa_features.OcrWordVectors(settings["fasttext"], tokens)
            if tokens:
                print(f"[data] {settings['fasttext']}: vectors for {len(word_vectors.rows)} "
                      f"of {len(set(tokens))} OCR token types (the others get zeros)")
        questions = question_batch([self.tokens(r) for r in split.records],
                                   trained.vocabs["words"], hparams.max_question_length)
        return m4c_batches.M4CBatches(
            split.records, split.store, questions, trained.vocabs["answers"], hparams,
            spatial=settings["model"] == "sa_m4c", random=settings.get("graph") == "random",
            seed=settings["seed"], word_vectors=word_vectors)

    def schedule(self, hparams, per_epoch):
        """M4C's warm-up and step decay (the gradients clipped to mmf's
        `max_grad_l2_norm`, `clip_norm`), its steps fractions of the run's
        budget (`schedule_scale`)."""
        scale = self.schedule_scale(hparams, per_epoch)
        decay_steps = ",".join(str(max(1, round(int(s) * scale)))
                               for s in str(hparams.decay_steps).split(",") if s.strip())
        return LinearWarmupMultiStepDecay(hparams.learning_rate,
                                          max(1, round(hparams.warmup_steps * scale)),
                                          hparams.warmup_factor, decay_steps, hparams.decay_rate)

    def model_name(self, settings):
        return settings["model"] + (" (random graph)" if settings.get("graph") == "random"
                                    else "")

    def before_training(self, trained, train_set):
        print(f"[data] {100 * train_set.coverage():.1f}% of the training questions have an "
              "answer the vocabulary and OCR tokens can write (the others give no loss)")

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
            per_type, overall = majority_answers(
                (r.question_type, a) for r in splits["train"].records for a in r.answers)
            baselines = {"majority": [per_type.get(r.question_type, overall) for r in records],
                         **baselines}
        for name, baseline in baselines.items():
            columns[name] = self.scores(split, baseline)
            print(f"[eval] baseline {name}: {BASELINES[name]}")
        textvqa_metrics.write_textvqa_scores_json(
            columns["model"], self.output_file(f"{self.args.split}_scores.json"))
        ocr = [r.question_id for r in records if r.answer_source == "ocr"]
        if ocr:  # the OCR answers' score beside its floors (docs/textvqa.md)
            def on_ocr(name):
                per = columns[name].per_question
                return 100.0 * float(np.mean([per[q]["accuracy"] for q in ocr]))

            print(f"[eval] OCR answers ({len(ocr)}): {self.model_name(trained.settings)} "
                  f"{on_ocr('model'):.2f}% accuracy; floors: " + ", ".join(
                      f"{name} {on_ocr(name):.2f}%" for name in columns if name != "model"))
        for record, answer in list(zip(records, answers))[:5]:
            print(f"  {record.question} -> {answer} (annotators: {record.answers[0]})")
        return (self.results(split, predicted), columns["model"],
                textvqa_report.score_table(columns, records))

    def real_images(self, records):
        return [read_images(self.args.images, [f"{r.image_name or r.image_id}.jpg"],
                            [r.image_id])[0] for r in records]

    def draw(self, trained, encoded, k, prediction, image):
        """The answer's attention (`textvqa_report.draw_question`)."""
        record = encoded.records[k]
        answer, copied = prediction
        inputs, _, _ = encoded.batch(np.array([k]))
        picture = textvqa_report.draw_question(trained.model, trained.hparams, inputs, record,
                                               answer, copied, image)
        return picture, record.question_id, f"{record.question}\t{answer}"

    def score(self):
        """Scores a results file with the TextVQA accuracy and ANLS."""
        args = self.args
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
        # Percentages, as `evaluate` and the other recipes' `score` print them.
        _cli.emit(f"accuracy\t{100 * scores.accuracy:.2f}")
        _cli.emit(f"anls\t{100 * scores.anls:.2f}")
        return scores


run = TextVQATask.run  # what `recipes._cli.recipe_main` calls
