"""What the sequence-to-sequence recipes share (translation, captioning).

Both recipes train a token decoder with t2t's recipe and decode it with
beam search; this module holds, once, what their commands do alike:

- the run: its settings and hparams resolved against the saved run
  (`resolve_run`, `new_hparams`), its model built and a new run's files
  committed (`build_run`);
- the weights a command loads (`choose_weights`, `load_weights`;
  docs/recipes.md, "Which weights are used");
- the set-up of `train` (`replicas_and_jit`, `compile_model`) and its end
  (`history_of`, `evaluates_after_training`, the vision-and-language
  recipes' own);
- the output of `decode` (`deliver`).

Their flags are `recipes._cli`'s "sequence-to-sequence flags".
"""

import sys

import keras

from keras_structattn.training import checkpoints as checkpoints_lib
from keras_structattn.training.history import history_from_csv
from keras_structattn.training.losses import PaddedAccuracy
from keras_structattn.training.losses import PaddedCrossEntropy
from keras_structattn.training.schedules import WarmupRsqrtDecay
from models import registry
from recipes import _cli
from recipes import _engine
from recipes import _replicas
from recipes import _run
from recipes._run import RunFolder
from recipes._run import write_atomically
from recipes._run import write_json

ONE_PHASE = (_engine.Phase(),)  # the training phases of a run trained in one


# --------------------------------------------------------------------- run


def resolve_run(args, given, defaults, check_set, training_commands=("train",)):
    """The run folder, its settings and hparams; usage errors (a flag that
    disagrees with the saved run, a bad set or override) come out here,
    before any data is read.

    Args:
        args: the flags (`output_dir`, `hparams`, `command`, `seed`).
        given: the run-defining flags' values by name (None where left
            out), `--seed` aside.
        defaults: the settings of a new run.
        check_set: `check_set(hparams, settings)`, raising `UsageError`
            when a new run's set does not fit the recipe or its --model.
        training_commands: the commands that take `--seed` (only training
            uses it).

    Returns:
        `(run, settings, hparams)`: the saved hparams of an existing run;
        None for a new run, whose hparams `new_hparams` makes once the
        recipe knows what they depend on (`--hparams` is checked here).
    """
    run = RunFolder(args.output_dir)
    if args.command in training_commands:
        given = dict(given, seed=args.seed)
    settings = run.resolve_settings(given, defaults)
    hparams, saved = run.resolve_hparams(args.hparams, settings["hparams_set"],
                                         lambda hparams: check_set(hparams, settings))
    return run, settings, hparams if saved else None


def new_hparams(args, settings, default_set, overrides, fitted=""):
    """A new run's hparams: the set's, with `overrides` if it is the
    recipe's `default_set` (sized for its small embedded data), then the
    values `fitted` to the data, then `--hparams`."""
    hparams = registry.get(settings["hparams_set"])
    if settings["hparams_set"] == default_set:
        hparams = hparams.parse(overrides)
    return _cli.usage(hparams.parse(fitted).parse, args.hparams)


def build_run(args, run, settings, hparams, vocab, vocab_file, build, described,
              write=True):
    """The run's model, built by `build(seed)` under the run's seed; a new
    run's files (`hparams.json`, the vocabulary, `run.json`) are written
    only once the model has been built from them, so a command that fails
    before that leaves no run behind.

    Args:
        args, run, settings, hparams: the run (`resolve_run`).
        vocab: its vocabulary (with `save(path)`).
        vocab_file: the vocabulary's file name in the run folder.
        build: `build(seed)`, the built model.
        described: the "[run] new run" line's account of the vocabulary.
        write: commit a new run's files (False in the processes of a
            multi-process run other than process 0, which builds the same
            vocabulary from the same data and seed).
    """
    print(f"[hparams] {settings['hparams_set']}: {hparams}")
    keras.utils.set_random_seed(settings["seed"])
    model = build(settings["seed"])
    if not run.holds_run and write:
        run.commit(settings, {_run.HPARAMS_FILE: hparams.to_json() + "\n", vocab_file: vocab.save})
        print(f"[run] new run in {args.output_dir}: {described}")
    return model


# ----------------------------------------------------------------- weights


def newest_checkpoint(folder):
    """The newest readable checkpoint in `folder`, or None."""
    try:
        return checkpoints_lib.latest_checkpoint(folder)
    except FileNotFoundError:
        return None


def choose_weights(args, run, phases=ONE_PHASE):
    """The weights to decode with: `--weights`; else those of the last
    phase trained (`phases`, the last first; a phase without readable
    checkpoints is not trained): the averaged weights if they average its
    newest checkpoint (`average`), else its best checkpoint of early
    stopping, else its newest readable checkpoint."""
    if args.weights:
        return args.weights
    for phase in phases:
        newest = newest_checkpoint(run.file(phase.checkpoints))
        if newest is None and phase is not phases[-1]:
            continue
        averaged, note = run.averaged_weights(newest)
        if note:
            print(f"warning: {note}", file=sys.stderr)
        chosen = averaged or phase.best_weights(run.path) or newest
        if chosen:
            return chosen
    raise FileNotFoundError(f"No readable checkpoints in {run.file(phases[-1].checkpoints)}")


def load_weights(model, args, run, phases=ONE_PHASE):
    """`model` with the weights `choose_weights` picks, named on stderr."""
    weights = choose_weights(args, run, phases)
    model.load_weights(weights)
    print(f"[model] weights {weights}")
    return model


# ---------------------------------------------------------------- training


def replicas_and_jit(args):
    """The `Replicas` of the distribution flags and `jit_compile` of
    `--jit` (`recipes._replicas.jit_flag`, which turns op determinism on without
    XLA): the first thing `train` does (on TensorFlow the CPU can be split
    into devices only before any op)."""
    replicas = _replicas.from_flags(args)
    return replicas, _replicas.jit_flag(args, replicas)


def compile_model(model, hparams, args, jit):
    """Compiles for t2t's training: Adam under linear warm-up then rsqrt
    decay (`WarmupRsqrtDecay`; the warm-up as `_engine.warmup_steps` fits
    it to `--train_steps`), label-smoothed `PaddedCrossEntropy`,
    `PaddedAccuracy`."""
    schedule = WarmupRsqrtDecay(
        hparams.learning_rate_constant,
        _engine.warmup_steps(hparams.learning_rate_warmup_steps, args, args.train_steps),
        hparams.hidden_size,
    )
    model.compile(
        optimizer=keras.optimizers.Adam(
            schedule,
            beta_1=hparams.optimizer_adam_beta1,
            beta_2=hparams.optimizer_adam_beta2,
            epsilon=hparams.optimizer_adam_epsilon,
        ),
        loss=PaddedCrossEntropy(hparams.label_smoothing),
        metrics=[PaddedAccuracy()],
        jit_compile=jit,
    )
    print(f"[model] {model.count_params():,} parameters")


def history_of(run, name="history.csv"):
    """Every metric's values in a history CSV of the run (all the commands
    that trained it), for `train_summary.json`."""
    return {k: v for k, v in history_from_csv(run.file(name)).items() if k != "epoch"}


# ---------------------------------------------------------------- decoding


def deliver(args, lines, noun, value=None):
    """The output of `decode`: to `--output_file`, `value` as JSON if
    given, else the `lines` (written whole or not at all); without it the
    `lines` on stdout."""
    if not args.output_file:
        for line in lines:
            _cli.emit(line)
        return
    if value is None:
        write_atomically(args.output_file, "".join(f"{line}\n" for line in lines))
    else:
        write_json(args.output_file, value)
    print(f"[decode] {len(lines)} {noun} -> {args.output_file}")
