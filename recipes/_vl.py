"""The commands of the vision-and-language recipes (VQA, grounding, TextVQA)
written once: `Task`, subclassed by each recipe with its hooks, and
`RegionTask` for the models on region features; resumable, data-parallel
training (`--distribute`, docs/distributed.md).
"""

import collections
import os
import time

import keras
import numpy as np

from keras_structattn.data import feature_formats
from keras_structattn.data import image_features
from keras_structattn.data.feature_extraction import images_by_id
from keras_structattn.data.shapes_world.run_cache import scene_images
from keras_structattn.data.word_vectors import embedding_matrix
from keras_structattn.data.word_vocab import WordVocab
from keras_structattn.tasks.vqa.vqa import question_batch
from keras_structattn.training import checkpoints as checkpoints_lib
from keras_structattn.training import feeding
from keras_structattn.training.distribution import restarting
from keras_structattn.training.history import history_from_csv
from keras_structattn.training.run_folder import write_json
from keras_structattn.training.schedules import StepWarmupDecay
from recipes import _cli
from recipes import _engine
from recipes import _replicas
from recipes import _run
from recipes import _world
from recipes._run import RunFolder

CHECKPOINTS = "checkpoints"


def global_batch_size(args, hparams, replicas):
    """--batch_size, else the hparams' (--hparams applied), checked to split
    over the replicas (a UsageError) before any data is read."""
    if args.batch_size:
        batch_size, flag = args.batch_size, "--batch_size"
    else:
        batch_size = _cli.usage(hparams.parse, args.hparams).batch_size
        flag = "hparams batch_size (--batch_size to change it)"
    _replicas.check_batch(replicas, batch_size, flag)
    return batch_size


def decay_epochs(hparams):
    """`hparams.decay_epochs` ("10,12") as ints; a bad value is a usage error."""
    try:
        return [int(e) for e in str(hparams.decay_epochs).split(",") if e.strip()]
    except ValueError:
        raise _cli.UsageError(f"hparams decay_epochs must be comma-separated epochs, e.g. "
                              f"10,12; got {hparams.decay_epochs!r}") from None


# A run's model, `{name: vocabulary}` of the task's `VOCAB_FILES`, settings
# (run.json) and hparams.
Trained = collections.namedtuple("Trained", "model vocabs settings hparams")


class Split:
    """A split's name, records and feature store (regions, or TextVQA's)."""

    def __init__(self, name, records, store):
        self.name, self.records, self.store = name, records, store

    def __len__(self):
        return len(self.records)

    def head(self, count):
        """The split's first `count` records."""
        return Split(self.name, self.records[:count], self.store)


def with_features(name, records, problem, skip_invalid, items="questions"):
    """The `records` of split `name` whose `problem(record)` (what is wrong
    with its features) is None; the first problem is a ValueError, or with
    `skip_invalid` they are counted."""
    found = [problem(record) for record in records]
    kept = [record for record, error in zip(records, found) if error is None]
    problems = [error for error in found if error is not None]
    if problems and not skip_invalid:
        raise ValueError(f"{problems[0]}; {len(problems)} {items} lack features "
                         "(--skip_invalid skips and counts them)")
    if problems:
        print(f"[data] {name}: {len(problems)} {items} skipped for their features "
              f"(first: {problems[0]})")
    return kept


