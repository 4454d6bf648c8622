"""Checkpoints that survive a kill at any moment, resuming from them, and
the rules that end a training run (a step count, early stopping that
survives a resume, a time budget).

A Keras weights file (`model.save_weights`) of a compiled model holds the
weights *and* the optimizer state (its step counter included), so the newest
checkpoint of a run is all that is needed to resume it. `keras.callbacks.
BackupAndRestore` keeps a separate backup and writes it in place: a kill
while it writes leaves a truncated HDF5 file that the next run cannot open
(we hit this in CI). Here every file is written under a temporary name and
renamed into place, which POSIX makes atomic, so a checkpoint on disk is
always complete; the epoch it ends is in its name. Checkpoints also hold the
states of the model's `SeedGenerator`s (dropout), which `save_weights`
leaves out: with them, and the data read on from where it stopped, a resumed
run repeats an uninterrupted one exactly where the backend is deterministic.

    restored = restore_latest(model, "run/checkpoints")   # 0 on a fresh run
    model.fit(..., initial_epoch=restored,
              callbacks=[EpochCheckpoints("run/checkpoints", keep=5)])
"""

import glob
import json
import os
import re
import time
import warnings

import h5py
import keras
import numpy as np

from keras_structattn.data.json_files import atomic_open
from keras_structattn.training.history import history_from_csv

CHECKPOINT_PATTERN = "ckpt-{epoch:04d}.weights.h5"
_CHECKPOINT_NAME = re.compile(r"ckpt-(\d+)\.weights\.h5$")
# Ends with `.weights.h5`, which `save_weights` requires, but does not match
# the checkpoint glob, so a half-written file is never listed.
_PARTIAL_NAME = ".partial.weights.h5"
_SEED_GROUP = "seed_generator_states"


def _seed_states(model):
    """The model's SeedGenerator state variables, in a fixed order.

    `model.variables` is `model.weights` plus these states (metric variables
    are in neither).
    """
    weights = {id(v) for v in model.weights}
    return [v for v in model.variables if id(v) not in weights]


def save_weights_atomically(model, path):
    """Writes `model.save_weights(path)` so that `path` is never partial.

    Args:
        model: a Keras model.
        path: the destination, ending in `.weights.h5`.
    """
    if not path.endswith(".weights.h5"):
        raise ValueError(f"`path` must end in '.weights.h5'; received: path={path!r}")
    directory = os.path.dirname(os.path.abspath(path))
    os.makedirs(directory, exist_ok=True)
    partial = os.path.join(directory, _PARTIAL_NAME)
    model.save_weights(partial, overwrite=True)
    with h5py.File(partial, "a") as f:
        group = f.create_group(_SEED_GROUP)
        for i, state in enumerate(_seed_states(model)):
            group[str(i)] = keras.ops.convert_to_numpy(state)
    # Flushed to disk before the rename, so that a crash of the machine (not
    # only of the process) cannot leave a renamed file with missing blocks.
    with open(partial, "rb+") as f:
        os.fsync(f.fileno())
    os.replace(partial, path)


def list_checkpoints(directory):
    """The checkpoints in `directory`, oldest first.

    Args:
        directory: a folder written by `EpochCheckpoints`.

    Returns:
        A list of `(epoch, path)` pairs sorted by epoch.
    """
    found = []
    for path in glob.glob(os.path.join(directory, "ckpt-*.weights.h5")):
        match = _CHECKPOINT_NAME.search(os.path.basename(path))
        if match:
            found.append((int(match.group(1)), path))
    return sorted(found)


def restore_latest(model, directory):
    """Loads the newest readable checkpoint of `directory` into `model`.

    The model must be built and compiled; its optimizer state (step counter
    included) is restored with the weights. A checkpoint that cannot be read
    (e.g. one written in place by another tool and cut off by a kill) is
    skipped with a warning and the one before it is tried.

    Args:
        model: a built, compiled Keras model.
        directory: a folder written by `EpochCheckpoints`.

    Returns:
        The epoch that checkpoint ends, to pass to `fit(initial_epoch=...)`;
        0 when there is none.
    """
    if not model.built:
        raise ValueError("`model` must be built before a checkpoint is restored into it")
    optimizer = getattr(model, "optimizer", None)
    if optimizer is not None and not optimizer.built:
        # The saved optimizer variables need somewhere to load into.
        optimizer.build(model.trainable_variables)
    for epoch, path in reversed(list_checkpoints(directory)):
        try:
            model.load_weights(path)
        except (OSError, ValueError) as error:
            warnings.warn(f"Skipping unreadable checkpoint {path}: {error}", stacklevel=2)
            continue
        _load_seed_states(model, path)
        return epoch
    return 0


