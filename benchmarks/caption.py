"""Training and decoding speed of the Transformer captioner, regular vs 2x2 vs 3x3 area attention.

The captioner of Li et al., "Area Attention", ICML 2019 (arXiv:1810.10126,
section 4.3; `models/captioning/transformer_captioner.py`) puts 2-D area attention over the 8x8
image grid in the first 2 layers of the encoder self-attention and of the
caption-to-image attention: 441 areas of up to 3x3 cells (225 of up to
2x2) instead of 64 cells. What that costs in time is the point measured
here, for `--hparams_set` (e.g. `captioner_tiny`) against its `_area2x2`
and `_area3x3` variants.

Training: one `train_on_batch` (forward, backward, Adam update, dropout on)
of a fixed batch of `--images` random grids `[images, grid, grid,
feature_dim]` (1536 channels: the paper's Inception-ResNet-v2 features)
with `--captions_per_image` random captions of `--length` tokens each
(`[images, K, T]`: each image encoded once for its K captions), loss
`PaddedCrossEntropy`; with `jit_compile` off and/or on (`--jit`; on JAX,
off runs the step op by op, unjitted).

Decoding: cached beam search (`compiled_generate`, XLA; beam `--beam_size`,
alpha 0.6) of `--decode_batch` images, at most `--length` tokens. The
weights are random (untrained): EOS is then rarely chosen, so nearly every
caption runs the whole `--length` steps; the mean caption length printed
says how many did.

Timing: each variant is timed against the regular model with
`benchmarks._timing.paired_medians` (the two steps alternated, run after
run, after `--warmup` runs of each; medians of `--repeats`), so each ratio
comes from interleaved runs and survives the drift of a shared machine.
"regular ms" is the regular model's median from the same pairing and
"cost x regular" the variant's time over it (above 1: slower); the regular
row shows its pairing with the first variant. Rates (captions/s,
sentences/s) are `1000 * items / ms`.

Usage:
    python benchmarks/caption.py [--hparams_set captioner_tiny] [--jit both] [--repeats 8]
"""

import argparse
import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

import keras  # noqa: E402
import numpy as np  # noqa: E402
from keras import ops  # noqa: E402

from _timing import paired_medians  # noqa: E402

from keras_structattn.decoding.seq2seq import compiled_generate  # noqa: E402
from keras_structattn.decoding.tokens import EOS_ID  # noqa: E402
from keras_structattn.training.losses import PaddedCrossEntropy  # noqa: E402
from models import registry  # noqa: E402
from models.captioning.transformer_captioner import TransformerCaptioner  # noqa: E402

VARIANTS = ("", "_area2x2", "_area3x3")
JITS = {"off": (False,), "on": (True,), "both": (False, True)}


def variant_hparams(args):
    """`[(label, HParams)]`: the set and its area variants, on the grid."""
    return [
        (
            args.hparams_set + suffix,
            registry.get(args.hparams_set + suffix).override(
                grid_height=args.grid, grid_width=args.grid
            ),
        )
        for suffix in VARIANTS
    ]


def make_model(hparams, args):
    keras.utils.set_random_seed(0)
    model = TransformerCaptioner.from_hparams(hparams, args.vocab, seed=0)
    grid = np.zeros((1, args.grid, args.grid, args.feature_dim), "float32")
    model((grid, np.zeros((1, 1, 4), "int32")))  # build
    return model


def training_batch(args):
    """`((features, decoder_inputs), targets)`, captions `[images, K, T]`."""
    rng = np.random.default_rng(0)
    images, k, length = args.images, args.captions_per_image, args.length
    features = rng.standard_normal((images, args.grid, args.grid, args.feature_dim))
    targets = rng.integers(3, args.vocab, size=(images, k, length)).astype("int32")
    targets[..., -1] = EOS_ID
    decoder_inputs = np.concatenate(
        [np.zeros((images, k, 1), "int32"), targets[..., :-1]], axis=-1
    )
    return (features.astype("float32"), decoder_inputs), targets


def training_step(hparams, jit, batch, args):
    model = make_model(hparams, args)
    model.compile(
        optimizer=keras.optimizers.Adam(1e-4),
        loss=PaddedCrossEntropy(hparams.label_smoothing),
        jit_compile=jit,
    )
    x, y = batch
    # train_on_batch returns the loss as NumPy: each call waits for the step.
    return lambda: model.train_on_batch(x, y)