class Task:
    """The commands of a vision-and-language recipe (`train`, `evaluate`,
    `predict`, `visualize`), written once; each recipe subclasses it with
    what its task does differently.

    Class attributes of a subclass:
        MODEL_TYPE: the `model_type` of the recipe's hparams sets.
        RECIPE: the recipe package: its `RUN_DEFAULTS` (the settings that
            define a run, each but `seed` a flag of that name), `WORLD_SETS`
            and `PAPER_SETS` (`{model: hparams set}` of a new run on Shapes
            world / on real data; key None without --model) and
            `DATA_FLAGS` (the flags that name real data, not Shapes world).
        WORLD_TASKS: the Shapes world data the recipe reads.
        ARCHITECTURES: `{model: architecture}` where they differ.
        VOCAB_FILES: `{name: (file, read)}` of the run's vocabularies
            (`read(path)` loads one; each has `save(path)`).
        ENCODED: the class of an encoded split, `ENCODED(task, split,
            trained)`: `len`, `inputs(rows)`, `batch(rows[, epoch])`.
        ITEMS, DONE: what the records are and what predicting does to
            them ("questions", "answered"), for status lines.
        PREDICTED: what `predict` writes ("answers").
        PICTURES: the folder under DIR that `visualize` writes.
        WITH_EPOCH: training targets drawn anew each epoch.
        NAME_IDS: the image ids are names (str, TextVQA's): region stores
            are keyed by their files' names (`open_store`).

    Hooks (see each method): `load_splits`, `new_vocabs`, `new_hparams`,
    `new_model`, `dummy_inputs`, `schedule`, `no_split`, `decode`,
    `accuracy`, `report`, `draw`; optional: `compile_args`, `check_run`,
    `model_name`, `describe_vocabs`, `before_training`, `results`,
    `result_line`, `real_images`, `train_names`, `eval_names`.
    """

    ARCHITECTURES = {}
    ITEMS, DONE, PREDICTED = "questions", "answered", "answers"
    PICTURES = "attention"
    WITH_EPOCH = False
    NAME_IDS = False

    def __init__(self, args):
        self.args = args
        self.data_given = _cli.given(args, *self.RECIPE.DATA_FLAGS)
        self._stores, self._sizes = {}, None  # `open_store`'s

    @classmethod
    def run(cls, args):
        """Runs `args.command` (the recipe's `commands.run`); returns what it returns."""
        return getattr(cls(args), args.command)()

    def world_folder(self):
        """The Shapes world folder with the recipe's data (made if needed)."""
        return _world.ensure_world(self.args, tasks=self.WORLD_TASKS,
                                   default_seed=self.RECIPE.RUN_DEFAULTS["seed"])

    def output_file(self, name):
        return os.path.join(self.args.output_dir, name)

    def resolve_run(self):
        """`(run folder, settings, hparams)`: an existing run's, else the
        set's with `--hparams` checked, not applied; usage errors come out
        here, before any data is read."""
        args = self.args
        run = RunFolder(args.output_dir)
        defaults = self.RECIPE.RUN_DEFAULTS
        given = {k: getattr(args, k) for k in defaults if k != "seed"}
        if args.command == "train":
            given["seed"] = args.seed
        settings = _run.resolve_settings(run, args, given, defaults)
        if not run.holds_run and settings.get("hparams_set") is None:
            sets = self.RECIPE.PAPER_SETS if self.data_given else self.RECIPE.WORLD_SETS
            settings["hparams_set"] = sets[settings.get("model")]

        def check_set(hparams):
            if hparams.model_type != self.MODEL_TYPE:
                raise _cli.UsageError(
                    f"--hparams_set {settings['hparams_set']} is a {hparams.model_type} set; "
                    f"this recipe takes a {self.MODEL_TYPE} set")

        hparams, _ = run.resolve_hparams(args.hparams, settings["hparams_set"], check_set)
        if "model" in settings:
            model = settings["model"]
            if hparams.architecture != self.ARCHITECTURES.get(model, model):
                raise _cli.UsageError(f"--hparams_set {settings['hparams_set']} is a "
                                      f"{hparams.architecture} set, not {model}")
        self.check_run(settings)
        return run, settings, hparams

    def check_run(self, settings):
        """Hook: checks of the run's settings together (UsageError)."""

    def prepare_run(self, run, settings, hparams, splits, resuming):
        """The `Trained` of a training run, its model built; a new run is
        committed later (`commit_run`), once its data has been checked.
        `resuming`: whether `resolve_run` found the run (the chief may have
        written it since)."""
        word_vectors = None
        if resuming:
            vocabs = self.read_vocabs(run)
            print(f"[run] resuming {self.args.output_dir}: {settings['hparams_set']}")
        else:
            vocabs = self.new_vocabs(splits, settings, hparams)
            hparams, word_vectors = self.new_hparams(splits, settings, hparams, vocabs)
        print(f"[hparams] {settings['hparams_set']} ({settings.get('precision', 'float32')}): "
              f"{hparams}")
        keras.utils.set_random_seed(settings["seed"])
        model = self.build_model(hparams, vocabs, word_vectors, settings["seed"])
        return Trained(model, vocabs, settings, hparams)

    def commit_run(self, run, trained):
        """Writes a new run's settings, hparams and vocabularies (run.json last)."""
        run.commit(trained.settings, {
            _run.HPARAMS_FILE: trained.hparams.to_json() + "\n",
            **{self.VOCAB_FILES[k][0]: v.save for k, v in trained.vocabs.items()}})
        print(f"[run] new run in {self.args.output_dir}: "
              f"{self.describe_vocabs(trained.vocabs, trained.settings)}")

    def check_batches(self, pairs, batch_size):
        """The checks of a new run's data, before it is committed: every
        feature file's shape (a folder's, from the headers) and the first
        batch of each `(split, encoded split)` of `pairs` (the features'
        and targets' checks: shapes, boxes), not at some step of training."""
        for split, encoded in pairs:
            image_features.check_shapes(split.store, [r.image_id for r in split.records])
            encoded.batch(np.arange(min(len(encoded), batch_size)))

    def image_sizes(self, records):
        """Hook: `{image_id: (width, height)}` for pixel boxes stored without
        them (--image_sizes; grounding's instances have them), or None."""
        if not getattr(self.args, "image_sizes", None):
            return None
        if self._sizes is None:
            self._sizes = feature_formats.image_sizes_from_coco(self.args.image_sizes)
        return self._sizes

    def open_store(self, features, records):
        """The region store at `features` (--features_format, else detected),
        opened once per command: every split of one file shares it; keyed
        by the images' names where `NAME_IDS`."""
        if features not in self._stores:
            store = feature_formats.open_region_features(
                features, getattr(self.args, "features_format", None),
                image_sizes=self.image_sizes(records), name_ids=self.NAME_IDS)
            print(f"[data] features: {store.describe()}")
            self._stores[features] = store
        return self._stores[features]

    def read_vocabs(self, run):
        return {name: read(run.file(file)) for name, (file, read) in self.VOCAB_FILES.items()}

    def describe_vocabs(self, vocabs, settings):
        """Hook: the vocabularies' sizes, for the new run's status line."""
        return f"{vocabs['words'].vocab_size} word ids"

    def word_vocab(self, split):
        """A new run's word vocabulary: every word of the training texts."""
        return WordVocab.build([self.tokens(r) for r in split.records], min_count=1)

    def tokens(self, record):
        """Hook: the words of a record's text."""
        return record.tokens

    def build_model(self, hparams, vocabs, word_vectors=None, seed=None):
        """The model of `hparams` (`new_model`), built on a batch of zeros."""
        model = self.new_model(hparams, vocabs, word_vectors, seed)
        model(self.dummy_inputs(hparams, model))
        return model

    def load_trained(self):
        """The run's `Trained` with the weights to use: --weights, else the
        best checkpoint (`--early_stopping`), else the newest readable one."""
        run, settings, hparams = self.resolve_run()
        vocabs = self.read_vocabs(run)
        model = self.build_model(hparams, vocabs)
        weights = (self.args.weights or _engine.Phase().best_weights(self.args.output_dir)
                   or checkpoints_lib.latest_checkpoint(self.output_file(CHECKPOINTS)))
        model.load_weights(weights)
        print(f"[model] weights {weights}")
        return Trained(model, vocabs, settings, hparams)

    def encode(self, split, trained):
        return self.ENCODED(self, split, trained)

    def schedule_scale(self, hparams, per_epoch):
        """`_engine.schedule_scale` of the hparams' epochs against the run's
        budget (`--epochs`, `--train_steps`)."""
        args = self.args
        budget = (args.epochs or hparams.epochs) * per_epoch
        if args.train_steps:
            budget = min(budget, args.train_steps)
        return _engine.schedule_scale(hparams.epochs * per_epoch, budget, args)

    def compile(self, model, hparams, per_epoch, replicas):
        """`model.compile`: Adam under the task's `schedule` (gradients
        clipped to the hparams' `clip_norm`, if any), --jit under `replicas`,
        `compile_args`. Call it inside `replicas.scope()`."""
        model.compile(
            optimizer=keras.optimizers.Adam(
                self.schedule(hparams, per_epoch), beta_1=hparams.optimizer_adam_beta1,
                beta_2=hparams.optimizer_adam_beta2, epsilon=hparams.optimizer_adam_epsilon,
                global_clipnorm=getattr(hparams, "clip_norm", None)),
            # XLA on TensorFlow too: 1.5x the default VQA run's steps per
            # second on a 2-core CPU (docs/performance.md).
            jit_compile=_replicas.jit_flag(self.args, replicas, xla_on_tensorflow=True),
            **self.compile_args(hparams))

    def compile_args(self, hparams):
        """Hook: the loss, metrics, ... of `model.compile`."""
        return {}

    def train_names(self):
        """Hook: the names of the training and validation splits."""
        return "train", "val"

    def the_split(self, splits, name=None, scored=False):
        """`splits[name]` (default --split), else a usage error (`no_split`);
        `scored`: also when its records have no answers (`annotated`)."""
        name = name or self.args.split
        if name not in splits or scored and not self.annotated(splits[name]):
            raise _cli.UsageError(self.no_split(name))
        return splits[name]

    def annotated(self, split):
        """Hook: whether the split can be scored (its records' answers)."""
        return bool(split.records[0].answers)

    def model_name(self, settings):
        """Hook: the model's name in the status line of its size."""
        return settings["model"]

    def before_training(self, trained, train_set):
        """Hook: what a task does before the first step (after compiling)."""

    def train(self):
        """Trains to --epochs on the --distribute replicas, resumed from the
        newest checkpoint (`_engine.fit`), then evaluates on --split."""
        args = self.args
        replicas = _replicas.replicas_of(args)  # first: before any TensorFlow op
        run, settings, hparams = self.resolve_run()
        resuming = run.holds_run
        batch_size = global_batch_size(args, hparams, replicas)
        train_name, val_name = self.train_names()
        names = (train_name, val_name) + (() if args.no_eval else (args.split,))
        splits = self.load_splits(tuple(dict.fromkeys(names)))
        self.the_split(splits, train_name, scored=True)
        if val_name not in splits:
            val_name = None
        with replicas.scope():  # the model, its optimizer, metrics and checkpoint
            trained = self.prepare_run(run, settings, hparams, splits, resuming)
            model, hparams = trained.model, trained.hparams
            epochs = args.epochs or hparams.epochs
            train_set = self.encode(splits[train_name], trained)
            per_epoch = feeding.steps_per_epoch(len(train_set), batch_size)
            self.compile(model, hparams, per_epoch, replicas)
            print(f"[model] {self.model_name(settings)}: {model.count_params():,} parameters")
            val_set = self.encode(splits[val_name], trained) if val_name else None
            if not resuming:
                self.check_batches([(splits[name], encoded) for name, encoded in
                                    ((train_name, train_set), (val_name, val_set))
                                    if encoded is not None], batch_size)
            self.before_training(trained, train_set)  # CATT's dictionaries: sized to the data
            if not resuming and replicas.is_chief:
                self.commit_run(run, trained)  # every check passed: nothing half-made
            validation = None
            if val_set is not None:
                validation = feeding.validation_batches(len(val_set), batch_size,
                                                        val_set.batch, replicas)
            print(f"[train] {len(train_set)} {self.ITEMS}, {per_epoch} batches of "
                  f"{batch_size} per epoch, {epochs} epochs")
            start = time.time()

            def accuracy(model):  # --early_stopping accuracy, computed only when asked
                if val_name is None:
                    raise _cli.UsageError("--early_stopping accuracy needs validation data")
                return {"accuracy": self.accuracy(trained._replace(model=model),
                                                  splits[val_name])}

            scores = _engine.ScoresHook(("accuracy",), accuracy)
            _engine.check_task_score(args, replicas, scores)

            def data(step):
                def batches():
                    return feeding.epoch_batches(
                        len(train_set), batch_size, settings["seed"], train_set.batch,
                        start=step, with_epoch=self.WITH_EPOCH, replicas=replicas)

                # Under MirroredStrategy: made anew for each of fit's
                # iterators, and split evenly over the replicas.
                strategy = replicas.strategy is not None
                return restarting(batches, rebatch=True) if strategy else batches()

            if validation is not None and replicas.strategy is not None:
                ordered = validation
                validation = restarting(lambda: iter(ordered), rebatch=True)
            _engine.fit(model, args, data, per_epoch=per_epoch, epochs=epochs,
                        total_steps=args.train_steps, validation=validation, replicas=replicas,
                        scores=scores)
        print(f"[train] done ({time.time() - start:.0f} s in this command)")
        self.report_cut(f"{train_name} (training batches)", train_set)
        if replicas.is_chief:  # every metric's history
            write_json(run.file("train_summary.json"),
                       {k: v for k, v in history_from_csv(run.file("history.csv")).items()
                        if k != "epoch"})
        if not _replicas.evaluates_after_training(args, replicas):
            return model
        if args.split not in splits:  # e.g. real training data and no test set given
            print(f"[eval] not evaluated: {self.no_split(args.split)}")
            return model
        if replicas.strategy is None:
            print("[model] the trained model in memory")
            return self.evaluate(trained, splits)
        # TensorFlow's MirroredStrategy models' `predict_on_batch` runs the
        # whole batch on every replica and concatenates the outputs (3.15).
        print("[model] the newest checkpoint, on one device (a MirroredStrategy model would "
              "predict every batch on every replica)")
        return self.evaluate(None, splits)

    def report_cut(self, name, encoded):
        """One line if images of a split had more regions than max_regions
        (the first ones are kept, as detectors list them by confidence)."""
        counts = getattr(encoded, "counts", None)
        if counts and counts["truncated_images"]:
            print(f"[data] {name}: {counts['truncated_images']} of {counts['images']} images "
                  f"read had more than max_regions={encoded.hparams.max_regions} regions; "
                  f"{counts['dropped_regions']} regions left out (the first ones kept)")

    def predict_split(self, trained, split):
        """`decode`'s predictions of the records of `split`."""
        encoded = self.encode(split, trained)
        size = self.args.predict_batch_size
        predicted = []
        for begin in range(0, len(split), size):
            rows = np.arange(begin, min(len(split), begin + size))
            # Padded to the batch size: one compiled program for every batch.
            inputs = encoded.inputs(np.concatenate([rows, np.full(size - len(rows),
                                                                  rows[-1])]))
            outputs = trained.model.predict_on_batch(inputs)
            predicted.extend(self.decode(trained, split, rows, inputs, outputs))
        self.report_cut(split.name, encoded)
        return predicted

    def results(self, split, predicted):
        """Hook: the results JSON of `predicted` (default: answers)."""
        return [{"question_id": r.question_id, "answer": a}
                for r, a in zip(split.records, predicted)]

    def result_line(self, result):
        """Hook: `predict`'s stdout line of one result."""
        return f"{result['question_id']}\t{result['answer']}"

    def eval_names(self):
        """Hook: the splits `evaluate` reads (its baselines may need train)."""
        return tuple(dict.fromkeys((self.args.split, "train")))

    def evaluate(self, trained=None, splits=None):
        """Predicts the --split records and scores them next to the task's
        baselines (`report`): DIR/<split>_results.json, <split>_scores.json,
        the score table on stdout. Returns the model's scores; a split
        without answers (an official test set) is predicted, written in the
        official results format and not scored (None)."""
        args = self.args
        trained = trained or self.load_trained()
        if splits is None or args.split not in splits:
            splits = self.load_splits(self.eval_names())
        split = self.the_split(splits)
        start = time.time()
        predicted = self.predict_split(trained, split)
        print(f"[eval] {len(split)} {args.split} {self.ITEMS} {self.DONE} in "
              f"{time.time() - start:.0f} s")
        if not self.annotated(split):  # an official test set: its answers are the server's
            path = self.output_file(f"{args.split}_results.json")
            write_json(path, self.results(split, predicted))
            print(f"[eval] the {args.split} {self.ITEMS} have no answers to score against: "
                  f"{len(predicted)} {self.PREDICTED} -> {path}, the official results format "
                  "(upload it to the evaluation server, EvalAI); not scored")
            return None
        results, scores, lines = self.report(split, splits, predicted, trained)
        write_json(self.output_file(f"{args.split}_results.json"), results)
        for line in lines:
            _cli.emit(line)
        return scores

    def predict_records(self):
        """Hook: the split `predict` reads (default: --split)."""
        return self.the_split(self.load_splits((self.args.split,)))

    def predict(self):
        """The prediction of every record of `predict_records`: JSON in
        --output_file, else one stdout line each."""
        trained = self.load_trained()
        split = self.predict_records()
        results = self.results(split, self.predict_split(trained, split))
        if self.args.output_file:
            write_json(self.args.output_file, results)
            print(f"[predict] {len(results)} {self.PREDICTED} -> {self.args.output_file}")
        else:
            for result in results:
                _cli.emit(self.result_line(result))
        return results

    def real_images(self, records):
        """Hook: the images of real data's `records` (from --images)."""
        return images_by_id(self.args.images, [r.image_id for r in records])

    def visualize(self):
        """One PNG per record of the first of --split (`draw(trained,
        encoded, k, prediction, image)` -> `(picture, name, text)`), in
        DIR/<PICTURES>; one `path<TAB>text` line each on stdout."""
        args = self.args
        trained = self.load_trained()
        chosen = self.the_split(self.load_splits((args.split,))).head(
            getattr(args, f"num_{self.ITEMS}"))
        predicted = self.predict_split(trained, chosen)
        if not self.data_given:
            images = scene_images(_world.folder_of(args), chosen.name,
                                  [r.image_id for r in chosen.records])
        elif not args.images:
            raise _cli.UsageError("visualize needs --images, the folder of the split's images")
        else:
            images = self.real_images(chosen.records)
        encoded = self.encode(chosen, trained)

        def pictures():
            for k, (prediction, image) in enumerate(zip(predicted, images)):
                picture, name, text = self.draw(trained, encoded, k, prediction, image)
                yield name, picture, text

        return _run.save_pictures(os.path.join(args.output_dir, self.PICTURES), pictures(),
                                  self.ITEMS)


