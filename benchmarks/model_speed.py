"""Training, forward and decoding speed of every model family, fp32 against mixed bfloat16.

Each model at its paper's shapes (the header's lines give them; the
batches come from the family's own benchmark): the translation
Transformer (`transformer_base`, tensor2tensor's 4096-token batch as 64
pairs of 64 tokens), the Transformer captioner without and with 3x3 area
attention (`captioner_base`, `captioner_base_area3x3`: 16 images of 8x8
grids x 5 captions), Up-Down and Up-Down+CATT (`updown_base`,
`updown_catt_base`: 10 images x 5 captions), MCAN, MCAN+PA and MUAN
(`mcan_small`, `mcan_pa_small`, `muan_base`: batch 64), M4C and SA-M4C
(`m4c_base`, `sa_m4c_base`: batch 32). On each Keras backend asked for:

* train ms: `model.train_on_batch(inputs, targets)` after
  `model.compile(optimizer=keras.optimizers.Adam(...), loss=<the recipe's
  loss>, jit_compile=...)`: forward, loss, backward and the Adam update,
  as a user runs it (M4C: its own `compute_loss` with the step mask as
  the sample weight, gradients clipped, as in its recipe); ex/s is the
  batch over it.
* fwd ms: `model.predict_on_batch(inputs)` (training=False; the seq2seq
  models and M4C teacher-forced).
* decode ms: greedy decoding of the batch as the recipes run it: the
  Transformer and the captioners with `compiled_generate` (`beam_size=1`,
  always XLA, an EOS that never comes: all 64 or 17 steps run), M4C with
  `predict_on_batch` without `previous` (`M4C.decode`, 12 cached steps).
* GFLOP/s: XLA's flops of the training step's forward and backward
  (`_timing.jax_training_step`'s cost analysis; Adam's few per weight
  left out), counted once per model in a JAX process and used for every
  backend, over the train ms; "% peak" compares it with a 4096 x 4096
  fp32 matmul timed first on the same machine. Not for Up-Down(+CATT):
  XLA counts the body of their recurrent loop once, not once a word.

Each model and backend runs in a worker process (`--worker`, with
`KERAS_BACKEND` set) that builds the fp32 and the mixed_bfloat16 model
(`keras.config.set_dtype_policy` before building) and times them
alternately, run after run, after the warm-up runs
(`_timing.paired_medians`): every time is a median, and the bf16 row's
"x fp32" (its train ms over fp32's) comes from interleaved runs that
share the machine's drift. "RSS MiB" is the worker's peak resident memory
(`ru_maxrss`): both precisions' models, their compiled programs and the
batch. JAX always jits (the Keras trainer does; a JAX worker keeps
TensorFlow out, as a JAX-only install would); TensorFlow's rows follow
`--jit` (`both`: a worker each, "tf" and "tf+xla").

"x torch" is our time over PyTorch's fp32 time (below 1: faster; the
target is at most 0.9) for train/forward/decode of MCAN and M4C at the
reference batches. PyTorch is not a dependency: the reference figures
are constants below, measured with the reference codes (OpenVQA, mmf) on
a 2-core CPU of the kind these results come from.

`--quick` is a smoke run: the tiny sets (`transformer_tiny`,
`captioner_tiny`, `updown_tiny`, `mcan_tiny`, `m4c_tiny` with 4 decoding
steps, ...), batches of 2-4, 1 warm-up and 1 timed run, a 512 x 512
matmul, the flops of the step before XLA's optimisations (no second
compile); its times mean nothing.

Usage (the table on stdout, progress on stderr):
    python -m benchmarks.model_speed [--backends tensorflow,jax] [--jit both]
        [--models mcan,m4c] [--precision fp32,bf16] [--repeats 5] [--warmup 2]
        [--quick] > benchmarks/results_model_speed_<machine>.txt
"""

