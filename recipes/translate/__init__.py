"""Translation with a tensor2tensor-style Transformer (optionally with area attention).

    python -m recipes.translate                 # = train, then evaluate
    python -m recipes.translate train    [flags]
    python -m recipes.translate evaluate [flags]  # sacreBLEU + chrF on the test set
    python -m recipes.translate decode   --input_file in.txt --output_file out.txt
    python -m recipes.translate average  --last 5  # average the last checkpoints
    python -m recipes.translate export   # SavedModel: raw strings -> translations
    python -m recipes.translate record   # the training batches, for `train --recorded`

With no data flags it trains on the Tatoeba English-German subset that ships
with the package (CC BY 2.0 FR, see keras_structattn/tasks/translation/tatoeba_en_de/
NOTICE.md): `transformer_tiny_area` (area attention of width 3 in both
layers), a joint SentencePiece vocabulary, 900 steps (about 7 minutes on
2 CPU cores), then beam-search decoding of the test split, scored with
sacreBLEU against all references of each English source.

Everything lives in `--output_dir`: the run's settings (`run.json`) and
resolved hparams (`hparams.json`), reloaded by the other subcommands, the
vocabulary, weights checkpoints (with the optimizer state, written
atomically: a `train` killed at any moment resumes from its last checkpoint
when run again, and trains on to `--train_steps` steps) and TensorBoard
logs (`tensorboard --logdir DIR/logs`). Results (scores, translations) go
to stdout, everything else to stderr; errors are one line (`--debug` for
the traceback), exit status 2 for a bad command line, 1 for a failure.

Several devices (docs/distributed.md): `train --distribute data_parallel
[--devices N]` splits every batch over the devices (JAX: also across hosts
with --coordinator_address/--num_processes/--process_id; TensorFlow: one
machine, steps without XLA) and gives the losses of one device: the token
batches, whose row counts vary, get rows of padding up to a multiple of
the devices, which change no loss, gradient or accuracy. A run may resume
on another number of devices.
"""

import os

from recipes import _cli

DEFAULT_OUTPUT_DIR = os.path.join("runs", "translate_tatoeba")
DEFAULT_HPARAMS_SET = "transformer_tiny_area"
DEFAULT_LSTM_HPARAMS_SET = "lstm_area_attention_base"
MODEL_TYPES = ("lstm", "transformer")
COMMANDS = ("train", "evaluate", "decode", "average", "export", "record")
# What --early_stopping may watch (each as val_<metric>).
VALIDATION_METRICS = ("loss", "accuracy", "bleu")
TRAINING_COMMANDS = ("train", "record")
SPLITS = ("train", "dev", "test")
# The settings that define a run (saved in run.json, checked on resume) and
# their values for a new run; the hparams set's default depends on --model.
RUN_DEFAULTS = dict(vocab_type="subword", vocab_size=4000, seed=1)


