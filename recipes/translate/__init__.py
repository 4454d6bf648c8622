"""Translation with a tensor2tensor-style Transformer (optionally with area attention).

    python -m recipes.translate                 # = train, then evaluate
    python -m recipes.translate train    [flags]
    python -m recipes.translate evaluate [flags]  # sacreBLEU + chrF on the test set
    python -m recipes.translate decode   --input_file in.txt --output_file out.txt
    python -m recipes.translate average  --last 5  # average the last checkpoints
    python -m recipes.translate export   # SavedModel: raw strings -> translations
    python -m recipes.translate record   # the training batches, for `train --recorded`

With no data flags it trains `transformer_tiny_area` (area attention of width 3
in both layers) on the Tatoeba English-German subset that ships with the
package (CC BY 2.0 FR, keras_structattn/tasks/translation/tatoeba_en_de/
NOTICE.md) for 900 steps (about 7 minutes on 2 CPU cores), then decodes
the test split with beam search, scored with sacreBLEU against all
references of each source.

Everything lives in `--output_dir` (docs/translation.md): settings, hparams,
vocabulary, checkpoints (a killed `train` resumes) and TensorBoard logs.
Results go to stdout, the rest to stderr; errors are one line (`--debug`:
the traceback), exit status 2 for a bad command line, 1 for a failure
(docs/recipes.md). `train --distribute data_parallel [--devices N]`
splits every batch over the devices (docs/distributed.md).
"""

import os

from recipes import _cli

DEFAULT_HPARAMS_SET = "transformer_tiny_area"
DEFAULT_LSTM_HPARAMS_SET = "lstm_area_attention_base"
MODEL_TYPES = ("lstm", "transformer")
COMMANDS = ("train", "evaluate", "decode", "average", "export", "record")
TRAINING_COMMANDS = ("train", "record")
SPLITS = ("train", "dev", "test")
# The settings that define a run (saved in run.json, checked on resume) and
# their values for a new run; the hparams set's default depends on --model.
RUN_DEFAULTS = dict(vocab_type="subword", vocab_size=4000, seed=1)


def build_parser():
    """The recipe's flags (no heavy import: checked before TensorFlow loads)."""
    parser, run = _cli.seq2seq_parser(
        __name__, __doc__, COMMANDS, os.path.join("runs", "translate_tatoeba"), MODEL_TYPES,
        MODEL_TYPES, model_help="the model family (default: the hparams set's)",
        hparams_set_help=f"default {DEFAULT_HPARAMS_SET} ({DEFAULT_LSTM_HPARAMS_SET} with "
        "--model lstm); --list_hparams_sets shows them",
        hparams_example="num_area_layers=1", seed=RUN_DEFAULTS["seed"])
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
    train = _cli.add_seq2seq_training_flags(
        parser, ("loss", "accuracy", "bleu"), train_steps=900, steps_per_checkpoint=100,
        train_steps_help="train until the optimizer has taken this many steps",
        keep_checkpoints=5)
    train.add_argument("--recorded", action="store_true",
                       help="train on the batches `record` wrote to DIR/recorded/ "
                       "(no TensorFlow needed, e.g. JAX on an accelerator machine)")
    dec = _cli.add_decoding_flags(
        parser, "decoding", beam_size=4, alpha=0.6, decode_batch_size=64,
        weights_help="weights file to decode with (default: docs/recipes.md, "
        "\"Which weights are used\")", outputs="translations",
        output_file_help="where to write (default stdout)")
    dec.add_argument("--extra_length", type=_cli.non_negative_int, default=20,
                     help="decode at most source length + this many tokens")
    dec.add_argument("--max_input_length", type=_cli.positive_int, default=None,
                     help="longest source in tokens, EOS included (default: the run's "
                     "max_length hparam); longer sources are cut, and counted on stderr")
    dec.add_argument("--input_file", type=_cli.input_file,
                     help="decode: sentences to translate (default stdin)")
    parser.add_argument("--last", type=_cli.positive_int, default=5,
                        help="average: checkpoints to average")
    _cli.add_distribution_flags(parser)
    return parser


def check_args(args):
    """Checks of flags that go together; raises `_cli.UsageError`."""
    _cli.refuse((not args.length_bucket_step > 1,
                 f"--length_bucket_step must be > 1, got {args.length_bucket_step}"))
    for split in SPLITS:
        tsv, source, target = (getattr(args, f"{split}_{kind}")
                               for kind in ("tsv", "source", "target"))
        _cli.refuse(
            (tsv and (source or target),
             f"give either --{split}_tsv or --{split}_source/--{split}_target"),
            (bool(source) != bool(target), f"--{split}_source and --{split}_target go together"))


main = _cli.recipe_main(__name__, build_parser, check_args,
                        run_commands=("evaluate", "decode", "average", "export"))
