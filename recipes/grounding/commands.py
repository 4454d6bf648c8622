"""The commands of the grounding recipe (flags: `recipes.grounding`).

Each command is `command(args)` with the parsed flags; `run(args)` picks
it. Status goes to stderr, results to stdout (`_cli.emit`).
"""

import collections
import os
import time

import keras
import numpy as np

from keras_structattn.data.word_vocab import WordVocab
from keras_structattn.tasks.grounding import heads as grounding
from keras_structattn.tasks.grounding import refcoco
from keras_structattn.tasks.vqa.vqa import question_batch
from keras_structattn.tasks.vqa.vqa import records_report
from models.vqa.muan import MUANGrounding
from recipes import _cli
from recipes import _vl
from recipes import _world
from recipes._run import write_atomically
from recipes._run import write_json
from recipes.grounding import PAPER_SET
from recipes.grounding import RUN_DEFAULTS
from recipes.grounding import WORLD_SET
from recipes.grounding import data_flags_given

VOCAB = "vocab.json"
BASELINE_NAME = "the biggest region proposal"
IOU_THRESHOLD = 0.5


def run(args):
    """Runs `args.command`; returns what it returns."""
    return {"train": train, "evaluate": evaluate, "predict": predict,
            "visualize": visualize}[args.command](args)


# -------------------------------------------------------------------- data


class Split:
    """The expressions of one split, their region store, encoded per batch."""

    def __init__(self, name, records, store):
        self.name, self.records, self.store = name, records, store
        self.image_ids = [r.image_id for r in records]
        self.gt_boxes = np.stack([r.normalized_box() for r in records]) if records else None

    def encode(self, vocab, hparams, settings=None):
        self.hparams = hparams
        self.target = dict(target="iou", threshold=0.5) if settings is None else dict(
            target=settings["target"], threshold=settings["iou_threshold"])
        self.expressions = question_batch([r.tokens for r in self.records], vocab,
                                          hparams.max_expression_length)
        return self

    def __len__(self):
        return len(self.records)

    def inputs(self, rows):
        inputs = _vl.region_inputs(self.store, [self.image_ids[i] for i in rows],
                                   self.hparams.max_regions)
        inputs["expression"] = self.expressions[rows]
        return inputs

    def batch(self, rows):
        """`(inputs, {"scores": target distribution [B, N], "box_deltas":
        packed regression targets [B, N, 5]})` of the expressions `rows`."""
        inputs = self.inputs(rows)
        gt = self.gt_boxes[rows]
        targets = refcoco.grounding_targets(inputs["boxes"], inputs["region_mask"], gt,
                                            **self.target)
        # Eq. 13 averages over the n proposals: every real one is regressed.
        packed = grounding.regression_targets_numpy(
            inputs["boxes"], gt, inputs["region_mask"].astype("float32"))
        return inputs, {"scores": targets["target_distribution"], "box_deltas": packed}


def _world_paths(args):
    folder = _world.ensure_world(args, tasks="refs", default_seed=RUN_DEFAULTS["seed"])
    return (os.path.join(folder, "refs", "refs.json"),
            os.path.join(folder, "refs", "instances.json"), folder)


def load_splits(args, needed):
    """`{split: Split}` of the `needed` split names the refs have."""
    if data_flags_given(args):
        refs, instances, folder = args.refs, args.instances, None
    else:
        refs, instances, folder = _world_paths(args)
    records, report = refcoco.read_refs(refs, instances, splits=list(needed),
                                        skip_invalid=args.skip_invalid)
    print(f"[data] refs: {records_report(report)}")
    by_split = collections.defaultdict(list)
    for record in records:
        by_split[record.split].append(record)
    splits = {}
    for name in needed:
        if not by_split.get(name):
            continue
        features = args.features or _world.features_path(folder, name)
        store = _vl.open_regions(features)
        kept = [r for r in by_split[name] if r.image_id in store]
        if len(kept) < len(by_split[name]):
            first = next(r for r in by_split[name] if r.image_id not in store)
            missing = len(by_split[name]) - len(kept)
            if not args.skip_invalid:
                raise ValueError(f"{features}: no features for image {first.image_id} (ref "
                                 f"{first.ref_id}); {missing} expressions lack features "
                                 "(--skip_invalid skips and counts them)")
            print(f"[data] {name}: {missing} expressions skipped: no features in {features}")
        splits[name] = Split(name, kept, store)
    return splits


