"""A training run's history: one CSV row per epoch, appended across resumes.

`HistoryCSV` writes it (the history of every `fit` of a run, however often
it was killed and resumed), `history_from_csv` reads it back: for
`train_summary.json`, early stopping's state (`EarlyStopping`) and the
learning curves (docs/recipes.md, "The training engine").
"""

import csv
import os

import keras

from keras_structattn.data.json_files import atomic_open


class HistoryCSV(keras.callbacks.Callback):
    """One CSV row per epoch, appended across resumes, written whole.

    Unlike `keras.callbacks.CSVLogger`, a row with a column the file lacks
    (a metric added when a run resumes) rewrites the file with the wider
    header instead of misaligning the columns; "NA" marks a missing value.

    Args:
        path: the CSV file.
    """

    def __init__(self, path):
        super().__init__()
        self.path = path

    def on_epoch_end(self, epoch, logs=None):
        row = {"epoch": str(epoch)}
        for name, value in (logs or {}).items():
            try:
                value = float(value)
            except (TypeError, ValueError):
                continue
            row[name] = str(int(value)) if name == "step" else repr(value)
        header, lines = _read_csv_lines(self.path)
        columns = list(dict.fromkeys([*header, "epoch", "step", *sorted(row)]))
        if "step" not in row and "step" not in header:
            columns.remove("step")
        text = ",".join(row.get(c, "NA") for c in columns) + "\n"
        if columns == header:
            with open(self.path, "a", encoding="utf-8") as f:
                f.write(text)
            return
        widened = [line + ",NA" * (len(columns) - len(header)) for line in lines]
        with atomic_open(self.path) as f:
            f.write("".join(f"{line}\n" for line in [",".join(columns)] + widened) + text)


def _read_csv_lines(path):
    if not os.path.exists(path):
        return [], []
    with open(path, encoding="utf-8") as f:
        lines = [line.rstrip("\n") for line in f if line.strip()]
    if not lines:
        return [], []
    return lines[0].split(","), lines[1:]


def history_from_csv(path):
    """The per-epoch metrics of every `fit` of a run, from its history CSV.

    A run resumed after a kill may have logged an epoch twice (once before
    the kill, once after); the later row wins.

    Args:
        path: a CSV of `HistoryCSV` (or `keras.callbacks.CSVLogger(append=True)`).

    Returns:
        `{"epoch": [...], metric: [...]}`, epochs in order (None where an
        epoch lacks the metric; metrics no epoch has are left out); `{}` if
        the file does not exist.
    """
    if not os.path.exists(path):
        return {}
    rows = {}
    with open(path, newline="", encoding="utf-8") as f:
        for row in csv.DictReader(f):
            rows[int(row["epoch"])] = row
    history = {}
    for epoch in sorted(rows):
        for name, text in rows[epoch].items():
            # CSVLogger writes "NA" for a metric an epoch lacks (the val_
            # columns it adds when a fit has no validation data).
            value = int(text) if name == "epoch" else None if text == "NA" else float(text)
            history.setdefault(name, []).append(value)
    return {name: values for name, values in history.items()
            if any(v is not None for v in values)}
