"""The commands of the VQA recipe (flags: `recipes.vqa`): `VQATask`, the
hooks of `recipes._vl.Task` and `score`. Status goes to stderr, results
to stdout (`_cli.emit`).
"""

import json
import os
import time

import keras
import numpy as np

from keras_structattn.data.shapes_world.writers import features_path
from keras_structattn.data.word_vocab import WordVocab
from keras_structattn.metrics import evaluate_vqa
from keras_structattn.metrics import prepare_answer
from keras_structattn.metrics import write_vqa_scores_json
from keras_structattn.tasks.vqa import report as vqa_report
from keras_structattn.tasks.vqa import vqa as vqa_data
from keras_structattn.training import checkpoints as checkpoints_lib
from keras_structattn.training import dictionaries
from keras_structattn.training import feeding
from keras_structattn.training.losses import SoftTargetBinaryCrossEntropy
from keras_structattn.training.losses import soft_accuracy
from keras_structattn.training.run_folder import write_json
from models.vqa import build as vqa_models
from recipes import _cli
from recipes import _vl
from recipes import _world
from recipes import vqa

BASELINE_NAME = "the majority answer of the question's type in the training split"
# The learnability probe's scores on the default world (written by
# `python benchmarks/shapes_world_probe.py --seed 1 --val 200 --reference ...`),
# printed beside a run on that very world: what a small model reaches there.
PROBE_REFERENCE = os.path.join(os.path.dirname(os.path.abspath(__file__)),
                               "probe_reference.json")


class Encoded(_vl.RegionEncoded):
    """A split's questions and regions; soft answer scores as targets."""

    def batch(self, rows):
        targets = vqa_data.soft_score_batch([self.split.records[i] for i in rows],
                                            self.trained.vocabs["answers"], prepare_answer)
        return self.inputs(rows), targets


