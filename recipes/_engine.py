"""The training engine the recipes share: how long a run trains, and `fit`.

Every training command ends in `fit` (or `fit_steps`, for a custom step such
as captioning's self-critical one), which writes the run's training files
the same way:

- resumes from the newest checkpoint of its phase (after `kill -9` too);
- stops at the first of `--train_steps`, the schedule's epochs,
  `--early_stopping METRIC[:PATIENCE]`, `--max_minutes` (this command's
  time) or a NaN loss, saying which; the epoch then ends as any other;
- writes `history.csv` (one row per checkpoint; a resumed run appends, a
  new column widens it), TensorBoard logs, checkpoints, `curves.png`, and
  with early stopping `best.weights.h5` / `best.json`, which the model
  holds when training ends and `evaluate` loads. Early stopping's state is
  read back from `history.csv`, so it survives a kill;
- shows progress (`--verbose`) as bars over the phase's optimizer steps
  (`StepProgress`), which a resumed run opens at its resumed step.

`--scale_schedule` and `--warmup_fraction` fit a learning-rate schedule to
the run's budget (`schedule_scale`, `warmup_steps`), so that a shortened run
does not end at its warm-up peak; without them a schedule the budget cuts
short is warned about (docs/recipes.md, "Budgets").
"""

import dataclasses
import json
import math
import os
import time

import keras

from keras_structattn.training import curves
from keras_structattn.training import distribution
from keras_structattn.training.callbacks import EarlyStopping
from keras_structattn.training.callbacks import EpochCheckpoints
from keras_structattn.training.callbacks import EpochTime
from keras_structattn.training.callbacks import LogStep
from keras_structattn.training.callbacks import StepProgress
from keras_structattn.training.callbacks import StopAfterMinutes
from keras_structattn.training.callbacks import StopAtStep
from keras_structattn.training.callbacks import ValidationScores
from keras_structattn.training.callbacks import fit_custom_steps
from keras_structattn.training.callbacks import restore_latest
from keras_structattn.training.callbacks import steps_done
from keras_structattn.training.history import HistoryCSV
from recipes import _cli

BEST = "best"  # best.weights.h5, best.json: the best checkpoint of early stopping


def warmup_steps(hparams_warmup, args, total_steps):
    """The warm-up of a step schedule: the hparams' steps, or with
    `--warmup_fraction F` F of the budget `total_steps` (None: unknown), or
    with `--scale_schedule` at most half of it; else only a warning where
    it does not end within the budget (a run extended later must not
    change schedule)."""
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
    """With `--scale_schedule`, the factor mapping an epoch schedule of
    `planned_steps` onto the budget `total_steps`; else 1 (with a note when
    the budget is the shorter)."""
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


def _early_stopping(args, phase, scores, folder=None):
    """`--early_stopping`'s `EarlyStopping` (best checkpoint in `folder`,
    default the run folder), or None; a loss or a `scores.lower` must fall."""
    spec = getattr(args, "early_stopping", None)
    if not spec:
        return None
    metric, patience = spec
    lower = metric.endswith("loss") or (scores is not None and metric in scores.lower)
    return EarlyStopping(f"val_{metric}", patience,
                         os.path.join(args.output_dir, phase.history),
                         folder or args.output_dir, phase.best, lower_is_better=lower)


def _uses_task_score(args, scores):
    """Whether `--early_stopping` watches a score of the `scores` hook."""
    spec = getattr(args, "early_stopping", None)
    return bool(spec and scores is not None and spec[0] in scores.names)


@dataclasses.dataclass(frozen=True)
class Phase:
    """Where a training phase keeps its files in the run folder."""

    checkpoints: str = "checkpoints"
    history: str = "history.csv"
    logs: str = "logs"
    best: str = BEST

    def best_weights(self, output_dir):
        """The phase's best checkpoint (early stopping), or None."""
        path = os.path.join(output_dir, f"{self.best}.weights.h5")
        return path if os.path.exists(path) else None


def _callbacks(args, phase, replicas, total_steps, scores):
    """The callbacks, in their order at an epoch's end (early stopping's best
    weights before the history row), and the stoppers that give a reason."""
    out = args.output_dir
    chief = replicas is None or replicas.is_chief
    stopper = _early_stopping(args, phase, scores,
                              out if chief else distribution.scratch_folder(replicas, "best"))
    timer = StopAfterMinutes(args.max_minutes) if getattr(args, "max_minutes", None) else None

    def make_writers():
        writers = [HistoryCSV(os.path.join(out, phase.history)),
                   EpochCheckpoints(os.path.join(out, phase.checkpoints),
                                    keep=args.keep_checkpoints)]
        try:
            import tensorflow  # noqa: F401  (Keras' TensorBoard callback writes with it)
        except ImportError:
            print("[train] no TensorFlow: no TensorBoard logs (the history CSV has the metrics)")
        else:
            writers.append(keras.callbacks.TensorBoard(os.path.join(out, phase.logs)))
        return writers

    callbacks = [
        EpochTime(), LogStep(),
        ValidationScores(scores) if _uses_task_score(args, scores) else None,
        stopper,
        *(make_writers() if replicas is None
          else distribution.chief_writers(replicas, make_writers)),
        StopAtStep(total_steps) if total_steps else None, timer,
        keras.callbacks.TerminateOnNaN(),
    ]
    stoppers = [c for c in (stopper, timer) if c is not None]
    return [c for c in callbacks if c is not None], stoppers