# ------------------------------------------------------------------- model


def resolve_run(args):
    return _vl.resolve_run(
        args, dict(hparams_set=args.hparams_set, target=args.target,
                   iou_threshold=args.iou_threshold), RUN_DEFAULTS, "grounding",
        lambda s: PAPER_SET if data_flags_given(args) else WORLD_SET)


def build_model(hparams, vocab, word_vectors=None, seed=None):
    """The grounding model of `hparams`, built on a batch of zeros."""
    model = MUANGrounding.from_hparams(hparams, vocab.vocab_size, word_vectors=word_vectors,
                                       seed=seed)
    n = hparams.max_regions
    model({"expression": np.ones((1, hparams.max_expression_length), "int32"),
           "regions": np.zeros((1, n, hparams.feature_dim), "float32"),
           "boxes": np.zeros((1, n, 4), "float32"), "region_mask": np.ones((1, n), bool)})
    return model


def prepare_run(args, run, settings, hparams, train_split, resuming, write=True):
    """The vocabulary, hparams and built model of a training run; a new
    run's files are committed once its model has been built, by the chief
    process only (`write`). `resuming`: whether the folder held the run
    when `resolve_run` read it (see `recipes.vqa.commands.prepare_run`)."""
    word_vectors = None
    if resuming:
        vocab = WordVocab.load(run.file(VOCAB))
        print(f"[run] resuming {args.output_dir}: {settings['hparams_set']}")
    else:
        vocab = WordVocab.build([r.tokens for r in train_split.records], min_count=1)
        if args.word_vectors:
            word_vectors = _vl.read_word_vectors(args.word_vectors, vocab)
        fitted = [f"max_regions={_vl.max_regions_of(train_split.store, hparams.max_regions)}",
                  f"feature_dim={int(train_split.store.feature_dim)}"]
        if word_vectors is not None:
            fitted.append(f"word_dim={word_vectors.shape[1]}")
        hparams = _vl.usage(hparams.parse(",".join(fitted)).parse, args.hparams)
        _vl.decay_epochs(hparams)  # checked before the run is written
    print(f"[hparams] {settings['hparams_set']}: {hparams}")
    keras.utils.set_random_seed(settings["seed"])
    model = build_model(hparams, vocab, word_vectors, settings["seed"])
    if not resuming and write:
        run.commit(settings, {_vl.HPARAMS_FILE: hparams.to_json() + "\n", VOCAB: vocab.save})
        print(f"[run] new run in {args.output_dir}: {vocab.vocab_size} word ids")
    return vocab, hparams, model


def load_trained(args):
    run, settings, hparams = resolve_run(args)
    vocab = WordVocab.load(run.file(VOCAB))
    model = build_model(hparams, vocab)
    weights = _vl.newest_weights(args)
    model.load_weights(weights)
    print(f"[model] weights {weights}")
    return model, vocab, settings, hparams


# ------------------------------------------------------------------ train


