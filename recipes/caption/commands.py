"""The commands of the captioning recipe (flags: `recipes.caption`).

Each command is `command(args)`; `run(args)` picks it. Status goes to
stderr, results to stdout (`_cli.emit`). Without data flags the data is
the run's Shapes world (`recipes._world`) with its baseline captions.
Data parallelism (docs/distributed.md): each process feeds its rows of
every global batch (`keras_structattn.training.feeding.feed`); a self-critical step samples and
rewards the whole global batch alike in every process.
"""

import argparse
import functools
import itertools
import os
import sys
import time

import keras
import numpy as np

from keras_structattn import metrics
from keras_structattn.data import feature_formats
from keras_structattn.data import image_features
from keras_structattn.data.feature_extraction import read_images
from keras_structattn.data.json_files import load_json
from keras_structattn.data.shapes_world import baselines
from keras_structattn.data.shapes_world.run_cache import scene_images
from keras_structattn.data.shapes_world.run_cache import world_bias
from keras_structattn.data.shapes_world.writers import features_path
from keras_structattn.data.word_vocab import WordVocab
from keras_structattn.decoding.seq2seq import compiled_generate
from keras_structattn.tasks.captioning import batches
from keras_structattn.tasks.captioning import bias_probe
from keras_structattn.tasks.captioning import coco_captions
from keras_structattn.tasks.captioning import decode as decode_lib
from keras_structattn.tasks.captioning import report
from keras_structattn.tasks.captioning import world_scores
from keras_structattn.tasks.captioning.pictures import draw_caption_attention
from keras_structattn.training import checkpoints as checkpoints_lib
from keras_structattn.training import dictionaries
from keras_structattn.training import feeding
from keras_structattn.training import self_critical
from keras_structattn.training.callbacks import restore_latest
from keras_structattn.training.callbacks import steps_done
from keras_structattn.training.distribution import restarting
from keras_structattn.training.history import history_from_csv
from keras_structattn.training.losses import PaddedCrossEntropy
from keras_structattn.training.run_folder import write_json
from models import registry
from models.captioning.catt_captioner import CATTCaptioner
from models.captioning.transformer_captioner import TransformerCaptioner
from models.captioning.updown import UpDownCaptioner
from recipes import _cli
from recipes import _engine
from recipes import _replicas
from recipes import _run
from recipes import _seq2seq
from recipes import _vl
from recipes import _world
from recipes.caption import DICTIONARY_WARMUP_FRACTION
from recipes.caption import MAX_DICTIONARY_WARMUP
from recipes.caption import MODELS
from recipes.caption import RUN_DEFAULTS
from recipes.caption import data_flags_given
from recipes.caption import run_defaults

# Applied to the models' Shapes world sets only: their 1,000 warm-up steps
# are for COCO-sized runs; the embedded default trains about as many in all.
DEFAULT_SET_OVERRIDES = "learning_rate_warmup_steps=200"
# The captioner classes, by their sets' `model_type`.
MODEL_CLASSES = {
    cls.model_type: cls for cls in (TransformerCaptioner, CATTCaptioner, UpDownCaptioner)
}
VOCAB_FILE = "vocab.json"
XE_DIR, SCST_DIR = "checkpoints", "scst_checkpoints"
# The two training phases' files (`recipes._engine`).
XE_PHASE = _engine.Phase(XE_DIR, "history.csv", "logs/xe")
SCST_PHASE = _engine.Phase(SCST_DIR, "scst_history.csv", "logs/scst", best="scst_best")
FLOORS_HELP = ("constant: the most frequent training caption; constant_<group>: the most "
               "frequent one of a template group; biggest_shape: 'a <size> <colour> <shape>' "
               "of the biggest shape; oracle_count: the true count's caption (reads the "
               "scene); docs/captioning.md")
# Bottom-up features have 10 to 100 regions an image (Anderson et al., 2018).
MAX_REGIONS = 100
CAPTIONS_PER_IMAGE = 5
VALIDATION_IMAGES = 200  # the first ones, in order


def run(args):
    """Runs `args.command` (the function of that name); returns what it returns."""
    return globals()[args.command](args)


