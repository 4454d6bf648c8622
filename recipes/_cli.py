"""The command-line layer every recipe shares: flags, errors, output streams.

A recipe is a package `recipes/<name>/` whose `__init__.py` builds its
flags with `ArgumentParser` and the flag types below (no TensorFlow, JAX or
Keras import there, so that a bad flag is refused in a fraction of a second)
and whose `__main__.py` is `entry_point(main)`. `main(argv)` calls `execute`,
which

- parses the flags (`UsageError` on a bad one),
- runs the recipe's own flag checks (`UsageError`),
- runs the command with `sys.stdout` pointed at stderr, so that status
  lines, Keras' progress bars and any library's chatter go to stderr;
  results (scores, translations, captions) are written with `emit`, the
  only writer to the real stdout, so `... > out.txt` holds results only.

`entry_point` turns exceptions into one line on stderr, `error: <message>`,
and an exit status: 2 for usage errors (bad flags, files or folders named
by flags that do not fit, a run folder made with other settings), 1 for
failures while working, 130 for Ctrl-C. `--debug` shows the traceback
instead. Warnings are one line each too (`warning: ...`).
"""

import argparse
import contextlib
import os
import sys
import warnings

# TensorFlow's C++ start-up chatter (CUDA probing, CPU features) is not
# status a recipe's user needs; set before any recipe imports TensorFlow.
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

USAGE_EXIT = 2
FAILURE_EXIT = 1
INTERRUPTED_EXIT = 130

_results = None  # the real stdout while a command runs (see `execute`)


class UsageError(ValueError):
    """A command line that cannot be run as given: exit status 2.

    A `ValueError`, so that code calling `main(argv)` in-process can catch
    it like the library's argument errors.
    """


class ArgumentParser(argparse.ArgumentParser):
    """`argparse.ArgumentParser` raising `UsageError` instead of exiting.

    Every recipe's parser has `--debug` (tracebacks instead of one-line
    errors), and a recipe that takes hparams sets has
    `--list_hparams_sets`.

    Args:
        hparams_model_types: the `model_type`s of the hparams sets the
            recipe takes; given, the parser has `--list_hparams_sets`,
            which prints them (`models.registry`, no Keras) and exits 0.
        **kwargs: `argparse.ArgumentParser` arguments.
    """

    def __init__(self, hparams_model_types=None, **kwargs):
        kwargs.setdefault("formatter_class", argparse.RawDescriptionHelpFormatter)
        super().__init__(**kwargs)
        self.add_argument("--debug", action="store_true",
                          help="on an error, show the Python traceback")
        if hparams_model_types:
            self.add_argument("--list_hparams_sets", action=_ListHparamsSets,
                              model_types=tuple(hparams_model_types),
                              help="print the hparams sets this recipe takes (name, "
                              "model_type, architecture; one per line) and exit")

    def error(self, message):
        raise UsageError(f"{message} (see {self.prog} --help)")


def hparams_sets_listing(model_types):
    """The `--list_hparams_sets` lines: `name<TAB>model_type<TAB>architecture`
    ("-" without one) of every set of `model_types`, sorted by name."""
    from models import registry  # noqa: PLC0415 (keras-free, only when listing)

    return [
        f"{name}\t{registry.model_type(name)}\t{registry.architecture(name) or '-'}"
        for name in registry.registered(model_types)
    ]


class _ListHparamsSets(argparse.Action):
    """`--list_hparams_sets`: prints the recipe's sets on stdout and exits 0
    (as `--help`, with no command needed)."""

    def __init__(self, option_strings, dest, model_types, **kwargs):
        super().__init__(option_strings, dest, nargs=0, default=argparse.SUPPRESS, **kwargs)
        self.model_types = model_types

    def __call__(self, parser, namespace, values, option_string=None):
        for line in hparams_sets_listing(self.model_types):
            print(line)
        parser.exit(0)


# ------------------------------------------------------------- flag types
# argparse calls these on the flag's text; their ValueError/TypeError
# messages become "argument --flag: ..." usage errors.


