"""Image captioning: Transformer captioners (area attention, CATT) and Up-Down, scored with CIDEr-D.

    python -m recipes.caption                  # = train (cross-entropy, then SCST), evaluate
    python -m recipes.caption train    [flags]
    python -m recipes.caption evaluate [flags]  # BLEU-1..4, ROUGE-L, CIDEr-D (+ METEOR/SPICE)
    python -m recipes.caption decode   --features F [--output_file results.json]
    python -m recipes.caption score    --annotations captions.json --results results.json
    python -m recipes.caption visualize [--num_images 8]  # attended areas per word, PNG
    python -m recipes.caption extract  --images DIR --features_out DIR --backbone_weights W

With no data flags it generates Shapes world (keras_structattn.data.shapes_world,
cached under DIR/shapes_world) and trains `updown_tiny` (Up-Down: an LSTM
with top-down attention over the image's regions; Anderson et al., 2018,
arXiv:1707.07998) on its region features: cross-entropy, then self-critical
training with a CIDEr-D reward (Rennie et al., 2017, arXiv:1612.00563), then
beam search over the test images, scored next to the floors (constant
captions, "describe the biggest shape") and the count oracle. Why Up-Down and
not the area captioner by default: docs/captioning.md.

--model picks the captioner (docs/captioning.md): `butd` (the default),
`butd_catt` (Up-Down+CATT, arXiv:2103.03493), `area` (a Transformer with
area attention over grid features, Li et al., 2019, arXiv:1810.10126),
`transformer` or `catt` (Transformer+CATT); each trains its tiny set on
Shapes world, its paper-sized one on real data. --world_bias SHAPE=COLOR:P makes a
train/val confounder, and `evaluate` then also reports CHAIR-style
hallucination rates. Real COCO: --karpathy_json or --captions_* files and
--features; `extract` writes grid features with a keras.applications
backbone from a local weights file.

Everything lives in --output_dir: settings, hparams, vocabulary, checkpoints
of both phases (a killed `train` resumes), history CSVs and TensorBoard
logs. Results go to stdout, the rest to stderr; errors are one line
(--debug: the traceback), exit status 2 for a bad command line, 1 for a
failure. `train --distribute data_parallel` splits every batch over the
devices; --batch_size and --scst_images must split evenly.
"""

import os

from recipes import _cli
from recipes import _world

DEFAULT_HPARAMS_SET = "captioner_tiny_area2x2"
# --model: (its Shapes world set, its set on real data, its feature kind).
MODELS = {
    "area": (DEFAULT_HPARAMS_SET, DEFAULT_HPARAMS_SET, "grid"),
    "transformer": ("transformer_captioner_tiny", "transformer_captioner_base", "regions"),
    "catt": ("catt_captioner_tiny", "catt_captioner_base", "regions"),
    "butd": ("updown_tiny", "updown_base", "regions"),
    "butd_catt": ("updown_catt_tiny", "updown_catt_base", "regions"),
}
# Up-Down learns Shapes world's captions in the default budget; the area
# captioner's grid features do not show it the shapes (docs/captioning.md).
DEFAULT_MODEL = "butd"
COMMANDS = ("train", "evaluate", "decode", "score", "visualize", "extract")
SPLITS = ("train", "val", "test")
BACKBONES = ("InceptionResNetV2", "ResNet50", "EfficientNetB0", "MobileNetV2")
# The settings that define a run (saved in run.json, checked on resume).
# (hparams_set and feature_kind: by --model, `run_defaults`.)
RUN_DEFAULTS = dict(
    model=DEFAULT_MODEL, hparams_set=MODELS[DEFAULT_MODEL][0], seed=1, min_word_count=5,
    max_caption_length=16, feature_kind="grid", dictionary_init="kmeans", dictionary_warmup=None,
)
# CATT dictionaries are fitted after this share of a new run's --train_steps,
# at most MAX_DICTIONARY_WARMUP steps (`--dictionary_warmup`).
DICTIONARY_WARMUP_FRACTION, MAX_DICTIONARY_WARMUP = 0.1, 500
# --train_steps left out (None until `check_args`: a resumed run tells a
# given number from the default, `commands.check_cross_entropy_done`).
TRAIN_STEPS = 1500


