"""Visual question answering: MCAN, MCAN+PA, MUAN, Transformer(+CATT); official VQA accuracy.

    python -m recipes.vqa                    # = train, then evaluate on the test split
    python -m recipes.vqa train     [--model mcan|mcan_pa|muan|catt|transformer] [flags]
    python -m recipes.vqa evaluate  [--split test]  # accuracy per question type
    python -m recipes.vqa predict   --questions Q.json --features F [--output_file R.json]
    python -m recipes.vqa score     --questions Q.json --annotations A.json --results R.json
    python -m recipes.vqa visualize [--num_questions 8]   # attention over the regions, PNG

Models (`models/vqa/mcan.py`, `models/vqa/muan.py`; docs/vqa.md): MCAN (Yu et al.,
2019, arXiv:1906.10770), MCAN+PA (Mao et al., 2022, IEEE TNNLS: positional
word, object and multimodal attention) and MUAN (Yu et al., 2019,
arXiv:1908.04107: gated self-attention over [question; regions]),
Transformer+CATT (`--model catt`; Yang et al., 2021, arXiv:2103.03493:
LXMERT-style language, vision and cross-modality layers with in-sample and
cross-sample attention, trained from scratch; its word and image
dictionaries are fitted by K-means over the training split before
training, or left uniform with --dictionary_init uniform, the paper's
"w/o Init") and its non-CATT twin (`--model transformer`).

With no data flags it generates Shapes world VQA (keras_structattn.data.
shapes_world: deterministic scenes with count, colour, shape, existence
and relation questions, 10 answers each, cached under DIR/shapes_world),
trains `<model>_tiny` (`catt_vqa_tiny[_nocatt]` for catt and transformer)
on its region features, and prints the accuracy per question type next
to the per-type majority answer of the training split.

Real VQA v2: --questions_train/--annotations_train (and _val, _test) in
the official JSON format, --features: a folder of per-image .npz files
(bottom-up style: `features` [N, C], `boxes` [N, 4], `image_w`, `image_h`),
up to --max_regions regions each; --word_vectors: a local GloVe-format
text file to initialise the word embeddings (learned from scratch
otherwise). Answers seen at least --min_answer_count times in the training
and validation annotations (MCAN: more than 8 times over train+val, 3129
answers on VQA v2) form the answer vocabulary; soft scores as MCAN (0.3 per matching
human answer, at most 1).

Several devices (docs/distributed.md): `train --distribute data_parallel
[--devices N]` splits every batch over the devices (JAX: also across hosts
with --coordinator_address/--num_processes/--process_id; TensorFlow: one
machine, steps without XLA). The batch is the global one and must split
evenly; the validation questions are rounded down to a multiple of the
devices, those left out counted on stderr. A run may resume on another
number of devices.

Everything lives in --output_dir: the settings (run.json), hparams, the
question and answer vocabularies, per-epoch checkpoints (written
atomically: a killed `train` resumes from its last checkpoint when run
again), history.csv and TensorBoard logs. Results go to stdout, everything
else to stderr; errors are one line (--debug for the traceback), exit
status 2 for a bad command line, 1 for a failure.
"""

import os

from recipes import _cli
from recipes import _world

DEFAULT_OUTPUT_DIR = os.path.join("runs", "vqa_shapes_world")
MODELS = ("mcan", "mcan_pa", "muan", "catt", "transformer")
COMMANDS = ("train", "evaluate", "predict", "score", "visualize")
# What --early_stopping may watch (each as val_<metric>).
VALIDATION_METRICS = ("loss", "soft_accuracy", "accuracy")
SPLITS = ("train", "val", "test")
# The settings that define a run (saved in run.json, checked on resume).
RUN_DEFAULTS = dict(model="mcan", hparams_set=None, seed=1, min_answer_count=9,
                    dictionary_init="kmeans")
# The hparams set of a model: on Shapes world / on real data (the paper's).
WORLD_SETS = {"mcan": "mcan_tiny", "mcan_pa": "mcan_pa_tiny", "muan": "muan_tiny",
              "catt": "catt_vqa_tiny", "transformer": "catt_vqa_tiny_nocatt"}
PAPER_SETS = {"mcan": "mcan_small", "mcan_pa": "mcan_pa_small", "muan": "muan_base",
              "catt": "catt_vqa_small", "transformer": "catt_vqa_small_nocatt"}
# The `architecture` of each model's hparams sets (the twin is a CATT set
# with dictionary_size=0).
ARCHITECTURES = {"transformer": "catt"}
DICTIONARY_INITS = ("kmeans", "uniform")


