"""MUAN's gate at d 128: gated, ungated and gated from M near 1, at convergence, paired by seed.

Yu et al. (2019, "Multimodal Unified Attention Networks for Vision-and-
Language Interactions", arXiv:1908.04107) gate each token's query and key
by M = sigmoid(FC_g(FC_q^g(Q) * FC_k^g(K))) (Eqs. 4-6) and report that the
gated model "steadily outperforms" the ungated one for L = 2..12 (Fig. 5a).
At d 64 (d_h 16) and 13 epochs the ungated MUAN won every seed here, and at
initialisation the two gates (about 0.5 each) scale the logits by about a
quarter, so the gated arm starts with near-uniform attention. Three arms
per seed, at d 128 (4 heads of d_h = d_g = 32, 2 blocks: `muan_d128*`):

- `gated`: `muan_d128` (the gate's bias at zero, as the paper's code);
- `ungated`: `muan_d128_nogate` (`qk_gate=False`, Fig. 5a's ablation);
- `gated_bias4`: `muan_d128_gate_bias`, the gate's FC_g bias initialised
  to 4 (M = sigmoid(4) = 0.98 at the start: the logits nearly unscaled),
  which separates the gate's function from its initial scaling.

Each trained to convergence (`benchmarks._vqa_seeds.TRAINING`: up to 96
epochs, early stopping on the validation VQA accuracy, patience 12 epochs,
the 48-epoch schedule unchanged) on a Shapes world of 1,000 training
scenes (the default's validation and test splits, 200 and 500 scenes): at
2,000 scenes and 4 blocks an epoch took 22-32 s on one CPU core (3
epochs timed), 25-50 minutes a converged run; here about a quarter. Measures on
the test split: overall, each type, relation forms, next to the majority
baseline; per seed, mean (min-max), and the paired differences gated -
ungated, gated_bias4 - ungated and gated_bias4 - gated with a 95% bootstrap
interval of their mean. Ledger: `benchmarks/results_muan_gate_cpu_runs.json`.

Usage:
    python -m benchmarks.muan_gate_seeds [--seeds 1,2,3,4,5] \\
        [--output_dir runs/muan_gate_seeds] [--ledger FILE] [-- more recipe flags]
"""

import os

from benchmarks._vqa_seeds import compare
from benchmarks._vqa_seeds import type_groups

LEDGER = os.path.join(os.path.dirname(os.path.abspath(__file__)),
                      "results_muan_gate_cpu_runs.json")
ARMS = {
    "gated": ["--model", "muan", "--hparams_set", "muan_d128"],
    "ungated": ["--model", "muan", "--hparams_set", "muan_d128_nogate"],
    "gated_bias4": ["--model", "muan", "--hparams_set", "muan_d128_gate_bias"],
}
WORLD = ("--world_train", "1000")
PAIRS = [("gated", "ungated"), ("gated_bias4", "ungated"), ("gated_bias4", "gated")]


def main(argv=None):
    return compare("muan_gate_seeds", __doc__, ARMS, PAIRS, type_groups(), ledger=LEDGER,
                   world_flags=WORLD, argv=argv)


if __name__ == "__main__":
    main()