def _read_captions(args, world, split, skip):
    """A split's caption records (the world's, or its flags'), or None."""
    if world is not None:
        path, split_list = os.path.join(world, "captions", f"captions_{split}.json"), None
    else:
        path, split_list = getattr(args, f"captions_{split}"), getattr(args, f"split_{split}")
    if not path:
        return None
    records = coco_captions.read_coco_captions(
        path, split_ids=coco_captions.read_split_list(split_list) if split_list else None,
        tokenize=metrics.ptb_tokenize, images_without_captions=skip)
    print(f"[data] {split}: {records.report.describe()}")
    return records


def load_splits(args, settings, needed):
    """`{split: _vl.Split}` of the splits in `needed` that the data has (the
    Shapes world's without data flags); images without features: --skip_missing."""
    def write_floors(world, folder):
        for name, split in world.splits.items():
            write_json(os.path.join(folder, f"floors_{name}.json"),
                       baselines.caption_floors(world.splits["train"], split))

    world = None
    if not data_flags_given(args):
        world = _world.ensure_world(args, tasks="captions", default_seed=RUN_DEFAULTS["seed"],
                                    write_extras=write_floors)
    skip = "skip" if args.skip_missing else "error"
    if args.karpathy_json:
        records = coco_captions.read_karpathy(args.karpathy_json, images_without_captions=skip)
        print(f"[data] {records.report.describe()}")
    else:
        records = {split: _read_captions(args, world, split, skip) for split in needed}
    splits = {}
    for name in needed:
        if not records.get(name):
            continue
        path = (features_path(world, name) if world is not None
                else getattr(args, f"{name}_features") or args.features)
        store = open_store(args, path, settings["feature_kind"],
                           {r.image_id: r.file_name for r in records[name]})
        kept, skipped = image_features.select_images(store, records[name], missing=skip,
                                                          skip_hint="--skip_missing")
        if skipped:
            print(f"[data] {name}: {skipped} images without features in {path} skipped")
        splits[name] = _vl.Split(name, kept, store)
    return splits


def open_store(args, path, kind, file_names=None):
    """The features at `path`: region features in --features_format (else
    detected, `feature_formats`), grid features by `image_features`."""
    if kind != "regions":
        return image_features.open_features(path, kind, file_names=file_names)
    sizes = (feature_formats.image_sizes_from_coco(args.image_sizes)
             if getattr(args, "image_sizes", None) else None)
    store = feature_formats.open_region_features(
        path, getattr(args, "features_format", None), file_names=file_names, image_sizes=sizes)
    print(f"[data] features: {store.describe()}")
    return store


def feature_batch(store, image_ids, kind):
    """The encoder input of `image_ids` (regions: one count a store, `fitted_max_regions`)."""
    if kind == "regions" and not hasattr(store, "padded_regions"):
        store.padded_regions = image_features.fitted_max_regions(store, MAX_REGIONS)
    return batches.encoder_input(store, image_ids, kind, getattr(store, "padded_regions", None))


def check_set(hparams, settings):
    """A usage error unless a new run's set is a captioner set of its --model."""
    if hparams.model_type not in MODEL_CLASSES:
        raise _cli.UsageError(
            f"--hparams_set {settings['hparams_set']} is a {hparams.model_type} set; "
            "captioning takes a captioner_*, catt_captioner_*, transformer_captioner_* or "
            "updown_* set"
        )
    expected = registry.get(MODELS[settings["model"]][0]).model_type
    if hparams.model_type != expected:
        raise _cli.UsageError(
            f"--hparams_set {settings['hparams_set']} is a {hparams.model_type} set, not a "
            f"set of --model {settings['model']} ({expected})")


def resolve_run(args):
    """`_seq2seq.resolve_run`; a new run's hparams (None) come in `prepare_run`."""
    given = {name: getattr(args, name) for name in RUN_DEFAULTS if name != "seed"}
    run, settings, hparams = _seq2seq.resolve_run(args, given, run_defaults(args), check_set)
    # Runs made before --model and --dictionary_init existed.
    settings.setdefault("model", "area")
    settings.setdefault("dictionary_init", RUN_DEFAULTS["dictionary_init"])
    if "dictionary_warmup" not in settings:  # a run of before the warm-up: before step 1
        settings["dictionary_warmup"] = 0
    elif settings["dictionary_warmup"] is None:  # a new run
        settings["dictionary_warmup"] = min(
            MAX_DICTIONARY_WARMUP,
            int(DICTIONARY_WARMUP_FRACTION * (getattr(args, "train_steps", None) or 0)))
    return run, settings, hparams


