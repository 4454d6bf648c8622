"""Training and decoding speed of the translation Transformer, regular vs area attention.

Training: tokens per second of `train_on_batch` (forward, backward and Adam
update) on a fixed batch shape (`--batch` rows of `--length` source and
target tokens), for the regular model and the `_area` model (area attention
of width 3 in the first 2 layers), with and without `jit_compile`; then the
same for the LSTM seq2seq (`--lstm_hparams_set`, area width 2). Ratios are
against the regular model with the same jit setting.

Decoding: sentences per second of greedy decoding of exactly
`--decode_length` target tokens (no early stop), with the fixed-shape cache
(`Transformer.decode_step`) and without it (re-running the whole decoder on
the padded prefix at every step, as the keras.io and TF tutorials do), both
compiled with XLA. Ratio: cached over uncached.

Each time is the median of `--repeats` runs after `--warmup` runs.

Usage:
    python benchmarks/translate.py [--hparams_set transformer_tiny] [--repeats 10]
"""

import argparse
import os
import statistics
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

import keras  # noqa: E402
import numpy as np  # noqa: E402
from keras import ops  # noqa: E402

from keras_structattn.decoding import greedy_search  # noqa: E402
from keras_structattn.training.losses import PaddedCrossEntropy  # noqa: E402
from models import registry  # noqa: E402
from models.translation.lstm_seq2seq import LSTMSeq2Seq  # noqa: E402
from models.translation.transformer import Transformer  # noqa: E402

VOCAB = 4000


def median_seconds(fn, warmup, repeats):
    for _ in range(warmup):
        fn()
    runs = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        runs.append(time.perf_counter() - start)
    return statistics.median(runs)


def make_model(hparams, seed=0):
    family = LSTMSeq2Seq if getattr(hparams, "model_type", "") == "lstm" else Transformer
    model = family.from_hparams(hparams, VOCAB, seed=seed)
    model((np.ones((1, 4), "int32"), np.zeros((1, 4), "int32")))
    return model


def batch(rng, rows, length):
    source = rng.integers(3, VOCAB, size=(rows, length)).astype("int32")
    target = rng.integers(3, VOCAB, size=(rows, length)).astype("int32")
    decoder_inputs = np.concatenate([np.zeros((rows, 1), "int32"), target[:, :-1]], 1)
    return (source, decoder_inputs), target


def training_speed(hparams, jit, args):
    keras.utils.set_random_seed(0)
    model = make_model(hparams)
    model.compile(
        optimizer=keras.optimizers.Adam(1e-4),
        loss=PaddedCrossEntropy(hparams.label_smoothing),
        jit_compile=jit,
    )
    x, y = batch(np.random.default_rng(0), args.batch, args.length)
    seconds = median_seconds(lambda: model.train_on_batch(x, y), args.warmup, args.repeats)
    return 2 * args.batch * args.length / seconds  # source + target tokens


def compile_fn(fn):
    if keras.backend.backend() == "tensorflow":
        import tensorflow as tf

        return tf.function(fn, jit_compile=True)
    import jax

    return jax.jit(fn)


def decoding_speed(hparams, args):
    model = make_model(hparams)
    source, _ = batch(np.random.default_rng(1), args.decode_batch, args.length)[0]
    steps = args.decode_length
    never = VOCAB + 1  # an EOS id that never comes: decode all steps

    def cached(source):
        encoded, mask = model.encode(source)
        cache = model.initial_cache(encoded, mask, steps)
        start = ops.zeros((ops.shape(source)[0],), "int32")
        return greedy_search(
            model.decode_step, start, cache, max_decode_length=steps, eos_id=never
        )[0]

    def uncached(source):
        encoded, mask = model.encode(source)
        rows = ops.shape(source)[0]

        def body(index, ids):
            logits = model.decode(ids, encoded, mask)  # the whole prefix again
            step = ops.take(logits, index, axis=1)
            token = ops.cast(ops.argmax(step, axis=-1), "int32")
            ids = ops.slice_update(
                ids,
                (ops.zeros((), "int32"), ops.cast(index + 1, "int32")),
                ops.expand_dims(token, 1),
            )
            return ids

        ids = ops.zeros((rows, steps + 1), "int32")
        return ops.fori_loop(0, steps, body, ids)[:, 1:]

    fast, slow = compile_fn(cached), compile_fn(uncached)
    # Both decoders must produce the same tokens (greedy, same model).
    same = np.array_equal(
        ops.convert_to_numpy(fast(source)), ops.convert_to_numpy(slow(source))
    )
    results = []
    for fn in (fast, slow):
        seconds = median_seconds(
            lambda fn=fn: ops.convert_to_numpy(fn(source)), args.warmup, args.repeats
        )
        results.append(args.decode_batch / seconds)
    return results[0], results[1], same


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--hparams_set", default="transformer_tiny")
    parser.add_argument("--lstm_hparams_set", default="lstm_seq2seq_256_h4",
                        help="LSTM rows: this set vs its _area variant ('' to skip)")
    parser.add_argument("--batch", type=int, default=128)
    parser.add_argument("--length", type=int, default=16)
    parser.add_argument("--decode_batch", type=int, default=32)
    parser.add_argument("--decode_length", type=int, default=50)
    parser.add_argument("--repeats", type=int, default=10)
    parser.add_argument("--warmup", type=int, default=2)
    args = parser.parse_args(argv)
    regular = registry.get(args.hparams_set)
    area = registry.get(args.hparams_set + "_area")
    print(
        f"backend={keras.backend.backend()}  {args.hparams_set} vs "
        f"{args.hparams_set}_area (width {area.max_area_width}, first "
        f"{area.num_area_layers} layers); train batch {args.batch} x "
        f"{args.length} tokens; median of {args.repeats} after {args.warmup}"
    )
    print(f"\n{'training':28s} {'jit':>4s} {'tokens/s':>10s} {'x regular':>10s}")
    families = [("", regular, area)]
    if args.lstm_hparams_set:
        families.append((
            f"{args.lstm_hparams_set} ",
            registry.get(args.lstm_hparams_set),
            registry.get(args.lstm_hparams_set + "_area"),
        ))
    for prefix, plain, with_area in families:
        for jit in (False, True):
            base = None
            for name, hparams in (("regular", plain), ("area", with_area)):
                speed = training_speed(hparams, jit, args)
                base = base or speed
                print(f"{prefix + name:28s} {'on' if jit else 'off':>4s} "
                      f"{speed:10.0f} {speed / base:10.2f}", flush=True)
    print(f"\n{'decoding ' + str(args.decode_length) + ' tokens':28s} "
          f"{'cached':>10s} {'uncached':>10s} {'speed-up':>9s}  same tokens")
    for name, hparams in (("regular", regular), ("area", area)):
        fast, slow, same = decoding_speed(hparams, args)
        print(f"{name + ' (sentences/s)':28s} {fast:10.1f} {slow:10.1f} "
              f"{fast / slow:9.2f}  {same}", flush=True)


if __name__ == "__main__":
    main()
