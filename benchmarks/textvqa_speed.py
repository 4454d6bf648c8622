"""Training step, greedy decoding and host graph building times of M4C and SA-M4C.

At the papers' shapes (Hu et al., 2020, arXiv:1911.06258, Sec. 4; Kant et
al., 2020, arXiv:2007.12146, Sec. 4): 20 question tokens, 100 objects of
2048-d features, 50 OCR tokens of `ocr_feature_dim` (2952: FastText 300 +
PHOC 604 + appearance 2048), 12 decoding steps, d 768, 12 heads, FFN 3072,
5,000 answer words, on the JAX backend under XLA (`jax.jit`):

1. One training step (forward, `m4c_loss` with the step mask, backward: the
   gradient of every weight; the Adam update, the same per weight for every
   model, is left out) of M4C (`m4c_base`: 3 text + 4 multimodal layers),
   SA-M4C (`sa_m4c_base`: 3 text + 2 plain + 4 spatial layers) and SA-M4C's
   depth with plain attention (`sa_m4c_base` with `num_layers=6,
   num_spatial_layers=0`), which separates the cost of two more layers
   from the cost of the graph. Step times are paired medians against
   M4C's step (`benchmarks/_timing.py`: the two timed alternately after
   warm-up), so a row's "x M4C" divides by M4C's median of its own run;
   multiply-adds are XLA's count of the compiled step
   (`cost_analysis()["flops"]` / 2).
2. Greedy decoding of one batch (`M4C.decode`, cached keys and values, 12
   steps, compiled with `jax.jit`), paired against M4C likewise.
3. Building SA-M4C's relation labels on the host, as the recipe's input
   pipeline does (`keras_structattn.tasks.textvqa.batches.M4CBatches`):
   `textvqa_relations_numpy` for a batch of 128 (M4C's training batch) and
   of `--batch`, and the random-graph control (the same, then
   `random_graph` per row), median of `--graph_repeats` after `--warmup`.

The question vocabulary is BERT-base's 30,522 WordPiece ids (M4C's
question encoder; the recipe's word vocabulary is smaller, which changes
every model's step by the same embedding gradient). Inputs are random:
question lengths 5..20, all 100 objects real, 1..50 real OCR tokens,
answers of 1..12 steps (the step mask); every model's compute is dense, so
the masks do not change its time.

Usage:
    KERAS_BACKEND=jax python -m benchmarks.textvqa_speed [--batch 8] [--repeats 5]
        [--warmup 1] [--graph_repeats 20]
"""

import argparse
import datetime
import os
import platform
import sys
import time
import types

os.environ.setdefault("KERAS_BACKEND", "jax")

import keras  # noqa: E402
import numpy as np  # noqa: E402

from benchmarks._timing import jax_training_step  # noqa: E402
from benchmarks._timing import paired_medians  # noqa: E402
from benchmarks.spatial_graph import median_ms  # noqa: E402
from benchmarks.spatial_graph import random_boxes  # noqa: E402
from keras_structattn.tasks.textvqa.batches import M4CBatches  # noqa: E402
from models import registry  # noqa: E402
from models.textvqa.m4c import BOS  # noqa: E402
from models.textvqa.m4c import M4C  # noqa: E402
from models.textvqa.m4c import m4c_loss  # noqa: E402

MODELS = (
    ("M4C (m4c_base)", "m4c_base", ""),
    ("SA-M4C (sa_m4c_base)", "sa_m4c_base", ""),
    ("SA-M4C depth, plain", "sa_m4c_base", "num_layers=6,num_spatial_layers=0"),
)
QUESTION_VOCAB, ANSWER_VOCAB = 30_522, 5_000
TRAINING_BATCH = 128  # M4C's (the hparams' batch_size)


def graph_inputs(rng, size, hparams):
    """The question mask's source and the boxes and masks of one random
    batch: what the host graph building reads."""
    q, n, t = hparams.max_question_length, hparams.max_objects, hparams.max_ocr
    question = rng.integers(1, QUESTION_VOCAB, (size, q)).astype("int32")
    question[np.arange(q)[None] >= rng.integers(5, q + 1, (size, 1))] = 0
    return {"question": question,
            "object_boxes": random_boxes(rng, size, n, 0.0),
            "object_mask": np.ones((size, n), bool),
            "ocr_boxes": random_boxes(rng, size, t, 0.0),
            "ocr_mask": np.arange(t)[None] < rng.integers(1, t + 1, (size, 1))}