def _integer(text):
    try:
        return int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected an integer, got {text!r}") from None


def positive_int(text):
    """An int >= 1."""
    value = _integer(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be >= 1, got {value}")
    return value


def non_negative_int(text):
    """An int >= 0."""
    value = _integer(text)
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be >= 0, got {value}")
    return value


def non_negative_float(text):
    """A finite float >= 0."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number, got {text!r}") from None
    if not value >= 0 or value == float("inf"):
        raise argparse.ArgumentTypeError(f"must be a finite number >= 0, got {text}")
    return value


def positive_float(text):
    """A finite float > 0."""
    value = non_negative_float(text)
    if value == 0:
        raise argparse.ArgumentTypeError(f"must be > 0, got {text}")
    return value


def unit_interval(text):
    """A float in [0, 1]."""
    value = non_negative_float(text)
    if value > 1:
        raise argparse.ArgumentTypeError(f"must be in [0, 1], got {text}")
    return value


def input_file(text):
    """A path to an existing, readable file."""
    if not os.path.exists(text):
        raise argparse.ArgumentTypeError(f"no such file: {text}")
    if os.path.isdir(text):
        raise argparse.ArgumentTypeError(f"{text} is a folder, not a file")
    if not os.access(text, os.R_OK):
        raise argparse.ArgumentTypeError(f"{text} is not readable")
    return text


def input_folder(text):
    """A path to an existing, readable folder."""
    if not os.path.exists(text):
        raise argparse.ArgumentTypeError(f"no such folder: {text}")
    if not os.path.isdir(text):
        raise argparse.ArgumentTypeError(f"{text} is a file, not a folder")
    if not os.access(text, os.R_OK | os.X_OK):
        raise argparse.ArgumentTypeError(f"{text} is not readable")
    return text


def input_file_or_folder(text):
    """A path to an existing, readable file or folder."""
    if os.path.isdir(text):
        return input_folder(text)
    return input_file(text)


def output_file(text):
    """A path a file can be written to: its folder exists and is writable."""
    if os.path.isdir(text):
        raise argparse.ArgumentTypeError(f"{text} is a folder, not a file")
    folder = os.path.dirname(os.path.abspath(text))
    if not os.path.isdir(folder):
        raise argparse.ArgumentTypeError(f"the folder of {text} does not exist")
    if not os.access(folder, os.W_OK):
        raise argparse.ArgumentTypeError(f"cannot write to the folder of {text}")
    return text


def output_folder(text):
    """A folder that exists or can be created, and can be written to."""
    if os.path.exists(text) and not os.path.isdir(text):
        raise argparse.ArgumentTypeError(f"{text} is a file, not a folder")
    existing = os.path.abspath(text)
    while not os.path.exists(existing):
        existing = os.path.dirname(existing)
    if not os.path.isdir(existing):
        raise argparse.ArgumentTypeError(f"cannot create {text}: {existing} is a file")
    if not os.access(existing, os.W_OK):
        raise argparse.ArgumentTypeError(f"cannot write to {existing}")
    return text


def add_command_argument(parser, commands):
    """The recipe's `command` (default `train`), `curves` among the choices,
    and the run folders `curves` draws (`curves RUN [RUN ...]`)."""
    parser.add_argument("command", nargs="?", default="train", choices=(*commands, "curves"))
    parser.add_argument("runs", nargs="*", metavar="RUN",
                        help="curves: the run folders to draw on one figure")


def early_stopping_type(metrics):
    """The flag type of `--early_stopping METRIC[:PATIENCE]`: `(metric,
    patience)`, METRIC one of `metrics`, PATIENCE >= 1 (default 3)."""
    def parse(text):
        metric, _, patience = text.partition(":")
        if metric not in metrics:
            raise argparse.ArgumentTypeError(
                f"{metric!r} is not a validation metric of this recipe: {', '.join(metrics)}")
        return metric, positive_int(patience) if patience else 3

    return parse


def add_budget_flags(group, metrics, train_steps=False):
    """How long `train` runs, beside the recipe's steps or epochs:
    `--early_stopping METRIC[:PATIENCE]` on a validation metric of
    `metrics`, `--max_minutes`, `--warmup_fraction`, `--scale_schedule`,
    and `--train_steps`
    where the recipe counts epochs (`train_steps=True`). They may change
    when a run resumes (docs/recipes.md, "Budgets")."""
    if train_steps:
        group.add_argument("--train_steps", type=positive_int, default=None,
                           help="stop at this many optimizer steps (default: the epochs decide)")
    group.add_argument(
        "--early_stopping", type=early_stopping_type(metrics), default=None,
        metavar="METRIC[:PATIENCE]",
        help=f"stop after PATIENCE (default 3) checkpoints without a better validation METRIC "
             f"({', '.join(metrics)}); the best checkpoint is kept and evaluated")
    group.add_argument("--max_minutes", type=positive_float, default=None,
                       help="end training cleanly (checkpoint, evaluation) after N minutes")
    group.add_argument("--warmup_fraction", type=unit_interval, default=None,
                       help="the learning-rate warm-up as this fraction of --train_steps "
                            "(default: the hparams' steps)")
    group.add_argument("--scale_schedule", action="store_true",
                       help="fit the hparams' learning-rate schedule to this run's budget "
                            "(--train_steps, --epochs): warm-up at most half of it, epoch "
                            "schedules scaled; a run extended later then follows another "
                            "schedule than one trained that long at once")


def add_epoch_training_flags(parser, metrics, epochs_help="default: the hparams' epochs"):
    """The training flags of the recipes that train in epochs (VQA,
    grounding, TextVQA): `--epochs`, the budget flags (`add_budget_flags`
    with early stopping on one of `metrics`), `--batch_size`,
    `--keep_checkpoints`, `--jit`, `--no_eval`, `--verbose`; they may
    change when a run resumes."""
    train = parser.add_argument_group("training (may change when a run resumes)")
    train.add_argument("--epochs", type=positive_int, default=None, help=epochs_help)
    add_budget_flags(train, metrics, train_steps=True)
    train.add_argument("--batch_size", type=positive_int, default=None,
                       help="default: the hparams' batch_size")
    train.add_argument("--keep_checkpoints", type=positive_int, default=3)
    train.add_argument("--jit", choices=("auto", "on", "off"), default="auto",
                       help="jit_compile for fit (auto: Keras' choice)")
    train.add_argument("--no_eval", action="store_true", help="train only")
    train.add_argument("--verbose", type=int, default=1, choices=(0, 1, 2),
                       help="1 = progress bars (on stderr)")


def add_distribution_flags(parser):
    """`--distribute none|data_parallel`, `--devices N` and the JAX
    multi-process flags (docs/distributed.md). They may change when a run
    resumes: a checkpoint does not depend on how many devices wrote it."""
    group = parser.add_argument_group(
        "distribution (may change when a run resumes; docs/distributed.md)")
    group.add_argument(
        "--distribute", choices=("none", "data_parallel"), default="none",
        help="data_parallel: every batch split over the devices (JAX: "
             "keras.distribution.DataParallel; TensorFlow: MirroredStrategy)")
    group.add_argument(
        "--devices", type=positive_int, default=None,
        help="with data_parallel, use this many devices (default: all); on a "
             "CPU-only machine the CPU is split into that many devices")
    group.add_argument(
        "--coordinator_address", default=None, metavar="HOST:PORT",
        help="JAX multi-process: process 0's address (or "
             "KERAS_DISTRIBUTION_JOB_ADDRESSES)")
    group.add_argument(
        "--num_processes", type=positive_int, default=None,
        help="JAX multi-process: the process count (or KERAS_DISTRIBUTION_NUM_PROCESSES)")
    group.add_argument(
        "--process_id", type=non_negative_int, default=None,
        help="JAX multi-process: this process, 0.. (or KERAS_DISTRIBUTION_PROCESS_ID)")


def _check_distribution(args):
    """The distribution flags that go together; sets JAX's CPU device count
    before any recipe imports JAX."""
    if not hasattr(args, "distribute"):
        return
    several = (args.num_processes or 1) > 1
    if args.distribute == "none":
        for flag in ("devices", "coordinator_address", "num_processes", "process_id"):
            if getattr(args, flag) is not None:
                raise UsageError(f"--{flag} needs --distribute data_parallel")
        return
    if several and args.devices:
        raise UsageError("--devices applies to one process; with --num_processes, "
                         "every device of every process is used")
    if several and args.process_id is not None and args.process_id >= args.num_processes:
        raise UsageError(f"--process_id {args.process_id} must be below "
                         f"--num_processes {args.num_processes}")
    if args.devices:
        # JAX's CPU shows this many devices (GPUs are unaffected); it reads
        # the flag when it starts, which is after this point.
        flags = os.environ.get("XLA_FLAGS", "")
        if "xla_force_host_platform_device_count" not in flags:
            os.environ["XLA_FLAGS"] = (
                f"{flags} --xla_force_host_platform_device_count={args.devices}".strip())


# ---------------------------------------------------------------- running


def usage(function, *args):
    """`function(*args)`, its ValueError (a bad hparams set or override, say)
    as a usage error."""
    try:
        return function(*args)
    except ValueError as error:
        raise UsageError(str(error)) from None


def check_distribute_for_train(args):
    """`--distribute` is for `train`: every other command runs on one device."""
    if args.command != "train" and args.distribute != "none":
        raise UsageError(f"--distribute is for train; {args.command} runs on one device")


RUN_FILE = "run.json"  # a run folder holds a run once this is in it (`recipes._run`)


def require_run(output_dir, command):
    """Raises `UsageError` unless `output_dir` holds a trained run: checked
    with the flags, before any heavy import."""
    if not os.path.exists(os.path.join(output_dir, RUN_FILE)):
        raise UsageError(
            f"no trained run in {output_dir} (no {RUN_FILE}): run `train` with this "
            f"--output_dir before `{command}`")


def emit(text=""):
    """Writes a result line to stdout (the real one while a command runs).

    Args:
        text: the line, without its newline.
    """
    stream = _results or sys.stdout
    stream.write(f"{text}\n")
    stream.flush()


def execute(parser, argv, run, check=None):
    """Parses `argv`, checks it and runs the command: a recipe's `main`.

    Args:
        parser: the recipe's `ArgumentParser`.
        argv: the arguments (None: `sys.argv[1:]`).
        run: `run(args)`, the command; it may import heavy libraries.
        check: optional `check(args)`, the recipe's checks of flags that go
            together; it raises `UsageError` and must stay light.

    Returns:
        What `run` returns.
    """
    global _results
    args = parser.parse_args(argv)
    if getattr(args, "command", None) == "curves":
        return curves_command(args)
    if getattr(args, "runs", None):
        raise UsageError(f"unrecognized arguments: {' '.join(args.runs)} (see {parser.prog} "
                         "--help)")
    if check is not None:
        check(args)
    _check_distribution(args)
    previous = _results
    _results = sys.stdout
    try:
        with contextlib.redirect_stdout(sys.stderr), warnings.catch_warnings():
            warnings.showwarning = _one_line_warning
            return run(args)
    finally:
        _results = previous


def curves_command(args):
    """`curves RUN [RUN ...]`: one figure of several runs (for seed
    comparisons), to `--output_file` (default `curves.png` in the current
    folder); prints its path (`recipes._curves`)."""
    from recipes import _curves

    if not args.runs:
        raise UsageError("curves needs one or more run folders: curves RUN [RUN ...]")
    runs = []
    for folder in args.runs:
        if not os.path.isdir(folder):
            raise UsageError(f"no such run folder: {folder}")
        panels, best = _curves.read_run(folder)
        if not panels:
            raise UsageError(f"{folder} has no history.csv: train it first")
        runs.append((os.path.normpath(folder), panels, best))
    path = _curves.draw(runs, getattr(args, "output_file", None) or _curves.CURVES_FILE)
    emit(path)
    return path


def run_commands_of(package):
    """`run(args)` of a recipe package: imports `<package>.commands` (the
    heavy part: TensorFlow, the models) only once the flags are checked,
    and runs its `run(args)`.

    Args:
        package: the recipe's package name (`__name__` of its `__init__`).
    """
    def run(args):
        import importlib

        if getattr(args, "debug", False):
            commands = importlib.import_module(f"{package}.commands")
        else:
            with _native_start_up_lines_dropped():
                commands = importlib.import_module(f"{package}.commands")
        return commands.run(args)

    return run


# TensorFlow's C++ libraries log INFO lines while they load (CPU features,
# CUDA probing), before absl's logging starts, so TF_CPP_MIN_LOG_LEVEL no
# longer silences them (TensorFlow 2.21): absl's format, severity I.
_START_UP_LINE = (
    "WARNING: All log messages before absl::InitializeLog() is called are written to STDERR",
    "I0000 ",
)


@contextlib.contextmanager
def _native_start_up_lines_dropped():
    """Runs the body with file descriptor 2 captured, then writes back all
    it caught but the native libraries' start-up INFO lines (warnings and
    errors stay, in order). `--debug` skips this."""
    import tempfile

    sys.stderr.flush()
    saved = os.dup(2)
    with tempfile.TemporaryFile() as caught:
        os.dup2(caught.fileno(), 2)
        try:
            yield
        finally:
            sys.stderr.flush()
            os.dup2(saved, 2)
            os.close(saved)
            caught.seek(0)
            text = caught.read().decode("utf-8", errors="replace")
            kept = [line for line in text.splitlines(keepends=True)
                    if not line.startswith(_START_UP_LINE)]
            sys.stderr.write("".join(kept))
            sys.stderr.flush()


def _one_line_warning(message, category, filename, lineno, file=None, line=None):
    print(f"warning: {message}", file=sys.stderr, flush=True)


def entry_point(main, argv=None):
    """Runs `main(argv)` as a command-line tool and exits.

    Errors become `error: <message>` on stderr and exit status 2
    (`UsageError`) or 1 (anything else); `--debug` lets the traceback
    through. Never returns.

    Args:
        main: the recipe's `main(argv)`.
        argv: the arguments (None: `sys.argv[1:]`).
    """
    argv = sys.argv[1:] if argv is None else list(argv)
    if "--debug" in argv:
        main(argv)
        sys.exit(0)
    try:
        main(argv)
    except KeyboardInterrupt:
        print("error: interrupted", file=sys.stderr)
        sys.exit(INTERRUPTED_EXIT)
    except UsageError as error:
        print(f"error: {_one_line(error)}", file=sys.stderr)
        sys.exit(USAGE_EXIT)
    except Exception as error:  # noqa: BLE001  (any failure: one line, exit 1)
        print(f"error: {_one_line(error)} (--debug shows the traceback)", file=sys.stderr)
        sys.exit(FAILURE_EXIT)
    sys.exit(0)


def _one_line(error):
    """The first line of an error's message (backends' messages run long)."""
    text = str(error).strip()
    if isinstance(error, KeyError) and len(error.args) == 1:
        text = f"missing key {error.args[0]!r}"
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    if not lines:
        return type(error).__name__
    return lines[0] + (" ..." if len(lines) > 1 else "")


# --- vision-and-language flags (shared)
# The flags of the VQA, grounding and TextVQA recipes (`recipes._vl.Task`).

VL_EPILOG = """
Several devices (docs/distributed.md): `train --distribute data_parallel
[--devices N]` splits every batch over the devices (JAX: also across hosts
with --coordinator_address/--num_processes/--process_id; TensorFlow: one
machine, steps without XLA). The batch is the global one and must split
evenly; the validation items are rounded down to a multiple of the
devices, those left out counted on stderr. A run may resume on another
number of devices.