def build_model(hparams, vocab_size, feature_shape, seed=None):
    """The captioner of `hparams` (its class by `model_type`), built on zeros."""
    model = MODEL_CLASSES[hparams.model_type].from_hparams(hparams, vocab_size, seed=seed)
    features = batches.zero_encoder_input(hparams.encoder_input, feature_shape)
    model((features, np.zeros((1, 2), "int32")))
    return model


def prepare_run(args, run, settings, hparams, splits, replicas):
    """`(vocab, hparams, model)` of a training run; a new run's hparams are
    fitted to the features, its files committed once the model is built
    and its data checked (`check_new_run`)."""
    train_split = splits["train"]
    if run.holds_run:
        vocab = WordVocab.load(run.file(VOCAB_FILE))
        print(f"[run] resuming {args.output_dir}: {settings['hparams_set']}")
    else:
        store, kind = train_split.store, settings["feature_kind"]
        if store.kind != kind:
            raise _cli.UsageError(f"--feature_kind {kind} but the training features are "
                                  f"{store.kind}")
        grid = list(store.grid_shape) if kind == "grid" else []
        settings["feature_shape"] = grid + [int(store.feature_dim)]
        fitted = f"encoder_input={kind}"
        if grid:
            fitted += f",grid_height={grid[0]},grid_width={grid[1]}"
        hparams = _seq2seq.new_hparams(args, settings, MODELS[settings["model"]][0],
                                       DEFAULT_SET_OVERRIDES, fitted)
        tokens = [t for r in train_split.records for t in r.tokens]
        vocab = _cli.usage(
            lambda: WordVocab.build(tokens, min_count=settings["min_word_count"]))
    # The batches must split over the replicas: checked before anything is written.
    _replicas.check_batch(replicas, args.batch_size or hparams.batch_size)
    if args.scst_steps:
        images = min(args.scst_images, len(train_split.records))
        _replicas.check_batch(replicas, images, "--scst_images")
    described = f"{vocab.vocab_size} word ids (words seen >= {settings['min_word_count']} times)"
    model = _seq2seq.build_run(
        args, run, settings, hparams, vocab, VOCAB_FILE,
        lambda seed: build_model(hparams, vocab.vocab_size, settings["feature_shape"], seed),
        described, write=False)
    if not run.holds_run:
        check_new_run(args, model, splits, vocab, settings, args.batch_size or hparams.batch_size)
        if replicas.is_chief:  # every check passed: nothing half-made
            _seq2seq.commit_run(args, run, settings, hparams, vocab, VOCAB_FILE, described)
    return vocab, hparams, model


def check_new_run(args, model, splits, vocab, settings, batch_size):
    """What would fail in training, checked before a new run is committed:
    every feature file's shape (a folder's, from the file headers), the
    first batch of each split, and that each CATT dictionary has at least
    as many vectors to cluster as entries."""
    for split in splits.values():
        image_features.check_shapes(split.store, [r.image_id for r in split.records])
        batch_of(split, range(min(len(split.records), batch_size)), vocab, settings)
    if not dictionaries.has_dictionaries(model) or settings["dictionary_init"] == "uniform":
        return
    train, count = splits["train"], len(splits["train"].records)
    short = dictionaries.too_few_samples(model, (
        batch_of(train, range(begin, min(count, begin + batch_size)), vocab, settings)[0]
        for begin in range(0, count, batch_size)))
    if short:
        raise _cli.UsageError(f"{short} (--hparams dictionary_size=...)")


def load_trained(args):
    """`(model, vocab, settings, hparams)` of the run, with its chosen weights."""
    run, settings, hparams = resolve_run(args)
    vocab = WordVocab.load(run.file(VOCAB_FILE))
    model = build_model(hparams, vocab.vocab_size, settings["feature_shape"])
    _seq2seq.load_weights(model, args, run, (SCST_PHASE, XE_PHASE))
    return model, vocab, settings, hparams


