"""The commands of the captioning recipe (flags: `recipes.caption`).

Each command is `command(args)` with the parsed flags; `run(args)` picks
it. Status goes to stderr (`print`, which `recipes._cli.execute` points
there), results to stdout (`_cli.emit`).

Data parallelism (`train --distribute data_parallel`, docs/distributed.md):
the model is built, compiled, restored and trained in `Replicas.scope()`;
each process of a multi-process run feeds its rows of every global batch
(`recipes._vl.feed`). The cross-entropy phase is `model.fit`; self-critical training
is one `train_on_batch` a step, with the samples and rewards of the whole
global batch computed alike in every process. Under JAX's DataParallel
that batch is split over the devices; TensorFlow's MirroredStrategy runs
the whole of a `train_on_batch` batch on every replica, which the loss
(`PaddedCrossEntropy`, divided by the tokens of all replicas) turns into
the one-device step at the cost of computing it on each replica.
"""

import argparse
import itertools
import json
import os
import time

import keras
import numpy as np

from keras_structattn.data import image_features
from keras_structattn.data.word_vocab import WordVocab
from keras_structattn.decoding.seq2seq import compiled_generate
from keras_structattn.metrics import CaptionScores
from keras_structattn.metrics import CiderD
from keras_structattn.metrics import evaluate_captions
from keras_structattn.metrics import ptb_tokenize
from keras_structattn.tasks.captioning import coco_captions
from keras_structattn.training import checkpoints as checkpoints_lib
from keras_structattn.training import self_critical
from keras_structattn.training.dictionaries import fit_dictionaries
from keras_structattn.training.dictionaries import has_dictionaries
from keras_structattn.training.losses import PaddedCrossEntropy
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
from recipes._run import write_json
from recipes.caption import MODELS
from recipes.caption import RUN_DEFAULTS
from recipes.caption import SPLITS
from recipes.caption import data_flags_given
from recipes.caption import run_defaults
from recipes.caption import world as world_lib

# Applied to the models' Shapes world sets only: their 1,000 warm-up steps
# are for COCO-sized runs; the embedded default trains about as many steps
# in all.
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
# The metrics printed, in pycocoevalcap's names and order.
METRICS = ("Bleu_1", "Bleu_2", "Bleu_3", "Bleu_4", "METEOR", "ROUGE_L", "CIDEr", "SPICE")


def run(args):
    """Runs `args.command` (the function of that name); returns what it returns."""
    return globals()[args.command](args)


# -------------------------------------------------------------------- data


class Split:
    """One split: its caption records and feature store."""

    def __init__(self, name, records, store):
        self.name = name
        self.records = records
        self.store = store
        self.image_ids = [r.image_id for r in records]

    def annotations(self):
        """The split's references in the COCO captions format."""
        return {
            "images": [{"id": r.image_id, "file_name": r.file_name} for r in self.records],
            "annotations": [
                {"id": k, "image_id": r.image_id, "caption": c}
                for k, (r, c) in enumerate((r, c) for r in self.records for c in r.captions)
            ],
        }


def _captions(args, folder, needed):
    """`{split: records or None}` of the `needed` splits, from the flags or
    the Shapes world files."""
    skip = "skip" if args.skip_missing else "error"
    if args.karpathy_json:
        splits = coco_captions.read_karpathy(args.karpathy_json, images_without_captions=skip)
        print(f"[data] {splits.report.describe()}")
        return {s: splits.get(s) for s in SPLITS}
    out = {}
    for split in needed:
        path = getattr(args, f"captions_{split}", None)
        if folder is not None:
            path = world_lib.captions_path(folder, split)
        if not path:
            out[split] = None
            continue
        split_list = getattr(args, f"split_{split}", None) if folder is None else None
        split_ids = coco_captions.read_split_list(split_list) if split_list else None
        records = coco_captions.read_coco_captions(
            path, split_ids=split_ids, tokenize=ptb_tokenize, images_without_captions=skip
        )
        print(f"[data] {split}: {records.report.describe()}")
        out[split] = records
    return out


def _feature_path(args, folder, split):
    if folder is not None:
        return world_lib.features_path(folder, split)
    return getattr(args, f"{split}_features", None) or args.features