def train(args):
    """Trains to --epochs (resuming from the newest checkpoint) on the
    --distribute replicas, then evaluates."""
    replicas = _vl.replicas_of(args)  # first: before any TensorFlow op
    run, settings, hparams = resolve_run(args)
    resuming = run.holds_run
    batch_size = _vl.global_batch_size(args, hparams, replicas)
    names = (args.train_split, args.val_split) + (() if args.no_eval else (args.split,))
    splits = load_splits(args, tuple(dict.fromkeys(names)))
    if args.train_split not in splits:
        raise _cli.UsageError(f"the refs have no '{args.train_split}' expressions "
                              "(--train_split)")
    with replicas.scope():  # the model, its optimizer, metrics and checkpoint
        vocab, hparams, model = prepare_run(args, run, settings, hparams,
                                            splits[args.train_split], resuming,
                                            write=replicas.is_chief)
        epochs = args.epochs or hparams.epochs
        train_set = splits[args.train_split].encode(vocab, hparams, settings)
        per_epoch = _vl.steps_per_epoch(len(train_set), batch_size)
        _vl.compile_model(
            model, hparams, per_epoch, args, replicas,
            loss={"scores": grounding.RankLoss(), "box_deltas": grounding.BoxRegressionLoss()},
            loss_weights={"scores": hparams.rank_weight,
                          "box_deltas": hparams.regression_weight})
        print(f"[model] MUAN grounding: {model.count_params():,} parameters")
        validation = None
        if args.val_split in splits:
            val_set = splits[args.val_split].encode(vocab, hparams, settings)
            validation = _vl.validation_batches(len(val_set), batch_size, val_set.batch,
                                                replicas)
        print(f"[train] {len(train_set)} expressions, {per_epoch} batches of {batch_size} per "
              f"epoch, {epochs} epochs")
        start = time.time()
        def accuracy_of(model):
            val = splits[args.val_split]
            predicted, _ = ground((model, vocab, settings, hparams), val, args)
            accuracy, _ = refcoco.grounding_accuracy(predicted, val.gt_boxes, IOU_THRESHOLD)
            return 100.0 * float(accuracy)

        _vl.fit_resumable(
            model, args,
            lambda step: _vl.epoch_batches(len(train_set), batch_size, settings["seed"],
                                           train_set.batch, start=step,
                                           replicas=replicas),
            per_epoch, epochs, validation, replicas,
            _vl.accuracy_hook(args.val_split if args.val_split in splits else None,
                              accuracy_of))
    print(f"[train] done ({time.time() - start:.0f} s in this command)")
    _vl.write_train_summary(run, replicas)
    if _vl.evaluates_after_training(args, replicas):
        trained = _vl.model_to_evaluate((model, vocab, settings, hparams), replicas)
        return evaluate(args, trained=trained, splits=splits)
    return model


# ------------------------------------------------------------- predicting


def ground(trained, split, args):
    """`(boxes [E, 4] normalised, region scores [E, N] softmaxed)` of every
    expression of `split`."""
    model, vocab, _, hparams = trained
    split.encode(vocab, hparams)
    size = args.predict_batch_size
    boxes, probabilities = [], []
    for begin in range(0, len(split), size):
        rows = np.arange(begin, min(len(split), begin + size))
        # Padded to the batch size: one compiled program for every batch.
        padded = np.concatenate([rows, np.full(size - len(rows), rows[-1])])
        inputs = split.inputs(padded)
        outputs = model.predict_on_batch(inputs)
        predicted, _ = grounding.predict_boxes(outputs["scores"], outputs["box_deltas"],
                                               inputs["boxes"])
        scores = keras.ops.softmax(keras.ops.cast(outputs["scores"], "float32"), axis=-1)
        boxes.append(keras.ops.convert_to_numpy(predicted)[: len(rows)])
        probabilities.append(keras.ops.convert_to_numpy(scores)[: len(rows)])
    return np.concatenate(boxes), np.concatenate(probabilities)


def biggest_boxes(split):
    """The baseline's prediction: each image's biggest region proposal."""
    out = []
    for image_id in split.image_ids:
        _, boxes = split.store.regions(image_id)
        areas = (boxes[:, 2] - boxes[:, 0]) * (boxes[:, 3] - boxes[:, 1])
        out.append(boxes[int(np.argmax(areas))])
    return np.asarray(out, np.float32)


def pixel_xywh(record, box):
    """A normalised `[x1, y1, x2, y2]` as COCO's pixel `[x, y, w, h]`."""
    w, h = record.image_size
    x1, y1, x2, y2 = (float(v) for v in np.asarray(box) * np.array([w, h, w, h]))
    return [round(x1, 2), round(y1, 2), round(x2 - x1, 2), round(y2 - y1, 2)]