class RegionEncoded:
    """A split as a region model's inputs: word ids, regions read per batch."""

    def __init__(self, task, split, trained):
        self.split, self.trained, self.hparams = split, trained, trained.hparams
        self.counts = collections.Counter()  # of `region_batch`: regions cut to max_regions
        self.text_key = task.TEXT_KEY
        self.texts = question_batch([r.tokens for r in split.records], trained.vocabs["words"],
                                    getattr(self.hparams, task.TEXT_LENGTH))

    def __len__(self):
        return len(self.split)

    def inputs(self, rows):
        features, boxes, mask = image_features.region_batch(
            self.split.store, [self.split.records[i].image_id for i in rows],
            self.hparams.max_regions,  # padded to max_regions: one shape for every batch
            counts=self.counts)
        return {"regions": features, "boxes": boxes, "region_mask": mask,
                self.text_key: self.texts[rows]}


class RegionTask(Task):
    """A `Task` whose model reads a text (`TEXT_KEY`, `TEXT_LENGTH` word ids
    at most) and an image's region features (VQA, grounding): the hparams
    fitted to the regions and --word_vectors, MCAN's optimiser."""

    def new_hparams(self, splits, settings, hparams, vocabs):
        """`(hparams, word_vectors or None)` of a new run: the set's fitted
        to the regions and word vectors, then --hparams, then the features'
        width (the data fixes it)."""
        args, store = self.args, splits[self.train_names()[0]].store
        word_vectors = None
        fitted = [f"max_regions={image_features.fitted_max_regions(store, hparams.max_regions)}"]
        if args.word_vectors:
            vocab = vocabs["words"]
            words = [vocab.id_to_word(i) for i in range(vocab.vocab_size)]
            word_vectors, found = embedding_matrix(args.word_vectors, words)
            print(f"[data] word vectors {args.word_vectors}: {int(found.sum())} of {len(words)} "
                  f"words found ({word_vectors.shape[1]}-d); the others start random")
            fitted.append(f"word_dim={word_vectors.shape[1]}")
        hparams = _cli.usage(hparams.parse(",".join(fitted)).parse, args.hparams)
        if word_vectors is not None and hparams.word_dim != word_vectors.shape[1]:
            raise _cli.UsageError(f"--hparams word_dim={hparams.word_dim}, but the --word_vectors "
                                  f"are {word_vectors.shape[1]}-d (their width sets word_dim)")
        decay_epochs(hparams)  # checked before the run is written
        return hparams.parse(f"feature_dim={int(store.feature_dim)}"), word_vectors

    def dummy_inputs(self, hparams, model):
        n = hparams.max_regions
        return {self.TEXT_KEY: np.ones((1, getattr(hparams, self.TEXT_LENGTH)), "int32"),
                "regions": np.zeros((1, n, hparams.feature_dim), "float32"),
                "boxes": np.zeros((1, n, 4), "float32"), "region_mask": np.ones((1, n), bool)}

    def schedule(self, hparams, per_epoch):
        """MCAN's: warm-up epochs, then x decay_rate at the decay epochs
        (docs/vqa.md), an epoch being `per_epoch` steps scaled to the run's
        budget (`schedule_scale`)."""
        scaled_epoch = max(1, round(per_epoch * self.schedule_scale(hparams, per_epoch)))
        return StepWarmupDecay(hparams.learning_rate, scaled_epoch,
                               warmup_epochs=hparams.warmup_epochs,
                               decay_epochs=decay_epochs(hparams), decay_rate=hparams.decay_rate)

    def read_split(self, name, records, features, describe):
        """The `Split` of `records` whose images the features file or folder
        has; `describe(record)` names a record in the error."""
        store = self.open_store(features, records)
        kept = with_features(
            name, records, lambda r: None if r.image_id in store else
            f"{features}: no features for image {r.image_id} ({describe(r)})",
            self.args.skip_invalid, self.ITEMS)
        return Split(name, kept, store)