def run_defaults(args):
    """The settings of a new run: `RUN_DEFAULTS` with the hparams set and
    feature kind of its --model (the tiny set on Shapes world)."""
    model = args.model or RUN_DEFAULTS["model"]
    world_set, real_set, kind = MODELS[model]
    return dict(RUN_DEFAULTS, model=model, feature_kind=kind,
                hparams_set=real_set if data_flags_given(args) else world_set)


def build_parser():
    """The recipe's flags (no heavy import: checked before TensorFlow loads)."""
    parser, run = _cli.seq2seq_parser(
        __name__, __doc__, COMMANDS, os.path.join("runs", "caption_shapes_world"),
        ("captioner", "catt_captioner", "updown_captioner"), MODELS,
        model_help=f"the captioner (default {DEFAULT_MODEL}; see above)",
        hparams_set_help=f"default: the --model's ({MODELS[DEFAULT_MODEL][0]} for "
        f"{DEFAULT_MODEL}); "
        "--list_hparams_sets shows them", hparams_example="area_key_mode=concat",
        seed=RUN_DEFAULTS["seed"])
    run.add_argument("--dictionary_init", choices=("kmeans", "uniform"), default=None,
                     help="CATT dictionaries: K-means over the training embeddings "
                     "(default, the paper) or the uniform initializer (its 'w/o Init')")
    run.add_argument("--dictionary_warmup", type=_cli.non_negative_int, default=None,
                     help="CATT dictionaries: cross-entropy steps before the K-means fit, "
                     "over the embeddings learnt by then (default: 10%% of a new run's "
                     f"--train_steps, at most {MAX_DICTIONARY_WARMUP}; 0: before step 1, "
                     "over the initial embeddings); docs/catt_attention.md")
    run.add_argument("--min_word_count", type=_cli.positive_int, default=None,
                     help="words seen fewer times in the training captions are UNK "
                     f"(default {RUN_DEFAULTS['min_word_count']})")
    run.add_argument("--max_caption_length", type=_cli.positive_int, default=None,
                     help="training captions are cut to this many words "
                     f"(default {RUN_DEFAULTS['max_caption_length']})")
    run.add_argument("--feature_kind", choices=("grid", "regions"), default=None,
                     help="grid features [H, W, C] or regions with boxes (default: grid "
                     "for area, regions for the others)")

    data = parser.add_argument_group("data (default: generated Shapes world)")
    data.add_argument("--karpathy_json", type=_cli.input_file,
                      help="Karpathy's dataset_coco.json (splits and tokenised captions)")
    for split in SPLITS:
        first = split == "train"  # the other splits' help would repeat it
        data.add_argument(f"--captions_{split}", type=_cli.input_file,
                          help="COCO captions_*.json of the train images" if first else None)
        data.add_argument(f"--split_{split}", type=_cli.input_file,
                          help="image ids or file names, one per line" if first else None)
    data.add_argument("--features", type=_cli.input_file_or_folder,
                      help="the features of every split: a folder of .npy/.npz, or .h5")
    for split in SPLITS:
        data.add_argument(f"--{split}_features", type=_cli.input_file_or_folder,
                          help="the features of one split (default --features)"
                          if split == "train" else None)
    _cli.add_features_format_flags(data)
    data.add_argument("--skip_missing", action="store_true",
                      help="skip (and count) images without features or captions "
                      "instead of stopping at the first")
    _world.add_world_flags(data)

    train = _cli.add_seq2seq_training_flags(
        parser, ("loss", "accuracy", "cider"), train_steps=None, steps_per_checkpoint=250,
        train_steps_help=f"cross-entropy steps (optimizer steps; default {TRAIN_STEPS})",
        keep_checkpoints=3)
    train.add_argument("--batch_size", type=_cli.positive_int, default=None,
                       help="images per cross-entropy batch, 5 captions each (default: "
                       "the hparams' batch_size)")
    train.add_argument("--scst_steps", type=_cli.non_negative_int, default=1500,
                       help="self-critical steps after the cross-entropy ones (0: none)")
    train.add_argument("--scst_images", type=_cli.positive_int, default=16,
                       help="images per self-critical batch")
    train.add_argument("--scst_samples", type=_cli.positive_int, default=5,
                       help="captions sampled per image")
    train.add_argument("--scst_baseline", choices=("mean", "greedy"), default="mean",
                       help="reward baseline: the mean of the image's other samples, "
                       "or its greedy caption")
    train.add_argument("--scst_learning_rate", type=_cli.positive_float, default=5e-5)
    train.add_argument("--scst_clip_value", type=_cli.non_negative_float, default=0.1,
                       help="self-critical steps clip each gradient element to +-this, as "
                       "self-critical.pytorch does (0: no clipping)")
    train.add_argument("--scst_dropout", choices=("off", "on"), default="off",
                       help="off: self-critical steps train the dropout-free model that "
                       "draws the samples (on-policy); on: with the hparams' dropout, the "
                       "samples still drawn without it")

    dec = _cli.add_decoding_flags(
        parser, "decoding and scoring", beam_size=3, alpha=0.0, decode_batch_size=50,
        weights_help="weights to decode with (default: the last phase's best or newest "
        "checkpoint)", outputs="captions", output_file_help="COCO results JSON (default: "
        "stdout, one `image_id<TAB>caption` line per image)")
    dec.add_argument("--split", choices=SPLITS, default="test",
                     help="evaluate / visualize: the split")
    dec.add_argument("--annotations", type=_cli.input_file,
                     help="score: COCO captions_*.json (the references)")
    dec.add_argument("--results", type=_cli.input_file,
                     help="score: COCO results JSON [{image_id, caption}]")
    dec.add_argument("--output", type=_cli.output_file,
                     help="score: also write corpus and per-image scores as JSON")
    dec.add_argument("--num_images", type=_cli.positive_int, default=8,
                     help="visualize: images to draw")
    dec.add_argument("--layer", type=_cli.non_negative_int, default=0,
                     help="visualize: the decoder layer whose caption-to-image attention "
                     "is drawn")

    ext = parser.add_argument_group("extract")
    ext.add_argument("--images", type=_cli.input_folder,
                     help="extract / decode: a folder of images")
    ext.add_argument("--features_out", type=_cli.output_folder,
                     help="extract: where to write <image>.npy grid features")
    ext.add_argument("--backbone", choices=BACKBONES, default="InceptionResNetV2")
    ext.add_argument("--backbone_weights", type=_cli.input_file,
                     help="the backbone's weights, a local file (nothing is downloaded)")
    ext.add_argument("--image_size", type=_cli.positive_int, default=299)
    _cli.add_distribution_flags(parser)
    parser.command_flags = {  # commands that read no run
        "score": ("annotations", "results", "output"),
        "extract": ("images", "features_out", "backbone", "backbone_weights", "image_size")}
    return parser


