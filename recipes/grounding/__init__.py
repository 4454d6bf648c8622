"""Visual grounding (referring expressions) with MUAN, scored by accuracy at IoU > 0.5.

    python -m recipes.grounding                  # = train, then evaluate on the test split
    python -m recipes.grounding train    [flags]
    python -m recipes.grounding evaluate [--split test]
    python -m recipes.grounding predict  --split testA [--output_file boxes.json]
    python -m recipes.grounding visualize [--num_expressions 8]   # PNG per expression

The model (`models/vqa/muan.py`, docs/grounding.md) is MUAN's grounding
architecture (arXiv:1908.04107, Sec. III-B): a ranking score and a box
refinement per region proposal (KL divergence to an IoU-derived target,
--target, plus smooth-L1); the top proposal's refined box is correct at
IoU > 0.5 with the referred box.

With no data flags it generates Shapes world referring expressions
(cached under DIR/shapes_world as RefCOCO refs + COCO instances), trains
`muan_grounding_tiny` and prints the accuracy next to the biggest-box
baseline. Real RefCOCO / RefCOCO+ / RefCOCOg: --refs, --instances,
--features; --train_split/--val_split/--split name the refs' splits
(docs/grounding.md, "The recipe").
"""

from recipes import _cli
from recipes import _world

COMMANDS = ("train", "evaluate", "predict", "visualize")
DATA_FLAGS = ("refs", "instances")  # without them: Shapes world
RUN_DEFAULTS = dict(hparams_set=None, seed=1, target="iou", iou_threshold=0.5)
# The hparams set of a new run on Shapes world / real data (no --model: key None).
WORLD_SETS, PAPER_SETS = {None: "muan_grounding_tiny"}, {None: "muan_grounding_base"}


def build_parser():
    """The recipe's flags (no heavy import: checked before TensorFlow loads)."""
    parser, run, data, out = _cli.vl_parser(
        __name__, __doc__, COMMANDS, RUN_DEFAULTS, hparams_example="num_layers=2,qk_gate=False",
        hparams_set_help=f"default {WORLD_SETS[None]} on Shapes world, {PAPER_SETS[None]} "
        "on real data",
        metrics=("loss", "accuracy"), epochs_help="default: the hparams' epochs",
        title="evaluation, prediction and pictures",
        split_choices=None, split_commands="evaluate / predict / visualize",
        predict_batch_size=256, drawn="expressions",
        output_file_help="predict: JSON [{ref_id, sent_id, image_id, bbox [x, y, w, h] "
        "pixels}] (default: stdout, one line per expression)")
    run.add_argument("--target", choices=("iou", "paper"), default=None,
                     help="the ranking target over the proposals: their IoU with the referred "
                     "box normalised to sum to 1 (default), or the paper's softmax of the IoUs "
                     "above --iou_threshold (docs/grounding.md)")
    run.add_argument("--iou_threshold", type=_cli.unit_interval, default=None,
                     help="--target paper: IoUs at or below it count as 0 (default 0.5)")

    data.add_argument("--refs", type=_cli.input_file,
                      help="RefCOCO refs: refs(unc).p (pickle) or JSON")
    data.add_argument("--instances", type=_cli.input_file,
                      help="COCO instances.json of the referred images")
    data.add_argument("--features", type=_cli.input_file_or_folder,
                      help="region proposals: a folder of per-image .npz (features [N, C], "
                      "boxes [N, 4], image_w, image_h), or one .npz/.h5")
    data.add_argument("--train_split", default="train", help="the refs' training split")
    data.add_argument("--val_split", default="val", help="the refs' validation split")
    _cli.add_features_format_flags(data)
    _cli.add_vl_data_flags(data, "refs", word_vectors=True)
    _world.add_world_flags(data)

    return parser


def check_args(args):
    """Checks of flags that go together; raises `_cli.UsageError`."""
    _cli.refuse((bool(args.refs) != bool(args.instances), "give --refs and --instances together"),
                (args.refs and not args.features,
                 "real refs need their region proposals: give --features"))


main = _cli.recipe_main(__name__, build_parser, check_args,
                        run_commands=("evaluate", "predict", "visualize"))
