"""Training step time and multiply-adds of the CATT captioners against their twins.

One training step (forward, the cross-entropy of every caption word,
backward: the gradient of every weight; the optimizer update is left out)
at the papers' shapes: batch 10 images x 5 captions of 16 words (+ EOS),
36 bottom-up regions of 2048-d features, 10,000 words, under XLA on the
JAX backend (`jax.jit`):

* Transformer (`transformer_captioner_base`: 6 + 6 post-norm blocks, d 512,
  8 heads) vs Transformer+CATT (`catt_captioner_base`: the same with image
  and word dictionaries of 500 entries; Yang et al., 2021,
  arXiv:2103.03493, Sec. 3.3);
* Up-Down (`updown_base`: LSTMs of 1000, attention 512; Anderson et al.,
  2018, arXiv:1707.07998) vs Up-Down+CATT (`updown_catt_base`: a visual
  dictionary of 1000 entries).

Step times are paired medians (the twin and the CATT model timed
alternately after warm-up, `benchmarks/_timing.py`); multiply-adds are
XLA's count of the compiled step (`cost_analysis()["flops"]` / 2), the
same on every run.

Usage:
    KERAS_BACKEND=jax python -m benchmarks.catt_caption_speed [--repeats 3] [--warmup 1]
"""

import datetime
import os
import platform
import sys

os.environ.setdefault("KERAS_BACKEND", "jax")

import keras  # noqa: E402
import numpy as np  # noqa: E402

from benchmarks._timing import jax_training_step  # noqa: E402
from benchmarks._timing import model_step_arguments  # noqa: E402
from benchmarks._timing import paired_medians  # noqa: E402
from keras_structattn.training.losses import PaddedCrossEntropy  # noqa: E402
from models import registry  # noqa: E402
from models.captioning.catt_captioner import CATTCaptioner  # noqa: E402
from models.captioning.updown import UpDownCaptioner  # noqa: E402

PAIRS = (
    ("Transformer", "transformer_captioner_base", "Transformer+CATT", "catt_captioner_base",
     CATTCaptioner),
    ("Up-Down", "updown_base", "Up-Down+CATT", "updown_catt_base", UpDownCaptioner),
)
IMAGES, CAPTIONS, LENGTH, REGIONS, FEATURES, VOCAB = 10, 5, 17, 36, 2048, 10_000


def batch(rng):
    corner = rng.uniform(0.0, 0.8, (IMAGES, REGIONS, 2))
    size = rng.uniform(0.05, 0.2, (IMAGES, REGIONS, 2))
    features = {
        "features": rng.random((IMAGES, REGIONS, FEATURES)).astype("float32"),
        "boxes": np.concatenate([corner, corner + size], -1).astype("float32"),
        "mask": np.ones((IMAGES, REGIONS), bool),
    }
    targets = rng.integers(2, VOCAB, (IMAGES, CAPTIONS, LENGTH)).astype("int32")
    decoder_inputs = np.concatenate(
        [np.zeros((IMAGES, CAPTIONS, 1), "int32"), targets[..., :-1]], -1)
    return (features, decoder_inputs), targets


def make_step(model_class, set_name, inputs, targets):
    """A compiled training step (loss and gradients), its multiply-adds and
    parameter count."""
    keras.utils.set_random_seed(0)
    model = model_class.from_hparams(registry.get(set_name), VOCAB, seed=0)
    model(inputs)
    step, cost = jax_training_step(model, PaddedCrossEntropy(0.1), inputs, targets)
    flops = cost["flops"]
    return step, None if flops is None else flops / 2, model.count_params()


def main():
    args = model_step_arguments(__doc__.split("\n")[0])
    print(f"# {datetime.date.today()} {platform.machine()} {os.cpu_count()} cores; "
          f"KERAS_BACKEND=jax (XLA); {IMAGES} images x {CAPTIONS} captions of {LENGTH} tokens, "
          f"{REGIONS} regions x {FEATURES}, {VOCAB} words")
    print(f"# command: KERAS_BACKEND=jax python -m benchmarks.catt_caption_speed "
          f"{' '.join(sys.argv[1:])}")
    inputs, targets = batch(np.random.default_rng(0))
    header = (f"{'model':18s} {'parameters':>12s} {'step ms':>9s} {'x twin':>7s} "
              f"{'GMACs':>8s} {'x twin':>7s}")
    print(header)
    print("-" * len(header))
    for twin_name, twin_set, catt_name, catt_set, model_class in PAIRS:
        twin_step, twin_macs, twin_params = make_step(model_class, twin_set, inputs, targets)
        catt_step, catt_macs, catt_params = make_step(model_class, catt_set, inputs, targets)
        twin_ms, catt_ms = paired_medians(twin_step, catt_step, args.warmup, args.repeats)
        print(f"{twin_name:18s} {twin_params:12,d} {twin_ms:9.0f} {1.0:7.2f} "
              f"{twin_macs / 1e9:8.2f} {1.0:7.2f}")
        print(f"{catt_name:18s} {catt_params:12,d} {catt_ms:9.0f} {catt_ms / twin_ms:7.2f} "
              f"{catt_macs / 1e9:8.2f} {catt_macs / twin_macs:7.2f}", flush=True)


if __name__ == "__main__":
    main()
