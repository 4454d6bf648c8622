"""The training engine the recipes share: how long a run trains, and `fit`.

Every training command of every recipe ends in `fit` (or, for a custom
training step such as captioning's self-critical one, `fit_steps`), which
writes the run's training files once, the same way:

- resumes from the newest checkpoint of its phase (a run killed with
  `kill -9` goes on where its last checkpoint left it);
- stops at the first of: `--train_steps` optimizer steps, the epochs of
  the schedule, `--early_stopping METRIC[:PATIENCE]` (PATIENCE evaluations
  without a better validation METRIC), `--max_minutes` (the time of this
  command), a NaN loss; one status line says which, and the epoch then
  ends as any other (validation, checkpoint, history row);
- `history.csv` (one row per checkpoint: the optimizer `step`, training
  and validation metrics; a resumed run appends, a column added later
  widens the file), TensorBoard logs, checkpoints, and with early stopping
  `best.weights.h5` / `best.json`, the best checkpoint so far, which the
  model in memory holds when training ends and which `evaluate` loads;
- `curves.png`: the learning curves (`recipes._curves`).

Early stopping survives a kill: its state (best value, evaluations since)
is read back from `history.csv`, whose row of an epoch is written only
after that epoch's best weights.

Learning-rate schedules can follow the budget (`--scale_schedule`,
`--warmup_fraction`; `schedule_scale`, `warmup_steps`): warm-up and decay
points then are fractions of the run's length, so a run shortened with
`--train_steps` or `--epochs` does not end at its warm-up peak; without
them a schedule that the budget cuts short is warned about
(docs/recipes.md, "Budgets").
"""

import json
import math
import os
import time

import keras

from keras_structattn.training.callbacks import EarlyStopping
from keras_structattn.training.callbacks import LogStep
from keras_structattn.training.callbacks import StopAfterMinutes
from keras_structattn.training.callbacks import StopAtStep
from keras_structattn.training.callbacks import ValidationScores
from keras_structattn.training.callbacks import restore_latest
from keras_structattn.training.callbacks import steps_done
from keras_structattn.training.history import HistoryCSV
from recipes import _cli
from recipes import _curves
from recipes import _replicas

BEST = "best"  # best.weights.h5, best.json: the best checkpoint of early stopping


# ------------------------------------------------------------------ budgets