Everything lives in --output_dir: the settings (run.json), hparams, the
vocabularies, per-epoch checkpoints (written atomically: a killed `train`
resumes from its last checkpoint when run again), history.csv and
TensorBoard logs. Results go to stdout, everything else to stderr; errors
are one line (--debug for the traceback), exit status 2 for a bad command
line, 1 for a failure.
"""


def vl_parser(doc, prog, model_type, commands, output_dir, run_defaults, *, models=None,
              hparams_set_help, hparams_example):
    """A vision-and-language recipe's parser: its command, --output_dir,
    and the run's --model (with `models`), --hparams_set, --hparams, --seed.

    Args:
        doc: the recipe's docstring (first line: the description; the
            rest, then `VL_EPILOG`: the epilog).
        prog, model_type, commands, output_dir: the recipe's.
        run_defaults: the recipe's `RUN_DEFAULTS`.
        models: the --model choices, or None (no --model).
        hparams_set_help: what --hparams_set defaults to.
        hparams_example: an example of --hparams.

    Returns:
        `(parser, run)`: the parser and the run's group, for the recipe's
        other run flags.
    """
    parser = ArgumentParser(hparams_model_types=(model_type,), prog=prog,
                            description=doc.split("\n")[0],
                            epilog=doc.split("\n", 1)[1] + VL_EPILOG)
    add_command_argument(parser, commands)
    parser.add_argument("--output_dir", default=output_dir, type=output_folder)
    run = parser.add_argument_group(
        "the run (fixed when `train` first writes --output_dir; leave out to reuse)")
    if models:
        run.add_argument("--model", choices=models, default=None,
                         help=f"default {run_defaults['model']}")
    run.add_argument("--hparams_set", default=None, help=hparams_set_help)
    run.add_argument("--hparams", default="",
                     help=f'comma-separated overrides, e.g. "{hparams_example}"')
    run.add_argument("--seed", type=int, default=None, help=f"default {run_defaults['seed']}")
    return parser, run


def add_vl_command_flags(parser, metrics, epochs_help, *, title, split_choices,
                         split_commands, predict_batch_size, drawn, output_file_help):
    """The training and distribution groups, then the output group's
    --split (for `split_commands`), --predict_batch_size, --weights,
    --output_file, --num_<drawn> and --images; returns the output group,
    for the recipe's other flags."""
    add_epoch_training_flags(parser, metrics, epochs_help)
    add_distribution_flags(parser)
    out = parser.add_argument_group(title)
    out.add_argument("--split", choices=split_choices, default="test",
                     help=f"{split_commands}: the split (default test)")
    out.add_argument("--predict_batch_size", type=positive_int, default=predict_batch_size)
    out.add_argument("--weights", type=input_file,
                     help="weights to use (default: the newest checkpoint)")
    out.add_argument("--output_file", type=output_file, help=output_file_help)
    out.add_argument(f"--num_{drawn}", type=positive_int, default=8,
                     help=f"visualize: {drawn} to draw")
    out.add_argument("--images", type=input_folder,
                     help="visualize (real data): the folder of the split's images")
    return out