def decoding_step(hparams, features, args):
    model = make_model(hparams, args)
    generate = compiled_generate(
        model, max_decode_length=args.length, beam_size=args.beam_size, alpha=0.6
    )
    out = {}

    def step():
        out["ids"] = ops.convert_to_numpy(generate(features)[0])

    return step, out


def mean_length(ids):
    """Mean caption length in tokens, EOS included (0 pads after it)."""
    return float(np.mean(np.sum(ids != 0, axis=-1)))


def print_rows(title, columns, rows):
    print(f"\n{title:28s} " + " ".join(f"{c:>{w}s}" for c, w in columns))
    for label, values in rows:
        print(f"{label:28s} " + " ".join(f"{v:>{w}s}" for v, (_, w) in zip(values, columns)),
              flush=True)


def paired_rows(steps, args):
    """`[(label, regular ms, variant ms)]`: each variant against `steps[0]`."""
    (base_label, base), *variants = steps
    rows = []
    for label, step in variants:
        regular_ms, variant_ms = paired_medians(base, step, args.warmup, args.repeats)
        if not rows:
            rows.append((base_label, regular_ms, regular_ms))
        rows.append((label, regular_ms, variant_ms))
    return rows


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--hparams_set", default="captioner_tiny",
                        help="the regular set; its _area2x2 and _area3x3 variants are timed")
    parser.add_argument("--images", type=int, default=16)
    parser.add_argument("--captions_per_image", type=int, default=5)
    parser.add_argument("--grid", type=int, default=8)
    parser.add_argument("--feature_dim", type=int, default=1536)
    parser.add_argument("--vocab", type=int, default=10000)
    parser.add_argument("--length", type=int, default=17, help="caption tokens, EOS included")
    parser.add_argument("--beam_size", type=int, default=3)
    parser.add_argument("--decode_batch", type=int, default=50)
    parser.add_argument("--warmup", type=int, default=2)
    parser.add_argument("--repeats", type=int, default=8)
    parser.add_argument("--jit", choices=sorted(JITS), default="both",
                        help="jit_compile of the training steps (decoding is always XLA)")
    args = parser.parse_args(argv)
    variants = variant_hparams(args)
    captions = args.images * args.captions_per_image
    print(
        f"backend={keras.backend.backend()}  {args.hparams_set} vs _area2x2 / _area3x3 "
        f"(first {variants[1][1].num_area_layers} layers, encoder self + encdec); "
        f"grid {args.grid}x{args.grid}x{args.feature_dim}, vocab {args.vocab}; "
        f"paired medians of {args.repeats} after {args.warmup}"
    )

    batch = training_batch(args)
    columns = [("jit", 4), ("ms/step", 9), ("captions/s", 11), ("regular ms", 11),
               ("cost x regular", 15)]
    for jit in JITS[args.jit]:
        steps = [(label, training_step(hparams, jit, batch, args)) for label, hparams in variants]
        rows = [
            (label, ("on" if jit else "off", f"{ms:.1f}", f"{captions / ms * 1e3:.0f}",
                     f"{regular:.1f}", f"{ms / regular:.2f}"))
            for label, regular, ms in paired_rows(steps, args)
        ]
        print_rows(f"training {args.images}x{args.captions_per_image}x{args.length}",
                   columns, rows)

    features = np.random.default_rng(1).standard_normal(
        (args.decode_batch, args.grid, args.grid, args.feature_dim)
    ).astype("float32")
    outputs = []
    steps = []
    for label, hparams in variants:
        step, out = decoding_step(hparams, features, args)
        steps.append((label, step))
        outputs.append(out)
    rows = [
        (label, (f"{ms:.0f}", f"{args.decode_batch / ms * 1e3:.1f}", f"{regular:.0f}",
                 f"{ms / regular:.2f}", f"{mean_length(out['ids']):.1f}"))
        for (label, regular, ms), out in zip(paired_rows(steps, args), outputs)
    ]
    print_rows(
        f"beam {args.beam_size}, {args.decode_batch} images",
        [("ms/batch", 9), ("sentences/s", 12), ("regular ms", 11), ("cost x regular", 15),
         ("mean length", 12)],
        rows,
    )


if __name__ == "__main__":
    main()