def batch_of(split, rows, vocab, settings):
    """The records at `rows`, each image with 5 captions (`batches.image_captions_batch`)."""
    records = [split.records[j] for j in rows]
    features = feature_batch(split.store, [r.image_id for r in records], settings["feature_kind"])
    return batches.image_captions_batch(records, features, vocab,
                                        settings["max_caption_length"], CAPTIONS_PER_IMAGE)


def train(args):
    """Cross-entropy, then self-critical training (each resumable), then evaluation."""
    replicas, jit = _seq2seq.replicas_and_jit(args)
    run, settings, hparams = resolve_run(args)
    needed = ("train", "val") if args.no_eval else ("train", "val", args.split)
    splits = load_splits(args, settings, tuple(dict.fromkeys(needed)))  # --split may be val
    if "train" not in splits:
        raise _cli.UsageError("give training captions: --karpathy_json or --captions_train")
    before_file = run.file(f"{args.split}_scores_cross_entropy.json")
    with replicas.scope():
        vocab, hparams, model = prepare_run(args, run, settings, hparams, splits, replicas)
        trained = (model, vocab, settings, hparams)
        _seq2seq.compile_model(model, hparams, args, jit)
        start = time.time()
        if checkpoints_lib.checkpoint_paths(run.file(SCST_DIR), readable_only=True):
            check_cross_entropy_done(args, run)
            print("[train] cross-entropy phase done (self-critical checkpoints found)")
        else:
            train_cross_entropy(args, trained, splits, args.batch_size or hparams.batch_size,
                                replicas)
            # The cross-entropy model's scores, for the comparison with SCST
            # (evaluating needs every process of a multi-process run).
            if args.scst_steps and not args.no_eval and replicas.num_processes == 1:
                print("[eval] the cross-entropy model, before self-critical training:")
                xe_scores, _, xe_results = caption_split(args, trained, splits, save=False)
                write_json(before_file, {"scores": xe_scores.scores,
                                         "not_computed": xe_scores.not_computed,
                                         "results": xe_results})
        if args.scst_steps:
            trained = train_self_critical(args, trained, splits, jit, replicas)
            model = trained[0]
    print(f"[train] done ({time.time() - start:.0f} s in this command)")
    if not replicas.is_chief:
        return model
    write_json(run.file("train_summary.json"), {
        name: _seq2seq.history_of(run, name)
        for name in ("history.csv", "scst_history.csv") if os.path.exists(run.file(name))
    })
    if _replicas.evaluates_after_training(args, replicas):
        print("[model] the trained model in memory")
        before = None
        if args.scst_steps and os.path.exists(before_file):
            before = load_json(before_file, "scores").get("results")
        evaluate(args, trained=trained, splits=splits, before=before)
    return model


def check_cross_entropy_done(args, run):
    """A usage error if --train_steps asks for more cross-entropy steps than
    a run whose self-critical training has begun took: they would come
    after self-critical steps, which then started from another model."""
    done = history_from_csv(run.file(XE_PHASE.history)).get("step") or [None]
    if args.train_steps_given and done[-1] is not None and args.train_steps > int(done[-1]):
        raise _cli.UsageError(
            f"--train_steps {args.train_steps}, but {args.output_dir} began self-critical "
            f"training after {int(done[-1])} cross-entropy steps: more cannot follow (leave "
            "--train_steps out or at that number, raise --scst_steps, or use a new --output_dir)")