def _load_seed_states(model, path):
    states = _seed_states(model)
    with h5py.File(path, "r") as f:
        if _SEED_GROUP not in f:
            return  # written by plain `save_weights`: dropout streams restart
        group = f[_SEED_GROUP]
        if len(group) != len(states):
            raise ValueError(
                f"{path} holds {len(group)} seed generator states; the model has {len(states)}"
            )
        for i, state in enumerate(states):
            state.assign(np.asarray(group[str(i)]))


class StopAtStep(keras.callbacks.Callback):
    """Stops `fit` once the optimizer has taken `total_steps` steps.

    With it, a run trains to a step count whatever its epoch size: a run
    resumed with another checkpoint interval (`steps_per_epoch`) still ends
    at `total_steps`, its last epoch cut short. Keras ends the epoch (and
    runs its validation and checkpoint) when `stop_training` is set.

    Args:
        total_steps: the optimizer step count to stop at.
    """

    def __init__(self, total_steps):
        super().__init__()
        if not isinstance(total_steps, int) or total_steps < 1:
            raise ValueError(
                f"`total_steps` must be a positive int; received: total_steps={total_steps!r}"
            )
        self.total_steps = total_steps

    def on_train_batch_end(self, batch, logs=None):
        steps = int(keras.ops.convert_to_numpy(self.model.optimizer.iterations))
        if steps >= self.total_steps:
            self.model.stop_training = True


class EpochCheckpoints(keras.callbacks.Callback):
    """Saves the training state at the end of every epoch; keeps the newest.

    Files are named `ckpt-{epoch:04d}.weights.h5` (epochs counted from 1) and
    written atomically (`save_weights_atomically`), so a run killed at any
    moment resumes with `restore_latest`.

    Args:
        directory: the folder of the checkpoints.
        keep: how many of the newest checkpoints to keep (older ones are
            deleted after each save); `None` keeps all.

    Use it in `model.fit(..., callbacks=[EpochCheckpoints(directory)])`;
    Keras calls `on_epoch_end(epoch, logs)` with the 0-based epoch.
    """

    def __init__(self, directory, keep=5):
        super().__init__()
        if keep is not None and (not isinstance(keep, int) or keep < 1):
            raise ValueError(f"`keep` must be a positive int or None; received: keep={keep!r}")
        self.directory = directory
        self.keep = keep

    def on_epoch_end(self, epoch, logs=None):
        path = os.path.join(self.directory, CHECKPOINT_PATTERN.format(epoch=epoch + 1))
        save_weights_atomically(self.model, path)
        if self.keep is not None:
            for _, old in list_checkpoints(self.directory)[: -self.keep]:
                os.remove(old)


def steps_done(model):
    """The optimizer steps the model has taken."""
    return int(keras.ops.convert_to_numpy(model.optimizer.iterations))


class LogStep(keras.callbacks.Callback):
    """Puts the optimizer step into each epoch's logs (the x of the curves)."""

    KEYS = ("step",)

    def on_epoch_end(self, epoch, logs=None):
        if logs is not None:
            logs["step"] = steps_done(self.model)


class EpochTime(keras.callbacks.Callback):
    """Puts each epoch's wall seconds (`epoch_seconds`) and process CPU
    seconds per wall second (`cpu_per_wall`: 2.0 keeps both cores of a
    2-core machine busy; `docs/performance.md`) into its logs.

    It has no batch hook: one would make Keras wait for every step (JAX's
    asynchronous dispatch included).
    """

    KEYS = ("epoch_seconds", "cpu_per_wall")

    def __init__(self):
        super().__init__()
        self._start = None

    def on_epoch_begin(self, epoch, logs=None):
        self._start = (time.perf_counter(), time.process_time())

    def on_epoch_end(self, epoch, logs=None):
        if logs is None or self._start is None:
            return
        wall = time.perf_counter() - self._start[0]
        logs["epoch_seconds"] = wall
        logs["cpu_per_wall"] = (time.process_time() - self._start[1]) / max(wall, 1e-9)


class _BarFrom(keras.utils.Progbar):
    """A `Progbar` whose first value is `first`, not 0: Keras estimates the
    time per step (and so the ETA) as if counting began at 0, which for a
    bar starting at a resumed step 1200 would be 1200 times too short."""

    def __init__(self, target, first, **kwargs):
        super().__init__(target, **kwargs)
        self._first = first

    def _estimate_step_duration(self, current, now):
        return super()._estimate_step_duration(current - self._first, now)


