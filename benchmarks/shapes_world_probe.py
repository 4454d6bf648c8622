"""Does a small model learn Shapes world VQA in minutes? A learnability probe.

Shapes world's defaults are meant to be small enough that generation takes
under a minute and a small model reaches clearly-above-chance accuracy in
minutes (docs/shapes_world.md). This script checks the second half: it
generates the default world in memory (train 2000 / val 500 / test 500 scenes, VQA task
only), trains a small Keras model on the train questions and reports the
official VQA accuracy on test per question type, next to the train
majority-answer baseline (`trivial_baselines`), with the generation and
training wall times.

The model (Functional API, `keras.layers` plus a few `keras.ops` for masks):

- question: whitespace word vocabulary of the train questions ->
  `Embedding` (masked) -> bidirectional `GRU` -> question vector q;
- objects: `Dense` over [30-d region features, normalised box] of each
  shape, padding rows masked (`num_obj`);
- question-conditioned objects: [object, q] -> `Dense`, then one
  masked self-attention block (`MultiHeadAttention` over the objects, so
  that relation questions can compare a shape with its landmark);
- question-guided attention: `MultiHeadAttention` with q as the single
  query over the objects (padding masked), plus a few sigmoid gates per
  object summed over the objects (an unnormalised "soft count", which a
  softmax attention cannot express);
- [q, attended objects, soft counts] -> `Dense` -> softmax over the train
  `multiple_choice_answer` vocabulary, sparse cross-entropy, Adam, batch 64,
  `jit_compile` as Keras defaults, seeds fixed with
  `keras.utils.set_random_seed`.

Test predictions are scored with `shapes_world.baselines.vqa_accuracy`
(mean over the 10 leave-one-out subsets of min(1, matches / 3)), the same
function the majority baseline uses.

Usage:
    python benchmarks/shapes_world_probe.py [--epochs 30] [--seed 0]
    python benchmarks/shapes_world_probe.py --train 100 --val 20 --test 20 --epochs 1  # smoke
    KERAS_BACKEND=jax python benchmarks/shapes_world_probe.py
"""

import argparse
import collections
import json
import os
import sys
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

import keras  # noqa: E402
import numpy as np  # noqa: E402
from keras import layers  # noqa: E402
from keras import ops  # noqa: E402

from keras_structattn.data import shapes_world as sw  # noqa: E402
from keras_structattn.data.shapes_world.vqa import QUESTION_TYPES  # noqa: E402

BATCH_SIZE = 64
DIM = 64


def tokenize(question):
    return question.lower().replace("?", " ?").split()


def split_records(split):
    """`[(scene index, record)]` of a split's VQA questions."""
    return [(k, r) for k, records in enumerate(split.tasks["vqa"]) for r in records]


def build_vocab(records):
    words = sorted({w for _, r in records for w in tokenize(r["question"])})
    # 0 padding, 1 unknown.
    return {w: i + 2 for i, w in enumerate(words)}


def encode(split, records, vocab, answers, max_len, positions=True):
    """Model inputs and answer labels (-1 for answers unseen in training);
    without `positions` the objects are their appearance alone (a world
    generated with `region_geometry=False`, and no box appended)."""
    f = split.features
    n = f["obj_features"].shape[1]
    scene = np.array([k for k, _ in records], np.int64)
    tokens = np.zeros((len(records), max_len), np.int32)
    for row, (_, r) in enumerate(records):
        ids = [vocab.get(w, 1) for w in tokenize(r["question"])][:max_len]
        tokens[row, : len(ids)] = ids
    objects = (np.concatenate([f["obj_features"], f["obj_boxes"]], -1) if positions
               else f["obj_features"])[scene]
    mask = (np.arange(n)[None, :] < f["num_obj"][scene][:, None]).astype("float32")
    labels = np.array([answers.get(r["answer"], -1) for _, r in records], np.int32)
    return {"question": tokens, "objects": objects, "object_mask": mask}, labels