def build_parser():
    """The recipe's flags (no heavy import: checked before TensorFlow loads)."""
    parser = _cli.ArgumentParser(
        hparams_model_types=MODEL_TYPES,
        prog="python -m recipes.translate",
        description=__doc__.split("\n")[0],
        epilog=__doc__.split("\n", 1)[1],
    )
    _cli.add_command_argument(parser, COMMANDS)
    parser.add_argument("--output_dir", default=DEFAULT_OUTPUT_DIR, type=_cli.output_folder)
    run = parser.add_argument_group(
        "the run (fixed when `train` first writes --output_dir; leave out to reuse)"
    )
    run.add_argument("--model", choices=MODEL_TYPES,
                     help="the model family (default: the hparams set's)")
    run.add_argument("--hparams_set", default=None,
                     help=f"default {DEFAULT_HPARAMS_SET} ({DEFAULT_LSTM_HPARAMS_SET} with "
                     "--model lstm); see keras_structattn.training.hparams.registered()")
    run.add_argument("--hparams", default="",
                     help='comma-separated overrides, e.g. "num_area_layers=1"; a list value '
                     'keeps its commas: "area_attention_kinds=encoder_self,encdec"')
    run.add_argument("--seed", type=int, default=None,
                     help=f"default {RUN_DEFAULTS['seed']}")
    run.add_argument("--vocab_type", choices=("subword", "char"), default=None,
                     help=f"default {RUN_DEFAULTS['vocab_type']}")
    run.add_argument("--vocab_size", type=_cli.positive_int, default=None,
                     help=f"subword vocabulary size, default {RUN_DEFAULTS['vocab_size']}")
    data = parser.add_argument_group("data (default: the embedded Tatoeba En-De)")
    data.add_argument("--train_source", type=_cli.input_file,
                      help="source sentences, one per line (.txt/.gz)")
    data.add_argument("--train_target", type=_cli.input_file,
                      help="target sentences aligned with --train_source")
    data.add_argument("--train_tsv", type=_cli.input_file,
                      help="or: a TSV of source<TAB>target pairs")
    for split in ("dev", "test"):
        for kind in ("source", "target", "tsv"):
            data.add_argument(f"--{split}_{kind}", type=_cli.input_file)
    data.add_argument("--length_bucket_step", type=float, default=1.5,
                      help="> 1; t2t uses 1.1; coarser buckets mean fewer XLA compiles")
    train = parser.add_argument_group("training (may change when a run resumes)")
    train.add_argument("--train_steps", type=_cli.positive_int, default=900,
                       help="train until the optimizer has taken this many steps")
    train.add_argument("--steps_per_checkpoint", type=_cli.positive_int, default=100)
    _cli.add_budget_flags(train, VALIDATION_METRICS)
    train.add_argument("--keep_checkpoints", type=_cli.positive_int, default=5)
    train.add_argument(
        "--jit", choices=("auto", "on", "off"), default="auto",
        help="jit_compile for fit; auto = Keras' choice: XLA on GPU/TPU, not on "
        "CPU, where it is slower for this model (benchmarks/translate.py)",
    )
    train.add_argument("--recorded", action="store_true",
                       help="train on the batches `record` wrote to DIR/recorded/ "
                       "(no TensorFlow needed, e.g. JAX on an accelerator machine)")
    train.add_argument("--no_eval", action="store_true",
                       help="train only; skip the test-set evaluation")
    train.add_argument("--verbose", type=int, default=1, choices=(0, 1, 2),
                       help="Keras fit verbosity: 1 = progress bar (on stderr)")
    dec = parser.add_argument_group("decoding")
    dec.add_argument("--beam_size", type=_cli.positive_int, default=4)
    dec.add_argument("--alpha", type=_cli.non_negative_float, default=0.6)
    dec.add_argument("--extra_length", type=_cli.non_negative_int, default=20,
                     help="decode at most source length + this many tokens")
    dec.add_argument("--max_input_length", type=_cli.positive_int, default=None,
                     help="longest source in tokens, EOS included (default: the run's "
                     "max_length hparam); longer sources are cut, and counted on stderr")
    dec.add_argument("--decode_batch_size", type=_cli.positive_int, default=64)
    dec.add_argument("--weights", type=_cli.input_file,
                     help="weights file to decode with (default: the averaged weights "
                     "if they average the newest checkpoint, else the newest checkpoint)")
    dec.add_argument("--input_file", type=_cli.input_file,
                     help="decode: sentences to translate (default stdin)")
    dec.add_argument("--output_file", type=_cli.output_file,
                     help="decode: where to write (default stdout)")
    dec.add_argument("--examples", type=_cli.non_negative_int, default=5,
                     help="evaluate: translations to show (on stderr)")
    parser.add_argument("--last", type=_cli.positive_int, default=5,
                        help="average: checkpoints to average")
    _cli.add_distribution_flags(parser)
    return parser


def check_args(args):
    """Checks of flags that go together; raises `_cli.UsageError`."""
    if not args.length_bucket_step > 1:
        raise _cli.UsageError(
            f"--length_bucket_step must be > 1, got {args.length_bucket_step}"
        )
    for split in SPLITS:
        tsv = getattr(args, f"{split}_tsv")
        source = getattr(args, f"{split}_source")
        target = getattr(args, f"{split}_target")
        if tsv and (source or target):
            raise _cli.UsageError(
                f"give either --{split}_tsv or --{split}_source/--{split}_target"
            )
        if bool(source) != bool(target):
            raise _cli.UsageError(f"--{split}_source and --{split}_target go together")
    if args.command != "train" and args.distribute != "none":
        raise _cli.UsageError(f"--distribute is for train; {args.command} runs on one device")
    if args.command not in TRAINING_COMMANDS:
        from recipes._run import RunFolder

        RunFolder(args.output_dir).require_run(args.command)


def main(argv=None):
    """Runs the recipe: `python -m recipes.translate [command] [flags]`.

    Returns:
        What the command returns (used by tests).
    """
    return _cli.execute(build_parser(), argv, _cli.run_commands_of(__name__),
                        check=check_args)