def vl_check(recipe_check):
    """The `check` of a vision-and-language recipe: --distribute only for
    `train`, then `recipe_check(args)`, then a trained run in --output_dir
    for the commands that need one (UsageError)."""
    def check(args):
        check_distribute_for_train(args)
        recipe_check(args)
        if args.command in ("evaluate", "predict", "visualize"):
            require_run(args.output_dir, args.command)

    return check


def add_vl_data_flags(data, records, word_vectors=False):
    """--word_vectors (with `word_vectors`: the text's word embeddings) and
    --skip_invalid (malformed `records` and images without features)."""
    if word_vectors:
        data.add_argument("--word_vectors", type=input_file,
                          help="GloVe-format text file (word v1 ... vd) to initialise the word "
                          "embeddings; its width sets word_dim")
    data.add_argument("--skip_invalid", action="store_true",
                      help=f"skip (and count) malformed {records} and images without features "
                      "instead of stopping at the first")


def add_vl_score_flags(out, annotations_help, output_help):
    """`score`'s --annotations, --results and --output."""
    out.add_argument("--annotations", type=input_file, help=f"score: {annotations_help}")
    out.add_argument("--results", type=input_file,
                     help="score: results JSON [{question_id, answer}]")
    out.add_argument("--output", type=output_file, help=f"score: {output_help}")