def load_splits(args, settings, needed):
    """The splits in `needed` that the data has, with their feature stores.

    Shapes world is generated (or reused from DIR/shapes_world) when no
    data flag is given. Images without features are an error naming the
    image and the store, or skipped and counted with --skip_missing.

    Returns:
        `{split: Split}` (a split the data does not have is left out).
    """
    folder = None
    if not data_flags_given(args):
        folder = world_lib.ensure_world(args)
    records = _captions(args, folder, needed)
    splits = {}
    for name in needed:
        if not records.get(name):
            continue
        path = _feature_path(args, folder, name)
        file_names = {r.image_id: r.file_name for r in records[name]}
        store = image_features.open_features(
            path, settings["feature_kind"], file_names=file_names
        )
        kept, skipped = image_features.select_images(
            store, records[name], missing="skip" if args.skip_missing else "error"
        )
        if skipped:
            print(f"[data] {name}: {skipped} images without features in {path} skipped")
        splits[name] = Split(name, kept, store)
    return splits


# Bottom-up features have 10 to 100 regions an image (Anderson et al., 2018).
MAX_REGIONS = 100


def feature_batch(store, image_ids, kind):
    """The encoder input of `image_ids`: a grid `[B, H, W, C]` or a regions
    dict, padded to the store's region count (one static shape for every
    batch: `recipes._vl.max_regions_of`)."""
    if kind == "grid":
        return image_features.grid_batch(store, image_ids)
    if not hasattr(store, "padded_regions"):
        store.padded_regions = _vl.max_regions_of(store, MAX_REGIONS)
    features, boxes, mask = image_features.region_batch(store, image_ids, store.padded_regions)
    return {"features": features, "boxes": boxes, "mask": mask}


# ------------------------------------------------------------------- model


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
    """The run folder, its settings and hparams (`_seq2seq.resolve_run`).

    Returns:
        `(run, settings, hparams)`; `hparams` is None for a new run (it
        depends on the data's grid, see `new_hparams`).
    """
    run, settings, hparams = _seq2seq.resolve_run(
        args, dict(model=args.model, hparams_set=args.hparams_set,
                   min_word_count=args.min_word_count,
                   max_caption_length=args.max_caption_length,
                   feature_kind=args.feature_kind, dictionary_init=args.dictionary_init),
        run_defaults(args), check_set)
    # Runs made before --model and --dictionary_init existed.
    settings.setdefault("model", "area")
    settings.setdefault("dictionary_init", RUN_DEFAULTS["dictionary_init"])
    return run, settings, hparams


def new_hparams(args, settings, feature_shape):
    """A new run's hparams: the set's, fitted to the data's grid and the
    feature kind, then `--hparams`."""
    fitted = f"encoder_input={settings['feature_kind']}"
    if settings["feature_kind"] == "grid":
        fitted += f",grid_height={feature_shape[0]},grid_width={feature_shape[1]}"
    return _seq2seq.new_hparams(args, settings, MODELS[settings["model"]][0],
                                DEFAULT_SET_OVERRIDES, fitted)


def build_model(hparams, vocab_size, feature_shape, seed=None):
    """The captioner of `hparams` (its class by `model_type`), built on a
    batch of zeros."""
    model = MODEL_CLASSES[hparams.model_type].from_hparams(hparams, vocab_size, seed=seed)
    if hparams.encoder_input == "grid":
        features = np.zeros((1, *feature_shape), "float32")
    else:
        regions, dim = 2, feature_shape[-1]
        features = {"features": np.zeros((1, regions, dim), "float32"),
                    "boxes": np.zeros((1, regions, 4), "float32"),
                    "mask": np.ones((1, regions), bool)}
    model((features, np.zeros((1, 2), "int32")))
    return model


def feature_shape_of(store):
    """The per-image feature shape a model is built for: `[H, W, C]` or `[C]`."""
    if store.kind == "grid":
        return list(store.grid_shape) + [int(store.feature_dim)]
    return [int(store.feature_dim)]