def train_cross_entropy(args, trained, splits, batch_size, replicas):
    """Label-smoothed cross-entropy with the engine's `fit`, resumable."""
    model, vocab, settings, _ = trained
    train_split = splits["train"]
    warmup = dictionary_warmup(model, settings, args.train_steps)
    fresh = not checkpoints_lib.checkpoint_paths(os.path.join(args.output_dir, XE_DIR),
                                                 readable_only=True)
    if fresh and not warmup:
        # A fresh model (a checkpoint holds fitted dictionaries already).
        init_dictionaries(args, model, train_split, vocab, settings, batch_size)
    print(f"[train] cross-entropy: {len(train_split.records)} images, batches of "
          f"{batch_size} images x {CAPTIONS_PER_IMAGE} captions")
    validation = None
    if "val" in splits:
        val = splits["val"]
        validation = feeding.validation_batches(
            min(len(val.records), VALIDATION_IMAGES), batch_size,
            lambda rows: batch_of(val, rows, vocab, settings), replicas)

    def data(done):
        def stream():
            return feeding.epoch_batches(
                len(train_split.records), batch_size, settings["seed"],
                lambda rows: batch_of(train_split, rows, vocab, settings), done, replicas=replicas)

        # Under MirroredStrategy `fit` peeks with an iterator of its own, whose
        # read-ahead of a generator would be lost: each iterator restarts at `done`.
        return restarting(stream) if replicas.strategy is not None else stream()

    scores = val_cider_hook(args, splits, vocab, settings)
    _engine.check_task_score(args, replicas, scores)
    fit = functools.partial(_engine.fit, model, data=data, per_epoch=args.steps_per_checkpoint,
                            validation=validation, replicas=replicas, phase=XE_PHASE,
                            scores=scores, label="cross-entropy")
    if warmup:
        # Warm-up, then K-means over the embeddings the model has learnt.
        # The checkpoint at the warm-up's end holds the dictionaries of
        # before the fit: resumed from it, the fit is done again (seeded,
        # on the same weights: the same centres). Without early stopping in
        # the warm-up, its weights cannot become the run's best checkpoint.
        restore_latest(model, os.path.join(args.output_dir, XE_DIR))
        if steps_done(model) < warmup:
            fit(argparse.Namespace(**{**vars(args), "early_stopping": None}),
                total_steps=warmup)
        if steps_done(model) == warmup:
            init_dictionaries(args, model, train_split, vocab, settings, batch_size)
    fit(args, total_steps=args.train_steps)


def dictionary_warmup(model, settings, train_steps):
    """The cross-entropy steps before a CATT model's dictionaries are fitted
    (`--dictionary_warmup`; 0: before step 1, or no dictionaries to fit)."""
    if not dictionaries.has_dictionaries(model) or settings["dictionary_init"] == "uniform":
        return 0
    warmup = settings["dictionary_warmup"]
    if warmup >= train_steps:
        raise _cli.UsageError(f"--dictionary_warmup {warmup} must be below --train_steps "
                              f"{train_steps}: the dictionaries would never be fitted")
    return warmup


def val_cider_hook(args, splits, vocab, settings):
    """`--early_stopping cider`'s score: CIDEr-D of greedy validation captions."""
    def compute(model):
        if "val" not in splits:
            raise _cli.UsageError("--early_stopping cider needs validation captions")
        val = splits["val"]
        image_ids = [r.image_id for r in val.records]
        captions = caption_images((model, vocab, settings), val.store, image_ids, args,
                                  beam_size=1)
        cider = metrics.CiderD({r.image_id: r.tokens for r in val.records})
        return {"cider": float(np.mean(cider.scores(
            image_ids, [c.split() for c in captions])))}

    return _engine.ScoresHook(("cider",), compute)