class StepProgress(keras.callbacks.Callback):
    """Progress bars over a training phase's optimizer steps, for `fit`
    with `verbose=0` (or `fit_custom_steps`).

    Keras' own bars count the batches of each epoch under "Epoch k/n". A
    run that checkpoints every `steps_per_epoch` steps, trains to a step
    count and resumes from its newest checkpoint has epochs that are
    checkpoint intervals, and after a resume k goes on from the
    checkpoints. Here the bar's value is the optimizer step and its target
    the step the phase ends at, so a run resumed at step 1200 of 20000
    shows "1200/20000"; each epoch (checkpoint) ends one line with its logs
    (validation included). Where the run trains by passes over the data,
    each line is headed "Epoch p/passes", p the pass the step is in.
    Bars go where `sys.stdout` goes, as Keras' do.

    Args:
        total_steps: the step the phase ends at (the bars' target).
        verbose: 1 for a bar updated as steps end, 2 for one line per epoch.
        steps_per_pass: the steps of a pass over the data, or None where
            the run trains to a step count (no "Epoch" lines).
        passes: the passes the run trains (with `steps_per_pass`).

    Example:

    ```python
    model.fit(..., verbose=0, callbacks=[StepProgress(total_steps=20000)])
    ```
    """

    # What other callbacks put in the logs that the bar already shows (the
    # step, the time) or that is the run's bookkeeping.
    HIDDEN = frozenset(LogStep.KEYS + EpochTime.KEYS)

    def __init__(self, total_steps, verbose=1, steps_per_pass=None, passes=None):
        super().__init__()
        if verbose not in (1, 2):
            raise ValueError(f"`verbose` must be 1 or 2; received: verbose={verbose!r}")
        if (steps_per_pass is None) != (passes is None):
            raise ValueError("`steps_per_pass` and `passes` go together; received: "
                             f"steps_per_pass={steps_per_pass!r}, passes={passes!r}")
        self.total_steps, self.verbose = total_steps, verbose
        self.steps_per_pass, self.passes = steps_per_pass, passes
        self._step, self._bar = None, None

    def on_train_begin(self, logs=None):
        self._step = steps_done(self.model)

    def on_epoch_begin(self, epoch, logs=None):
        if self.steps_per_pass:
            print(f"Epoch {self._step // self.steps_per_pass + 1}/{self.passes}", flush=True)
        # Logs of `fit` are already means over the epoch: shown as they are.
        self._bar = _BarFrom(self.total_steps, self._step, verbose=self.verbose,
                             stateless_metrics=set())
        self._bar.update(self._step, finalize=False)  # where it starts, before the first step

    def on_train_batch_end(self, batch, logs=None):
        # Counted, not read from the optimizer: reading it would wait for
        # every step (JAX's asynchronous dispatch).
        self._step += 1
        self._bar.update(self._step, self._shown(logs), finalize=False)

    def on_epoch_end(self, epoch, logs=None):
        self._bar.update(self._step, self._shown(logs), finalize=True)

    def _shown(self, logs):
        return [(k, v) for k, v in (logs or {}).items() if k not in self.HIDDEN]


class ValidationScores(keras.callbacks.Callback):
    """Adds the task's validation scores (`val_<name>`) to each epoch's logs.

    Args:
        scores: `scores(model)` -> `{name: value}`.
    """

    def __init__(self, scores):
        super().__init__()
        self.scores = scores

    def on_epoch_end(self, epoch, logs=None):
        start = time.time()
        values = self.scores(self.model)
        if logs is not None:
            logs.update({f"val_{name}": float(v) for name, v in values.items()})
        shown = ", ".join(f"{name} {v:.4g}" for name, v in values.items())
        print(f"[validation] {shown} ({time.time() - start:.0f} s)")


