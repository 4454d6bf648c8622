"""Learning curves: a run's `curves.png`, and several runs on one figure.

The recipes draw `curves.png` after each training command, and their
`curves RUN [RUN ...]` command draws several runs on one figure. One panel
per metric: the training value and the validation value
(`val_<metric>`) against the optimizer step, one colour per run; the step
of a run's best checkpoint (`best.json`, early stopping) is marked on
every panel. Phases after the first (captioning's self-critical
`scst_history.csv`) continue the step axis where the first ended. Needs
matplotlib (the `vision` extra), imported when drawing.
"""

import json
import os

from keras_structattn.data.json_files import atomic_open
from keras_structattn.training.history import history_from_csv

CURVES_FILE = "curves.png"
# The history files of a run, in the order its phases train.
PHASES = (("history.csv", ""), ("scst_history.csv", "scst "))


def read_run(folder):
    """Reads the curves of a run folder.

    Args:
        folder: the run folder (`history.csv`, `scst_history.csv`,
            `best.json`).

    Returns:
        `(panels, best_step)`: `panels` is `{panel: {label: (steps,
        values)}}`, label "training" or "validation"; `best_step` is the
        step of the best checkpoint, or None.
    """
    panels, offset = {}, 0
    for name, prefix in PHASES:
        history = history_from_csv(os.path.join(folder, name))
        if not history:
            continue
        epochs = history.get("epoch", [])
        steps = history.get("step") or [e + 1 for e in epochs]
        steps = [offset + (s if s is not None else k + 1) for k, s in enumerate(steps)]
        for key, values in history.items():
            if key in ("epoch", "step"):
                continue
            metric = key[4:] if key.startswith("val_") else key
            label = ("validation" if key.startswith("val_") else "training")
            points = [(s, v) for s, v in zip(steps, values) if v is not None]
            if points:
                panels.setdefault(prefix + metric, {})[label] = tuple(zip(*points))
        offset = steps[-1] if steps else offset
    best = None
    best_file = os.path.join(folder, "best.json")
    if os.path.exists(best_file):
        with open(best_file, encoding="utf-8") as f:
            best = json.load(f).get("step")
    return panels, best


def draw(runs, path, title=None):
    """Draws runs' curves into one PNG, written whole.

    Args:
        runs: `[(name, panels, best_step)]` (`read_run`).
        path: the PNG to write.
        title: the figure's title.

    Returns:
        `path`, or None when no run has a history.
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    names = sorted({p for _, panels, _ in runs for p in panels},
                   key=lambda p: (p.startswith("scst"), p != "loss", p))
    if not names:
        return None
    columns = min(3, len(names))
    rows = -(-len(names) // columns)
    figure, axes = plt.subplots(rows, columns, figsize=(4.2 * columns, 3.2 * rows),
                                squeeze=False)
    colours = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    for k, panel in enumerate(names):
        ax = axes[k // columns][k % columns]
        for r, (run, panels, best) in enumerate(runs):
            colour = colours[r % len(colours)]
            for label, (steps, values) in sorted(panels.get(panel, {}).items()):
                style = "-" if label == "validation" else ":"
                ax.plot(steps, values, style, color=colour, marker="." if len(steps) < 30
                        else None, label=f"{run} {label}" if len(runs) > 1 else label)
            if best is not None:
                ax.axvline(best, color=colour, linestyle="--", linewidth=0.8)
        ax.set_title(panel)
        ax.set_xlabel("step")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7)
    for k in range(len(names), rows * columns):
        axes[k // columns][k % columns].axis("off")
    if title:
        figure.suptitle(title)
    figure.tight_layout()
    with atomic_open(path, "wb") as f:
        figure.savefig(f, format="png", dpi=80)
    plt.close(figure)
    return path


def draw_run(folder):
    """Draws `<folder>/curves.png` of one run (dashed line: the best step).

    Args:
        folder: the run folder.

    Returns:
        The PNG's path, or None when the run has no history.
    """
    panels, best = read_run(folder)
    return draw([(os.path.basename(os.path.normpath(folder)), panels, best)],
                os.path.join(folder, CURVES_FILE), title=os.path.normpath(folder))
