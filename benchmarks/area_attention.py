"""Speed and memory of `MultiHeadAreaAttention` against `keras.layers.MultiHeadAttention`.

Both layers run in the same process, at the same shapes: self-attention over
1-D sequences (`1d:L`, areas of width 1 to `--widths`) and over 2-D grids
(`2d:HxW`, flattened to `H*W` items with `memory_height=H`, square areas up to
`--areas`), for the key modes `mean` (implementations `fast`, `direct`,
`fused`, `stacked`, `auto`) and `concat` (the learned Eq. 9 keys, on the fast
path or `concat_stacked`), with and without
`jit_compile`; Li et al., 2019, "Area Attention", arXiv:1810.10126, and
`docs/area_attention.md`. Each time is the median of `--repeats` runs after
`--warmup` runs; the table gives milliseconds and the ratio to Keras MHA at
the same shape and jit setting, whose runs alternate with the row's runs (so
that a drift of the machine's speed cancels out of the ratio).

Forward+backward is the gradient of `sum(y**2)` with respect to the input and
all weights. Peak memory is XLA's buffer assignment for the compiled
forward+backward (temporaries + outputs), read with JAX's
`Compiled.memory_analysis()`: run with `KERAS_BACKEND=jax` to get it (the
TensorFlow CPU runtime exposes no allocator statistics: n/a). A row that does
not fit in the device's memory (XLA RESOURCE_EXHAUSTED / OOM while compiling
or running) reads "does not fit" and the run goes on.

Flags:
    --shapes 1d:256 2d:16x16 ...: the shapes; when given they replace the
        older `--lengths` (1-D) and `--only 1d|2d` (which ran 2-D grids 8x8
        and 16x16), still accepted.
    --batch, --heads, --key_dim: default 8, 4, 32 (model width heads*key_dim).
    --widths: 1-D max area widths (default 1 2 3 5); --areas: 2-D square
        area sides (default 2 3).
    --implementations among fast direct concat fused stacked concat_stacked
        auto (rows "mean fast", "mean direct", "concat", "mean fused", "mean
        stacked", "concat stacked", "mean auto"); default fast
        direct concat, plus fused when JAX sees a GPU (on a CPU the fused
        Pallas kernel runs in interpret mode, which is for tests, not timing).
    --dtype float32|mixed_bfloat16: the global dtype policy of both layers
        (the inputs stay float32, as a model's would be).
    --baseline xla|flash: Keras MHA with `flash_attention=False` (XLA's
        attention) or with its default `flash_attention=None` (cuDNN flash
        attention where JAX can use it: a GPU under bf16; XLA otherwise).
        Default flash under mixed_bfloat16, else xla.
    --output FILE: the table also goes to FILE (written atomically), under a
        comment naming the machine, date (UTC), command line, backend and
        versions. Name results files
        `benchmarks/results_area_attention_<device>_<backend>.txt`, e.g.
        `results_area_attention_cpu_jax.txt`, `results_area_attention_h100_jax.txt`.

Usage:
    python benchmarks/area_attention.py [--repeats 10] [--warmup 3]
        [--shapes 1d:256 2d:16x16] [--batch 8] [--heads 4] [--key_dim 32]
        [--widths 1 2 3 5] [--areas 2 3] [--implementations fast direct concat]
        [--dtype float32|mixed_bfloat16] [--baseline xla|flash]
        [--jit both|on|off] [--output FILE]
    KERAS_BACKEND=jax python benchmarks/area_attention.py --shapes 1d:256 \
        2d:16x16 --widths 3 5 --areas 3 --jit on --repeats 10 \
        --output benchmarks/results_area_attention_cpu_jax.txt
    # one GPU, bf16, against cuDNN flash attention (issue 22):
    KERAS_BACKEND=jax python benchmarks/area_attention.py --shapes 1d:256 \
        1d:1024 2d:16x16 2d:32x32 --batch 32 --heads 8 --key_dim 64 \
        --widths 3 5 --areas 3 --implementations fast fused \
        --dtype mixed_bfloat16 --jit on
    # the same in float32, against XLA's attention:
    KERAS_BACKEND=jax python benchmarks/area_attention.py --shapes 1d:256 \
        1d:1024 2d:16x16 2d:32x32 --batch 32 --heads 8 --key_dim 64 \
        --widths 3 5 --areas 3 --implementations fast fused \
        --dtype float32 --baseline xla --jit on
"""

