"""Visual question answering: MCAN, MCAN+PA, MUAN, Transformer(+CATT); official VQA accuracy.

    python -m recipes.vqa                    # = train, then evaluate on the test split
    python -m recipes.vqa train     [--model mcan|mcan_pa|muan|catt|transformer] [flags]
    python -m recipes.vqa evaluate  [--split test]  # accuracy per question type
    python -m recipes.vqa predict   --questions Q.json --features F [--output_file R.json]
    python -m recipes.vqa score     --questions Q.json --annotations A.json --results R.json
    python -m recipes.vqa visualize [--num_questions 8]   # attention over the regions, PNG

Models (`models/vqa/`; docs/vqa.md): MCAN (arXiv:1906.10770), MCAN+PA
(positional attention), MUAN (arXiv:1908.04107), Transformer+CATT (`catt`,
arXiv:2103.03493) and its non-CATT twin (`transformer`).

With no data flags it generates Shapes world VQA (cached under
DIR/shapes_world), trains `<model>_tiny` on its region features and prints
the accuracy per question type next to the per-type majority answer of
the training split. Real VQA v2: the official questions and annotations
JSON and per-image region features (--features); answers seen at least
--min_answer_count times over train + val form the answer vocabulary, soft
scores as MCAN (docs/vqa.md, "The recipe").
"""

from recipes import _cli
from recipes import _world

MODELS = ("mcan", "mcan_pa", "muan", "catt", "transformer")
COMMANDS = ("train", "evaluate", "predict", "score", "visualize")
SPLITS = ("train", "val", "test")
DATA_FLAGS = tuple(f"questions_{s}" for s in SPLITS)  # without them: Shapes world
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


def build_parser():
    """The recipe's flags (no heavy import: checked before TensorFlow loads)."""
    parser, run, data, out = _cli.vl_parser(
        __name__, __doc__, COMMANDS, RUN_DEFAULTS,
        models=MODELS, hparams_example="num_layers=4,qk_gate=False",
        hparams_set_help="default <model>_tiny on Shapes world, the paper's set on real data "
        f"({', '.join(PAPER_SETS.values())})",
        metrics=("loss", "soft_accuracy", "accuracy"),
        epochs_help="default: the hparams' epochs (13 for the paper's sets)",
        predict_batch_size=256,
        output_file_help="predict: results JSON (default: stdout, one "
        "`question_id<TAB>answer` line per question)")
    run.add_argument("--min_answer_count", type=_cli.positive_int, default=None,
                     help="answers (normalised multiple_choice_answer) seen fewer times in "
                     f"the training and validation annotations are left out (default "
                     f"{RUN_DEFAULTS['min_answer_count']}: MCAN's 'more than 8')")
    run.add_argument("--dictionary_init", choices=("kmeans", "uniform"), default=None,
                     help="CATT: the dictionaries' initialisation before training: K-means "
                     "(default) or uniform, the paper's 'w/o Init' (docs/vqa.md)")

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
    _cli.add_features_format_flags(data)
    _cli.add_vl_data_flags(data, "questions", word_vectors=True)
    _world.add_world_flags(data)

    out.add_argument("--questions", type=_cli.input_file,
                     help="predict / score: VQA v2 questions JSON")
    _cli.add_vl_score_flags(out, "VQA v2 annotations JSON",
                            "also write the scores as the official code reports them")
    out.add_argument("--normalization", choices=("official", "corrected"), default="official",
                     help="answer normalisation of the accuracy: the official code's, quirks "
                     "included (default), or corrected (docs/vqa_metrics.md)")
    # score reads no run: its flags outright
    parser.command_flags = {"score": (
        "questions", "annotations", "results", "output", "normalization")}
    return parser


def check_args(args):
    """Checks of flags that go together; raises `_cli.UsageError`."""
    features = _cli.given(args, "features", *(f"{s}_features" for s in SPLITS))
    score = args.command == "score"
    _cli.refuse(
        *((getattr(args, f"annotations_{s}") and not getattr(args, f"questions_{s}"),
           f"--annotations_{s} needs --questions_{s}") for s in SPLITS),
        (args.questions_train and not args.annotations_train,
         "--questions_train needs --annotations_train (the answers)"),
        (score and not (args.questions and args.annotations and args.results),
         "score needs --questions, --annotations and --results"),
        (args.command == "predict" and not (args.questions and features),
         "predict needs --questions (VQA v2 questions JSON) and --features (their region "
         "features)"),
        (not score and _cli.given(args, *DATA_FLAGS) and not features,
         "real questions need their region features: give --features"))


main = _cli.recipe_main(__name__, build_parser, check_args,
                        run_commands=("evaluate", "predict", "visualize"))