def prepare_run(args, run, settings, hparams, train_split, replicas=None):
    """The vocabulary, hparams and built model of a training run; a new
    run's files are committed once its model has been built (by process 0
    of a multi-process run). With `replicas`, the batches must split over
    them (checked before anything is built or written)."""
    if run.holds_run:
        vocab = WordVocab.load(run.file(VOCAB_FILE))
        print(f"[run] resuming {args.output_dir}: {settings['hparams_set']}")
    else:
        if train_split.store.kind != settings["feature_kind"]:
            raise _cli.UsageError(f"--feature_kind {settings['feature_kind']} but the "
                                  f"training features are {train_split.store.kind}")
        settings["feature_shape"] = feature_shape_of(train_split.store)
        hparams = new_hparams(args, settings, settings["feature_shape"])
        tokens = [t for r in train_split.records for t in r.tokens]
        vocab = _cli.usage(
            lambda: WordVocab.build(tokens, min_count=settings["min_word_count"]))
    if replicas is not None:
        check_batches(args, replicas, hparams, train_split)
    model = _seq2seq.build_run(
        args, run, settings, hparams, vocab, VOCAB_FILE,
        lambda seed: build_model(hparams, vocab.vocab_size, settings["feature_shape"], seed),
        f"{vocab.vocab_size} word ids (words seen >= {settings['min_word_count']} times)",
        write=replicas is None or replicas.is_chief)
    return vocab, hparams, model


def check_batches(args, replicas, hparams, train_split):
    """Usage errors unless the cross-entropy and self-critical batches
    (images) split evenly over the replicas."""
    _replicas.check_batch(replicas, args.batch_size or hparams.batch_size)
    if args.scst_steps:
        images = min(args.scst_images, len(train_split.records))
        _replicas.check_batch(replicas, images, "--scst_images")


def load_trained(args):
    """The run's model with the weights to decode with (those of the last
    phase trained, `_seq2seq.choose_weights`), its vocabulary, settings and
    hparams."""
    run, settings, hparams = resolve_run(args)
    vocab = WordVocab.load(run.file(VOCAB_FILE))
    model = build_model(hparams, vocab.vocab_size, settings["feature_shape"])
    _seq2seq.load_weights(model, args, run, (SCST_PHASE, XE_PHASE))
    return model, vocab, settings, hparams


# ------------------------------------------------------------ training data


CAPTIONS_PER_IMAGE = 5
VALIDATION_IMAGES = 200  # the first ones, in order


def image_captions(record, count=CAPTIONS_PER_IMAGE):
    """`count` token lists of an image: its first `count` captions, cycled
    when it has fewer (COCO images have 5 to 7)."""
    return [record.tokens[k % len(record.tokens)] for k in range(count)]


def xe_batches(split, vocab, settings, images, start=0, replicas=None):
    """Cross-entropy batches `((features, captions), targets)`, forever.

    A batch holds `images` images with `CAPTIONS_PER_IMAGE` captions each
    (`captions`, `targets`: `[images, 5, T]`): the captioner encodes each
    image once for its five captions (as self-critical.pytorch's
    `seq_per_img`), which makes a step about five times cheaper than one
    image per caption. The order is `recipes._vl.epoch_batches`' (a pass
    a permutation drawn from the seed and the pass: a run resumed at step
    `start` reads what an uninterrupted one would); with `replicas`, this
    process's rows of each batch (`recipes._vl.feed`).
    """
    return _vl.epoch_batches(len(split.records), images, settings["seed"],
                             lambda rows: batch_of(split, rows, vocab, settings),
                             start=start, replicas=replicas)


def batch_of(split, rows, vocab, settings):
    """`((features, captions [B, 5, T]), targets [B, 5, T])` of the records
    at `rows`."""
    records = [split.records[j] for j in rows]
    tokens = [t for r in records for t in image_captions(r)]
    decoder_inputs, targets = coco_captions.caption_batch(
        tokens, vocab, settings["max_caption_length"])
    shape = (len(records), CAPTIONS_PER_IMAGE, -1)
    features = feature_batch(split.store, [r.image_id for r in records],
                             settings["feature_kind"])
    return (features, decoder_inputs.reshape(shape)), targets.reshape(shape)


# ------------------------------------------------------------------ train