import argparse
import datetime
import functools
import gc
import os
import platform
import shlex
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

import keras  # noqa: E402
import numpy as np  # noqa: E402

from _timing import make_steps  # noqa: E402
from _timing import paired_medians  # noqa: E402

from keras_structattn.layers import MultiHeadAreaAttention  # noqa: E402

# --implementations value: (row label, MultiHeadAreaAttention arguments).
IMPLEMENTATIONS = {
    "fast": ("mean fast", dict(area_key_mode="mean", area_implementation="fast")),
    "direct": ("mean direct", dict(area_key_mode="mean", area_implementation="direct")),
    "concat": ("concat", dict(area_key_mode="concat")),
    "fused": ("mean fused", dict(area_key_mode="mean", area_implementation="fused")),
    "stacked": ("mean stacked", dict(area_key_mode="mean", area_implementation="stacked")),
    "concat_stacked": (
        "concat stacked", dict(area_key_mode="concat", area_implementation="stacked")
    ),
    "auto": ("mean auto", dict(area_key_mode="mean", area_implementation="auto")),
}
DEFAULT_IMPLEMENTATIONS = ("fast", "direct", "concat")
LABEL_WIDTH = 36


def parse_shape(text):
    """`"1d:256"` -> `(1, 256)`; `"2d:16x16"` -> `(16, 16)`: (height, width)."""
    kind, _, size = text.lower().partition(":")
    try:
        if kind == "1d":
            height, width = 1, int(size)
        elif kind == "2d":
            height, width = (int(s) for s in size.split("x"))
        else:
            raise ValueError
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"--shapes: {text!r} is neither 1d:L nor 2d:HxW (e.g. 1d:256 2d:16x16)"
        ) from None
    if height < 1 or width < 1:
        raise argparse.ArgumentTypeError(f"--shapes: {text!r} has a size below 1")
    return kind, height, width


def shapes_of(args):
    """The `(kind, height, width)` shapes: `--shapes`, or the older flags."""
    if args.shapes:
        return args.shapes
    shapes = []
    if args.only in (None, "1d"):
        shapes += [("1d", 1, length) for length in args.lengths or (64, 256, 1024)]
    if args.only in (None, "2d"):
        shapes += [("2d", side, side) for side in (8, 16)]
    return shapes


def configurations(args, implementations):
    """Yields (label, (height, width), layer arguments) rows; the baseline
    (arguments None) comes first for each shape."""
    variants = [IMPLEMENTATIONS[name] for name in implementations]
    for kind, height, width in shapes_of(args):
        if kind == "1d":
            shape = f"1-D L={width}"
            areas = [(f"w={w}", dict(max_area_width=w)) for w in args.widths]
        else:
            shape = f"2-D {height}x{width}"
            areas = [
                (f"{a}x{a}", dict(max_area_width=a, max_area_height=a, memory_height=height))
                for a in args.areas
            ]
        yield f"{shape} keras MHA", (height, width), None
        for area, area_kwargs in areas:
            for name, kwargs in variants:
                yield f"{shape} {area} {name}", (height, width), dict(**area_kwargs, **kwargs)


def is_out_of_memory(error):
    """Whether `error` is the device running out of memory (XLA's
    RESOURCE_EXHAUSTED under JAX, `ResourceExhaustedError` under TF)."""
    text = f"{type(error).__name__}: {error}"
    return isinstance(error, MemoryError) or any(
        s in text for s in ("RESOURCE_EXHAUSTED", "ResourceExhausted", "OOM when allocating")
    ) or "out of memory" in text.lower()


def time_row(make_layer, shape, jit, base, args):
    """Builds a layer and times it against `base` (None: alone).

    Returns `(steps, (fwd_base, fwd, both_base, both))`, or `(None, why)`
    when the layer rejects its arguments or does not fit in memory.
    """
    height, width = shape
    x = keras.ops.convert_to_tensor(
        np.random.default_rng(0)
        .normal(size=(args.batch, height * width, args.heads * args.key_dim))
        .astype("float32")
    )
    keras.utils.set_random_seed(0)
    try:
        layer = make_layer()
        layer(x, x)  # build
    except (ValueError, NotImplementedError) as error:
        # e.g. an `area_implementation` this version of the layer lacks.
        return None, f"not supported: {str(error).splitlines()[0][:120]}"
    except Exception as error:
        if not is_out_of_memory(error):
            raise
        return None, does_not_fit(error)
    try:
        steps = make_steps(layer, x, jit)
        if base is None:
            # A row alone (the baseline, or a row whose baseline did not fit).
            fwd = paired_medians(steps[0], steps[0], args.warmup, args.repeats)[0]
            both = paired_medians(steps[1], steps[1], args.warmup, args.repeats)[0]
            return steps, (fwd, fwd, both, both)
        fwd_base, fwd = paired_medians(base[0], steps[0], args.warmup, args.repeats)
        both_base, both = paired_medians(base[1], steps[1], args.warmup, args.repeats)
        return steps, (fwd_base, fwd, both_base, both)
    except Exception as error:
        if not is_out_of_memory(error):
            raise
        return None, does_not_fit(error)


