"""What the vision-and-language recipes on region features share (VQA,
grounding): region batches, the epoch-based resumable `fit`, the run's
hparams set.
"""

import math
import os

import keras
import numpy as np

from keras_structattn import hparams as hparams_lib
from keras_structattn.callbacks import restore_latest
from keras_structattn.data import image_features
from recipes import _cli
from recipes._run import RunFolder
from recipes._run import fit_callbacks

CHECKPOINTS = "checkpoints"
HPARAMS_FILE = "hparams.json"


def usage(function, *args):
    """`function(*args)`, its ValueError (a bad set or override) as a usage error."""
    try:
        return function(*args)
    except ValueError as error:
        raise _cli.UsageError(str(error)) from None


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
    hparams = usage(hparams_lib.get, settings["hparams_set"])
    if hparams.model_type != model_type:
        raise _cli.UsageError(
            f"--hparams_set {settings['hparams_set']} is a {hparams.model_type} set; "
            f"this recipe takes a {model_type} set")
    usage(hparams.parse, args.hparams)
    return run, settings, hparams


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


def epoch_batches(count, batch_size, seed, make_batch, start=0, with_epoch=False):
    """Training batches, forever: step `s` is batch `s % per_epoch` of epoch
    `s // per_epoch`, each epoch a permutation of the `count` items drawn
    from `(seed, epoch)` with the last incomplete batch dropped (as MCAN),
    so a run resumed at step `start` reads what an uninterrupted one would.

    Args:
        count: number of training items.
        batch_size: items per batch.
        seed: the run's seed.
        make_batch: `make_batch(indices)` -> a batch (`make_batch(indices,
            epoch)` with `with_epoch`: for targets sampled anew each epoch).
        start: the first step.
        with_epoch: pass the 0-based epoch to `make_batch`.
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
        yield make_batch(rows, epoch) if with_epoch else make_batch(rows)
        step += 1


def steps_per_epoch(count, batch_size):
    """Full batches per epoch (at least 1)."""
    return max(1, count // batch_size)


class OrderedBatches(keras.utils.PyDataset):
    """Items `0..count-1` in order, in batches (the last one short)."""

    def __init__(self, count, batch_size, make_batch):
        super().__init__()
        self.count, self.batch_size, self.make_batch = count, batch_size, make_batch

    def __len__(self):
        return math.ceil(self.count / self.batch_size)

    def __getitem__(self, index):
        begin = index * self.batch_size
        return self.make_batch(np.arange(begin, min(self.count, begin + self.batch_size)))


def fit_resumable(model, args, train_batches, per_epoch, epochs, validation=None):
    """`model.fit` to `epochs` epochs of `per_epoch` steps, resumed from the
    newest checkpoint in DIR/checkpoints; CSV history, TensorBoard logs.

    Args:
        model: the compiled model.
        args: the flags (`output_dir`, `keep_checkpoints`, `verbose`).
        train_batches: `train_batches(start_step)` -> a batch generator.
        per_epoch: steps per epoch.
        epochs: the epochs to reach.
        validation: optional validation data for `fit`.
    """
    epochs_done = restore_latest(model, os.path.join(args.output_dir, CHECKPOINTS))
    if epochs_done >= epochs:
        print(f"[train] already {epochs_done} epochs (--epochs {epochs})")
        return
    done = int(keras.ops.convert_to_numpy(model.optimizer.iterations))
    if epochs_done:
        print(f"[train] resuming at epoch {epochs_done + 1} (step {done})")
    model.fit(
        train_batches(done),
        steps_per_epoch=per_epoch,
        epochs=epochs,
        initial_epoch=epochs_done,
        validation_data=validation,
        shuffle=False,  # epoch_batches shuffles (seeded, resumable) itself
        callbacks=[*fit_callbacks(args.output_dir, "history.csv", CHECKPOINTS, "logs",
                                  keep=args.keep_checkpoints),
                   keras.callbacks.TerminateOnNaN()],
        verbose=args.verbose,
    )


def compile_model(model, hparams, per_epoch, args, **compile_args):
    """`model.compile` with MCAN's optimiser: Adam at `hparams.learning_rate`
    under `StepWarmupDecay` (warm-up epochs, then x decay_rate at the
    decay epochs: the MCAN code's schedule, docs/vqa.md), with the
    --jit setting; `compile_args` are the loss, metrics, ..."""
    from keras_structattn.schedules import StepWarmupDecay

    model.compile(
        optimizer=keras.optimizers.Adam(
            StepWarmupDecay(hparams.learning_rate, per_epoch,
                            warmup_epochs=hparams.warmup_epochs,
                            decay_epochs=decay_epochs(hparams), decay_rate=hparams.decay_rate),
            beta_1=hparams.optimizer_adam_beta1, beta_2=hparams.optimizer_adam_beta2,
            epsilon=hparams.optimizer_adam_epsilon),
        jit_compile=jit_flag(args),
        **compile_args,
    )


def jit_flag(args):
    """--jit as `jit_compile`; without XLA on TensorFlow, op determinism
    on, so that a resumed run equals a straight one."""
    jit = {"auto": "auto", "on": True, "off": False}[args.jit]
    if jit is False and keras.backend.backend() == "tensorflow":
        import tensorflow as tf

        tf.config.experimental.enable_op_determinism()
    return jit


def newest_weights(args):
    """--weights, else the newest readable checkpoint of the run."""
    from keras_structattn import checkpoints as checkpoints_lib

    if args.weights:
        return args.weights
    return checkpoints_lib.latest_checkpoint(os.path.join(args.output_dir, CHECKPOINTS))