def train(args):
    """Cross-entropy training to --train_steps, self-critical training to
    --scst_steps, then the evaluation; each phase resumes from its newest
    checkpoint."""
    replicas, jit = _seq2seq.replicas_and_jit(args)
    run, settings, hparams = resolve_run(args)
    needed = ("train", "val") if args.no_eval else ("train", "val", args.split)
    needed = tuple(dict.fromkeys(needed))  # --split may be val
    splits = load_splits(args, settings, needed)
    if "train" not in splits:
        raise _cli.UsageError("give training captions: --karpathy_json or --captions_train")
    # Only process 0 of a multi-process run writes files; evaluating in the
    # training command would need every process (their arrays are global).
    evaluating = not args.no_eval and replicas.num_processes == 1
    with replicas.scope():
        vocab, hparams, model = prepare_run(args, run, settings, hparams, splits["train"],
                                            replicas)
        batch_size = args.batch_size or hparams.batch_size
        _seq2seq.compile_model(model, hparams, args, jit)
        scst_folder = os.path.join(args.output_dir, SCST_DIR)
        start = time.time()
        trained = (model, vocab, settings, hparams)
        before = None
        if checkpoints_lib.checkpoint_paths(scst_folder, readable_only=True):
            print("[train] cross-entropy phase done (self-critical checkpoints found)")
        else:
            train_cross_entropy(args, settings, splits, vocab, model, batch_size, replicas)
            if args.scst_steps and evaluating:
                # The cross-entropy model's scores, for the comparison with SCST.
                print("[eval] the cross-entropy model, before self-critical training:")
                before, _, _ = caption_split(args, trained, splits, save=False)
                write_json(run.file(f"{args.split}_scores_cross_entropy.json"),
                           {"scores": before.scores, "not_computed": before.not_computed})
        if args.scst_steps:
            train_self_critical(args, settings, splits, vocab, model, jit, replicas)
    print(f"[train] done ({time.time() - start:.0f} s in this command)")
    if not replicas.is_chief:
        return model
    if before is None and os.path.exists(run.file(f"{args.split}_scores_cross_entropy.json")):
        saved = _read_json(run.file(f"{args.split}_scores_cross_entropy.json"))
        before = CaptionScores(saved["scores"], {}, saved["not_computed"], [])
    write_json(run.file("train_summary.json"), {
        name: _seq2seq.history_of(run, name)
        for name in ("history.csv", "scst_history.csv") if os.path.exists(run.file(name))
    })
    if _replicas.evaluates_after_training(args, replicas):
        print("[model] the trained model in memory")
        evaluate(args, trained=trained, splits=splits, before=before if args.scst_steps else None)
    return model


def train_cross_entropy(args, settings, splits, vocab, model, batch_size, replicas):
    """Label-smoothed cross-entropy with the engine's `fit`, resumable;
    each process feeds its rows of every batch."""
    if not checkpoints_lib.checkpoint_paths(os.path.join(args.output_dir, XE_DIR),
                                            readable_only=True):
        # A fresh model (a checkpoint holds fitted dictionaries already).
        init_dictionaries(model, splits["train"], vocab, settings, batch_size)
    print(f"[train] cross-entropy: {len(splits['train'].records)} images, batches of "
          f"{batch_size} images x {CAPTIONS_PER_IMAGE} captions")
    validation = None
    if "val" in splits:
        val = splits["val"]
        validation = _vl.validation_batches(
            min(len(val.records), VALIDATION_IMAGES), batch_size,
            lambda rows: batch_of(val, rows, vocab, settings), replicas)

    def data(done):
        def batches():
            return xe_batches(splits["train"], vocab, settings, batch_size, done, replicas)

        # Under MirroredStrategy, `fit` peeks with an iterator of its own,
        # whose read-ahead of a generator would be lost: each iterator
        # restarts at step `done` instead.
        return _replicas.restarting(batches) if replicas.strategy is not None else batches()

    scores = val_cider_hook(args, splits, vocab, settings)
    _engine.check_task_score(args, replicas, scores)
    _engine.fit(model, args, data, per_epoch=args.steps_per_checkpoint,
                total_steps=args.train_steps, validation=validation, replicas=replicas,
                phase=XE_PHASE, scores=scores, label="cross-entropy")