def does_not_fit(error):
    """The row's text for an out-of-memory `error`, whose first line also
    goes to stderr (which memory: the device's or an SM's shared memory)."""
    print(f"  ({type(error).__name__}: {str(error).strip().splitlines()[0][:300]})",
          file=sys.stderr)
    shared = "shared memory" in str(error).lower()
    return "does not fit (shared memory)" if shared else "does not fit"


def format_row(label, jit, times, memory, base, base_memory):
    """One table row; `times` is `(fwd_base, fwd, both_base, both)` or a
    string saying why there are none."""
    head = f"{label:{LABEL_WIDTH}s} {'on' if jit else 'off':>3s}"
    if isinstance(times, str):
        return f"{head} {times}"
    fwd_base, fwd, both_base, both = times

    def ratio(value, reference):
        return f"{value / reference:6.2f}" if base and reference else f"{'':6s}"

    mem = f"{memory / 2**20:9.1f}" if memory else f"{'n/a':>9s}"
    return (
        f"{head} {fwd:8.2f} {ratio(fwd, fwd_base)} {both:10.2f} {ratio(both, both_base)} "
        f"{mem} {ratio(memory, base_memory) if memory else ' ' * 6}"
    )


def machine_and_versions(backend):
    """`(machine, versions)` lines for a results file's header."""
    cpu = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo") as f:
            cpu = next(line.split(":", 1)[1].strip() for line in f if line.startswith("model name"))
    except (OSError, StopIteration):
        pass
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    machine = f"{cpu}, {cores} CPU cores"
    versions = [f"keras {keras.__version__}", f"numpy {np.__version__}"]
    if backend == "jax":
        import jax
        import jaxlib

        device = jax.devices()[0]
        machine = f"JAX device {device.device_kind}; {machine}"
        versions[:0] = [f"jax {jax.__version__}", f"jaxlib {jaxlib.__version__}"]
    elif backend == "tensorflow":
        import tensorflow as tf

        versions[:0] = [f"tensorflow {tf.__version__}"]
    versions.append(f"python {platform.python_version()}")
    return machine, ", ".join(versions)


