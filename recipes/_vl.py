"""What the vision-and-language recipes on region features share (VQA,
grounding, TextVQA): region batches, the epoch-based resumable `fit`, the
run's hparams set, and their data-parallel training (`--distribute`,
docs/distributed.md).
"""

import math
import os

import keras
import numpy as np

from keras_structattn.data import image_features
from keras_structattn.training import hparams as hparams_lib
from keras_structattn.training.history import history_from_csv
from models import registry
from recipes import _cli
from recipes import _engine
from recipes import _replicas
from recipes._run import RunFolder
from recipes._run import write_json

CHECKPOINTS = "checkpoints"
HPARAMS_FILE = "hparams.json"
VALIDATION_LIMIT = 2000  # validation items per epoch (the first ones, in order)
JIT = {"auto": "auto", "on": True, "off": False}


def usage(function, *args):
    """`function(*args)`, its ValueError (a bad set or override) as a usage error."""
    try:
        return function(*args)
    except ValueError as error:
        raise _cli.UsageError(str(error)) from None


def replicas_of(args):
    """The `Replicas` the training command runs on (`--distribute`,
    `--devices`, the multi-process flags): the first thing `train` does,
    before any TensorFlow op (a CPU is split into logical devices only
    before that). `--jit on` with TensorFlow's MirroredStrategy is refused
    here, before any data is read.

    Raises:
        UsageError: the setting cannot run here.
    """
    replicas = _replicas.from_flags(args)
    _replicas.jit_for(replicas, JIT[args.jit])
    return replicas


def global_batch_size(args, hparams, replicas):
    """The global batch: --batch_size, else the hparams' (with --hparams
    applied), checked to split evenly over the replicas before the run's
    data is read or its files written. Each replica gets an equal share,
    so the optimizer steps and the schedule are those of one device.

    Raises:
        UsageError: the batch does not split evenly.
    """
    if args.batch_size:
        _replicas.check_batch(replicas, args.batch_size)
        return args.batch_size
    batch_size = usage(hparams.parse, args.hparams).batch_size
    _replicas.check_batch(replicas, batch_size, "hparams batch_size (--batch_size to change it)")
    return batch_size


def resolve_run(args, given, defaults, model_type, default_set):
    """The run folder, its settings and hparams; usage errors come out here,
    before any data is read.

    Args:
        args: the flags (`output_dir`, `hparams`, `command`, `seed`).
        given: the run-defining flags' values (None where left out).
        defaults: the recipe's `RUN_DEFAULTS`.
        model_type: the `model_type` the hparams set must have.
        default_set: `default_set(settings)`, the set of a new run that
            names none.

    Returns:
        `(run, settings, hparams)`: the saved hparams for an existing run,
        else the set's with `--hparams` checked but not yet applied.
    """
    run = RunFolder(args.output_dir)
    if args.command == "train":
        given = dict(given, seed=args.seed)
    settings = run.resolve_settings(given, defaults)
    if run.holds_run:
        saved = hparams_lib.HParams.load(run.file(HPARAMS_FILE))
        run.check_hparams(saved, usage(saved.parse, args.hparams))
        return run, settings, saved
    if settings.get("hparams_set") is None:
        settings["hparams_set"] = default_set(settings)
    hparams = usage(registry.get, settings["hparams_set"])
    if hparams.model_type != model_type:
        raise _cli.UsageError(
            f"--hparams_set {settings['hparams_set']} is a {hparams.model_type} set; "
            f"this recipe takes a {model_type} set")
    usage(hparams.parse, args.hparams)
    return run, settings, hparams


def evaluates_after_training(args, replicas):
    """Whether `train` goes on to evaluate the model it holds: not with
    --no_eval, nor after multi-process training (prediction there would
    need every process's part of every batch; `evaluate` on the run folder,
    one process, scores the checkpoint instead)."""
    if args.no_eval:
        return False
    if replicas.num_processes > 1:
        if replicas.is_chief:
            print(f"[eval] not after training on {replicas.num_processes} processes: run "
                  f"`evaluate --output_dir {args.output_dir}` (one process)")
        return False
    return True