def evaluate(args, trained=None, splits=None):
    """Accuracy (IoU > 0.5 with the referred box) on --split, next to the
    biggest-proposal baseline; writes DIR/<split>_results.json.

    Returns:
        `{"accuracy": %, "baseline": %, "expressions": count}`.
    """
    trained = trained or load_trained(args)
    if splits is None or args.split not in splits:
        splits = load_splits(args, (args.split,))
    if args.split not in splits:
        raise _cli.UsageError(f"the refs have no '{args.split}' expressions (--split)")
    split = splits[args.split]
    start = time.time()
    predicted, _ = ground(trained, split, args)
    print(f"[eval] {len(split)} {args.split} expressions grounded in "
          f"{time.time() - start:.0f} s")
    accuracy, correct = refcoco.grounding_accuracy(predicted, split.gt_boxes, IOU_THRESHOLD)
    baseline, _ = refcoco.grounding_accuracy(biggest_boxes(split), split.gt_boxes,
                                             IOU_THRESHOLD)
    results = [{"ref_id": r.ref_id, "sent_id": r.sent_id, "image_id": r.image_id,
                "bbox": pixel_xywh(r, box), "correct": bool(ok)}
               for r, box, ok in zip(split.records, predicted, correct)]
    write_json(os.path.join(args.output_dir, f"{args.split}_results.json"), results)
    summary = {"expressions": len(split), "accuracy": 100.0 * float(accuracy),
               "baseline": 100.0 * float(baseline)}
    write_json(os.path.join(args.output_dir, f"{args.split}_scores.json"), summary)
    print(f"[eval] baseline: {BASELINE_NAME}")
    _cli.emit(f"{'split':10s} {'expressions':>11s} {'model':>9s} {'baseline':>9s}")
    _cli.emit(f"{args.split:10s} {len(split):11d} {summary['accuracy']:9.2f} "
              f"{summary['baseline']:9.2f}")
    return summary


def predict(args):
    """The predicted box of every expression of --split."""
    trained = load_trained(args)
    splits = load_splits(args, (args.split,))
    if args.split not in splits:
        raise _cli.UsageError(f"the refs have no '{args.split}' expressions (--split)")
    split = splits[args.split]
    predicted, _ = ground(trained, split, args)
    results = [{"ref_id": r.ref_id, "sent_id": r.sent_id, "image_id": r.image_id,
                "bbox": pixel_xywh(r, box)} for r, box in zip(split.records, predicted)]
    if args.output_file:
        write_json(args.output_file, results)
        print(f"[predict] {len(results)} boxes -> {args.output_file}")
    else:
        for r in results:
            _cli.emit(f"{r['sent_id']}\t{r['image_id']}\t" + " ".join(map(str, r["bbox"])))
    return results


def visualize(args):
    """PNGs: the proposals shaded by the model's ranking probability, the
    predicted box outlined in red and the referred box in green."""
    from keras_structattn.tasks import attention_maps

    trained = load_trained(args)
    splits = load_splits(args, (args.split,))
    if args.split not in splits:
        raise _cli.UsageError(f"the refs have no '{args.split}' expressions (--split)")
    split = splits[args.split]
    chosen = Split(split.name, split.records[: args.num_expressions], split.store)
    predicted, probabilities = ground(trained, chosen, args)
    if data_flags_given(args):
        if not args.images:
            raise _cli.UsageError("visualize needs --images, the folder of the images")
        images = _world.images_by_id(args.images, chosen.image_ids)
    else:
        images = _world.scene_images(_world.folder_of(args), split.name, chosen.image_ids)
    folder = os.path.join(args.output_dir, "grounding")
    os.makedirs(folder, exist_ok=True)
    written = []
    for k, (record, image) in enumerate(zip(chosen.records, images)):
        _, boxes = split.store.regions(record.image_id)
        n = min(len(boxes), trained[3].max_regions)
        iou = float(refcoco.box_iou(predicted[k][None], chosen.gt_boxes[k][None])[0, 0])
        picture = attention_maps.draw_region_weights(
            image, boxes[:n], probabilities[k][:n],
            title=[record.sentence, f"IoU {iou:.2f} (red: predicted, green: referred)"],
            outlines=[(chosen.gt_boxes[k], attention_maps.TARGET_OUTLINE),
                      (predicted[k], attention_maps.OUTLINE)])
        path = os.path.join(folder, f"{record.sent_id}.png")
        write_atomically(path, lambda partial, p=picture: p.save(partial, format="PNG"))
        written.append(path)
        _cli.emit(f"{path}\t{record.sentence}\tIoU {iou:.2f}")
    print(f"[visualize] {len(written)} expressions -> {folder}")
    return written