def batch(rng, size, hparams):
    """`(inputs, (targets, loss_mask))` of one random batch; `inputs` holds
    `relations` (SA-M4C's spatial graph)."""
    n, t, s = hparams.max_objects, hparams.max_ocr, hparams.num_steps
    inputs = graph_inputs(rng, size, hparams)
    inputs["objects"] = rng.random((size, n, hparams.object_feature_dim)).astype("float32")
    inputs["ocr"] = rng.random((size, t, hparams.ocr_feature_dim)).astype("float32")
    answers = rng.integers(3, ANSWER_VOCAB + t, (size, s)).astype("int32")
    inputs["previous"] = np.concatenate([np.full((size, 1), BOS, "int32"), answers[:, :-1]], 1)
    targets = np.zeros((size, s, ANSWER_VOCAB + t), "float32")
    np.put_along_axis(targets, answers[:, :, None], 1.0, axis=-1)
    loss_mask = (np.arange(s)[None] < rng.integers(1, s + 1, (size, 1))).astype("float32")
    inputs["relations"] = graph_builder(hparams, "spatial")(inputs, np.arange(size))
    return inputs, (targets, loss_mask)


def graph_builder(hparams, graph):
    """The recipe's host graph building (`M4CBatches.relations(inputs, rows)`)
    for `graph` "spatial" or "random", without a data split: the method
    reads only these attributes."""
    encoded = types.SimpleNamespace(hparams=hparams, random=graph == "random", seed=0)
    return lambda inputs, rows: M4CBatches.relations(encoded, inputs, rows)


def jax_decoding(model, inputs):
    """`decode()`: the model's greedy decoding of `inputs` (no `previous`)
    compiled with `jax.jit`, waited for."""
    import jax

    trainable = [v.value for v in model.trainable_variables]
    non_trainable = [v.value for v in model.non_trainable_variables]

    def run(trainable, non_trainable, inputs):
        indices, _ = model.stateless_call(trainable, non_trainable, inputs, training=False)
        return indices

    compiled = jax.jit(run).lower(trainable, non_trainable, inputs).compile()
    return lambda: jax.block_until_ready(compiled(trainable, non_trainable, inputs))


def model_steps(label, hparams, inputs, targets):
    """`(parameters, training step, its multiply-adds or None, decoding)`."""
    keras.utils.set_random_seed(0)
    model = M4C.from_hparams(hparams, QUESTION_VOCAB, ANSWER_VOCAB, seed=0)
    if not model.spatial:
        inputs = {k: v for k, v in inputs.items() if k != "relations"}
    model(inputs)
    start = time.perf_counter()
    step, cost = jax_training_step(
        model, lambda y, scores: m4c_loss(y[0], scores, y[1]), inputs, targets)
    decode = jax_decoding(model, {k: v for k, v in inputs.items() if k != "previous"})
    print(f"# compiled {label}: training step and decoding in "
          f"{time.perf_counter() - start:.0f} s", flush=True)
    macs = None if cost["flops"] is None else cost["flops"] / 2
    return model.count_params(), step, macs, decode


def paired_table(title, rows, size, warmup, repeats):
    """Prints paired medians of `rows` `[(label, step, extra columns)]`
    against the first row's step; returns `{label: ms}`.

    Each later row is timed alternately with the first (`paired_medians`);
    "M4C ms" is the first row's median in that same run, and the first row
    itself shows its median of the first pairing (timing it against
    itself would cost as many steps again).
    """
    base_step = rows[0][1]
    measured = []
    for label, step, extra in rows[1:]:
        base_ms, ms = paired_medians(base_step, step, warmup, repeats)
        measured.append((label, ms, base_ms, extra))
    first = measured[0][2] if measured else paired_medians(base_step, base_step, warmup,
                                                           repeats)[0]
    measured.insert(0, (rows[0][0], first, first, rows[0][2]))
    header = (f"{title:28s} {'ms':>9s} {'ms/question':>11s} {'M4C ms':>9s} {'x M4C':>7s}"
              + "".join(f" {name:>12s}" for name in rows[0][2]))
    print(header)
    print("-" * len(header))
    for label, ms, base_ms, extra in measured:
        print(f"{label:28s} {ms:9.0f} {ms / size:11.1f} {base_ms:9.0f} {ms / base_ms:7.2f}"
              + "".join(f" {value:>12s}" for value in extra.values()), flush=True)
    return {label: ms for label, ms, _, _ in measured}