def model_to_evaluate(trained, replicas):
    """What `evaluate` after training scores: `trained` (the model in
    memory and its vocabularies), or None (the newest checkpoint, loaded on
    one device) after TensorFlow's MirroredStrategy, whose models'
    `predict_on_batch` runs the whole batch on every replica and
    concatenates the outputs (Keras 3.15)."""
    if replicas.strategy is None:
        print("[model] the trained model in memory")
        return trained
    print("[model] the newest checkpoint, on one device (a MirroredStrategy model would "
          "predict every batch on every replica)")
    return None


def write_train_summary(run, replicas):
    """DIR/train_summary.json: every metric's history (the chief's file)."""
    if replicas.is_chief:
        write_json(run.file("train_summary.json"),
                   {k: v for k, v in history_from_csv(run.file("history.csv")).items()
                    if k != "epoch"})


def decay_epochs(hparams):
    """`hparams.decay_epochs` ("10,12") as ints; a bad value is a usage error."""
    try:
        return [int(e) for e in str(hparams.decay_epochs).split(",") if e.strip()]
    except ValueError:
        raise _cli.UsageError(f"hparams decay_epochs must be comma-separated epochs, e.g. "
                              f"10,12; got {hparams.decay_epochs!r}") from None


def read_word_vectors(path, vocab):
    """The embedding matrix `[vocab_size, dim]` of the question words from a
    GloVe-format file; words it lacks (and the reserved ids) get small
    random rows, counted."""
    from keras_structattn.data.word_vectors import read_word_vectors as read

    words = [vocab.id_to_word(i) for i in range(vocab.vocab_size)]
    matrix, found = read(path, words)
    missing = ~np.asarray(found)
    rng = np.random.default_rng(0)
    matrix[missing] = rng.normal(0.0, 0.1, (int(missing.sum()), matrix.shape[1]))
    print(f"[data] word vectors {path}: {int(np.sum(found))} of {len(words)} "
          f"words found ({matrix.shape[1]}-d); the others start random")
    return matrix.astype("float32")


def open_regions(path):
    """The region feature store of a file or folder (`open_features`)."""
    return image_features.open_features(path, "regions")


def region_inputs(store, image_ids, max_regions):
    """`{"regions", "boxes", "region_mask"}` of `image_ids`, padded to
    `max_regions` (a static shape for every batch)."""
    features, boxes, mask = image_features.region_batch(store, image_ids, max_regions)
    return {"regions": features, "boxes": boxes, "region_mask": mask}


def max_regions_of(store, wanted):
    """`wanted`, or fewer when every image of an in-memory store has fewer
    regions (Shapes world's 8: padding to 100 would only cost time). A
    folder of files is not read through for this: it gets `wanted`."""
    if not isinstance(store, image_features.ArrayFeatures):
        return wanted
    most = max((len(store.regions(i)[0]) for i in store.image_ids()), default=1)
    return max(1, min(wanted, most))


def epoch_batches(count, batch_size, seed, make_batch, start=0, with_epoch=False,
                  replicas=None):
    """Training batches, forever: step `s` is batch `s % per_epoch` of epoch
    `s // per_epoch`, each epoch a permutation of the `count` items drawn
    from `(seed, epoch)` with the last incomplete batch dropped (as MCAN),
    so a run resumed at step `start` reads what an uninterrupted one would
    (on any number of devices: the global batches do not depend on them).

    Args:
        count: number of training items.
        batch_size: items per batch.
        seed: the run's seed.
        make_batch: `make_batch(indices)` -> a batch (`make_batch(indices,
            epoch)` with `with_epoch`: for targets sampled anew each epoch).
        start: the first step.
        with_epoch: pass the 0-based epoch to `make_batch`.
        replicas: the run's `Replicas` (None: one device); see `feed`.
    """
    per_epoch = steps_per_epoch(count, batch_size)
    step = start
    order, order_epoch = None, None
    while True:
        epoch, offset = divmod(step, per_epoch)
        if epoch != order_epoch:
            order = np.random.default_rng([seed, epoch]).permutation(count)
            order_epoch = epoch
        rows = order[offset * batch_size:(offset + 1) * batch_size]
        yield feed(replicas, make_batch, rows, *((epoch,) if with_epoch else ()))
        step += 1