def warmup_steps(hparams_warmup, args, total_steps):
    """The warm-up of a step schedule.

    The hparams' steps, unless the run asks for a schedule fitted to its
    budget: `--warmup_fraction F` (F of `total_steps`) or
    `--scale_schedule` (at most half of `total_steps`). A warm-up that does
    not end before the budget is otherwise only warned about: fitting the
    schedule to the budget makes a run extended later with a larger
    `--train_steps` differ from one trained that long in one go.

    Args:
        hparams_warmup: the hparams' warm-up steps.
        args: the flags (`warmup_fraction`, `scale_schedule`).
        total_steps: the step budget, or None when unknown.
    """
    if total_steps is None:
        return hparams_warmup
    if getattr(args, "warmup_fraction", None) is not None:
        return max(1, round(args.warmup_fraction * total_steps))
    if hparams_warmup <= total_steps // 2:
        return hparams_warmup
    if getattr(args, "scale_schedule", False):
        cut = max(1, total_steps // 2)
        print(f"[schedule] warm-up {hparams_warmup} steps cut to {cut}, half of the "
              f"{total_steps}-step budget (--scale_schedule)")
        return cut
    if hparams_warmup >= total_steps:
        print(f"warning: the {hparams_warmup}-step warm-up does not end within the "
              f"{total_steps}-step budget: the run ends at its warm-up peak "
              "(--scale_schedule or --warmup_fraction fit it to the budget)")
    return hparams_warmup


def schedule_scale(planned_steps, total_steps, args):
    """The factor that maps an epoch schedule written for `planned_steps`
    (the hparams' epochs) onto a budget of `total_steps` with
    `--scale_schedule`: warm-up and decay epochs then are fractions of the
    run's length. 1 without it (a note says when the budget is shorter than
    the schedule), or when the budget is the planned one or unknown."""
    if not total_steps or not planned_steps or total_steps == planned_steps:
        return 1.0
    if not getattr(args, "scale_schedule", False):
        if total_steps < planned_steps:
            print(f"[schedule] the hparams' schedule spans {planned_steps} steps, the run "
                  f"{total_steps}: its later decays are not reached (--scale_schedule fits "
                  "it to the budget)")
        return 1.0
    scale = total_steps / planned_steps
    print(f"[schedule] the {planned_steps}-step schedule of the hparams is scaled by "
          f"{scale:.3g} to the {total_steps}-step budget (--scale_schedule)")
    return scale


# ---------------------------------------------------------------- callbacks


# --------------------------------------------------------------------- fit


def early_stopping_of(args, phase, scores, folder=None):
    """The `EarlyStopping` of `--early_stopping METRIC[:PATIENCE]` for a
    phase (best checkpoint in `folder`, default the run folder), or None.
    A loss, or a score the task's hook calls lower-is-better, must fall."""
    spec = getattr(args, "early_stopping", None)
    if not spec:
        return None
    metric, patience = spec
    lower = metric.endswith("loss") or (scores is not None and metric in scores.lower)
    return EarlyStopping(f"val_{metric}", patience,
                         os.path.join(args.output_dir, phase.history),
                         folder or args.output_dir, phase.best, lower_is_better=lower)


def uses_task_score(args, scores):
    """Whether `--early_stopping` watches a score of the task's `scores`
    hook (computed by decoding), rather than a metric `fit` logs itself."""
    spec = getattr(args, "early_stopping", None)
    return bool(spec and scores is not None and spec[0] in scores.names)


class Phase:
    """Where a training phase keeps its files in the run folder.

    Args:
        checkpoints: the checkpoints' folder name.
        history: the history CSV's name.
        logs: the TensorBoard folder name.
        best: the name of its best checkpoint (early stopping).
    """

    def __init__(self, checkpoints="checkpoints", history="history.csv", logs="logs",
                 best=BEST):
        self.checkpoints, self.history, self.logs = checkpoints, history, logs
        self.best = best

    def best_weights(self, output_dir):
        """The phase's best checkpoint (early stopping), or None."""
        path = os.path.join(output_dir, f"{self.best}.weights.h5")
        return path if os.path.exists(path) else None


def _callbacks(args, phase, replicas, total_steps, scores):
    """The engine's callbacks, in the order they must run at an epoch's end:
    the step, the task's scores, early stopping (best weights before the
    history row), the writers, then the stoppers."""
    out = args.output_dir
    history = os.path.join(out, phase.history)
    chief = replicas is None or replicas.is_chief
    callbacks = [LogStep()]
    if uses_task_score(args, scores):
        callbacks.append(ValidationScores(scores))
    stopper = early_stopping_of(args, phase, scores, out if chief else _scratch(replicas))
    if stopper is not None:
        callbacks.append(stopper)

    def make_writers():
        from keras_structattn.training.callbacks import EpochCheckpoints

        writers = [HistoryCSV(history),
                   EpochCheckpoints(os.path.join(out, phase.checkpoints),
                                    keep=args.keep_checkpoints)]
        try:
            import tensorflow  # noqa: F401  (Keras' TensorBoard callback writes with it)
        except ImportError:
            print("[train] no TensorFlow: no TensorBoard logs (the history CSV has the metrics)")
        else:
            writers.append(keras.callbacks.TensorBoard(os.path.join(out, phase.logs)))
        return writers

    callbacks += make_writers() if replicas is None else _replicas.writers(replicas, make_writers)
    if total_steps:
        callbacks.append(StopAtStep(total_steps))
    timer = StopAfterMinutes(args.max_minutes) if getattr(args, "max_minutes", None) else None
    if timer is not None:
        callbacks.append(timer)
    callbacks.append(keras.callbacks.TerminateOnNaN())
    return callbacks, stopper, timer


def _scratch(replicas):
    import atexit
    import shutil
    import tempfile

    folder = tempfile.mkdtemp(prefix=f"process-{replicas.process_id}-best-")
    atexit.register(shutil.rmtree, folder, ignore_errors=True)
    return folder


def _already_done(args, phase, done, epochs_done, epochs, total_steps, scores):
    """The line saying why a phase has nothing left to train, or None."""
    if total_steps and done >= total_steps:
        return f"already trained {done} steps (--train_steps {total_steps})"
    if epochs is not None and epochs_done >= epochs:
        return f"already {epochs_done} epochs (--epochs {epochs})"
    stopper = early_stopping_of(args, phase, scores)
    if stopper is not None and stopper.restore_state():
        return "already stopped early: " + stopper.stop_line()
    return None


def fit(model, args, data=None, *, step=None, per_epoch, epochs=None, total_steps=None,
        validation=None, validation_steps=None, replicas=None, phase=None, scores=None,
        label=None):
    """`model.fit` of one training phase, resumed from its newest checkpoint.

    Call it inside `replicas.scope()` with the model compiled.

    Args:
        model: the compiled model.
        args: the flags (`output_dir`, `keep_checkpoints`, `verbose`,
            `early_stopping`, `max_minutes`).
        data: `data(start_step)` -> what `fit` reads, from that step on.
        step: instead of `data`, a custom training step (`fit_steps`).
        per_epoch: steps per epoch (= per checkpoint).
        epochs: the epochs to reach, or None to train to `total_steps`.
        total_steps: the optimizer steps to stop at (None: the epochs).
        validation, validation_steps: `fit`'s validation data.
        replicas: the run's `Replicas` (None: one device).
        phase: the phase's files (`Phase`; default: the run's).
        scores: the task's validation scores hook (`ScoresHook`), or None.
        label: the phase's name in status lines (None: the only phase).

    Returns:
        The optimizer steps taken in all.
    """
    phase = phase or Phase()
    epochs_done, done = _restore(model, args, phase, epochs, total_steps, scores, label,
                                 replicas)
    if epochs_done is None:
        return done
    if epochs is None:
        epochs = epochs_done + math.ceil((total_steps - done) / per_epoch)
    callbacks, stopper, timer = _callbacks(args, phase, replicas, total_steps, scores)
    start = time.time()
    if step is None:
        model.fit(data(done), steps_per_epoch=per_epoch, epochs=epochs,
                  initial_epoch=epochs_done, validation_data=validation,
                  validation_steps=validation_steps,
                  shuffle=False,  # the recipes' streams shuffle (seeded, resumable) themselves
                  callbacks=callbacks, verbose=args.verbose)
    else:
        _step_loop(model, step, callbacks, done, range(epochs_done, epochs), per_epoch,
                   args.verbose)
    return _finish(model, args, label, stopper, timer, start, replicas, phase)


def fit_steps(model, args, step, **kwargs):
    """`fit` of a custom step (`step(model, step_index)` -> logs dict), with
    the same callbacks and stopping rules; for steps that `model.fit` cannot
    express (self-critical training samples and rewards on the host). Call
    it with the model compiled; `kwargs` are `fit`'s."""
    return fit(model, args, step=step, **kwargs)


def _step_loop(model, step, callbacks, index, epochs, per_epoch, verbose):
    """The loop of `model.fit` around a custom step: the callbacks' hooks in
    Keras' order, each epoch's logs the mean of its steps'."""
    callbacks = keras.callbacks.CallbackList(
        callbacks, add_history=True, add_progbar=verbose != 0, model=model,
        epochs=epochs.stop, steps=per_epoch, verbose=verbose)
    model.stop_training = False
    callbacks.on_train_begin()
    for epoch in epochs:
        callbacks.on_epoch_begin(epoch)
        totals = {}
        for batch in range(per_epoch):
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


def _restore(model, args, phase, epochs, total_steps, scores, label, replicas):
    """Restores the phase's newest checkpoint: `(epochs_done, steps_done)`,
    epochs_done None when the phase has nothing left to train."""
    epochs_done = restore_latest(model, os.path.join(args.output_dir, phase.checkpoints))
    done = steps_done(model)
    finished = _already_done(args, phase, done, epochs_done, epochs, total_steps, scores)
    if finished:
        print(f"[train] {label + ': ' if label else ''}{finished}")
        use_best_weights(model, args, phase, replicas)
        return None, done
    where = (f"at step {done} ({epochs_done} checkpoints so far)" if epochs is None
             else f"at epoch {epochs_done + 1} (step {done})")
    if epochs_done:
        print(f"[train] resuming {label + ' ' if label else ''}{where}")
    return epochs_done, done


def _finish(model, args, label, stopper, timer, start, replicas, phase):
    steps = steps_done(model)
    reasons = [c.reason for c in (stopper, timer) if c is not None and c.reason]
    print(f"[train] {label + ': ' if label else ''}{steps} steps "
          f"({time.time() - start:.0f} s in this command)"
          + (f"; {reasons[0]}" if reasons else ""))
    use_best_weights(model, args, phase, replicas)
    if replicas is None or replicas.is_chief:
        draw_curves(args.output_dir)
    return steps


def use_best_weights(model, args, phase, replicas=None):
    """Loads the phase's best checkpoint into `model` when early stopping
    kept one, so that what follows (evaluation, a next phase) uses it."""
    if not getattr(args, "early_stopping", None):
        return
    path = phase.best_weights(args.output_dir)
    if path is None or (replicas is not None and replicas.num_processes > 1):
        return
    model.load_weights(path)
    with open(os.path.join(args.output_dir, f"{phase.best}.json"), encoding="utf-8") as f:
        best = json.load(f)
    print(f"[model] the best checkpoint: step {best['step']}, {best['monitor']} "
          f"{best['value']:.4g}")


def draw_curves(output_dir):
    """`curves.png` of the run beside its history (a note if it cannot)."""
    try:
        path = _curves.draw_run(output_dir)
    except ImportError as error:
        print(f"[curves] not drawn: {error}")
        return
    if path:
        print(f"[curves] {path}")


class ScoresHook:
    """A task's validation scores, computed by decoding at each checkpoint
    when `--early_stopping` watches one of them.

    Args:
        names: the scores it computes (`bleu`, `cider`, `accuracy`...).
        compute: `compute(model)` -> `{name: value}`.
        lower: the names that improve by falling (an error rate).
    """

    def __init__(self, names, compute, lower=()):
        self.names, self.compute, self.lower = tuple(names), compute, tuple(lower)

    def __call__(self, model):
        return self.compute(model)


def check_task_score(args, replicas, scores):
    """Refuses a task score in a multi-process run (its decoding would need
    every process's rows)."""
    if uses_task_score(args, scores) and replicas is not None and replicas.num_processes > 1:
        raise _cli.UsageError(
            f"--early_stopping {args.early_stopping[0]} decodes the validation split, "
            "which a multi-process run cannot do; watch a metric fit logs (loss)")