def build_parser():
    """The recipe's flags (no heavy import: checked before TensorFlow loads)."""
    parser, run = _cli.vl_parser(
        __doc__, "python -m recipes.vqa", "vqa", COMMANDS, DEFAULT_OUTPUT_DIR, RUN_DEFAULTS,
        models=MODELS, hparams_example="num_layers=4,qk_gate=False",
        hparams_set_help="default <model>_tiny on Shapes world, the paper's set on real data "
        f"({', '.join(PAPER_SETS.values())})")
    run.add_argument("--min_answer_count", type=_cli.positive_int, default=None,
                     help="answers (normalised multiple_choice_answer) seen fewer times in "
                     f"the training and validation annotations are left out (default "
                     f"{RUN_DEFAULTS['min_answer_count']}: MCAN's 'more than 8')")
    run.add_argument("--dictionary_init", choices=DICTIONARY_INITS, default=None,
                     help="CATT: the dictionaries' initialisation before training: K-means "
                     "(default) or uniform, the paper's 'w/o Init' (docs/vqa.md)")

    data = parser.add_argument_group("data (default: generated Shapes world)")
    for split in SPLITS:
        data.add_argument(f"--questions_{split}", type=_cli.input_file,
                          help=f"VQA v2 questions JSON of the {split} split")
        data.add_argument(f"--annotations_{split}", type=_cli.input_file,
                          help=f"VQA v2 annotations JSON of the {split} split")
    data.add_argument("--features", type=_cli.input_file_or_folder,
                      help="region features of every split: a folder of per-image .npz "
                      "(features [N, C], boxes [N, 4], image_w, image_h), or one .npz/.h5")
    for split in SPLITS:
        data.add_argument(f"--{split}_features", type=_cli.input_file_or_folder,
                          help=f"the features of the {split} split (default --features)")
    data.add_argument("--word_vectors", type=_cli.input_file,
                      help="GloVe-format text file (word v1 ... vd) to initialise the word "
                      "embeddings; its width sets word_dim")
    data.add_argument("--skip_invalid", action="store_true",
                      help="skip (and count) malformed questions and images without "
                      "features instead of stopping at the first")
    _world.add_world_flags(data)

    out = _cli.add_vl_command_flags(
        parser, VALIDATION_METRICS, "default: the hparams' epochs (13 for the paper's sets)",
        title="evaluation, prediction and scoring",
        split_choices=SPLITS, split_commands="evaluate / visualize",
        predict_batch_size=256, drawn="questions",
        output_file_help="predict: results JSON (default: stdout, one "
        "`question_id<TAB>answer` line per question)")
    out.add_argument("--questions", type=_cli.input_file,
                     help="predict / score: VQA v2 questions JSON")
    out.add_argument("--annotations", type=_cli.input_file,
                     help="score: VQA v2 annotations JSON")
    out.add_argument("--results", type=_cli.input_file,
                     help="score: results JSON [{question_id, answer}]")
    out.add_argument("--output", type=_cli.output_file,
                     help="score: also write the scores as the official code reports them")
    out.add_argument("--normalization", choices=("official", "corrected"), default="official",
                     help="answer normalisation of the accuracy: the official code's, quirks "
                     "included (default), or corrected (docs/vqa_metrics.md)")
    return parser


def data_flags_given(args):
    """True when the command names real data (not the Shapes world default)."""
    return any(getattr(args, f"questions_{s}") for s in SPLITS)


def check_args(args):
    """Checks of flags that go together; raises `_cli.UsageError`."""
    for split in SPLITS:
        if getattr(args, f"annotations_{split}") and not getattr(args, f"questions_{split}"):
            raise _cli.UsageError(f"--annotations_{split} needs --questions_{split}")
    if args.questions_train and not args.annotations_train:
        raise _cli.UsageError("--questions_train needs --annotations_train (the answers)")
    features_given = args.features or any(getattr(args, f"{s}_features") for s in SPLITS)
    if args.command == "score":
        if not (args.questions and args.annotations and args.results):
            raise _cli.UsageError("score needs --questions, --annotations and --results")
        return
    if args.command == "predict" and not (args.questions and features_given):
        raise _cli.UsageError("predict needs --questions (VQA v2 questions JSON) and "
                              "--features (their region features)")
    if data_flags_given(args) and not features_given:
        raise _cli.UsageError("real questions need their region features: give --features")


def main(argv=None):
    """Runs `python -m recipes.vqa [command] [flags]`; returns what the command returns."""
    return _cli.execute(build_parser(), argv, _cli.run_commands_of(__name__),
                        check=_cli.vl_check(check_args))