def graph_rows(hparams, batches, rng, warmup, repeats):
    """Prints the host graph building times at each batch size; returns
    `{(graph, batch): ms}`."""
    header = f"{'host graph building':36s} {'batch':>5s} {'ms/batch':>9s} {'ms/question':>11s}"
    print(header)
    print("-" * len(header))
    times = {}
    for size in batches:
        inputs, rows = graph_inputs(rng, size, hparams), np.arange(size)
        for name, graph in (("textvqa_relations_numpy (spatial)", "spatial"),
                            ("+ random_graph per row (random)", "random")):
            build = graph_builder(hparams, graph)
            ms = median_ms(lambda b=build, x=inputs, r=rows: b(x, r), repeats, warmup)
            times[graph, size] = ms
            print(f"{name:36s} {size:5d} {ms:9.1f} {ms / size:11.2f}", flush=True)
    return times


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--batch", type=int, default=8,
                        help="questions per training step and decoding (default 8: a CPU)")
    parser.add_argument("--repeats", type=int, default=5,
                        help="timed pairs of training steps and of decodings")
    parser.add_argument("--warmup", type=int, default=1, help="untimed runs before timing")
    parser.add_argument("--graph_repeats", type=int, default=20,
                        help="timed runs of the host graph building")
    args = parser.parse_args()
    for name in ("batch", "repeats", "graph_repeats"):
        if getattr(args, name) < 1:
            parser.error(f"--{name} must be >= 1 (got {getattr(args, name)})")
    if args.warmup < 0:
        parser.error(f"--warmup must be >= 0 (got {args.warmup})")
    if keras.backend.backend() != "jax":
        sys.exit("error: run with KERAS_BACKEND=jax (the steps are compiled with jax.jit)")
    import jax

    began = time.perf_counter()
    print(f"# {datetime.date.today()} {platform.machine()} {os.cpu_count()} cores, "
          f"{platform.processor() or 'cpu'}; jax {jax.__version__} on "
          f"{jax.devices()[0].platform}, keras {keras.__version__}; load average "
          + ", ".join(f"{x:.2f}" for x in os.getloadavg()) + " (1/5/15 min)")
    print("# command: " + " ".join(["KERAS_BACKEND=jax python -m benchmarks.textvqa_speed",
                                     *sys.argv[1:]]))
    base = registry.get("m4c_base")
    print(f"# batch {args.batch}: {base.max_question_length} question tokens, "
          f"{base.max_objects} objects x {base.object_feature_dim}, {base.max_ocr} OCR tokens x "
          f"{base.ocr_feature_dim}, {base.num_steps} steps, d {base.hidden_size}, "
          f"{base.num_heads} heads, FFN {base.filter_size}, {ANSWER_VOCAB} answer words, "
          f"{QUESTION_VOCAB} question ids; paired medians of {args.repeats} after "
          f"{args.warmup} warm-up", flush=True)
    rng = np.random.default_rng(0)
    inputs, targets = batch(rng, args.batch, base)
    models = []
    for label, name, overrides in MODELS:
        hparams = registry.get(name).parse(overrides)
        models.append((label, *model_steps(label, hparams, inputs, targets)))
    print()
    base_macs = models[0][3]
    training = paired_table(
        f"training step (batch {args.batch})", [(label, step, {
            "parameters": f"{params:,d}",
            "GMACs": "n/a" if macs is None else f"{macs / 1e9:.1f}",
            "x M4C": "" if macs is None or base_macs is None else f"{macs / base_macs:.2f}"})
            for label, params, step, macs, _ in models],
        args.batch, args.warmup, args.repeats)
    # The graph's own cost: SA-M4C against its depth with plain attention,
    # timed alternately (the M4C pairings above drift with the load).
    plain_ms, graph_ms = paired_medians(models[2][2], models[1][2], args.warmup, args.repeats)
    print(f"# SA-M4C vs the same depth with plain attention, paired: {graph_ms:.0f} vs "
          f"{plain_ms:.0f} ms, x{graph_ms / plain_ms:.2f} (the spatial masks' cost)")
    print()
    paired_table(f"greedy decoding ({base.num_steps} steps)",
                 [(label, decode, {}) for label, _, _, _, decode in models],
                 args.batch, args.warmup, args.repeats)
    print()
    batches = sorted({TRAINING_BATCH, args.batch}, reverse=True)
    graphs = graph_rows(base, batches, rng, args.warmup, args.graph_repeats)
    sa_ms = training[MODELS[1][0]]
    print(f"# the spatial graph of a batch of {args.batch} takes "
          f"{graphs['spatial', args.batch]:.1f} ms on the host, "
          f"{100 * graphs['spatial', args.batch] / sa_ms:.2f}% of SA-M4C's training step "
          "above (the input pipeline can build it while the step runs)")
    print(f"# wall {time.perf_counter() - began:.0f} s; load average "
          + ", ".join(f"{x:.2f}" for x in os.getloadavg()) + " (1/5/15 min)")


if __name__ == "__main__":
    main()
