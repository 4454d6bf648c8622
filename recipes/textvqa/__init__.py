"""TextVQA: M4C and SA-M4C with pointer decoding, scored with TextVQA accuracy and ANLS.

    python -m recipes.textvqa                    # = train, then evaluate on the test split
    python -m recipes.textvqa train     [--model m4c|sa_m4c] [--graph spatial|random] [flags]
    python -m recipes.textvqa evaluate  [--split test]   # accuracy and ANLS per question type
    python -m recipes.textvqa predict   --imdb I.npy [--output_file R.json]
    python -m recipes.textvqa score     --annotations A.json --results R.json [--output S.json]
    python -m recipes.textvqa visualize [--num_questions 8]   # OCR boxes and spatial heads, PNG

Models (`models/textvqa/m4c.py`, docs/textvqa.md): M4C (arXiv:1911.06258:
a multimodal transformer answering word by word from a vocabulary or by
pointing at an OCR token) and SA-M4C (arXiv:2007.12146: upper layers
attending along the spatial relations of the boxes; `--graph random`, the
paper's control).

With no data flags it generates Shapes world scene text (written as an mmf
imdb under DIR/shapes_world, region features without their boxes: the
boxes reach the model only as detector-like, jittered boxes,
`box_jitter`), trains `<model>_tiny` with early stopping on the
validation accuracy under a time cap (`WORLD_TRAINING`, unless the flags
are given) and prints the TextVQA accuracy and ANLS per question type next
to the baselines. Real TextVQA: --imdb_train/_val/_test (mmf imdb `.npy`),
--object_features (a region store named by image id, read as the other
recipes read theirs: mmf's `<id>.npy` + `<id>_info.npy`, per-image `.npz`
or mmf's LMDB; --features_format) and --ocr_features (mmf's per-image
`.npy` + `_info.npy` or its LMDB, or per-image `.npz`; neither needed
when the imdb names stacked feature files), --fasttext for the OCR
tokens' word vectors, --answer_vocab (docs/textvqa.md, "Data").
"""

import sys

from recipes import _cli
from recipes import _world

MODELS = ("m4c", "sa_m4c")
COMMANDS = ("train", "evaluate", "predict", "score", "visualize")
SPLITS = ("train", "val", "test")
DATA_FLAGS = tuple(f"imdb_{s}" for s in SPLITS)  # without them: Shapes world
RUN_DEFAULTS = dict(model="m4c", graph="spatial", hparams_set=None, seed=1)
WORLD_SETS = {"m4c": "m4c_tiny", "sa_m4c": "sa_m4c_tiny"}
PAPER_SETS = {"m4c": "m4c_base", "sa_m4c": "sa_m4c_base"}
# Shapes world's training budget where the flags are left out: early
# stopping on the validation TextVQA accuracy and a cap that keeps the
# default run within 10 minutes on 2 CPU cores (docs/textvqa.md).
WORLD_TRAINING = {"early_stopping": ("accuracy", 15), "max_minutes": 7.5}


def build_parser():
    """The recipe's flags (no heavy import: checked before TensorFlow loads)."""
    parser, run, data, out = _cli.vl_parser(
        __name__, __doc__, COMMANDS, RUN_DEFAULTS, models=MODELS,
        hparams_example="num_layers=2,learning_rate=2e-4",
        hparams_set_help="default <model>_tiny on Shapes world, <model>_base on real data",
        metrics=("loss", "accuracy"),
        epochs_help="default: the hparams' epochs (89 for the papers')",
        predict_batch_size=128,
        output_file_help="predict: results JSON [{question_id, answer}] (default: stdout, "
        "one `question_id<TAB>answer` line per question)")
    run.add_argument("--graph", choices=("spatial", "random"), default=None,
                     help="sa_m4c: the relation graph: the spatial graph of the boxes "
                     "(default) or a random label per pair (the paper's control)")

    for split in SPLITS:
        data.add_argument(f"--imdb_{split}", type=_cli.input_file,
                          help=f"mmf TextVQA imdb (.npy) of the {split} split")
    data.add_argument("--object_features", type=_cli.input_file_or_folder,
                      help="object features named by image id: mmf's <id>.npy + <id>_info.npy "
                      "(the anchor's), per-image .npz (features [N, C], boxes [N, 4]) or "
                      "mmf's LMDB (--features_format)")
    _cli.add_features_format_flags(data, image_sizes=False)
    data.add_argument("--ocr_features", type=_cli.input_file_or_folder,
                      help="the OCR tokens' features, one row per imdb OCR token in its "
                      "order, named by image id: mmf's <id>.npy (+ <id>_info.npy), mmf's "
                      "LMDB of them, or per-image .npz (features [T, C]); layout detected")
    data.add_argument("--fasttext", type=_cli.input_file,
                      help="FastText .vec (or any word2vec/GloVe text) file: the OCR "
                      "tokens' word vectors (left out: PHOC and appearance only)")
    data.add_argument("--answer_vocab", type=_cli.input_file,
                      help="answer word list, one per line (M4C's "
                      "fixed_answer_vocab_textvqa_5k.txt); default: the training answers' "
                      "words")
    _cli.add_vl_data_flags(data, "imdb entries")
    _world.add_world_flags(data, train=4500, val=150, test=400, region_geometry="off")

    out.add_argument("--imdb", type=_cli.input_file, help="predict: the questions' imdb")
    _cli.add_vl_score_flags(out, 'TextVQA annotation JSON ({"data": [...]}) or an imdb',
                            "also write {accuracy, anls, per_question} JSON here")
    out.add_argument("--anls", choices=("st_vqa", "mmf"), default="st_vqa",
                     help="ANLS as ST-VQA defines it (default) or as mmf's evaluator "
                     "computes it (docs/textvqa_metrics.md)")
    # score reads no run: its flags outright
    parser.command_flags = {"score": ("annotations", "results", "output", "anls")}
    return parser


def check_args(args):
    """Checks of flags that go together; raises `_cli.UsageError`."""
    score = args.command == "score"  # reads no run and no features
    _cli.refuse(
        (score and not (args.annotations and args.results),
         "score needs --annotations and --results"),
        (args.command == "predict" and not args.imdb,
         "predict needs --imdb (the questions' mmf imdb)"),
        (not score and args.graph is not None and args.model == "m4c",
         "--graph is for --model sa_m4c (M4C has no relation graph)"),
        (not score and bool(args.object_features) != bool(args.ocr_features),
         "give --object_features and --ocr_features together"),
        (args.features_format is not None and not args.object_features,
         "--features_format is the layout of --object_features"))
    if args.command == "train" and not _cli.given(args, *DATA_FLAGS):
        left_out = {k: v for k, v in WORLD_TRAINING.items() if getattr(args, k) is None}
        for name, value in left_out.items():
            setattr(args, name, value)
        if left_out:
            shown = {k: ":".join(map(str, v)) if isinstance(v, tuple) else v
                     for k, v in left_out.items()}
            print("[train] Shapes world: " + " ".join(f"--{k} {v}" for k, v in shown.items()),
                  file=sys.stderr)


main = _cli.recipe_main(__name__, build_parser, check_args,
                        run_commands=("evaluate", "predict", "visualize"))