def val_cider_hook(args, splits, vocab, settings):
    """The validation score `--early_stopping cider` watches: CIDEr-D of
    greedy captions of the validation images against their references
    (document frequencies of the validation references themselves, as the
    COCO evaluation computes them)."""
    def compute(model):
        if "val" not in splits:
            raise _cli.UsageError("--early_stopping cider needs validation captions")
        val = splits["val"]
        greedy = argparse.Namespace(beam_size=1, alpha=args.alpha,
                                    decode_batch_size=args.decode_batch_size)
        captions = caption_images((model, vocab, settings, None), val.store, val.image_ids,
                                  greedy)
        cider = CiderD({r.image_id: r.tokens for r in val.records})
        return {"cider": float(np.mean(cider.scores(
            val.image_ids, [c.split() for c in captions])))}

    return _engine.ScoresHook(("cider",), compute)


def init_dictionaries(model, split, vocab, settings, batch_size):
    """Fits a CATT model's dictionaries by K-means over one pass of the
    training batches (`keras_structattn.training.dictionaries`), unless the run
    asked for the uniform initializer; the same seed gives the same
    centres, so a run killed before its first checkpoint refits them alike."""
    if not has_dictionaries(model):
        return
    if settings["dictionary_init"] == "uniform":
        print("[dictionaries] uniform(0, 0.01) initializer (--dictionary_init uniform, "
              "the paper's 'w/o Init')")
        return
    start = time.time()
    per_pass = max(1, len(split.records) // batch_size)
    batches = xe_batches(split, vocab, settings, batch_size)
    inputs = (batch[0] for batch in itertools.islice(batches, per_pass))
    try:
        report = fit_dictionaries(model, inputs, seed=settings["seed"])
    except ValueError as error:  # a dictionary larger than the data
        raise _cli.UsageError(f"{error} (--hparams dictionary_size=...)") from None
    for name, values in report.items():
        layer = model.global_dictionaries()[name]
        print(f"[dictionaries] {name}: K-means, {layer.size} centres of {values['rows']:,} "
              f"vectors (inertia {values['inertia']:.4g})")
    print(f"[dictionaries] fitted in {time.time() - start:.1f} s")


def train_self_critical(args, settings, splits, vocab, model, jit, replicas):
    """Self-critical sequence training (`keras_structattn.training.self_critical`):
    a fresh Adam at --scst_learning_rate, CIDEr-D rewards with document
    frequencies from the training references, resumable."""
    train_split = splits["train"]
    model.compile(
        optimizer=keras.optimizers.Adam(args.scst_learning_rate),
        loss=PaddedCrossEntropy(0.0),
        jit_compile=jit,
    )
    cider = CiderD({r.image_id: r.tokens for r in train_split.records})
    length = settings["max_caption_length"] + 1
    samples, images = args.scst_samples, args.scst_images
    if args.scst_baseline == "mean" and samples < 2:
        raise _cli.UsageError("--scst_baseline mean needs --scst_samples >= 2")
    draw = self_critical.sampler(model, samples)
    greedy = (compiled_generate(model, max_decode_length=length, beam_size=1)
              if args.scst_baseline == "greedy" else None)
    print(f"[train] self-critical: {images} images x {samples} samples, "
          f"{args.scst_baseline} baseline, CIDEr-D reward")
    scores = val_cider_hook(args, splits, vocab, settings)
    _engine.check_task_score(args, replicas, scores)
    # Without self-critical checkpoints the model holds the cross-entropy
    # weights (`train_cross_entropy` trained or restored them).
    _engine.fit_steps(
        model, args,
        lambda model, step: self_critical_step(model, train_split, settings, vocab, cider,
                                               draw, greedy, args, step, replicas),
        per_epoch=args.steps_per_checkpoint, total_steps=args.scst_steps, replicas=replicas,
        phase=SCST_PHASE, scores=scores, label="self-critical")


def self_critical_step(model, split, settings, vocab, cider, draw, greedy, args, step,
                       replicas):
    """One step: sample, reward on the host, one compiled gradient step.

    Every process samples and scores the whole global batch (the same
    draws: compiled programs over the replicated weights run in all of
    them alike), then trains on its rows of it."""
    count = len(split.records)
    rng = np.random.default_rng([settings["seed"], 1_000_003, step])
    chosen = rng.choice(count, size=min(args.scst_images, count), replace=False)
    image_ids = [split.records[i].image_id for i in chosen]
    features = feature_batch(split.store, image_ids, settings["feature_kind"])
    samples = args.scst_samples
    length = settings["max_caption_length"] + 1
    uniforms = self_critical.draw_uniforms(settings["seed"], step, len(chosen) * samples, length)
    ids = keras.ops.convert_to_numpy(draw(features, uniforms))
    captions = self_critical.caption_tokens(ids, vocab.id_to_word)
    repeated = np.repeat(image_ids, samples)
    rewards = cider.scores(repeated, captions).reshape(len(chosen), samples)
    baseline = None
    if greedy is not None:
        greedy_ids = keras.ops.convert_to_numpy(greedy(features)[0])
        baseline = cider.scores(image_ids, self_critical.caption_tokens(greedy_ids,
                                                                        vocab.id_to_word))
    advantage = self_critical.advantages(rewards, baseline)
    decoder_inputs, targets, weight = self_critical.training_batch(ids, advantage.reshape(-1))
    shape = (len(chosen), samples, -1)
    x, y, sample_weight = replicas.local_rows(
        ((features, decoder_inputs.reshape(shape)), targets.reshape(shape), weight.reshape(shape)))
    logs = model.train_on_batch(x, y, sample_weight=sample_weight, return_dict=True)
    logs = {k: float(v) for k, v in logs.items()}
    logs["reward"] = float(rewards.mean())
    return logs


# --------------------------------------------------------------- decoding


def caption_images(trained, store, image_ids, args):
    """Beam-search captions of `image_ids` (a list of strings)."""
    model, vocab, settings, _ = trained
    generate = compiled_generate(model, max_decode_length=settings["max_caption_length"] + 1,
                                 beam_size=args.beam_size, alpha=args.alpha)
    size = args.decode_batch_size
    captions = []
    for begin in range(0, len(image_ids), size):
        chunk = list(image_ids[begin:begin + size])
        # Padded to the batch size: one compiled program for every batch.
        padded = chunk + [chunk[-1]] * (size - len(chunk))
        ids, _ = generate(feature_batch(store, padded, settings["feature_kind"]))
        ids = keras.ops.convert_to_numpy(ids)[: len(chunk)]
        captions.extend(vocab.decode(row) for row in ids)
    return captions


def score_table(columns):
    """Result lines: a header, then one line per metric.

    Args:
        columns: `{title: CaptionScores}`, the model's first; a metric the
            first column could not compute is reported as such, once.
    """
    titles = list(columns)
    lines = [f"{'metric':10s}" + "".join(f" {t:>14s}" for t in titles)]
    first = columns[titles[0]]
    for name in METRICS:
        if name not in first.scores:
            continue
        values = [columns[t].scores.get(name) for t in titles]
        lines.append(f"{name:10s}" + "".join(
            f" {v:14.4f}" if v is not None else f" {'-':>14s}" for v in values))
    for name, why in first.not_computed.items():
        lines.append(f"{name:10s} {why}")
    return lines


def evaluate(args, trained=None, splits=None, before=None):
    """Captions the --split images with beam search and scores them.

    Args:
        args: the flags.
        trained: `(model, vocab, settings, hparams)`; default: the run's
            (`load_trained`).
        splits: the loaded splits, if the caller has them.
        before: optional `CaptionScores` of the cross-entropy model, shown
            next to the final model's (`train` with self-critical steps).

    Returns:
        The `CaptionScores` of the model.
    """
    scores, split, results = caption_split(args, trained or load_trained(args), splits)
    columns = {"model": scores}
    if before is not None:
        columns = {"self-critical": scores, "cross-entropy": before}
    outputs = {next(iter(columns)): results}
    baseline_path = world_lib.baseline_path(args, args.split)
    if baseline_path and os.path.exists(baseline_path):
        outputs["baseline"] = _read_json(baseline_path)
        columns["baseline"] = evaluate_captions(split.annotations(), outputs["baseline"])
        print(f"[eval] baseline: {world_lib.BASELINE_NAME}")
    saved = {
        name: {"scores": value.scores, "not_computed": value.not_computed}
        for name, value in columns.items()
    }
    rates = world_lib.hallucination_of(args, args.split, outputs)
    for name, values in rates.items():
        saved[name]["hallucination"] = values
    write_json(os.path.join(args.output_dir, f"{args.split}_scores.json"), saved)
    for line in score_table(columns) + hallucination_table(rates, list(columns)):
        _cli.emit(line)
    return scores


def hallucination_table(columns, titles):
    """Result lines of the colour-shape hallucination rates (percent)
    under the score table's `titles` ("-" where not computed)."""
    if not columns:
        return []
    rows = (("CHAIR_i", "chair_i"), ("CHAIR_s", "chair_s"), ("biased", "biased_pair"),
            ("biased@cf", "biased_pair_conflict"))
    first = next(iter(columns.values()))
    lines = []
    for label, key in rows:
        if key not in first:
            continue
        values = [columns.get(t, {}).get(key) for t in titles]
        lines.append(f"{label:10s}" + "".join(
            f" {100 * v:13.2f}%" if v is not None else f" {'-':>14s}" for v in values))
    return lines


def caption_split(args, trained, splits=None, save=True):
    """Beam-search captions of the --split images and their scores;
    `save` writes them to DIR/<split>_results.json.

    Returns:
        `(CaptionScores, Split, results)`, the results in the COCO format.
    """
    if splits is None or args.split not in splits:
        splits = load_splits(args, trained[2], (args.split,))
    if args.split not in splits:
        raise _cli.UsageError(f"no {args.split} captions: give --captions_{args.split} "
                              "or --karpathy_json")
    split = splits[args.split]
    start = time.time()
    captions = caption_images(trained, split.store, split.image_ids, args)
    seconds = time.time() - start
    results = [{"image_id": i, "caption": c} for i, c in zip(split.image_ids, captions)]
    scores = evaluate_captions(split.annotations(), results)
    print(f"[eval] {len(results)} {args.split} images, beam {args.beam_size}: {seconds:.0f} s;"
          f" CIDEr-D {scores.scores['CIDEr']:.4f}")
    for record, caption in list(zip(split.records, captions))[: args.examples]:
        print(f"  image {record.image_id}: {caption}\n    reference: {record.captions[0]}")
    if save:
        write_json(os.path.join(args.output_dir, f"{args.split}_results.json"), results)
    return scores, split, results


def _read_json(path):
    with open(path, encoding="utf-8") as f:
        return json.load(f)


def decode(args):
    """Captions every image of --features (or of --images, extracted first)."""
    trained = load_trained(args)
    settings = trained[2]
    path = args.features
    if args.images:
        path = os.path.join(args.output_dir, "extracted")
        extract(args, output=path)
    store = image_features.open_features(path, settings["feature_kind"])
    image_ids = list(store.image_ids())
    captions = caption_images(trained, store, image_ids, args)
    results = [{"image_id": _json_id(i), "caption": c} for i, c in zip(image_ids, captions)]
    _seq2seq.deliver(args, [f"{r['image_id']}\t{r['caption']}" for r in results], "captions",
                     results)
    return results


def _json_id(image_id):
    try:
        return int(image_id)
    except (TypeError, ValueError):
        return str(image_id)


def score(args):
    """Scores a COCO results file against COCO caption annotations."""
    scores = evaluate_captions(args.annotations, args.results)
    if args.output:
        write_json(args.output, {"scores": scores.scores, "not_computed": scores.not_computed,
                                 "per_image": scores.per_image})
        print(f"[score] corpus and per-image scores -> {args.output}")
    for line in score_table({"score": scores}):
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
    """PNGs of the caption-to-image attention of the --split's first
    --num_images images, DIR/attention/<image_id>.png: for a grid run
    (`TransformerCaptioner`) the most attended area of each generated word
    (`draw_areas`), for a region run the in-sample and cross-sample streams
    of a few words (`draw_streams`), at the --layer decoder layer."""
    trained = load_trained(args)
    settings = trained[2]
    kind = "grid" if isinstance(trained[0], TransformerCaptioner) else "regions"
    if settings["feature_kind"] != kind:
        raise _cli.UsageError("visualize draws grid areas: the run uses region features"
                              if kind == "grid" else
                              "visualize draws region attention: the run uses grid features")
    splits = load_splits(args, settings, (args.split,))
    if args.split not in splits:
        raise _cli.UsageError(f"no {args.split} captions to visualize")
    split = splits[args.split]
    chosen = split.records[: args.num_images]
    captions = caption_images(trained, split.store, [r.image_id for r in chosen], args)
    draw = draw_areas if kind == "grid" else draw_streams
    pictures = ((record.image_id, draw(args, trained,
                                       feature_batch(split.store, [record.image_id], kind),
                                       caption, image), caption)
                for record, caption, image in zip(chosen, captions,
                                                  world_lib.images_of(args, split, chosen)))
    return _run.save_pictures(os.path.join(args.output_dir, "attention"), pictures, "images")


def _decoder_inputs(vocab, words):
    """The teacher-forced decoder input `[1, T]` of a caption's `words` (EOS last)."""
    targets = vocab.encode(words) + [1]
    return np.array([[0] + targets[:-1]], "int32")


def draw_areas(args, trained, features, caption, image):
    """For each generated word (and EOS), the grid area it attends to most
    (averaged over heads)."""
    from keras_structattn.tasks import attention_maps

    model, vocab, settings, _ = trained
    words = caption.split()
    weights = keras.ops.convert_to_numpy(model.encdec_attention(
        features, _decoder_inputs(vocab, words), layer=args.layer))
    areas = attention_maps.top_areas(weights[0], model.area_coordinates(args.layer))
    return attention_maps.draw_word_areas(image, words + ["<eos>"], areas,
                                          grid_shape=settings["feature_shape"][:2])


# Words whose attention is drawn first: those a colour-shape confounder acts on.
_DRAWN_WORDS = 4


def _drawn_positions(words):
    from keras_structattn.data.shapes_world.hallucination import is_colour_or_shape

    chosen = [t for t, w in enumerate(words) if is_colour_or_shape(w)][:_DRAWN_WORDS]
    return chosen or list(range(min(_DRAWN_WORDS, len(words))))


def draw_streams(args, trained, features, caption, image):
    """A CATT or Up-Down captioner's attention, IS beside CS.

    For a few words of the caption (colours and shapes first): the
    in-sample attention over the regions (a spotlight) beside the
    cross-sample one: Transformer+CATT's CS stream over the encoder's CS
    output (one entry per region, so also a spotlight), Up-Down+CATT's
    over its global dictionary (the top entries as bars). Plain Up-Down
    and Transformer runs draw the IS attention alone.
    """
    from keras_structattn.tasks import attention_maps

    model, vocab, _, _ = trained
    words = caption.split() + ["<eos>"]
    decoder_inputs = _decoder_inputs(vocab, words[:-1])
    if isinstance(model, CATTCaptioner):
        weights = model.encdec_attention(features, decoder_inputs, layer=args.layer)
        # [1, heads, T, R] -> [T, R], averaged over heads.
        is_w, cs_w = (None if w is None else keras.ops.convert_to_numpy(w)[0].mean(0)
                      for w in weights)
        cs_kind = "regions"
    else:
        is_w, cs_w = (None if w is None else keras.ops.convert_to_numpy(w)[0]
                      for w in model.attention_weights(features, decoder_inputs))
        cs_kind = "dictionary"
    real = np.asarray(features["mask"][0], bool)
    boxes = np.asarray(features["boxes"][0])[real]
    rows = []
    for t in _drawn_positions(words):
        left = attention_maps.draw_region_weights(
            image, boxes, is_w[t][real], title=[f'"{words[t]}": in-sample (regions)'])
        if cs_w is None:
            rows.append(left)
        elif cs_kind == "regions":
            rows.append(attention_maps.beside(left, attention_maps.draw_region_weights(
                image, boxes, cs_w[t][real],
                title=[f'"{words[t]}": cross-sample ([V_C]_E)'])))
        else:
            rows.append(attention_maps.beside(left, attention_maps.draw_dictionary_weights(
                {f'"{words[t]}": the visual dictionary': cs_w[t]}, left.height)))
    return attention_maps.stacked(rows)