# --- sequence-to-sequence flags (shared)
# The flags of the recipes that train a token decoder and decode with beam
# search (translate, caption; docs/translation.md, docs/captioning.md).


def seq2seq_parser(doc, prog, commands, output_dir, hparams_model_types):
    """A sequence-to-sequence recipe's parser: its `command` and
    `--output_dir`, the first line of its module `doc` as the description
    and the rest as the epilog."""
    parser = ArgumentParser(hparams_model_types=hparams_model_types, prog=prog,
                            description=doc.split("\n")[0], epilog=doc.split("\n", 1)[1])
    add_command_argument(parser, commands)
    parser.add_argument("--output_dir", default=output_dir, type=output_folder)
    return parser


def add_seq2seq_run_flags(parser, models, *, model_help, hparams_set_help, hparams_example,
                          seed):
    """The group of the run-defining flags (`--model`, `--hparams_set`,
    `--hparams`, `--seed`); returns it for the recipe's own."""
    run = parser.add_argument_group(
        "the run (fixed when `train` first writes --output_dir; leave out to reuse)")
    run.add_argument("--model", choices=tuple(models), default=None, help=model_help)
    run.add_argument("--hparams_set", default=None, help=hparams_set_help)
    run.add_argument("--hparams", default="",
                     help=f'comma-separated overrides, e.g. "{hparams_example}" (a list '
                     'value keeps its commas: docs/translation.md)')
    run.add_argument("--seed", type=int, default=None, help=f"default {seed}")
    return run