def steps_per_epoch(count, batch_size):
    """Full batches per epoch (at least 1)."""
    return max(1, count // batch_size)


class OrderedBatches(keras.utils.PyDataset):
    """Items `0..count-1` in order, in batches (the last one short).

    Args:
        count: number of items.
        batch_size: items per (global) batch.
        make_batch: `make_batch(indices)` -> a batch.
        replicas: the run's `Replicas` (None: one device); see `feed`.
    """

    def __init__(self, count, batch_size, make_batch, replicas=None):
        super().__init__()
        self.count, self.batch_size, self.make_batch = count, batch_size, make_batch
        self.replicas = replicas

    def __len__(self):
        return math.ceil(self.count / self.batch_size)

    def __getitem__(self, index):
        begin = index * self.batch_size
        rows = np.arange(begin, min(self.count, begin + self.batch_size))
        return feed(self.replicas, self.make_batch, rows)


def feed(replicas, make_batch, rows, *extra):
    """`make_batch(rows, *extra)` as data-parallel `fit` takes it.

    With several processes each makes only its block of the global batch
    `rows` (`Replicas.local_rows`). Under TensorFlow's MirroredStrategy
    bool arrays (the padding masks) are fed as float32 0/1: Keras (3.15)
    averages the first batch over the replicas to build the model
    symbolically, which TensorFlow's AddN refuses for bool; the models cast
    their masks to bool.
    """
    if replicas is None:
        return make_batch(rows, *extra)
    batch = make_batch(replicas.local_rows(rows), *extra)
    if replicas.strategy is not None:
        batch = keras.tree.map_structure(
            lambda a: a.astype("float32")
            if isinstance(a, np.ndarray) and a.dtype == np.bool_ else a, batch)
    return batch


def validation_batches(count, batch_size, make_batch, replicas):
    """The validation data of `fit`: the first `VALIDATION_LIMIT` of the
    `count` items, in order. Data-parallel `fit` splits every batch over
    the replicas, the last short one too (JAX refuses a batch that does not
    divide), so the items are rounded down to a multiple of the replicas;
    how many are left out is printed.

    Args:
        count: number of validation items.
        batch_size: the global batch (a multiple of the replicas).
        make_batch: `make_batch(indices)` -> a batch.
        replicas: the run's `Replicas`.

    Returns:
        An `OrderedBatches`, or None when no item is left.
    """
    wanted = min(count, VALIDATION_LIMIT)
    used = wanted - wanted % replicas.num_replicas
    if used < wanted:
        print(f"[train] validation: {wanted - used} of {wanted} items left out, so that "
              f"every batch splits over the {replicas.num_replicas} replicas")
    if not used:
        return None
    return OrderedBatches(used, batch_size, make_batch, replicas)


def fit_resumable(model, args, train_batches, per_epoch, epochs, validation=None,
                  replicas=None, scores=None):
    """The engine's `fit` (`recipes._engine`) to `epochs` epochs of
    `per_epoch` steps (or `--train_steps`), resumed from the newest
    checkpoint in DIR/checkpoints.

    Call it inside `replicas.scope()` (the checkpoint's optimizer state is
    built there). With several processes every one restores the checkpoint
    (DIR must be shared) and only the chief writes checkpoints, history and
    logs.

    Args:
        model: the compiled model.
        args: the flags.
        train_batches: `train_batches(start_step)` -> a batch generator.
        per_epoch: steps per epoch.
        epochs: the epochs to reach.
        validation: optional validation data for `fit`.
        replicas: the run's `Replicas` (None: one device).
        scores: the task's validation scores (`_engine.ScoresHook`), or None.
    """
    _engine.check_task_score(args, replicas, scores)
    data = train_batches
    if replicas is not None and replicas.strategy is not None:
        # Made anew for each of fit's iterators, and split evenly over the
        # replicas (`_replicas.restarting`).
        def data(done):
            return _replicas.restarting(lambda: train_batches(done), rebatch=True)

        if validation is not None:
            ordered = validation
            validation = _replicas.restarting(
                lambda: (ordered[i] for i in range(len(ordered))), rebatch=True)
    _engine.fit(model, args, data, per_epoch=per_epoch, epochs=epochs,
                total_steps=args.train_steps, validation=validation, replicas=replicas,
                scores=scores)


def accuracy_hook(split_name, accuracy_of):
    """The validation score `--early_stopping accuracy` watches (percent):
    `accuracy_of(model)` on the validation split, computed only when asked.

    Args:
        split_name: the validation split's name, or None when there is none.
        accuracy_of: `accuracy_of(model)` -> the accuracy in percent.
    """
    def compute(model):
        if split_name is None:
            raise _cli.UsageError("--early_stopping accuracy needs validation data")
        return {"accuracy": accuracy_of(model)}

    return _engine.ScoresHook(("accuracy",), compute)


def schedule_steps(args, hparams, per_epoch):
    """The factor mapping the hparams' epoch schedule onto this run's
    budget with `--scale_schedule` (`_engine.schedule_scale`): `--epochs`
    and `--train_steps` against the hparams' epochs."""
    planned = hparams.epochs * per_epoch
    budget = (args.epochs or hparams.epochs) * per_epoch
    if args.train_steps:
        budget = min(budget, args.train_steps)
    return _engine.schedule_scale(planned, budget, args)


def compile_model(model, hparams, per_epoch, args, replicas=None, **compile_args):
    """`model.compile` with MCAN's optimiser: Adam at `hparams.learning_rate`
    under `StepWarmupDecay` (warm-up epochs, then x decay_rate at the
    decay epochs: the MCAN code's schedule, docs/vqa.md), with the
    --jit setting under `replicas` (`jit_flag`); `compile_args` are the
    loss, metrics, ... Call it inside `replicas.scope()`."""
    from keras_structattn.training.schedules import StepWarmupDecay

    # Warm-up and decay epochs as fractions of the budget: the schedule's
    # epoch is `per_epoch` steps scaled to the run's length.
    scaled_epoch = max(1, round(per_epoch * schedule_steps(args, hparams, per_epoch)))
    model.compile(
        optimizer=keras.optimizers.Adam(
            StepWarmupDecay(hparams.learning_rate, scaled_epoch,
                            warmup_epochs=hparams.warmup_epochs,
                            decay_epochs=decay_epochs(hparams), decay_rate=hparams.decay_rate),
            beta_1=hparams.optimizer_adam_beta1, beta_2=hparams.optimizer_adam_beta2,
            epsilon=hparams.optimizer_adam_epsilon),
        jit_compile=jit_flag(args, replicas),
        **compile_args,
    )


def jit_flag(args, replicas=None):
    """--jit as `jit_compile` under `replicas` (TensorFlow's MirroredStrategy
    runs no XLA-compiled step: `auto` is off there); without XLA on
    TensorFlow, op determinism on, so that a resumed run equals a straight
    one."""
    jit = JIT[args.jit]
    if replicas is not None:
        jit = _replicas.jit_for(replicas, jit)
    if jit is False and keras.backend.backend() == "tensorflow":
        import tensorflow as tf

        tf.config.experimental.enable_op_determinism()
    return jit


def newest_weights(args):
    """--weights, else the best checkpoint (`--early_stopping`), else the
    newest readable checkpoint of the run."""
    from keras_structattn.training import checkpoints as checkpoints_lib

    if args.weights:
        return args.weights
    best = _engine.Phase().best_weights(args.output_dir)
    if best:
        return best
    return checkpoints_lib.latest_checkpoint(os.path.join(args.output_dir, CHECKPOINTS))
