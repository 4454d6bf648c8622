"""What the sequence-to-sequence recipes share (translation, captioning):
the run, the weights a command loads (docs/recipes.md, "Which weights are
used"), t2t's training set-up and `decode`'s output. Their flags are
`recipes._cli`'s "sequence-to-sequence flags".
"""

import sys

import keras

from keras_structattn.training import checkpoints as checkpoints_lib
from keras_structattn.training.history import history_from_csv
from keras_structattn.training.losses import PaddedAccuracy
from keras_structattn.training.losses import PaddedCrossEntropy
from keras_structattn.training.run_folder import write_atomically
from keras_structattn.training.run_folder import write_json
from keras_structattn.training.schedules import WarmupRsqrtDecay
from models import registry
from recipes import _cli
from recipes import _engine
from recipes import _replicas
from recipes import _run
from recipes._run import RunFolder

ONE_PHASE = (_engine.Phase(),)  # the training phases of a run trained in one


def resolve_run(args, given, defaults, check_set, training_commands=("train",)):
    """`(run, settings, hparams)` of the flags `given` over a new run's
    `defaults`, checked by `check_set(hparams, settings)` before any data is
    read; `hparams` is None for a new run (`new_hparams`)."""
    run = RunFolder(args.output_dir)
    if args.command in training_commands:
        given = dict(given, seed=args.seed)
    settings = _run.resolve_settings(run, args, given, defaults)
    hparams, saved = run.resolve_hparams(args.hparams, settings["hparams_set"],
                                         lambda hparams: check_set(hparams, settings))
    return run, settings, hparams if saved else None


def new_hparams(args, settings, default_set, overrides, fitted=""):
    """A new run's hparams: the set's, `overrides` for the `default_set`,
    the values `fitted` to the data, then `--hparams`."""
    hparams = registry.get(settings["hparams_set"])
    if settings["hparams_set"] == default_set:
        hparams = hparams.parse(overrides)
    return _cli.usage(hparams.parse(fitted).parse, args.hparams)


def build_run(args, run, settings, hparams, vocab, vocab_file, build, described,
              write=True):
    """The model `build(seed)` builds; only then is a new run (`vocab` as
    `vocab_file`) committed if `write` (`commit_run`; a recipe with checks
    of its data to make first commits it itself). `described` tells the
    vocabulary."""
    print(f"[hparams] {settings['hparams_set']} ({settings.get('precision', 'float32')}): "
          f"{hparams}")
    keras.utils.set_random_seed(settings["seed"])
    model = build(settings["seed"])
    if not run.holds_run and write:
        commit_run(args, run, settings, hparams, vocab, vocab_file, described)
    return model


def commit_run(args, run, settings, hparams, vocab, vocab_file, described):
    """Writes a new run's settings, hparams and vocabulary (run.json last)."""
    run.commit(settings, {_run.HPARAMS_FILE: hparams.to_json() + "\n", vocab_file: vocab.save})
    print(f"[run] new run in {args.output_dir}: {described}")


def choose_weights(args, run, phases=ONE_PHASE):
    """`--weights`, else the last phase trained's (of `phases`, the last first):
    averaged (of its newest checkpoint), else best, else newest weights."""
    if args.weights:
        return args.weights
    for phase in phases:
        try:
            newest = checkpoints_lib.latest_checkpoint(run.file(phase.checkpoints))
        except FileNotFoundError:
            newest = None
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


def replicas_and_jit(args):
    """`(Replicas, jit_compile)` of the flags: first in `train` (TensorFlow
    splits the CPU only before any op)."""
    replicas = _replicas.from_flags(args)
    return replicas, _replicas.jit_flag(args, replicas)


def compile_model(model, hparams, args, jit):
    """Compiles for t2t's training: Adam under `WarmupRsqrtDecay`, label smoothing."""
    warmup = _engine.warmup_steps(hparams.learning_rate_warmup_steps, args, args.train_steps)
    schedule = WarmupRsqrtDecay(hparams.learning_rate_constant, warmup, hparams.hidden_size)
    optimizer = keras.optimizers.Adam(schedule, beta_1=hparams.optimizer_adam_beta1,
                                      beta_2=hparams.optimizer_adam_beta2,
                                      epsilon=hparams.optimizer_adam_epsilon)
    model.compile(optimizer=optimizer, loss=PaddedCrossEntropy(hparams.label_smoothing),
                  metrics=[PaddedAccuracy()], jit_compile=jit)
    print(f"[model] {model.count_params():,} parameters")


def history_of(run, name="history.csv"):
    """Every metric's values in a history CSV of the run, for `train_summary.json`."""
    return {k: v for k, v in history_from_csv(run.file(name)).items() if k != "epoch"}


def deliver(args, lines, noun, value=None):
    """`decode`'s output: `value` as JSON, else the `lines`, to
    `--output_file` (whole or not at all); else the `lines` on stdout."""
    if not args.output_file:
        for line in lines:
            _cli.emit(line)
        return
    if value is None:
        write_atomically(args.output_file, "".join(f"{line}\n" for line in lines))
    else:
        write_json(args.output_file, value)
    print(f"[decode] {len(lines)} {noun} -> {args.output_file}")