def init_dictionaries(args, model, split, vocab, settings, batch_size):
    """Fits a CATT model's dictionaries by K-means over one pass of the
    training batches through the model as it is (seeded: a killed run
    refits them alike), and writes what they cover to `dictionaries.json`."""
    if not dictionaries.has_dictionaries(model):
        return
    if settings["dictionary_init"] == "uniform":
        print("[dictionaries] uniform(0, 0.01) initializer (--dictionary_init uniform, "
              "the paper's 'w/o Init')")
        return
    start, step = time.time(), steps_done(model)
    per_pass = max(1, len(split.records) // batch_size)
    stream = feeding.epoch_batches(len(split.records), batch_size, settings["seed"],
                               lambda rows: batch_of(split, rows, vocab, settings))
    try:
        fitted = dictionaries.fit_dictionaries(model, (batch[0] for batch in itertools.islice(
            stream, per_pass)), seed=settings["seed"])
    except ValueError as error:  # a dictionary larger than the data
        raise _cli.UsageError(f"{error} (--hparams dictionary_size=...)") from None
    for name, values in fitted.items():
        layer = model.global_dictionaries()[name]
        print(f"[dictionaries] {name}: K-means, {layer.size} centres of {values['rows']:,} "
              f"vectors ({values['distinct_rows']:,} distinct; inertia "
              f"{values['inertia']:.4g}); entries nearest to some vector: "
              f"{values['entries_used']} in all, {values['entries_used_per_batch']:.1f} "
              f"per batch of {batch_size} images")
    print(f"[dictionaries] fitted at step {step} in {time.time() - start:.1f} s")
    write_json(os.path.join(args.output_dir, "dictionaries.json"),
               {"step": step, "dictionaries": fitted})


def dropout_free(model, hparams, vocab, settings):
    """`model` itself if it has no dropout, else a copy of it built with
    every dropout rate of the hparams at 0, holding the same weights."""
    rates = {name: 0.0 for name, value in hparams.values().items()
             if name.endswith("dropout") and value}
    if not rates:
        return model
    copy = build_model(hparams.override(**rates), vocab.vocab_size, settings["feature_shape"])
    copy.set_weights(model.get_weights())
    return copy


def train_self_critical(args, trained, splits, jit, replicas):
    """Self-critical training with CIDEr-D rewards and a fresh Adam, resumable.

    The samples are drawn without dropout; with --scst_dropout off (the
    default) the gradient steps train the same dropout-free model, so the
    policy that draws the samples is the one trained (self-critical.pytorch
    draws and trains both with dropout). Gradients are clipped by value
    (--scst_clip_value, 0.1 as in self-critical.pytorch).

    Returns:
        `trained` with the model trained (with --scst_dropout off, the
        dropout-free copy, `dropout_free`).
    """
    model, vocab, settings, hparams = trained
    if args.scst_dropout == "off":
        model = dropout_free(model, hparams, vocab, settings)
    split = splits["train"]
    model.compile(optimizer=keras.optimizers.Adam(args.scst_learning_rate,
                                                  clipvalue=args.scst_clip_value or None),
                  loss=PaddedCrossEntropy(0.0), jit_compile=jit)
    cider = metrics.CiderD({r.image_id: r.tokens for r in split.records})
    length = settings["max_caption_length"] + 1
    samples, images = args.scst_samples, args.scst_images
    if args.scst_baseline == "mean" and samples < 2:
        raise _cli.UsageError("--scst_baseline mean needs --scst_samples >= 2")
    draw = self_critical.sampler(model, samples)
    greedy = (compiled_generate(model, max_decode_length=length, beam_size=1)
              if args.scst_baseline == "greedy" else None)
    print(f"[train] self-critical: {images} images x {samples} samples, "
          f"{args.scst_baseline} baseline, CIDEr-D reward, dropout {args.scst_dropout}, "
          f"gradients clipped to +-{args.scst_clip_value:g}")

    def scst_step(model, step):
        count = len(split.records)
        rng = np.random.default_rng([settings["seed"], 1_000_003, step])
        chosen = rng.choice(count, size=min(images, count), replace=False)
        image_ids = [split.records[i].image_id for i in chosen]
        features = feature_batch(split.store, image_ids, settings["feature_kind"])
        uniforms = self_critical.draw_uniforms(settings["seed"], step, len(chosen) * samples,
                                               length)
        (decoder_inputs, targets, weight), rewards = self_critical.self_critical_batch(
            draw, features, image_ids, cider.scores, uniforms, vocab.id_to_word, greedy)
        x, y, sample_weight = replicas.local_rows(((features, decoder_inputs), targets, weight))
        logs = model.train_on_batch(x, y, sample_weight=sample_weight, return_dict=True)
        return {**{k: float(v) for k, v in logs.items()}, "reward": float(rewards.mean())}

    scores = val_cider_hook(args, splits, vocab, settings)
    _engine.check_task_score(args, replicas, scores)
    # Without self-critical checkpoints the model holds the cross-entropy weights.
    _engine.fit_steps(model, args, scst_step, per_epoch=args.steps_per_checkpoint,
                      total_steps=args.scst_steps, replicas=replicas, phase=SCST_PHASE,
                      scores=scores, label="self-critical")
    return (model, *trained[1:])


def caption_images(trained, store, image_ids, args, beam_size=None):
    """Beam-search captions (strings) of `image_ids` (--beam_size unless given)."""
    model, vocab, settings = trained[:3]
    generate = compiled_generate(model, max_decode_length=settings["max_caption_length"] + 1,
                                 beam_size=beam_size or args.beam_size, alpha=args.alpha)
    return decode_lib.caption_images(
        generate, vocab, image_ids, lambda ids: feature_batch(store, ids, settings["feature_kind"]),
        args.decode_batch_size)


def evaluate(args, trained=None, splits=None, before=None):
    """Scores beam-search captions of --split; `before`: the cross-entropy
    model's captions (COCO results). On Shapes world, beside the floors and
    oracles (`baselines.caption_floors`), with fact scores, CIDEr-D per
    template group and hallucination rates (`world_scores`)."""
    trained = trained or load_trained(args)
    scores, split, results = caption_split(args, trained, splits)
    outputs = ({"model": results} if before is None
               else {"self-critical": results, "cross-entropy": before})
    models = list(outputs)
    annotations = coco_captions.coco_annotations(split.records)
    if data_flags_given(args):
        entries = {name: metrics.evaluate_captions(annotations, captions)
                   for name, captions in outputs.items()}
        saved = {name: {"scores": e.scores, "not_computed": e.not_computed}
                 for name, e in entries.items()}
        lines = report.score_table(entries)
    else:
        world = _world.folder_of(args)
        floors = os.path.join(world, f"floors_{args.split}.json")
        if os.path.exists(floors):
            outputs.update(load_json(floors, "caption floors"))
        else:  # a world written before the floors were
            print(f"[eval] no floors: {floors} is missing (a world of an older version)")
        bias = world_bias(world)
        if bias is not None:
            print(f"[eval] hallucination: colour-shape claims absent from the scene; the bias "
                  f"{bias[1]} {bias[0]} (biased@cf: over the {bias[0]}s of other colours only)")
        scenes = load_json(os.path.join(world, f"scenes_{args.split}.json"), "scenes")["scenes"]
        saved = world_scores.score_captioners(
            load_json(os.path.join(world, "captions", f"captions_{args.split}.json"),
                      "captions"), outputs, scenes, bias, models)
        probe_lines = []
        if bias is not None:
            probe = colour_probe(trained, split, scenes, bias)
            saved[models[0]]["bias_probe"] = probe
            probe_lines = ["", report.bias_probe_line(models[0], probe, bias)]
        shown = models + [n for n in ("biggest_shape",) if n in saved]
        columns = {name: metrics.CaptionScores(saved[name]["scores"], {},
                                               saved[name]["not_computed"], [])
                   for name in shown}
        print(f"[eval] floors: {FLOORS_HELP}")
        lines = (report.score_table(columns)
                 + report.hallucination_table({n: saved[n]["hallucination"] for n in shown},
                                              shown)
                 + [""] + report.captioner_table(saved)
                 + ["", "CIDEr-D per template group (its references alone):"]
                 + report.group_table(saved, shown + [n for n in saved if "oracle" in n])
                 + probe_lines + [""] + world_scores.verdict(saved, models[0])[1])
    write_json(os.path.join(args.output_dir, f"{args.split}_scores.json"), saved)
    for line in lines:
        _cli.emit(line)
    return scores


def colour_probe(trained, split, scenes, bias):
    """`bias_probe.colour_log_odds` of the model on `split`'s conflict images."""
    model, vocab, settings, _ = trained

    def logits_of(image_ids, decoder_inputs):
        features = feature_batch(split.store, image_ids, settings["feature_kind"])
        return model((features, decoder_inputs), training=False)

    return bias_probe.colour_log_odds(logits_of, split.records, scenes, bias, vocab,
                                      max_length=settings["max_caption_length"])


def caption_split(args, trained, splits=None, save=True):
    """`(CaptionScores, split, COCO results)` of --split's beam-search captions."""
    if splits is None or args.split not in splits:
        splits = load_splits(args, trained[2], (args.split,))
    if args.split not in splits:
        raise _cli.UsageError(f"no {args.split} captions: give --captions_{args.split} "
                              "or --karpathy_json")
    split, start = splits[args.split], time.time()
    image_ids = [r.image_id for r in split.records]
    captions = caption_images(trained, split.store, image_ids, args)
    seconds = time.time() - start
    warn_if_empty(captions)
    results = coco_captions.coco_results(image_ids, captions)
    scores = metrics.evaluate_captions(coco_captions.coco_annotations(split.records), results)
    print(f"[eval] {len(results)} {args.split} images, beam {args.beam_size}: {seconds:.0f} s;"
          f" CIDEr-D {scores.scores['CIDEr']:.4f}")
    for record, caption in list(zip(split.records, captions))[: args.examples]:
        print(f"  image {record.image_id}: {caption}\n    reference: {record.captions[0]}")
    if save:
        write_json(os.path.join(args.output_dir, f"{args.split}_results.json"), results)
    return scores, split, results


def warn_if_empty(captions):
    """A warning when every caption is empty: the scores of nothing (CHAIR
    reads 0% hallucinations) would otherwise pass for results."""
    if captions and not any(c.strip() for c in captions):
        print(f"warning: all {len(captions)} captions are empty (the model ends every caption "
              "at once: train it longer); their scores, CHAIR's 0% included, mean nothing",
              file=sys.stderr)


def decode(args):
    """Captions every image of --features (or of --images, extracted first)."""
    trained = load_trained(args)
    path = args.features
    if args.images:
        path = os.path.join(args.output_dir, "extracted")
        extract(args, output=path)
    store = open_store(args, path, trained[2]["feature_kind"])
    image_ids = list(store.image_ids())
    captions = caption_images(trained, store, image_ids, args)
    warn_if_empty(captions)
    results = coco_captions.coco_results(image_ids, captions)
    _seq2seq.deliver(args, [f"{r['image_id']}\t{r['caption']}" for r in results], "captions",
                     results)
    return results


def score(args):
    """Scores a COCO results file against COCO caption annotations."""
    scores = metrics.evaluate_captions(args.annotations, args.results)
    if args.output:
        write_json(args.output, {"scores": scores.scores, "not_computed": scores.not_computed,
                                 "per_image": scores.per_image})
        print(f"[score] corpus and per-image scores -> {args.output}")
    for line in report.score_table({"score": scores}):
        _cli.emit(line)
    return scores


def extract(args, output=None):
    """Grid features of a folder of images with a keras.applications backbone."""
    from keras_structattn.data.feature_extraction import extract_grid_features

    output = output or args.features_out
    written = extract_grid_features(
        args.images, output, weights=args.backbone_weights, backbone=args.backbone,
        image_size=args.image_size,
    )
    print(f"[extract] {args.backbone} grid features -> {output}")
    return written


def visualize(args):
    """DIR/attention/<image_id>.png: the --layer caption-to-image attention
    of --split's first --num_images images (`draw_caption_attention`)."""
    trained = load_trained(args)
    model, vocab, settings, _ = trained
    kind = "grid" if isinstance(model, TransformerCaptioner) else "regions"
    if settings["feature_kind"] != kind:
        raise _cli.UsageError("visualize draws grid areas: the run uses region features"
                              if kind == "grid" else
                              "visualize draws region attention: the run uses grid features")
    splits = load_splits(args, settings, (args.split,))
    if args.split not in splits:
        raise _cli.UsageError(f"no {args.split} captions to visualize")
    split = splits[args.split]
    chosen = split.records[: args.num_images]
    image_ids = [r.image_id for r in chosen]
    captions = caption_images(trained, split.store, image_ids, args)
    if not data_flags_given(args):
        images = scene_images(_world.folder_of(args), split.name, image_ids)
    elif not args.images:
        raise _cli.UsageError("visualize needs --images, the folder of the split's images")
    else:
        images = read_images(args.images, [r.file_name for r in chosen], image_ids)

    def draw(image_id, caption, image):
        decoder_inputs, words = batches.teacher_forced_input(vocab, caption)
        return draw_caption_attention(
            model, feature_batch(split.store, [image_id], kind), decoder_inputs, words, image,
            layer=args.layer, grid_shape=settings["feature_shape"][:2] if kind == "grid" else None)

    pictures = ((i, draw(i, c, image), c) for i, c, image in zip(image_ids, captions, images))
    return _run.save_pictures(os.path.join(args.output_dir, "attention"), pictures, "images")