def _already_done(args, phase, done, epochs_done, epochs, total_steps, scores):
    """The line saying why a phase has nothing left to train, or None."""
    if total_steps and done >= total_steps:
        return f"already trained {done} steps (--train_steps {total_steps})"
    if epochs is not None and epochs_done >= epochs:
        return f"already {epochs_done} epochs (--epochs {epochs})"
    stopper = _early_stopping(args, phase, scores)
    if stopper is not None and stopper.restore_state():
        return "already stopped early: " + stopper.stop_line()
    return None


def fit(model, args, data=None, *, step=None, per_epoch, epochs=None, total_steps=None,
        validation=None, validation_steps=None, replicas=None, phase=None, scores=None,
        label=None):
    """`model.fit` of one training phase, resumed from its newest checkpoint;
    returns the optimizer steps taken in all. Call it inside
    `replicas.scope()` with the model compiled.

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
    """
    phase = phase or Phase()
    epochs_done = restore_latest(model, os.path.join(args.output_dir, phase.checkpoints))
    done = steps_done(model)
    finished = _already_done(args, phase, done, epochs_done, epochs, total_steps, scores)
    prefix = f"{label}: " if label else ""
    if finished:
        print(f"[train] {prefix}{finished}")
        _use_best_weights(model, args, phase, replicas)
        return done
    if epochs_done:
        where = (f"at step {done} ({epochs_done} checkpoints so far)" if epochs is None
                 else f"at epoch {epochs_done + 1} (step {done})")
        print(f"[train] resuming {label + ' ' if label else ''}{where}")
    passes = epochs  # None: the phase trains to a step count
    if epochs is None:
        epochs = epochs_done + math.ceil((total_steps - done) / per_epoch)
    callbacks, stoppers = _callbacks(args, phase, replicas, total_steps, scores)
    if args.verbose:
        # Our bars, not Keras': theirs count each epoch's batches under "Epoch k/n",
        # k a checkpoint interval that a resumed run counts on from its checkpoints.
        end = done + (epochs - epochs_done) * per_epoch
        callbacks.append(StepProgress(min(end, total_steps or end), args.verbose,
                                      steps_per_pass=per_epoch if passes else None,
                                      passes=passes))
    start = time.time()
    if step is None:
        model.fit(data(done), steps_per_epoch=per_epoch, epochs=epochs,
                  initial_epoch=epochs_done, validation_data=validation,
                  validation_steps=validation_steps,
                  shuffle=False,  # the recipes' streams shuffle (seeded, resumable) themselves
                  callbacks=callbacks, verbose=0)
    else:
        fit_custom_steps(model, step, callbacks, first_step=done,
                         epochs=range(epochs_done, epochs), steps_per_epoch=per_epoch,
                         verbose=0)
    steps = steps_done(model)
    reasons = [c.reason for c in stoppers if c.reason]
    print(f"[train] {prefix}{steps} steps "
          f"({time.time() - start:.0f} s in this command)"
          + (f"; {reasons[0]}" if reasons else ""))
    _use_best_weights(model, args, phase, replicas)
    if replicas is None or replicas.is_chief:
        try:
            path = curves.draw_run(args.output_dir)
        except ImportError as error:
            print(f"[curves] not drawn: {error}")
        else:
            if path:
                print(f"[curves] {path}")
    return steps


def fit_steps(model, args, step, **kwargs):
    """`fit` of a custom step, `step(model, step_index)` -> logs dict, for
    what `model.fit` cannot express (host-side sampling); `kwargs`: `fit`'s."""
    return fit(model, args, step=step, **kwargs)


def _use_best_weights(model, args, phase, replicas=None):
    """Loads early stopping's best checkpoint, if any, for what follows."""
    path = phase.best_weights(args.output_dir)
    if (not getattr(args, "early_stopping", None) or path is None
            or (replicas is not None and replicas.num_processes > 1)):
        return
    model.load_weights(path)
    with open(os.path.join(args.output_dir, f"{phase.best}.json"), encoding="utf-8") as f:
        best = json.load(f)
    print(f"[model] the best checkpoint: step {best['step']}, {best['monitor']} "
          f"{best['value']:.4g}")


class ScoresHook:
    """A task's validation scores `names` (`bleu`...), `compute(model)` ->
    `{name: value}` at each checkpoint when `--early_stopping` watches one;
    `lower`: those that improve by falling."""

    def __init__(self, names, compute, lower=()):
        self.names, self.compute, self.lower = tuple(names), compute, tuple(lower)

    def __call__(self, model):
        return self.compute(model)


def check_task_score(args, replicas, scores):
    """Refuses a task score in a multi-process run (decoding needs every row)."""
    if _uses_task_score(args, scores) and replicas is not None and replicas.num_processes > 1:
        raise _cli.UsageError(
            f"--early_stopping {args.early_stopping[0]} decodes the validation split, "
            "which a multi-process run cannot do; watch a metric fit logs (loss)")