def data_flags_given(args):
    """True when the command names real data (not the Shapes world default)."""
    return _cli.given(args, "karpathy_json", *(f"captions_{s}" for s in SPLITS))


def check_args(args):
    """Checks of flags that go together; raises `_cli.UsageError`."""
    captions = _cli.given(args, *(f"captions_{s}" for s in SPLITS))
    features = _cli.given(args, "features", *(f"{s}_features" for s in SPLITS))
    extract_missing = [f"--{name}" for name in ("images", "features_out", "backbone_weights")
                       if not getattr(args, name)]
    decode = args.command == "decode"
    args.train_steps_given = args.train_steps is not None
    if args.train_steps is None:
        args.train_steps = TRAIN_STEPS
    _cli.refuse(
        (args.karpathy_json and captions,
         "give either --karpathy_json or --captions_* files, not both"),
        *((getattr(args, f"split_{s}") and not getattr(args, f"captions_{s}"),
           f"--split_{s} needs --captions_{s}") for s in SPLITS),
        (data_flags_given(args) and not features and args.command != "score",
         "real captions need their features: give --features"),
        (args.command == "score" and not (args.annotations and args.results),
         "score needs --annotations and --results"),
        (args.command == "extract" and extract_missing,
         f"extract needs {', '.join(extract_missing)}"),
        (decode and not (args.features or args.images), "decode needs --features (a feature "
         "file or folder) or --images (a folder, with --backbone_weights)"),
        (decode and args.images and not args.backbone_weights,
         "decode --images needs --backbone_weights to extract features"))


main = _cli.recipe_main(__name__, build_parser, check_args,
                        run_commands=("evaluate", "decode", "visualize"))