import argparse
import datetime
import importlib.metadata
import json
import os
import platform
import resource
import statistics
import subprocess
import sys
import time
import types

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# Short name: (family, the paper's set, the --quick set).
MODELS = {
    "transformer": ("translation", "transformer_base", "transformer_tiny"),
    "captioner": ("grid_captioner", "captioner_base", "captioner_tiny"),
    "captioner_area": ("grid_captioner", "captioner_base_area3x3", "captioner_tiny_area3x3"),
    "updown": ("region_captioner", "updown_base", "updown_tiny"),
    "updown_catt": ("region_captioner", "updown_catt_base", "updown_catt_tiny"),
    "mcan": ("vqa", "mcan_small", "mcan_tiny"),
    "mcan_pa": ("vqa", "mcan_pa_small", "mcan_pa_tiny"),
    "muan": ("vqa", "muan_base", "muan_tiny"),
    "m4c": ("textvqa", "m4c_base", "m4c_tiny"),
    "sa_m4c": ("textvqa", "sa_m4c_base", "sa_m4c_tiny"),
}
# Models whose training step runs a recurrent loop over the words: XLA's
# cost analysis counts a loop's body once, not once per iteration, so their
# flops (and GFLOP/s) would be far too low and are not reported.
LOOPED = {"updown", "updown_catt"}
# PyTorch fp32 seconds (train, forward, decode) of the reference codes on a
# 2-core CPU of this kind, the mean of two runs each: OpenVQA's MCAN-small
# at batch 64 (train 6.63 and 6.41 s, forward 1.72 and 1.73 s); mmf's M4C
# at batch 32 (train 5.65 and 5.55 s, forward 1.93 and 2.04 s, greedy
# decoding of 12 steps without a key/value cache 29.2 and 22.4 s).
TORCH = {
    "mcan": (64, (6.63 + 6.41) / 2, (1.72 + 1.73) / 2, None),
    "m4c": (32, (5.65 + 5.55) / 2, (1.93 + 2.04) / 2, (29.2 + 22.4) / 2),
}
# --quick's changes to the tiny sets: M4C's decoding is unrolled, and 4
# steps compile in about a third of the time of 12.
QUICK_OVERRIDES = {"textvqa": "num_steps=4"}
JITS = {"on": ("on",), "off": ("off",), "both": ("off", "on")}  # TensorFlow's workers
POLICIES = {"fp32": "float32", "bf16": "mixed_bfloat16"}
_JSON_OUT = None  # the worker's stdout for its JSON lines (`_claim_stdout`)
FAILED = []  # the driver's failed workers: its exit status is then 1
TRANSLATION_VOCAB = 32_768  # tensor2tensor's wmt32k subwords (2^15)
PEAK_REPEATS = 5  # matmuls timed for the peak, after one warm-up


# ------------------------------------------------------------- the families


def case_of(**fields):
    """A family's case, a namespace: `build()` (an unbuilt model), `inputs`,
    `targets`, `sample_weight` (default None), `loss` (for `compile`; None:
    the model's own `compute_loss`), `flops_loss(targets, outputs)` and
    `flops_targets` (the training step whose flops are counted; default
    `loss` and `targets`), `decoder(model)` (a decoding step, or None),
    `batch` (examples) and `shapes` (a line)."""
    values = dict(sample_weight=None, flops_loss=None, flops_targets=None, decoder=None)
    return types.SimpleNamespace(**dict(values, **fields))


def greedy_decoder(source, vocab_size, length):
    """`decoder(model)` of a seq2seq model: greedy `compiled_generate` of
    `length` tokens from `source` (ids or image features), waited for."""
    from keras import ops

    from keras_structattn.decoding.seq2seq import compiled_generate

    def decoder(model):
        # An EOS that never comes: every row runs all `length` steps.
        generate = compiled_generate(model, max_decode_length=length, beam_size=1,
                                     eos_id=vocab_size + 1)
        return lambda: ops.convert_to_numpy(generate(source)[0])

    return decoder