def add_seq2seq_training_flags(parser, metrics, *, train_steps, train_steps_help,
                               steps_per_checkpoint, keep_checkpoints):
    """The group of the training flags (they may change when a run
    resumes): `--train_steps`, `--steps_per_checkpoint`, the budget flags
    (`add_budget_flags`), `--keep_checkpoints`, `--jit`, `--no_eval`,
    `--verbose`; returns it for the recipe's own."""
    train = parser.add_argument_group("training (may change when a run resumes)")
    train.add_argument("--train_steps", type=positive_int, default=train_steps,
                       help=train_steps_help)
    train.add_argument("--steps_per_checkpoint", type=positive_int,
                       default=steps_per_checkpoint)
    add_budget_flags(train, metrics)
    train.add_argument("--keep_checkpoints", type=positive_int, default=keep_checkpoints)
    train.add_argument("--jit", choices=("auto", "on", "off"), default="auto",
                       help="jit_compile for fit (auto: Keras' choice; docs/translation.md)")
    train.add_argument("--no_eval", action="store_true",
                       help="train only; skip the evaluation")
    train.add_argument("--verbose", type=int, default=1, choices=(0, 1, 2),
                       help="Keras fit verbosity: 1 = progress bars (on stderr)")
    return train


def add_decoding_flags(parser, title, *, beam_size, alpha, decode_batch_size, weights_help,
                       outputs, output_file_help):
    """The group of the beam-search flags (`--beam_size`, `--alpha`,
    `--decode_batch_size`, `--weights`, `--output_file` of `decode`,
    `--examples`: evaluate's `outputs` shown on stderr); returns it for the
    recipe's own."""
    dec = parser.add_argument_group(title)
    dec.add_argument("--beam_size", type=positive_int, default=beam_size)
    dec.add_argument("--alpha", type=non_negative_float, default=alpha,
                     help="length penalty exponent (0: plain log-probability)")
    dec.add_argument("--decode_batch_size", type=positive_int, default=decode_batch_size)
    dec.add_argument("--weights", type=input_file, help=weights_help)
    dec.add_argument("--output_file", type=output_file, help=f"decode: {output_file_help}")
    dec.add_argument("--examples", type=non_negative_int, default=5,
                     help=f"evaluate: {outputs} to show (on stderr)")
    return dec


def check_seq2seq_args(args, run_commands):
    """The checks both recipes make: `--distribute` only for `train`, and
    a run in --output_dir for the `run_commands`."""
    check_distribute_for_train(args)
    if args.command in run_commands:
        require_run(args.output_dir, args.command)
