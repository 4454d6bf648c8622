"""The command-line layer every recipe shares: flags, errors, output streams.

A recipe's `__init__.py` builds its flags with `ArgumentParser` and the flag
types below, with no heavy import (a bad flag is refused at once); its
`main(argv)` calls `execute`, which runs the command with `sys.stdout`
pointed at stderr: results are written with `emit`, the only writer to the
real stdout. `entry_point` turns exceptions into one line on stderr,
`error: <message>`, and an exit status: 2 for usage errors (flags or the
files they name that do not fit), 1 for failures while working, 130 for
Ctrl-C; `--debug` shows the traceback. Warnings are one line each too.
"""

import argparse
import contextlib
import os
import sys
import warnings

# TensorFlow's C++ start-up chatter is not status a recipe's user needs;
# set before any recipe imports TensorFlow.
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

USAGE_EXIT = 2
FAILURE_EXIT = 1
INTERRUPTED_EXIT = 130
RUN_FILE = "run.json"  # a run folder holds a run once this is in it (`recipes._run`)
# keras_structattn.training.precision.CHOICES, without importing Keras.
PRECISIONS = ("auto", "float32", "mixed_bfloat16")
RUN_GROUP = "the run (fixed when `train` first writes --output_dir; leave out to reuse)"

_results = None  # the real stdout while a command runs (see `execute`)


class UsageError(ValueError):
    """A command line that cannot be run as given: exit status 2 (a
    `ValueError`, so in-process callers of `main(argv)` can catch it)."""


class ArgumentParser(argparse.ArgumentParser):
    """Raises `UsageError`; adds `--debug`, and `--list_hparams_sets` for
    `hparams_model_types`. `doc`: description (first line) and epilog."""

    def __init__(self, doc=None, hparams_model_types=None, **kwargs):
        if doc:
            kwargs.update(description=doc.split("\n")[0], epilog=doc.split("\n", 1)[1])
        super().__init__(formatter_class=argparse.RawDescriptionHelpFormatter, **kwargs)
        self.add_argument("--debug", action="store_true",
                          help="on an error, show the Python traceback")
        if hparams_model_types:
            self.add_argument("--list_hparams_sets", action=_ListHparamsSets,
                              model_types=tuple(hparams_model_types),
                              help="print the hparams sets this recipe takes (name, "
                              "model_type, architecture; one per line) and exit")

    def error(self, message):
        raise UsageError(f"{message} (see {self.prog} --help)")

    # Which commands read a flag, for `<command> --help` (`command_help`):
    # `command_flags` {command: dests} lists a command's flags outright
    # (`score` reads no run); else by group (the run's, data and training
    # groups), else by the commands a flag's help names first ("evaluate /
    # visualize: ..."; train evaluates too), else every command.
    command_flags = {}
    RUN_READERS = ("train", "record")  # and the recipe's run commands (`recipe_main`)
    run_commands = ()

    def parse_known_args(self, args=None, namespace=None):
        argv = list(sys.argv[1:] if args is None else args)
        commands = self._commands()
        if any(a in ("-h", "--help") for a in argv):
            named = [a for a in argv if a in commands and a != "curves"]
            if named:
                self._print_message(self.command_help(named[0]), sys.stdout)
                self.exit(0)
        return super().parse_known_args(args, namespace)

    def _commands(self):
        for action in self._actions:
            if action.dest == "command":
                return tuple(action.choices or ())
        return ()

    def reads(self, command, action, group):
        """Whether `command` reads the flag of `action` (in `group`)."""
        if action.dest in ("help", "debug"):
            return True
        if command in self.command_flags:
            return action.dest in self.command_flags[command]
        makes_runs = command in self.RUN_READERS
        uses_run = makes_runs or command in self.run_commands
        title = group.title or ""
        if action.dest in ("command", "runs"):
            return False
        if action.dest == "output_dir" or title == RUN_GROUP:
            return uses_run
        if title.startswith(("training", "distribution")):
            return makes_runs
        if title.startswith("data"):
            return uses_run
        named = _commands_named(action.help or "", self._commands())
        if named:
            return command in named or (command == "train" and "evaluate" in named)
        if title in self._commands():  # a command's own group ("extract"): the commands
            owners = {title}               # its flags name ("extract / decode: ...")
            for other in group._group_actions:
                owners.update(_commands_named(other.help or "", self._commands()))
            return command in owners
        return True

    def command_help(self, command):
        """The help of `command`: its usage and only the flags it reads."""
        sub = argparse.ArgumentParser(prog=f"{self.prog} {command}", description=self.description,
                                      usage=f"{self.prog} {command} [flags]",
                                      formatter_class=self.formatter_class, add_help=False,
                                      epilog=f"All the recipe's flags: {self.prog} --help")
        for group in self._action_groups:
            kept = [a for a in group._group_actions if self.reads(command, a, group)]
            if kept:
                target = sub.add_argument_group(group.title, group.description)
                for action in kept:
                    target._add_action(action)
        return sub.format_help()