def build_model(vocab_size, max_len, num_objects, object_dim, num_answers):
    question = keras.Input((max_len,), dtype="int32", name="question")
    objects = keras.Input((num_objects, object_dim), name="objects")
    object_mask = keras.Input((num_objects,), name="object_mask")

    # Question vector.
    x = layers.Embedding(vocab_size, DIM, mask_zero=True)(question)
    x = layers.Bidirectional(layers.GRU(DIM))(x)
    q = layers.Dense(DIM, activation="relu")(x)

    # Objects, conditioned on the question.
    h = layers.Dense(DIM, activation="relu")(objects)
    h = layers.Dense(DIM)(h)
    h = layers.Concatenate()([h, layers.RepeatVector(num_objects)(q)])
    h = layers.Dense(DIM, activation="relu")(h)

    # One masked self-attention block over the objects (relations).
    valid = ops.greater(object_mask, 0.5)
    pair_mask = ops.logical_and(ops.expand_dims(valid, 1), ops.expand_dims(valid, 2))
    a = layers.MultiHeadAttention(4, DIM // 4)(h, h, attention_mask=pair_mask)
    h = layers.LayerNormalization()(h + a)
    a = layers.Dense(DIM)(layers.Dense(2 * DIM, activation="relu")(h))
    h = layers.LayerNormalization()(h + a)

    # Question-guided attention: q is the single query.
    query = layers.Reshape((1, DIM))(layers.Dense(DIM)(q))
    attended = layers.MultiHeadAttention(4, DIM // 4)(
        query, h, attention_mask=ops.expand_dims(valid, 1)
    )
    attended = layers.Flatten()(attended)

    # Soft counts: sigmoid gates summed over the real objects.
    gates = layers.Dense(8, activation="sigmoid")(h)
    counts = ops.sum(gates * ops.expand_dims(object_mask, -1), axis=1)

    fused = layers.Concatenate()([q, attended, counts])
    fused = layers.Dense(4 * DIM, activation="relu")(fused)
    fused = layers.Dropout(0.1)(fused)
    output = layers.Dense(num_answers, activation="softmax")(fused)
    return keras.Model([question, objects, object_mask], output, name="shapes_world_probe")


def write_reference(args, scores, train_s):
    """The probe's test accuracy per question type (%) as the JSON the VQA
    recipe prints beside a run on the same world (`recipes.vqa`, "probe")."""
    reference = dict(
        world=dict(seed=args.seed, train=args.train, val=args.val, test=args.test),
        scores={t: round(v, 2) for t, v in scores.items()},
        model="benchmarks/shapes_world_probe.py (172k parameters: bidirectional GRU, one "
              "self-attention block over the shapes, soft counts)",
        epochs=args.epochs,
        training_seconds=round(train_s, 1),
        date=time.strftime("%Y-%m-%d"),
        command="python benchmarks/shapes_world_probe.py " + " ".join(sys.argv[1:]),
    )
    with open(args.reference, "w", encoding="utf-8") as f:
        json.dump(reference, f, indent=1)
        f.write("\n")


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--epochs", type=int, default=30)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--train", type=int, default=2000, help="train scenes (smoke tests)")
    parser.add_argument("--val", type=int, default=500, help="val scenes")
    parser.add_argument("--test", type=int, default=500, help="test scenes")
    parser.add_argument("--positions", choices=("on", "off"), default="on",
                        help="off: the shapes' appearance alone, no box anywhere (can a "
                        "model answer without positions? the MCAN vs MCAN+PA test)")
    parser.add_argument("--reference", default=None,
                        help="also write the test scores as the VQA recipe's probe reference "
                        "(JSON; recipes/vqa/probe_reference.json for the recipe's default "
                        "world: --seed 1 --val 200)")
    args = parser.parse_args()
    if args.reference and args.positions == "off":
        parser.error("--reference is the recipe's default world: with --positions on")

    script_start = start = time.perf_counter()
    positions = args.positions == "on"
    world = sw.generate(args.train, args.val, args.test, seed=args.seed, tasks=["vqa"],
                        region_geometry=positions)
    generation_s = time.perf_counter() - start
    baselines = sw.trivial_baselines(world)["vqa"]

    train, val, test = (world.splits[s] for s in ("train", "val", "test"))
    train_records, val_records, test_records = map(split_records, (train, val, test))
    vocab = build_vocab(train_records)
    answer_list = sorted({r["answer"] for _, r in train_records})
    answers = {a: i for i, a in enumerate(answer_list)}
    max_len = max(len(tokenize(r["question"])) for _, r in train_records)

    x_train, y_train = encode(train, train_records, vocab, answers, max_len, positions)
    x_val, y_val = encode(val, val_records, vocab, answers, max_len, positions)
    x_test, _ = encode(test, test_records, vocab, answers, max_len, positions)
    keep = y_val >= 0
    x_val = {k: v[keep] for k, v in x_val.items()}
    y_val = y_val[keep]

    keras.utils.set_random_seed(args.seed)
    model = build_model(len(vocab) + 2, max_len, x_train["objects"].shape[1],
                        x_train["objects"].shape[2], len(answer_list))
    model.compile(
        optimizer=keras.optimizers.Adam(1e-3),
        loss="sparse_categorical_crossentropy",
        metrics=["accuracy"],
    )
    print(
        f"backend: {keras.backend.backend()}, CPUs: {os.cpu_count()}, seed {args.seed}\n"
        f"generated train/val/test {len(train.scenes)}/{len(val.scenes)}/{len(test.scenes)} "
        f"scenes in {generation_s:.1f} s; questions "
        f"{len(train_records)}/{len(val_records)}/{len(test_records)}; "
        f"vocab {len(vocab)} words, {len(answer_list)} answers, max length {max_len}; "
        f"model {model.count_params():,} parameters"
    )
    start = time.perf_counter()
    model.fit(
        x_train, y_train, batch_size=BATCH_SIZE, epochs=args.epochs,
        validation_data=(x_val, y_val), shuffle=True, verbose=2,
    )
    train_s = time.perf_counter() - start

    predictions = model.predict(x_test, batch_size=256, verbose=0).argmax(-1)
    per_type = collections.defaultdict(list)
    for (_, r), p in zip(test_records, predictions):
        per_type[r["question_type"]].append(
            sw.vqa_accuracy(answer_list[p], [a for a, _ in r["answers"]])
        )
    scores = [s for v in per_type.values() for s in v]

    print(f"\ntest VQA accuracy (%), {args.epochs} epochs, batch {BATCH_SIZE}; "
          f"training {train_s:.1f} s ({train_s / args.epochs:.1f} s/epoch)")
    print(f"{'type':<10}{'questions':>10}  {'majority answer':<16}"
          f"{'majority':>9}{'model':>9}{'gain':>9}")
    rows = [(t, per_type[t]) for t in QUESTION_TYPES if t in per_type] + [("overall", scores)]
    for t, values in rows:
        model_score = 100.0 * float(np.mean(values))
        if t == "overall":
            base, answer = baselines["overall"], "(per type)"
        else:
            base, answer = baselines["per_type"][t], baselines["answers"][t]
        print(f"{t:<10}{len(values):>10}  {answer:<16}{base:>9.2f}{model_score:>9.2f}"
              f"{model_score - base:>+9.2f}")
    if args.reference:
        write_reference(args, {t: 100.0 * float(np.mean(v)) for t, v in rows}, train_s)
    print(f"\ngeneration {generation_s:.1f} s, training {train_s:.1f} s, "
          f"script total {time.perf_counter() - script_start:.1f} s (after imports)")


if __name__ == "__main__":
    main()
