"""Visual question answering: MCAN, MCAN+PA, MUAN, Transformer(+CATT); official VQA accuracy.

    python -m recipes.vqa                    # = train, then evaluate on the test split
    python -m recipes.vqa train     [--model mcan|mcan_pa|muan|catt|transformer] [flags]
    python -m recipes.vqa evaluate  [--split test]  # accuracy per question type
    python -m recipes.vqa predict   --questions Q.json --features F [--output_file R.json]
    python -m recipes.vqa score     --questions Q.json --annotations A.json --results R.json
    python -m recipes.vqa visualize [--num_questions 8]   # attention over the regions, PNG

Models (`models/vqa/`; docs/vqa.md): MCAN (arXiv:1906.10770), MCAN+PA
(positional attention), MUAN (arXiv:1908.04107) and Transformer+CATT
(`--model catt`, arXiv:2103.03493; its dictionaries fitted by K-means
before training, or uniform with --dictionary_init uniform) and its
non-CATT twin (`--model transformer`).

With no data flags it generates Shapes world VQA (cached under
DIR/shapes_world), trains `<model>_tiny` on its region features and prints
the accuracy per question type next to the per-type majority answer of
the training split. Real VQA v2: the official questions and annotations
JSON and per-image region features (--features); answers seen at least
--min_answer_count times over train + val form the answer vocabulary, soft
scores as MCAN (docs/vqa.md, "The recipe").
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
    _cli.add_vl_data_flags(data, "questions", word_vectors=True)
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
    _cli.add_vl_score_flags(out, "VQA v2 annotations JSON",
                            "also write the scores as the official code reports them")
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