class VQATask(_vl.RegionTask):
    """VQA v2: MCAN, MCAN+PA, MUAN and Transformer(+CATT) answering from a
    fixed answer vocabulary (soft scores as MCAN), official accuracy."""

    RECIPE, MODEL_TYPE, WORLD_TASKS, ENCODED = vqa, "vqa", "vqa", Encoded
    ARCHITECTURES = vqa.ARCHITECTURES
    VOCAB_FILES = {"words": ("question_vocab.json", WordVocab.load),
                   "answers": ("answers.json", vqa_data.AnswerVocab.load)}
    TEXT_KEY, TEXT_LENGTH = "question", "max_question_length"

    def read_split(self, name, questions, annotations, features):
        records, report = vqa_data.read_vqa(questions, annotations,
                                            skip_invalid=self.args.skip_invalid)
        print(f"[data] {name}: {vqa_data.records_report(report)}")
        return super().read_split(name, records, features,
                                  lambda r: f"question {r.question_id}, {questions}")

    def load_splits(self, needed):
        """`{split: Split}` of the splits in `needed` that the data has."""
        args, splits = self.args, {}
        folder = None if self.data_given else self.world_folder()
        for name in needed:
            if self.data_given:
                paths = (getattr(args, f"questions_{name}"), getattr(args, f"annotations_{name}"),
                         getattr(args, f"{name}_features") or args.features)
            else:
                paths = (os.path.join(folder, "vqa", f"questions_{name}.json"),
                         os.path.join(folder, "vqa", f"annotations_{name}.json"),
                         features_path(folder, name))
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

    def compile_args(self, hparams):
        return {"loss": SoftTargetBinaryCrossEntropy(), "metrics": [soft_accuracy]}

    def before_training(self, trained, train_set):
        """CATT: the dictionaries set to K-means centres of the training
        split's embedded words and regions (seeded by the run's seed), or
        uniform(0, 0.01) with --dictionary_init uniform; not when resuming."""
        model, settings = trained.model, trained.settings
        if not dictionaries.has_dictionaries(model):
            return
        try:
            checkpoints_lib.latest_checkpoint(self.output_file(_vl.CHECKPOINTS))
            return  # resuming: the checkpoint holds the dictionaries
        except FileNotFoundError:
            pass
        init = settings.get("dictionary_init") or vqa.RUN_DEFAULTS["dictionary_init"]
        start = time.time()
        batches = feeding.OrderedBatches(len(train_set), 256, train_set.inputs)
        try:
            report = dictionaries.fit_dictionaries(model, batches, init=init,
                                                   seed=settings["seed"])
        except ValueError as error:  # a dictionary larger than the data: before the run is made
            raise _cli.UsageError(f"{error} (--hparams dictionary_size=...)") from None
        if not report:
            print("[dictionaries] uniform(0, 0.01) (--dictionary_init uniform: the paper's "
                  "'w/o Init')")
        for name, values in report.items():
            print(f"[dictionaries] {name}: K-means of {values['rows']} training vectors, "
                  f"inertia {values['inertia']:.4g} ({time.time() - start:.1f} s)")

    def decode(self, trained, split, rows, inputs, outputs):
        """The top answer of each question (strings)."""
        logits = keras.ops.convert_to_numpy(outputs)[: len(rows)]
        return [trained.vocabs["answers"].answer(int(i)) for i in logits.argmax(-1)]

    def accuracy(self, trained, split):
        chosen = split.head(feeding.VALIDATION_LIMIT)
        return evaluate_vqa(vqa_report.official_annotations(chosen.records),
                            self.results(chosen, self.predict_split(trained, chosen))).overall

    def report(self, split, splits, predicted, trained):
        """The official accuracy per type next to the per-type majority
        baseline, and on the questions of a --world_bias confounder."""
        args, records = self.args, split.records
        results = self.results(split, predicted)
        annotations = vqa_report.official_annotations(records)
        columns = {"model": evaluate_vqa(annotations, results, normalization=args.normalization)}
        if "train" in splits:
            per_type, overall = vqa_report.majority_answers(
                (r.question_type, r.multiple_choice_answer) for r in splits["train"].records)
            baseline = self.results(split, [per_type.get(r.question_type, overall)
                                            for r in records])
            columns["baseline"] = evaluate_vqa(annotations, baseline,
                                               normalization=args.normalization)
            print(f"[eval] baseline: {BASELINE_NAME}")
        scores_path = self.output_file(f"{args.split}_scores.json")
        conflict = vqa_report.bias_conflict_accuracy(columns, records)
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
        lines = vqa_report.accuracy_table(columns, records) + probe_lines(args)
        if conflict is not None:
            lines += vqa_report.bias_conflict_table(conflict)
        return results, columns["model"], lines

    def draw(self, trained, encoded, k, answer, image):
        """Where the model looks (`vqa_report.draw_answer`): AttFlat, MUAN's
        answer token, or the [CLS] token's IS cross-attention."""
        record = encoded.split.records[k]
        inputs = encoded.inputs(np.array([k]))
        picture = vqa_report.draw_answer(trained.model.attention_maps(inputs), inputs, record,
                                         answer, trained.hparams.max_question_length, image)
        return picture, record.question_id, f"{record.question}\t{answer}"

    def score(self):
        """Scores a VQA results file with the official VQA accuracy."""
        args = self.args
        records, report = vqa_data.read_vqa(args.questions, args.annotations)
        print(f"[score] {vqa_data.records_report(report)}")
        results = vqa_data.read_vqa_results(args.results,
                                            question_ids={r.question_id for r in records})
        try:
            scores = evaluate_vqa(vqa_report.official_annotations(records), results,
                                  normalization=args.normalization)
        except ValueError as error:  # the results do not cover the questions
            raise ValueError(f"{args.results}: {error}") from None
        if args.output:
            write_vqa_scores_json(scores, args.output)
            print(f"[score] overall, per answer type, per question type and per question "
                  f"-> {args.output}")
        for line in vqa_report.accuracy_table({"accuracy": scores}, records):
            _cli.emit(line)
        return scores


run = VQATask.run  # what `recipes._cli.recipe_main` calls


def probe_lines(args, reference=PROBE_REFERENCE):
    """The probe's accuracy per question type, as lines under the table,
    when the run's world is the one the probe was trained on (the same seed
    and sizes, the default configuration); else no lines."""
    manifest = os.path.join(_world.folder_of(args), "manifest.json")
    if not (os.path.exists(reference) and os.path.exists(manifest)):
        return []
    with open(reference, encoding="utf-8") as f:
        probe = json.load(f)
    with open(manifest, encoding="utf-8") as f:
        world = json.load(f)
    config, splits = world["config"], world["summary"]["splits"]
    same = (config["seed"] == probe["world"]["seed"] and config.get("bias") is None
            and config.get("layout", "default") == "default"
            and config.get("region_geometry", True)
            and all(splits[s]["scenes"] == probe["world"][s] for s in ("train", "val", "test")))
    if not same:
        return []
    scores = probe["scores"]
    return [f"probe (a small Keras model on this world, {probe['epochs']} epochs; "
            f"benchmarks/shapes_world_probe.py, {probe['date']}): "
            + ", ".join(f"{t} {v:.2f}" for t, v in scores.items())]