def translation(hparams, quick, rng):
    """tensor2tensor's batch of 4096 tokens (the set's `batch_size`) as 64
    pairs of 64 source and 64 target tokens (benchmarks/translate.py's
    `batch`), a vocabulary of 32,768; greedy decoding of 64 tokens."""
    from benchmarks import translate
    from keras_structattn.training.losses import PaddedCrossEntropy
    from models.translation.transformer import Transformer

    rows, length = (4, 16) if quick else (hparams.batch_size // 64, 64)
    vocab = translate.VOCAB if quick else TRANSLATION_VOCAB
    inputs, targets = translate.batch(rng, rows, length)
    return case_of(
        build=lambda: Transformer.from_hparams(hparams, vocab, seed=0), inputs=inputs,
        targets=targets, loss=PaddedCrossEntropy(hparams.label_smoothing),
        decoder=greedy_decoder(inputs[0], vocab, length), batch=rows,
        shapes=f"{rows} sentence pairs x {length} tokens, vocab {vocab}, greedy "
               f"decoding of {length} tokens")


def grid_captioner(hparams, quick, rng):
    """The area-attention captioner's batch (benchmarks/caption.py's): the
    set's 16 images of 8x8x1536 features x 5 captions of 17 tokens."""
    # caption.py runs as a script and imports `_timing` from its folder.
    sys.path.insert(0, os.path.join(ROOT, "benchmarks"))
    from benchmarks import caption
    from keras_structattn.training.losses import PaddedCrossEntropy
    from models.captioning.transformer_captioner import TransformerCaptioner

    shape = types.SimpleNamespace(images=2 if quick else hparams.batch_size,
                                  captions_per_image=5, length=17, grid=8, feature_dim=1536,
                                  vocab=10_000)
    inputs, targets = caption.training_batch(shape)
    return case_of(
        build=lambda: TransformerCaptioner.from_hparams(hparams, shape.vocab, seed=0),
        inputs=inputs, targets=targets, loss=PaddedCrossEntropy(hparams.label_smoothing),
        decoder=greedy_decoder(inputs[0], shape.vocab, shape.length), batch=shape.images,
        shapes=f"{shape.images} images of {shape.grid}x{shape.grid}x{shape.feature_dim} x "
               f"{shape.captions_per_image} captions of {shape.length} tokens, vocab "
               f"{shape.vocab}, greedy decoding of {shape.length} tokens")


def region_captioner(hparams, quick, rng):
    """Up-Down's batch (benchmarks/catt_caption_speed.py's): 10 images of
    36 regions x 2048 x 5 captions of 17 tokens."""
    from benchmarks import catt_caption_speed as speed
    from keras_structattn.training.losses import PaddedCrossEntropy
    from models.captioning.updown import UpDownCaptioner

    images = 2 if quick else speed.IMAGES
    (features, decoder_inputs), targets = speed.batch(rng)
    features = {key: value[:images] for key, value in features.items()}
    return case_of(
        build=lambda: UpDownCaptioner.from_hparams(hparams, speed.VOCAB, seed=0),
        inputs=(features, decoder_inputs[:images]), targets=targets[:images],
        loss=PaddedCrossEntropy(hparams.label_smoothing),
        decoder=greedy_decoder(features, speed.VOCAB, speed.LENGTH), batch=images,
        shapes=f"{images} images of {speed.REGIONS} regions x {speed.FEATURES} x "
               f"{speed.CAPTIONS} captions of {speed.LENGTH} tokens, vocab {speed.VOCAB}, "
               f"greedy decoding of {speed.LENGTH} tokens")


def vqa(hparams, quick, rng):
    """MCAN's batch (benchmarks/vqa_speed.py's): 64 questions of 14 words,
    100 regions x 2048, 3,129 answers."""
    from benchmarks import vqa_speed as speed
    from keras_structattn.training.losses import SoftTargetBinaryCrossEntropy
    from models.vqa.build import build_vqa_model

    size = 4 if quick else speed.BATCH
    inputs, targets = speed.batch(rng)
    return case_of(
        build=lambda: build_vqa_model(hparams, speed.VOCAB, speed.ANSWERS, seed=0),
        inputs={key: value[:size] for key, value in inputs.items()}, targets=targets[:size],
        loss=SoftTargetBinaryCrossEntropy(), batch=size,
        shapes=f"{size} questions of {speed.WORDS} words, {speed.REGIONS} regions x "
               f"{speed.FEATURES}, {speed.ANSWERS} answers, vocab {speed.VOCAB}")


def textvqa(hparams, quick, rng):
    """M4C's batch at mmf's reference batch of 32 (benchmarks/
    textvqa_speed.py's `batch`: 20 question tokens, 100 objects, 50 OCR
    tokens, 12 steps); greedy decoding: `predict` without `previous`."""
    from benchmarks import textvqa_speed as speed
    from models.textvqa.m4c import M4C
    from models.textvqa.m4c import m4c_loss

    size = 4 if quick else TORCH["m4c"][0]
    inputs, (targets, loss_mask) = speed.batch(rng, size, hparams)
    if hparams.num_spatial_layers == 0:
        del inputs["relations"]
    unrolled = {key: value for key, value in inputs.items() if key != "previous"}
    return case_of(
        build=lambda: M4C.from_hparams(hparams, speed.QUESTION_VOCAB, speed.ANSWER_VOCAB,
                                       seed=0),
        # The recipe compiles without a loss (M4C's `compute_loss`) and
        # feeds the step mask as the sample weight.
        inputs=inputs, targets=targets, sample_weight=loss_mask, loss=None,
        flops_loss=lambda y, scores: m4c_loss(y[0], scores, y[1]),
        flops_targets=(targets, loss_mask),
        decoder=lambda model: (lambda: model.predict_on_batch(unrolled)), batch=size,
        shapes=f"{size} questions of {hparams.max_question_length} tokens, "
               f"{hparams.max_objects} objects x {hparams.object_feature_dim}, "
               f"{hparams.max_ocr} OCR tokens x {hparams.ocr_feature_dim}, "
               f"{speed.ANSWER_VOCAB} answer words, greedy decoding of "
               f"{hparams.num_steps} steps")


FAMILIES = {f.__name__: f for f in (translation, grid_captioner, region_captioner, vqa,
                                    textvqa)}


# ------------------------------------------------------------------ worker


def emit(**record):
    """Writes one JSON line on the worker's real stdout (`_claim_stdout`)."""
    _JSON_OUT.write(json.dumps(record) + "\n")
    _JSON_OUT.flush()


def _claim_stdout():
    """Keeps fd 1 for `emit` and points fd 1 at stderr, so that whatever else
    is printed (TensorFlow, XLA, Keras) cannot break the driver's parsing."""
    global _JSON_OUT
    sys.stdout.flush()
    _JSON_OUT = os.fdopen(os.dup(1), "w")
    os.dup2(2, 1)


def peak_rss_mib():
    """The process's peak resident memory in MiB (`ru_maxrss`: KiB on
    Linux, bytes on macOS)."""
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return rss / 2**20 if sys.platform == "darwin" else rss / 2**10


def measure_peak(size, repeats):
    """Emits the fp32 GFLOP/s of a `size` x `size` matmul on this backend,
    the median of `repeats` after one warm-up (compiled with XLA)."""
    import keras
    import numpy as np

    from keras_structattn.decoding.seq2seq import compile_function

    rng = np.random.default_rng(0)
    a, b = (keras.ops.convert_to_tensor(rng.random((size, size), "float32")) for _ in "ab")
    matmul = compile_function(keras.ops.matmul)
    times = []
    for index in range(repeats + 1):
        start = time.perf_counter()
        keras.ops.convert_to_numpy(matmul(a, b)[:1, :1])  # waits for the product
        if index:
            times.append(time.perf_counter() - start)
    emit(peak_gflops=2 * size**3 / statistics.median(times) / 1e9, size=size,
         backend=keras.backend.backend(), repeats=repeats)


def make_case(name, quick):
    """The family case of model `name` and its hparams set."""
    import numpy as np

    from models import registry

    family, full, tiny = MODELS[name]
    set_name, overrides = (tiny, QUICK_OVERRIDES.get(family)) if quick else (full, None)
    hparams = registry.resolve(set_name, overrides)
    set_name += f" ({overrides})" if overrides else ""
    case = FAMILIES[family](hparams, quick, np.random.default_rng(0))
    case.set_name, case.hparams = set_name, hparams
    return case


def build_model(case, precision, jit):
    """`case`'s model under the precision's dtype policy, built and compiled
    as a user compiles it (Adam with the set's betas, its clip norm)."""
    import keras

    keras.config.set_dtype_policy(POLICIES[precision])
    try:
        # The models are seeded (`seed=0`); `keras.utils.set_random_seed`
        # would import TensorFlow into a JAX worker (its RSS, its start).
        model = case.build()
        # Built symbolically (traced, not run): eager JAX would compile
        # every op of the first call one by one.
        model(keras.tree.map_structure(
            lambda x: keras.KerasTensor(x.shape, str(x.dtype)), case.inputs))
    finally:
        keras.config.set_dtype_policy("float32")
    hp = case.hparams
    optimizer = keras.optimizers.Adam(
        1e-4, beta_1=getattr(hp, "optimizer_adam_beta1", 0.9),
        beta_2=getattr(hp, "optimizer_adam_beta2", 0.999),
        epsilon=getattr(hp, "optimizer_adam_epsilon", 1e-7),
        global_clipnorm=getattr(hp, "clip_norm", None))  # M4C's 0.25: a real cost
    model.compile(optimizer=optimizer, loss=case.loss, jit_compile=jit)
    return model


def flops_of(case, model, compiled=True):
    """XLA's flops of the model's training step (forward and backward): of
    the compiled step (`jax_training_step`), or with `compiled=False`
    (--quick) of the program before XLA's optimisations, which spares a
    second compile (a few % off at the tiny shapes)."""
    import jax

    from benchmarks._timing import jax_training_step

    loss = case.flops_loss or case.loss
    targets = case.targets if case.flops_targets is None else case.flops_targets
    if compiled:
        return jax_training_step(model, loss, case.inputs, targets)[1]["flops"]
    non_trainable = [v.value for v in model.non_trainable_variables]

    def loss_fn(trainable, inputs, targets):
        outputs, _ = model.stateless_call(trainable, non_trainable, inputs, training=True)
        return loss(targets, outputs)

    lowered = jax.jit(jax.value_and_grad(loss_fn)).lower(
        [v.value for v in model.trainable_variables], case.inputs, targets)
    return (lowered.cost_analysis() or {}).get("flops")


def worker(args):
    """Times one model in this process's backend and emits its rows."""
    _claim_stdout()
    if os.environ.get("KERAS_BACKEND") == "jax":
        # As in a JAX-only install: Keras imports TensorFlow, if installed,
        # only to check types when it serialises an initializer, which
        # would add TensorFlow's start and memory to the JAX rows.
        sys.modules["tensorflow"] = None
    import keras

    from benchmarks._timing import paired_medians

    if args.peak:  # before any model: the machine's peak, in the first worker
        measure_peak(args.peak, PEAK_REPEATS)
    backend = keras.backend.backend()
    jit = True if backend == "jax" else args.jit == "on"
    case = make_case(args.worker, args.quick)
    precisions = args.precision.split(",")
    if args.flops_only:
        return emit(model=args.worker,
                    flops=flops_of(case, build_model(case, "fp32", True), not args.quick))
    began = time.perf_counter()
    models = {precision: build_model(case, precision, jit) for precision in precisions}
    steps = {precision: {
        "train": lambda m=model: m.train_on_batch(case.inputs, case.targets,
                                                  sample_weight=case.sample_weight),
        "forward": lambda m=model: m.predict_on_batch(case.inputs),
        "decode": case.decoder(model) if case.decoder else None,
    } for precision, model in models.items()}
    first = models[precisions[0]]
    emit(model=args.worker, shapes=f"{case.set_name}, {case.shapes}; "
                                   f"{first.count_params():,} parameters")
    times = {precision: {} for precision in precisions}
    for kind in ("train", "forward", "decode"):
        pair = [steps[precision][kind] for precision in precisions]
        if pair[0] is None:
            continue
        # One precision: timed against a no-op, which costs nothing.
        medians = paired_medians(pair[0], pair[1] if len(pair) > 1 else (lambda: None),
                                 args.warmup, args.repeats)
        for precision, ms in zip(precisions, medians):
            times[precision][kind] = ms
        print(f"[model_speed] {args.worker} {backend}: {kind} timed "
              f"({time.perf_counter() - began:.0f} s)", file=sys.stderr, flush=True)
    rss = peak_rss_mib()
    for precision in precisions:
        emit(model=args.worker, backend=backend, jit=jit, precision=precision,
             batch=case.batch, train_ms=times[precision]["train"],
             forward_ms=times[precision]["forward"], decode_ms=times[precision].get("decode"),
             rss_mib=rss)
    if backend == "jax":  # after the RSS: the extra compile is not the benchmark's
        emit(model=args.worker, flops=flops_of(case, models[precisions[0]], not args.quick))


# ------------------------------------------------------------------ driver


def run_worker(backend, options, args):
    """Runs a worker (`options`: its mode) with `KERAS_BACKEND=backend`;
    returns its JSON records, or None when it failed (its stderr is ours)."""
    command = [sys.executable, "-m", "benchmarks.model_speed", *options, "--precision",
               args.precision, "--repeats", str(args.repeats), "--warmup", str(args.warmup)]
    command += ["--quick"] if args.quick else []
    print(f"[model_speed] {' '.join(options)} on {backend}", file=sys.stderr, flush=True)
    env = dict(os.environ, KERAS_BACKEND=backend, TF_CPP_MIN_LOG_LEVEL="3")
    result = subprocess.run(command, cwd=ROOT, env=env, stdout=subprocess.PIPE, text=True)
    if result.returncode:
        FAILED.append(options)
        print(f"# {' '.join(options)} on {backend}: the worker failed (exit "
              f"{result.returncode}; its stderr says why)", flush=True)
        return None
    return [json.loads(line) for line in result.stdout.splitlines() if line.startswith("{")]


def processor():
    """The CPU's model name (Linux's /proc/cpuinfo), else `platform`'s."""
    try:
        with open("/proc/cpuinfo") as cpuinfo:
            for line in cpuinfo:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "cpu"


def versions(backends):
    names = ["keras", *(("tensorflow",) if "tensorflow" in backends else ()),
             *(("jax", "jaxlib") if "jax" in backends else ())]
    found = []
    for name in names:
        try:
            found.append(f"{name} {importlib.metadata.version(name)}")
        except importlib.metadata.PackageNotFoundError:
            found.append(f"{name} not installed")
    return "; ".join(found)


def backend_label(row):
    if row["backend"] == "jax":
        return "jax"
    return "tf+xla" if row["jit"] else "tf"


def torch_ratios(row):
    """"t/f/d": our seconds over PyTorch's fp32 ones for train, forward, decode
    ("" for a model or batch without reference figures)."""
    if row["model"] not in TORCH or TORCH[row["model"]][0] != row["batch"]:
        return ""
    ours = (row["train_ms"], row["forward_ms"], row["decode_ms"])
    return "/".join("-" if ref is None or mine is None else f"{mine / (1e3 * ref):.2f}"
                    for ref, mine in zip(TORCH[row["model"]][1:], ours))


# The table's (heading, width); the first 3 columns are left-aligned.
COLUMNS = (("model", 14), ("backend", 7), ("prec", 4), ("batch", 5), ("train ms", 9),
           ("ex/s", 8), ("fwd ms", 8), ("decode ms", 9), ("RSS MiB", 8), ("GFLOP/s", 8),
           ("% peak", 6), ("x fp32", 6), ("x torch t/f/d", 15))


def table_line(values):
    return " ".join(f"{value:{'<' if i < 3 else '>'}{width}s}"
                    for i, (value, (_, width)) in enumerate(zip(values, COLUMNS))).rstrip()


def print_table(rows, flops, peak, quick):
    """Prints the rows (the workers' records) with their rates: examples/s,
    GFLOP/s (`flops[model]` over the train ms), % of the `peak`, bf16 over
    the fp32 row of its model and backend, PyTorch over ours."""
    def ms(value):
        return "-" if value is None else f"{value:.1f}" if value < 100 else f"{value:.0f}"

    header = table_line([heading for heading, _ in COLUMNS])
    print(header)
    print("-" * len(header))
    fp32 = {(r["model"], backend_label(r)): r for r in rows if r["precision"] == "fp32"}
    for row in rows:
        gflops = 0 if row["model"] in LOOPED else (
            (flops.get(row["model"]) or 0) / row["train_ms"] / 1e6)
        base = fp32.get((row["model"], backend_label(row)))
        print(table_line((
            row["model"], backend_label(row), row["precision"], str(row["batch"]),
            ms(row["train_ms"]), f"{1e3 * row['batch'] / row['train_ms']:.1f}",
            ms(row["forward_ms"]), ms(row["decode_ms"]), f"{row['rss_mib']:.0f}",
            f"{gflops:.1f}" if gflops else "", f"{100 * gflops / peak:.1f}"
            if gflops and peak else "",
            f"{row['train_ms'] / base['train_ms']:.2f}" if base and row is not base else "",
            "" if quick else torch_ratios(row))), flush=True)
    both = len({row["precision"] for row in rows}) > 1
    print("# RSS MiB: the worker's peak resident memory (ru_maxrss)"
          + (": one process holds both precisions' models\n# x fp32: bf16's train ms over "
             "fp32's, timed alternately in that process" if both else ""))
    print("# GFLOP/s: XLA's flops of the training step (JAX's cost analysis, used for every "
          "backend) over the train ms; % peak: of the matmul peak above"
          + ("; none for " + ", ".join(sorted(LOOPED & {r["model"] for r in rows}))
             + " (XLA counts a recurrent loop's body once)"
             if LOOPED & {r["model"] for r in rows} else ""))
    if quick:
        print("# --quick: tiny sets and batches, flops of the unoptimised step; no PyTorch "
              "ratios (other shapes)")
    else:
        (mcan_batch, *mcan), (m4c_batch, *m4c) = TORCH["mcan"], TORCH["m4c"]
        print("# x torch t/f/d: our seconds over PyTorch's fp32 ones (below 1: faster), train/"
              f"forward/decode: OpenVQA MCAN-small at batch {mcan_batch} "
              f"({mcan[0]:.2f}/{mcan[1]:.2f} s), mmf M4C at batch {m4c_batch} ({m4c[0]:.2f}/"
              f"{m4c[1]:.2f}/{m4c[2]:.1f} s, decoding without a key/value cache), measured "
              "on a 2-core CPU of this kind")


def worker_settings(backends, jit):
    """`(backend, --jit)` of each worker of a model: JAX always jits (the
    Keras trainer does); TensorFlow as `jit` says (`both`: off, then on)."""
    for backend in backends:
        for setting in ("on",) if backend == "jax" else JITS[jit]:
            yield backend, setting


def driver(args):
    """Runs the workers, model by model, and prints the header, the
    matmul peak, each model's shapes and the table; returns the exit
    status (1 if a worker failed: the table lacks its rows)."""
    backends = args.backends.split(",")
    print(f"# {datetime.date.today()} {platform.machine()} {os.cpu_count()} cores, "
          f"{processor()}; {versions(backends)}; load average "
          + ", ".join(f"{x:.2f}" for x in os.getloadavg()) + " (1/5/15 min)")
    print("# command: python -m benchmarks.model_speed " + " ".join(args.argv))
    print(f"# each time: the median of {args.repeats} run(s) after {args.warmup} warm-up run(s)"
          + (", fp32 and bf16 timed alternately" if "," in args.precision else "")
          + "; one worker process per model and backend", flush=True)
    size = 512 if args.quick else 4096
    peak_option = ["--peak", str(size)]  # measured by the first worker, before its model
    peak, rows, flops = None, [], {}
    for name in args.models.split(","):
        shapes = None
        for backend, jit in worker_settings(backends, args.jit):
            records = run_worker(backend, ["--worker", name, "--jit", jit, *peak_option], args)
            peak_option = []
            for record in records or []:
                if "peak_gflops" in record:
                    peak = record["peak_gflops"]
                    print(f"# measured matmul peak: {peak:.1f} GFLOP/s (fp32 {size}x{size} @ "
                          f"{size}x{size}, {backend}, XLA, median of {PEAK_REPEATS})",
                          flush=True)
                elif "shapes" in record and shapes is None:
                    shapes = record["shapes"]
                    print(f"# {name}: {shapes}", flush=True)
                elif "flops" in record:
                    flops[name] = record["flops"]
                elif "train_ms" in record:
                    rows.append(record)
        if name not in flops and "jax" not in backends:  # the same work on every backend
            records = run_worker("jax", ["--worker", name, "--flops_only"], args)
            flops[name] = (records or [{}])[0].get("flops")
    print()
    print_table(rows, flops, peak, args.quick)
    return 1 if FAILED else 0


def parse_arguments(argv):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--backends", default="tensorflow,jax",
                        help="comma list of Keras backends, a worker process each")
    parser.add_argument("--jit", choices=sorted(JITS), default="both",
                        help="TensorFlow's jit_compile (JAX always jits)")
    parser.add_argument("--models", default=",".join(MODELS),
                        help=f"comma list of {', '.join(MODELS)} (default all)")
    parser.add_argument("--precision", default="fp32,bf16",
                        help="fp32 and/or bf16 (mixed_bfloat16)")
    parser.add_argument("--repeats", type=int, help="timed runs (default 5; --quick 1)")
    parser.add_argument("--warmup", type=int, help="untimed runs first (default 2; --quick 1)")
    parser.add_argument("--quick", action="store_true",
                        help="tiny hparams sets and batches of 2-4: a smoke run")
    parser.add_argument("--worker", choices=MODELS, help=argparse.SUPPRESS)
    parser.add_argument("--peak", type=int, default=0, help=argparse.SUPPRESS)
    parser.add_argument("--flops_only", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    args.argv = list(sys.argv[1:] if argv is None else argv)
    for name, known in (("models", MODELS), ("precision", POLICIES),
                        ("backends", ("tensorflow", "jax"))):
        unknown = set(getattr(args, name).split(",")) - set(known)
        if unknown:
            parser.error(f"--{name}: unknown {', '.join(sorted(unknown))} "
                         f"(known: {', '.join(known)})")
    # fp32 first: the bf16 row's ratio divides by it.
    args.precision = ",".join(p for p in POLICIES if p in args.precision.split(","))
    args.repeats = args.repeats or (1 if args.quick else 5)
    args.warmup = (1 if args.quick else 2) if args.warmup is None else args.warmup
    return args


def main(argv=None):
    args = parse_arguments(argv)
    if args.worker:
        worker(args)
    else:
        sys.exit(driver(args))


if __name__ == "__main__":
    main()
