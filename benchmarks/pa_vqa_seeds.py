"""MCAN vs MCAN+PA on box-free region features, at convergence, paired by seed.

Mao et al. (2022, "Positional Attention Guided Transformer-like Architecture
for Visual Question Answering", MCAN+PA) add word positions (PWA), region
positions read from the boxes (PMA, POA: Eqs. 8 and 13-14) to MCAN (Yu et
al., 2019, arXiv:1906.10770) and report overall +0.42 and "Num" +1.6 on
VQA-v2 test-dev (Table V): "particularly good at handling object counting".
In the paper MCAN sees no box; Shapes world's region features end with the
box and its area by default, so here every run is on a world made with
`--world_region_geometry off` (appearance only: the boxes reach the model
only as `boxes`, which only MCAN+PA's positional layers read).

Two arms per seed, `mcan` (`mcan_tiny`) and `mcan_pa` (`mcan_pa_tiny`),
trained to convergence (`benchmarks._vqa_seeds.TRAINING`: up to 96 epochs,
early stopping on the validation VQA accuracy, patience 12 epochs, the
48-epoch schedule unchanged). Measures on the test split: counting first
(the paper's claim), then overall, each question type, and relation
questions by form (yes/no, what-shape, what-colour), each next to the
majority baseline; per seed, mean (min-max) over the seeds, and the paired
difference MCAN+PA - MCAN with a 95% bootstrap interval of its mean. Each
finished run goes to the ledger `benchmarks/results_pa_vqa_cpu_runs.json`
(`--ledger`), from which a stopped comparison resumes.

Usage:
    python -m benchmarks.pa_vqa_seeds [--seeds 1,2,3,4,5] [--output_dir runs/pa_vqa_seeds] \\
        [--ledger FILE] [-- more recipe flags for every arm]
"""

import os

from benchmarks._vqa_seeds import compare
from benchmarks._vqa_seeds import type_groups

LEDGER = os.path.join(os.path.dirname(os.path.abspath(__file__)), "results_pa_vqa_cpu_runs.json")
ARMS = {"mcan": ["--model", "mcan"], "mcan_pa": ["--model", "mcan_pa"]}
WORLD = ("--world_region_geometry", "off")
# Counting first: the paper's claim, the comparison's primary measure.
GROUPS = [("count", "type/count")] + [g for g in type_groups() if g[1] != "type/count"]


def main(argv=None):
    return compare("pa_vqa_seeds", __doc__, ARMS, [("mcan_pa", "mcan")], GROUPS,
                   ledger=LEDGER, world_flags=WORLD, argv=argv)


if __name__ == "__main__":
    main()