def write_atomically(path, lines):
    """Writes `lines` to `path` through `path.tmp` and `os.replace`, so that
    a reader never sees half a file (nor a crash leaves one)."""
    with open(path + ".tmp", "w") as f:
        f.write("\n".join(lines) + "\n")
    os.replace(path + ".tmp", path)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--repeats", type=int, default=10)
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument("--shapes", type=parse_shape, nargs="+",
                        help="1d:L or 2d:HxW; replaces --lengths and --only")
    parser.add_argument("--only", choices=("1d", "2d"))
    parser.add_argument("--lengths", type=int, nargs="+", help="1-D lengths (64 256 1024)")
    parser.add_argument("--widths", type=int, nargs="+", default=[1, 2, 3, 5])
    parser.add_argument("--areas", type=int, nargs="+", default=[2, 3])
    parser.add_argument("--batch", type=int, default=8)
    parser.add_argument("--heads", type=int, default=4)
    parser.add_argument("--key_dim", type=int, default=32)
    parser.add_argument("--implementations", nargs="+", choices=tuple(IMPLEMENTATIONS))
    parser.add_argument("--dtype", choices=("float32", "mixed_bfloat16"), default="float32")
    parser.add_argument("--baseline", choices=("xla", "flash"))
    parser.add_argument("--jit", choices=("both", "on", "off"), default="both")
    parser.add_argument("--output", help="also write the table to this file")
    args = parser.parse_args(argv)
    # A shared machine's load at the start says how far to trust the times.
    load = os.getloadavg() if hasattr(os, "getloadavg") else None
    jits = {"both": (False, True), "on": (True,), "off": (False,)}[args.jit]
    if args.shapes and (args.lengths or args.only):
        print("note: --shapes given: --lengths and --only are ignored", file=sys.stderr)

    backend = keras.backend.backend()
    accelerator = False
    if backend == "jax":
        import jax

        accelerator = jax.default_backend() != "cpu"
    notes = []
    implementations = args.implementations
    if implementations is None:
        implementations = DEFAULT_IMPLEMENTATIONS + (("fused",) if accelerator else ())
        if backend != "jax":
            notes.append(
                "note: fused skipped: it is a JAX (Pallas) kernel; time it with "
                "KERAS_BACKEND=jax on a GPU"
            )
        elif not accelerator:
            notes.append(
                "note: fused skipped: no GPU seen by JAX (on a CPU its Pallas kernel runs "
                "in interpret mode, for tests, not timing); --implementations ... fused "
                "times it anyway"
            )
    elif "fused" in implementations and not accelerator:
        notes.append(
            "note: fused without a GPU seen by JAX: its Pallas kernel runs in interpret "
            "mode (for tests, not timing), so its times say nothing of the kernel's speed"
        )
    for note in notes:
        print(note, file=sys.stderr)

    keras.config.set_dtype_policy(args.dtype)
    baseline = args.baseline or ("flash" if args.dtype == "mixed_bfloat16" else "xla")
    if baseline == "xla":
        # MultiHeadAttention stores `flash_attention or
        # is_flash_attention_enabled()`, so its own `flash_attention=False`
        # reads as None ("use flash where possible", cuDNN under bf16 on a
        # GPU) unless flash attention is also off globally.
        # MultiHeadAreaAttention never uses flash attention either way.
        keras.config.disable_flash_attention()
        described = "xla (keras MHA, flash_attention=False)"
    else:
        described = "flash (keras MHA, flash_attention=None: " + (
            "cuDNN flash attention where JAX can use it, XLA otherwise)" if accelerator
            else "no GPU here, so XLA's attention)" if backend == "jax"
            else "TensorFlow has no flash kernel: its einsum attention)"
        )

    def make_baseline():
        return keras.layers.MultiHeadAttention(
            args.heads, args.key_dim, flash_attention=None if baseline == "flash" else False
        )

    lines = []

    def emit(line=""):
        print(line, flush=True)
        lines.append(line)

    emit(
        f"backend={backend}  dtype={args.dtype}  batch={args.batch} heads={args.heads} "
        f"key_dim={args.key_dim}  baseline={described}  median of {args.repeats} after "
        f"{args.warmup} warm-up runs; ratios are against keras.layers.MultiHeadAttention "
        "at the same shape"
    )
    header = (
        f"{'configuration':{LABEL_WIDTH}s} {'jit':>3s} {'fwd ms':>8s} {'x MHA':>6s} "
        f"{'fwd+bwd ms':>10s} {'x MHA':>6s} {'peak MiB':>9s} {'x MHA':>6s}"
    )
    for jit in jits:
        emit()
        emit(header)
        emit("-" * len(header))
        base = None
        for label, shape, kwargs in configurations(args, implementations):
            if kwargs is None:
                base = None
                gc.collect()  # the previous shape's arrays, before the next shape
                steps, times = time_row(make_baseline, shape, jit, None, args)
                base = steps
            else:
                make_layer = functools.partial(
                    MultiHeadAreaAttention, args.heads, args.key_dim, **kwargs
                )
                steps, times = time_row(make_layer, shape, jit, base, args)
            memory = steps[2] if steps else None
            emit(format_row(label, jit, times, memory, base, base[2] if base else None))
            del steps

    if args.output:
        machine, versions = machine_and_versions(backend)
        env = os.environ.get("KERAS_BACKEND")
        env = f"KERAS_BACKEND={env} " if env else ""
        now = datetime.datetime.now(datetime.timezone.utc)
        write_atomically(args.output, [
            f"# machine: {machine}",
            f"# date: {now:%Y-%m-%d %H:%M} UTC",
            f"# command: {env}python {shlex.join(sys.argv)}",
            f"# backend: {backend}; {versions}",
            *([f"# load average (1, 5, 15 min) at the start: {load[0]:.2f} {load[1]:.2f} "
               f"{load[2]:.2f}"] if load else []),
            *(f"# {note}" for note in notes),
            "",
            *lines,
        ])


if __name__ == "__main__":
    main()