def _commands_named(text, commands):
    """The commands a help text begins with: "evaluate / visualize: ..."
    (an aside in brackets allowed); () if it begins otherwise."""
    head, colon, _ = text.partition(":")
    if not colon:
        return ()
    words = [w.split("(")[0].strip() for w in head.split("/")]
    return tuple(words) if words and all(w in commands for w in words) else ()


class _ListHparamsSets(argparse.Action):
    """Prints `name<TAB>model_type<TAB>architecture` per set and exits 0."""

    def __init__(self, option_strings, dest, model_types, **kwargs):
        super().__init__(option_strings, dest, nargs=0, default=argparse.SUPPRESS, **kwargs)
        self.model_types = model_types

    def __call__(self, parser, namespace, values, option_string=None):
        from models import registry  # noqa: PLC0415 (keras-free, only when listing)

        for name in registry.registered(self.model_types):
            print(f"{name}\t{registry.model_type(name)}\t{registry.architecture(name) or '-'}")
        parser.exit(0)


# Flag types: their ArgumentTypeErrors become "argument --flag: ..." usage errors.


def _number_type(convert, accept, requirement):
    """The type of a number `convert(text)` that `accept`s, else "must be ..."."""
    noun = "an integer" if convert is int else "a number"

    def parse(text):
        try:
            value = convert(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected {noun}, got {text!r}") from None
        if not accept(value):
            shown = value if convert is int else text
            raise argparse.ArgumentTypeError(f"must be {requirement}, got {shown}")
        return value

    return parse


positive_int = _number_type(int, lambda value: value >= 1, ">= 1")
non_negative_int = _number_type(int, lambda value: value >= 0, ">= 0")
non_negative_float = _number_type(float, lambda value: 0 <= value < float("inf"),
                                  "a finite number >= 0")
# These refuse what non_negative_float refuses first, with its message.
positive_float = _number_type(non_negative_float, lambda value: value > 0, "> 0")
unit_interval = _number_type(non_negative_float, lambda value: value <= 1, "in [0, 1]")


def _existing(kind, access):
    """The type of a path to an existing, readable `kind` (file or folder)."""
    other = "folder" if kind == "file" else "file"

    def parse(text):
        if not os.path.exists(text):
            raise argparse.ArgumentTypeError(f"no such {kind}: {text}")
        if os.path.isdir(text) != (kind == "folder"):
            raise argparse.ArgumentTypeError(f"{text} is a {other}, not a {kind}")
        if not os.access(text, access):
            raise argparse.ArgumentTypeError(f"{text} is not readable")
        return text

    return parse


input_file = _existing("file", os.R_OK)
input_folder = _existing("folder", os.R_OK | os.X_OK)


def input_file_or_folder(text):
    """A path to an existing, readable file or folder."""
    return input_folder(text) if os.path.isdir(text) else input_file(text)


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


# ------------------------------------------------------------ flag groups


def add_command_argument(parser, commands):
    """The `command` (default `train`; or `curves RUN [RUN ...]`)."""
    parser.add_argument("command", nargs="?", default="train", choices=(*commands, "curves"))
    parser.add_argument("runs", nargs="*", metavar="RUN",
                        help="curves: the run folders to draw on one figure")


def early_stopping_type(metrics):
    """The type of `--early_stopping METRIC[:PATIENCE]`: `(metric, patience)`."""
    def parse(text):
        metric, _, patience = text.partition(":")
        if metric not in metrics:
            raise argparse.ArgumentTypeError(
                f"{metric!r} is not a validation metric of this recipe: {', '.join(metrics)}")
        return metric, positive_int(patience) if patience else 3

    return parse


def add_budget_flags(group, metrics, train_steps=False):
    """How long `train` runs (docs/recipes.md, "Budgets"); `--train_steps`
    only with `train_steps` (recipes counting epochs)."""
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


def _add_fit_flags(train, keep_checkpoints, jit_help="", no_eval_help=""):
    """`--keep_checkpoints`, `--jit`, `--no_eval` and `--verbose`."""
    train.add_argument("--keep_checkpoints", type=positive_int, default=keep_checkpoints)
    train.add_argument("--jit", choices=("auto", "on", "off"), default="auto",
                       help=f"jit_compile for fit (auto: Keras' choice{jit_help})")
    train.add_argument("--no_eval", action="store_true", help=f"train only{no_eval_help}")
    train.add_argument("--verbose", type=int, default=1, choices=(0, 1, 2),
                       help="1 = a progress bar over the run's optimizer steps, 2 = one line "
                            "per checkpoint (on stderr)")


def add_distribution_flags(parser):
    """`--distribute`, `--devices` and the JAX multi-process flags."""
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
    for flag, kind, metavar, what, variable in (
            ("coordinator_address", None, "HOST:PORT", "process 0's address", "JOB_ADDRESSES"),
            ("num_processes", positive_int, None, "the process count", "NUM_PROCESSES"),
            ("process_id", non_negative_int, None, "this process, 0..", "PROCESS_ID")):
        group.add_argument(f"--{flag}", type=kind, default=None, metavar=metavar,
                           help=f"JAX multi-process: {what} (or KERAS_DISTRIBUTION_{variable})")


def _check_distribution(args):
    """Checks the distribution flags; sets JAX's CPU device count."""
    if not hasattr(args, "distribute"):
        return
    several = (args.num_processes or 1) > 1
    if args.distribute == "none":
        for flag in ("devices", "coordinator_address", "num_processes", "process_id"):
            if getattr(args, flag) is not None:
                raise UsageError(f"--{flag} needs --distribute data_parallel")
        return
    refuse((several and args.devices, "--devices applies to one process; with "
            "--num_processes, every device of every process is used"),
           (several and (args.process_id or 0) >= args.num_processes,
            f"--process_id {args.process_id} must be below --num_processes {args.num_processes}"))
    flags = os.environ.get("XLA_FLAGS", "")
    if args.devices and "xla_force_host_platform_device_count" not in flags:
        # JAX's CPU shows this many devices (GPUs are unaffected); JAX reads
        # the flag when it starts, after this point.
        os.environ["XLA_FLAGS"] = (
            f"{flags} --xla_force_host_platform_device_count={args.devices}".strip())


# ------------------------------------------------------------------ checks


def given(args, *names):
    """Whether any of the flags `names` (their dests) is given."""
    return any(getattr(args, name) for name in names)


def refuse(*rules):
    """Raises `UsageError(message)` of the first refused `(refused, message)`."""
    for refused, message in rules:
        if refused:
            raise UsageError(message)


def usage(function, *args):
    """`function(*args)`, its ValueError as a usage error."""
    try:
        return function(*args)
    except ValueError as error:
        raise UsageError(str(error)) from None


def emit(text=""):
    """Writes a result line to stdout (the real one while a command runs)."""
    stream = _results or sys.stdout
    stream.write(f"{text}\n")
    stream.flush()


# ---------------------------------------------------------------- running


def execute(parser, argv, run, check=None):
    """A recipe's `main`: parses `argv`, runs the light `check(args)`
    (raising `UsageError`), then returns `run(args)`, the command."""
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


TRAINING_COMMANDS = ("train", "record")  # the commands that make a run


def data_actions(parser):
    """The flags that name a run's data (`remember_data`): those of the
    parser's "data ..." groups that take a value, but the Shapes world's
    `--world_*` (the world's own settings file remembers them)."""
    return [action for group in parser._action_groups
            if (group.title or "").startswith("data")
            for action in group._group_actions
            if action.nargs != 0 and not action.dest.startswith("world_")]


def remember_data(parser, args):
    """Gives the flags of the run's data that `args` leaves out the run's values.

    A new run (`train`, `record`) saves the data flags it was given in
    run.json's "data" (paths made absolute, the other values as given:
    formats, splits...), `args._data`; every later command on the run takes
    them unless it names others. A remembered path is checked again (the
    file may have gone since): a usage error naming the flag and run.json.
    """
    actions = data_actions(parser)
    path = os.path.join(args.output_dir, RUN_FILE)
    saved = None
    if os.path.exists(path):
        import json

        with open(path, encoding="utf-8") as f:
            saved = json.load(f).get("data")
    if saved is not None:
        for action in actions:
            if action.dest not in saved or getattr(args, action.dest) != action.default:
                continue
            value = saved[action.dest]
            if action.type is not None:
                try:
                    value = action.type(value)
                except (argparse.ArgumentTypeError, ValueError) as error:
                    raise UsageError(f"--{action.dest} {saved[action.dest]} (the run's data, "
                                     f"from {path}): {error}") from None
            setattr(args, action.dest, value)
    paths = (input_file, input_folder, input_file_or_folder)
    args._data = {action.dest: (os.path.abspath(getattr(args, action.dest))
                                if action.type in paths else getattr(args, action.dest))
                  for action in actions if getattr(args, action.dest) != action.default}


def check_run_recipe(parser, args):
    """A usage error if --output_dir holds another recipe's run (its
    hparams.json has a `model_type` this recipe does not take)."""
    path = os.path.join(args.output_dir, "hparams.json")
    listing = [a for a in parser._actions if isinstance(a, _ListHparamsSets)]
    if not listing or not os.path.exists(os.path.join(args.output_dir, RUN_FILE)):
        return
    import json

    try:
        with open(path, encoding="utf-8") as f:
            model_type = json.load(f).get("model_type")
    except (OSError, ValueError):
        return  # the run's own loading names what is wrong with it
    if model_type is not None and model_type not in listing[0].model_types:
        raise UsageError(f"{args.output_dir} holds a {model_type} run (its hparams.json), not a "
                         f"run of {parser.prog}: use another --output_dir")


def recipe_main(package, build_parser, check, run_commands):
    """A recipe package's `main(argv)`: `execute` with the checks (and a
    trained run for `run_commands`; the run's data flags for those left
    out, `remember_data`), then `<package>.commands.run(args)`, the heavy
    import, once the flags are checked."""
    parser = None

    def checks(args):
        if args.command != "train" and args.distribute != "none":
            raise UsageError(f"--distribute is for train; {args.command} runs on one device")
        if args.command in run_commands or args.command in TRAINING_COMMANDS:
            check_run_recipe(parser, args)
            remember_data(parser, args)
        check(args)
        if args.command in run_commands and not os.path.exists(
                os.path.join(args.output_dir, RUN_FILE)):
            raise UsageError(f"no trained run in {args.output_dir} (no {RUN_FILE}): run "
                             f"`train` with this --output_dir before `{args.command}`")

    def run(args):
        import importlib

        with contextlib.nullcontext() if args.debug else _native_start_up_lines_dropped():
            commands = importlib.import_module(f"{package}.commands")
        return commands.run(args)

    def main(argv=None):
        nonlocal parser
        parser = build_parser()
        parser.run_commands = tuple(run_commands)
        return execute(parser, argv, run, check=checks)

    return main


def curves_command(args):
    """`curves RUN [RUN ...]`: one figure of several runs, to `--output_file`
    (default `curves.png`); prints its path."""
    from keras_structattn.training import curves

    if not args.runs:
        raise UsageError("curves needs one or more run folders: curves RUN [RUN ...]")
    runs = []
    for folder in args.runs:
        if not os.path.isdir(folder):
            raise UsageError(f"no such run folder: {folder}")
        panels, best = curves.read_run(folder)
        if not panels:
            raise UsageError(f"{folder} has no history.csv: train it first")
        runs.append((os.path.normpath(folder), panels, best))
    path = curves.draw(runs, getattr(args, "output_file", None) or curves.CURVES_FILE)
    emit(path)
    return path


# TensorFlow's C++ libraries log INFO lines while they load (CPU features,
# CUDA probing), before absl's logging starts, so TF_CPP_MIN_LOG_LEVEL no
# longer silences them (TensorFlow 2.21): absl's format, severity I.
_START_UP_LINE = (
    "WARNING: All log messages before absl::InitializeLog() is called are written to STDERR",
    "I0000 ",
)


@contextlib.contextmanager
def _native_start_up_lines_dropped():
    """Captures file descriptor 2, then writes back all but the start-up lines."""
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
    """Runs `main(argv)` as a command-line tool and exits (module docstring)."""
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


# ------------------------------------------- vision-and-language recipes
# The flags of the VQA, grounding and TextVQA recipes (`recipes._vl.Task`).

VL_EPILOG = """
`train --distribute data_parallel [--devices N]` splits every batch (the
global one: it must split evenly) over the devices (docs/distributed.md);
a run may resume on another number of devices.

Everything lives in --output_dir: settings (run.json), hparams,
vocabularies, checkpoints (a killed `train` resumes), history.csv and
TensorBoard logs. Results go to stdout, the rest to stderr; errors are one
line (--debug: the traceback), exit status 2 for a bad command line, 1 for
a failure.
"""


def vl_parser(package, doc, commands, run_defaults, *, models=None, hparams_set_help,
              hparams_example, metrics, epochs_help, predict_batch_size, output_file_help,
              title="evaluation, prediction and scoring", split_choices=("train", "val", "test"),
              split_commands="evaluate / visualize", drawn="questions"):
    """The parser of `package` recipes.<name> (<name>: the model_type and
    --output_dir; `models` None: no --model); returns `(parser, run, data,
    out)`, with the groups for the recipe's own flags."""
    name = package.split(".")[-1]
    parser, run = _recipe_parser(
        package, doc + VL_EPILOG, commands, os.path.join("runs", f"{name}_shapes_world"),
        (name,), models and {"choices": models, "help": f"default {run_defaults['model']}"},
        hparams_set_help, f'comma-separated overrides, e.g. "{hparams_example}"',
        run_defaults["seed"])
    data = parser.add_argument_group("data (default: generated Shapes world)")
    train = parser.add_argument_group("training (may change when a run resumes)")
    train.add_argument("--epochs", type=positive_int, default=None, help=epochs_help)
    add_budget_flags(train, metrics, train_steps=True)
    train.add_argument("--batch_size", type=positive_int, default=None,
                       help="default: the hparams' batch_size")
    _add_fit_flags(train, keep_checkpoints=3,
                   jit_help=", with XLA on TensorFlow too: docs/performance.md")
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
    return parser, run, data, out


# keras_structattn.data.feature_formats.FORMATS (checked by a test; not
# imported: the flags are parsed before Keras loads).
FEATURE_FORMATS = ("bottom_up_npz", "openvqa", "bottom_up_tsv", "mmf_npy", "mmf_lmdb",
                   "butd_hdf5", "cocobu")


def add_features_format_flags(data, image_sizes=True):
    """`--features_format` and (with `image_sizes`) `--image_sizes`, for
    region features."""
    data.add_argument("--features_format", choices=FEATURE_FORMATS, default=None,
                      help="the layout of the region features (default: detected from what "
                      "is there, and refused where two could fit): bottom-up .npz folder, "
                      "OpenVQA's channels-first .npz, bottom-up .tsv, mmf .npy + _info.npy, "
                      "mmf LMDB, bottom-up-attention-vqa .hdf5 + _imgid2idx.pkl, "
                      "self-critical cocobu_att + cocobu_box (docs/recipes.md, \"Feature "
                      "formats\")")
    if not image_sizes:
        return
    data.add_argument("--image_sizes", type=input_file,
                      help="COCO JSON with the images' sizes (images: id, width, height: "
                      "instances or captions), for pixel boxes stored without them "
                      "(self-critical's cocobu_box)")


def add_vl_data_flags(data, records, word_vectors=False):
    """--word_vectors (with `word_vectors`) and --skip_invalid (of `records`)."""
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


# -------------------------------------------- sequence-to-sequence recipes
# The flags of the recipes that train a token decoder and decode with beam
# search (translate, caption; docs/translation.md, docs/captioning.md).


def seq2seq_parser(package, doc, commands, output_dir, hparams_model_types, models, *,
                   model_help, hparams_set_help, hparams_example, seed):
    """A sequence-to-sequence recipe's parser and its run group."""
    return _recipe_parser(
        package, doc, commands, output_dir, hparams_model_types,
        {"choices": tuple(models), "help": model_help}, hparams_set_help,
        f'comma-separated overrides, e.g. "{hparams_example}" (a list value keeps its '
        'commas: docs/translation.md)', seed)


def _recipe_parser(package, doc, commands, output_dir, hparams_model_types, model,
                   hparams_set_help, hparams_help, seed):
    """The parser with the command and --output_dir, and the run group
    (`model`: --model's choices and help, or None for no --model)."""
    parser = ArgumentParser(doc, hparams_model_types=hparams_model_types,
                            prog=f"python -m {package}")
    add_command_argument(parser, commands)
    parser.add_argument("--output_dir", default=output_dir, type=output_folder,
                        help=f"the run folder: settings, hparams, vocabularies, checkpoints, "
                        f"results (default {output_dir})")
    run = parser.add_argument_group(RUN_GROUP)
    if model:
        run.add_argument("--model", default=None, **model)
    run.add_argument("--hparams_set", default=None, help=hparams_set_help)
    run.add_argument("--hparams", default="", help=hparams_help)
    run.add_argument("--seed", type=int, default=None, help=f"default {seed}")
    run.add_argument("--precision", choices=PRECISIONS, default=None,
                     help="float32 or mixed_bfloat16 (weights float32, compute bfloat16); "
                     "default auto: bfloat16 where it trains faster on this machine "
                     "(docs/performance.md)")
    return parser, run


def add_seq2seq_training_flags(parser, metrics, *, train_steps, train_steps_help,
                               steps_per_checkpoint, keep_checkpoints):
    """Adds and returns the training group (early stopping on `metrics`)."""
    train = parser.add_argument_group("training (may change when a run resumes)")
    train.add_argument("--train_steps", type=positive_int, default=train_steps,
                       help=train_steps_help)
    train.add_argument("--steps_per_checkpoint", type=positive_int,
                       default=steps_per_checkpoint)
    add_budget_flags(train, metrics)
    _add_fit_flags(train, keep_checkpoints, jit_help="; docs/translation.md",
                   no_eval_help="; skip the evaluation")
    return train


def add_decoding_flags(parser, title, *, beam_size, alpha, decode_batch_size, weights_help,
                       outputs, output_file_help):
    """Adds and returns the `title` group of beam search (`--examples`:
    evaluate's `outputs` shown on stderr)."""
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