class EarlyStopping(keras.callbacks.Callback):
    """Stops training after `patience` evaluations without a better
    `monitor`, keeping the best weights.

    Its state is read back from the run's history when training begins, so
    a resumed run stops where an uninterrupted one would; the best weights
    are written (atomically) before the history row of their epoch.

    Args:
        monitor: the logs' key, e.g. `val_bleu`.
        patience: evaluations without improvement before stopping.
        history_path: the history CSV of the phase.
        folder: where the best checkpoint goes.
        best: its name: `<best>.weights.h5`, `<best>.json`.
        lower_is_better: whether `monitor` improves by falling (a loss).
    """

    def __init__(self, monitor, patience, history_path, folder, best="best",
                 lower_is_better=False):
        super().__init__()
        self.monitor, self.patience = monitor, patience
        self.history_path, self.folder = history_path, folder
        self.weights_path = os.path.join(folder, f"{best}.weights.h5")
        self.info_path = os.path.join(folder, f"{best}.json")
        self.lower_is_better = lower_is_better
        self.best, self.best_step, self.wait, self.reason = None, None, 0, None
        self._missing_said = False

    def _better(self, value):
        if self.best is None:
            return True
        return value < self.best if self.lower_is_better else value > self.best

    def restore_state(self):
        """Best value and evaluations since, from the history; returns
        whether the patience is already used up."""
        history = history_from_csv(self.history_path)
        values, steps = history.get(self.monitor, []), history.get("step", [])
        self.best, self.best_step, self.wait = None, None, 0
        for k, value in enumerate(values):
            if value is None:
                continue
            if self._better(value):
                self.best, self.wait = value, 0
                self.best_step = steps[k] if k < len(steps) else None
            else:
                self.wait += 1
        return self.wait >= self.patience

    def on_train_begin(self, logs=None):
        self.restore_state()

    def on_epoch_end(self, epoch, logs=None):
        value = (logs or {}).get(self.monitor)
        if value is None:
            if not self._missing_said:
                print(f"warning: --early_stopping: no {self.monitor} in epoch {epoch + 1}'s "
                      "logs (no validation data?)")
                self._missing_said = True
            return
        value = float(value)
        if self._better(value):
            self.best, self.wait = value, 0
            self.best_step = steps_done(self.model)
            save_weights_atomically(self.model, self.weights_path)
            with atomic_open(self.info_path) as f:
                json.dump({"monitor": self.monitor, "value": value, "step": self.best_step,
                           "epoch": epoch + 1}, f, indent=2)
            return
        self.wait += 1
        if self.wait >= self.patience:
            self.model.stop_training = True
            self.reason = self.stop_line()

    def stop_line(self):
        return (f"early stopping: {self.monitor} has not improved on {self.best:.4g} "
                f"(step {self.best_step}) in {self.wait} evaluations; the best checkpoint "
                f"is {self.weights_path}")


class StopAfterMinutes(keras.callbacks.Callback):
    """Ends training cleanly once `minutes` have passed since it began: the
    epoch ends there (validation, checkpoint, history row).

    Args:
        minutes: the time budget of this command's training.
    """

    def __init__(self, minutes):
        super().__init__()
        self.minutes, self.reason = minutes, None

    def on_train_begin(self, logs=None):
        self.start = time.monotonic()

    def on_train_batch_end(self, batch, logs=None):
        if time.monotonic() - self.start >= 60 * self.minutes:
            self.model.stop_training = True
            self.reason = (f"--max_minutes {self.minutes:g} reached at step "
                           f"{steps_done(self.model)}")


def fit_custom_steps(model, step, callbacks, *, first_step, epochs, steps_per_epoch,
                     verbose=1):
    """The loop of `model.fit` around a custom training step, for steps that
    `fit` cannot express (self-critical training samples and rewards on the
    host): the callbacks' hooks run in Keras' order, and each epoch's logs
    are the mean of its steps' logs.

    Args:
        model: the compiled model.
        step: `step(model, step_index)` -> a logs dict of floats.
        callbacks: Keras callbacks.
        first_step: the `step_index` of the first step.
        epochs: the epochs to run, a `range` (`initial_epoch` to `epochs`).
        steps_per_epoch: the steps of an epoch.
        verbose: 0 for no progress bar.
    """
    callbacks = keras.callbacks.CallbackList(
        callbacks, add_history=True, add_progbar=verbose != 0, model=model,
        epochs=epochs.stop, steps=steps_per_epoch, verbose=verbose)
    index = first_step
    model.stop_training = False
    callbacks.on_train_begin()
    for epoch in epochs:
        callbacks.on_epoch_begin(epoch)
        totals = {}
        for batch in range(steps_per_epoch):
            callbacks.on_train_batch_begin(batch)
            logs = step(model, index)
            index += 1
            for key, value in logs.items():
                totals[key] = totals.get(key, 0.0) + value
            callbacks.on_train_batch_end(batch, logs)
            if model.stop_training:
                break
        callbacks.on_epoch_end(epoch, {k: v / (batch + 1) for k, v in totals.items()})
        if model.stop_training:
            break
    callbacks.on_train_end()
