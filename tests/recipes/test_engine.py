"""The training engine (`recipes._engine`): budgets, early stopping that
survives a resume, the clean end of `--max_minutes`, the history CSV, the
learning curves and their `curves` command."""

import argparse
import csv
import json
import os
import re

import keras
import numpy as np
import pytest

from keras_structattn.training import curves
from keras_structattn.training.history import HistoryCSV
from keras_structattn.training.history import history_from_csv
from recipes import _cli
from recipes import _engine

PER_EPOCH = 4


def make_model(seed=0):
    keras.utils.set_random_seed(seed)
    model = keras.Sequential([keras.Input((3,)), keras.layers.Dense(4, activation="tanh"),
                              keras.layers.Dense(2)])
    model.compile(keras.optimizers.Adam(0.01), "mse")
    return model


def batches(start):
    """A resumable stream: step `s` reads batch `s`."""
    rng = np.random.default_rng(0)
    x = rng.normal(size=(64, 3)).astype("float32")
    y = rng.normal(size=(64, 2)).astype("float32")
    step = start
    while True:
        rows = np.arange(step % 8 * 8, step % 8 * 8 + 8)
        yield x[rows], y[rows]
        step += 1


def flags(out, early_stopping=None, max_minutes=None, verbose=0):
    return argparse.Namespace(output_dir=str(out), keep_checkpoints=2, verbose=verbose,
                              early_stopping=early_stopping, max_minutes=max_minutes,
                              warmup_fraction=None, scale_schedule=False)


def scripted(values):
    """A scores hook whose k-th evaluation is `values[k]` (any process)."""
    calls = []

    def compute(model):
        calls.append(1)
        return {"bleu": values[len(calls) - 1]}

    return _engine.ScoresHook(("bleu",), compute), calls


def fit(out, total_steps, scores, early_stopping=("bleu", 2), model=None):
    model = model or make_model()
    steps = _engine.fit(model, flags(out, early_stopping), batches, per_epoch=PER_EPOCH,
                        total_steps=total_steps, scores=scores)
    return model, steps


SCORES = [1.0, 3.0, 2.0, 2.5, 4.0, 1.0, 1.0, 1.0]


def test_early_stopping_keeps_the_best_checkpoint(tmp_path):
    hook, calls = scripted(SCORES)
    model, steps = fit(tmp_path, 100, hook)
    # Best 3.0 at the 2nd evaluation, then 2 without a better one.
    assert steps == 4 * PER_EPOCH and len(calls) == 4
    best = json.loads((tmp_path / "best.json").read_text())
    assert best == {"monitor": "val_bleu", "value": 3.0, "step": 2 * PER_EPOCH, "epoch": 2}
    history = history_from_csv(tmp_path / "history.csv")
    assert history["step"] == [4, 8, 12, 16] and history["val_bleu"] == SCORES[:4]
    # The model in memory holds the best weights, not the last ones.
    best_model = make_model(seed=1)
    best_model.load_weights(tmp_path / "best.weights.h5")
    for a, b in zip(model.weights, best_model.weights):
        np.testing.assert_array_equal(keras.ops.convert_to_numpy(a),
                                      keras.ops.convert_to_numpy(b))
    assert (tmp_path / "curves.png").stat().st_size > 0


def test_early_stopping_resumes_where_an_uninterrupted_run_stops(tmp_path):
    straight, _ = scripted(SCORES)
    _, straight_steps = fit(tmp_path / "straight", 100, straight)
    # Interrupted after 3 evaluations (as a kill after the 3rd checkpoint),
    # then resumed: the patience already spent is read back.
    first, _ = scripted(SCORES)
    fit(tmp_path / "resumed", 3 * PER_EPOCH, first)
    rest, calls = scripted(SCORES[3:])
    _, steps = fit(tmp_path / "resumed", 100, rest)
    assert steps == straight_steps and len(calls) == 1
    # Once stopped, another `train` trains no more.
    again, calls = scripted(SCORES)
    _, steps = fit(tmp_path / "resumed", 100, again)
    assert steps == straight_steps and not calls


def test_loss_is_watched_downwards_from_fit_logs(tmp_path):
    model = make_model()
    x, y = next(batches(0))
    args = flags(tmp_path, ("loss", 1))
    _engine.fit(model, args, batches, per_epoch=PER_EPOCH, total_steps=8 * PER_EPOCH,
                validation=(x, y))
    best = json.loads((tmp_path / "best.json").read_text())
    history = history_from_csv(tmp_path / "history.csv")
    assert best["value"] == min(history["val_loss"])


def test_max_minutes_ends_with_a_checkpoint(tmp_path):
    model = make_model()
    steps = _engine.fit(model, flags(tmp_path, max_minutes=1e-9), batches,
                        per_epoch=PER_EPOCH, total_steps=100)
    # The first batch used the time up: its epoch ended there, checkpointed.
    assert steps == 1
    assert os.listdir(tmp_path / "checkpoints") == ["ckpt-0001.weights.h5"]
    assert history_from_csv(tmp_path / "history.csv")["step"] == [1]


def custom_step(**extra):
    """A custom training step (`fit_steps`) on `batches`, its logs with `extra`."""
    data = batches(0)

    def step(model, index):
        x, y = next(data)
        logs = model.train_on_batch(x, y, return_dict=True)
        return {**{k: float(v) for k, v in logs.items()}, **extra}

    return step


def test_fit_steps_runs_a_custom_step_with_the_same_rules(tmp_path):
    model = make_model()
    hook, calls = scripted(SCORES)
    steps = _engine.fit_steps(model, flags(tmp_path, ("bleu", 2)), custom_step(),
                              per_epoch=PER_EPOCH, total_steps=100, scores=hook)
    assert steps == 4 * PER_EPOCH and len(calls) == 4


def bar_lines(text):
    """The progress output: each line as a terminal ends it (the last rewrite
    of its bar) and the bars' first rewrite, without the status lines."""
    text = re.sub(r"\x1b\[[0-9;]*m|\x08", "", text)
    lines = [line.split("\r") for line in text.split("\n") if line]
    first = next(line[1] for line in lines if len(line) > 1)
    return first, [line[-1] for line in lines if not line[-1].startswith("[")]


def test_progress_bars_count_the_phases_steps_from_a_resume(tmp_path, capsys):
    model = make_model()
    _engine.fit(model, flags(tmp_path), batches, per_epoch=PER_EPOCH, total_steps=8)
    capsys.readouterr()
    _engine.fit(model, flags(tmp_path, verbose=1), batches, per_epoch=PER_EPOCH,
                total_steps=14, validation=next(batches(0)))
    first, lines = bar_lines(capsys.readouterr().out)
    # The bar opens at the resumed step; each checkpoint ends a line with
    # the epoch's logs; the last interval is cut at --train_steps.
    assert first.startswith(" 8/14 ")
    assert [line.split()[0] for line in lines] == ["12/14", "14/14"]
    assert all(" - loss:" in line and " - val_loss:" in line for line in lines)
    assert not any(word in line for line in lines
                   for word in ("Epoch", "step:", "epoch_seconds"))


def line_per_checkpoint(capsys):
    """`--verbose 2`'s lines, without the status lines."""
    return [line for line in capsys.readouterr().out.splitlines() if not line.startswith("[")]


def test_progress_lines_name_the_pass_where_a_run_trains_by_epochs(tmp_path, capsys):
    model = make_model()
    _engine.fit(model, flags(tmp_path), batches, per_epoch=PER_EPOCH, epochs=1)
    capsys.readouterr()
    _engine.fit(model, flags(tmp_path, verbose=2), batches, per_epoch=PER_EPOCH, epochs=3)
    lines = line_per_checkpoint(capsys)
    assert [line.split(" - ")[0] for line in lines] == ["Epoch 2/3", " 8/12", "Epoch 3/3",
                                                       "12/12"]
    assert "loss:" in lines[1]


def test_a_custom_steps_progress_bar_shows_its_logs(tmp_path, capsys):
    _engine.fit_steps(make_model(), flags(tmp_path, verbose=2), custom_step(reward=0.5),
                      per_epoch=PER_EPOCH, total_steps=6)
    lines = line_per_checkpoint(capsys)
    assert [line.split(" - ")[0] for line in lines] == ["4/6", "6/6"]
    assert "reward: 0.5000" in lines[0]


def test_history_csv_widens_for_a_new_column(tmp_path):
    path = tmp_path / "history.csv"
    writer = HistoryCSV(str(path))
    writer.on_epoch_end(0, {"loss": 1.0, "step": 5})
    writer.on_epoch_end(1, {"loss": 0.5, "step": 10, "val_bleu": 3.0})
    with open(path, newline="") as f:
        rows = list(csv.reader(f))
    assert rows == [["epoch", "step", "loss", "val_bleu"], ["0", "5", "1.0", "NA"],
                    ["1", "10", "0.5", "3.0"]]


def test_warmup_and_schedules_follow_the_budget_when_asked(capsys):
    plain = argparse.Namespace(warmup_fraction=None, scale_schedule=False)
    fitted = argparse.Namespace(warmup_fraction=None, scale_schedule=True)
    assert _engine.warmup_steps(200, plain, None) == 200
    assert _engine.warmup_steps(200, fitted, 1000) == 200
    # Left alone by default (a run extended later must equal a straight
    # one), with a warning when the run would end at its warm-up peak.
    assert _engine.warmup_steps(200, plain, 200) == 200
    assert "ends at its warm-up peak" in capsys.readouterr().out
    assert _engine.warmup_steps(200, fitted, 200) == 100
    assert "cut to 100" in capsys.readouterr().out
    assert _engine.warmup_steps(200, argparse.Namespace(warmup_fraction=0.1), 1000) == 100
    assert _engine.schedule_scale(1300, 1300, fitted) == 1.0
    assert _engine.schedule_scale(1300, 650, fitted) == 0.5
    assert _engine.schedule_scale(1300, 650, plain) == 1.0
    assert "not reached" in capsys.readouterr().out


def test_early_stopping_flag():
    parse = _cli.early_stopping_type(("loss", "bleu"))
    assert parse("bleu") == ("bleu", 3) and parse("loss:5") == ("loss", 5)
    with pytest.raises(argparse.ArgumentTypeError, match="not a validation metric"):
        parse("cider")
    with pytest.raises(argparse.ArgumentTypeError):
        parse("bleu:0")


def test_curves_command_draws_several_runs(tmp_path, capsys):
    from recipes import translate

    for seed, run in enumerate(("a", "b")):
        folder = tmp_path / run
        folder.mkdir()
        writer = HistoryCSV(str(folder / "history.csv"))
        for epoch in range(3):
            writer.on_epoch_end(epoch, {"loss": 1.0 / (epoch + 1 + seed), "step": 10 * epoch,
                                        "val_loss": 1.2 / (epoch + 1)})
    (tmp_path / "a" / "best.json").write_text(json.dumps({"step": 10}))
    output = tmp_path / "both.png"
    translate.main(["curves", str(tmp_path / "a"), str(tmp_path / "b"),
                    "--output_file", str(output)])
    assert capsys.readouterr().out.strip() == str(output)
    assert output.read_bytes().startswith(b"\x89PNG")
    panels, best = curves.read_run(str(tmp_path / "a"))
    assert best == 10 and set(panels["loss"]) == {"training", "validation"}
    with pytest.raises(_cli.UsageError, match="no such run folder"):
        translate.main(["curves", str(tmp_path / "missing")])
    with pytest.raises(_cli.UsageError, match="unrecognized arguments"):
        translate.main(["evaluate", str(tmp_path / "a")])


def test_the_example_task_of_the_docs_runs(tmp_path):
    """docs/recipes.md's "Adding a task" example, run as a user would."""
    import re
    import subprocess
    import sys

    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    with open(os.path.join(root, "docs", "recipes.md"), encoding="utf-8") as f:
        text = f.read()
    code = re.search(r"## Adding a task.*?```python\n(.*?)```", text, re.S).group(1)
    script = tmp_path / "example_task.py"
    script.write_text(code)
    run = tmp_path / "run"
    result = subprocess.run(
        [sys.executable, str(script), "--output_dir", str(run), "--train_steps", "60",
         "--early_stopping", "error:2"],
        cwd=tmp_path, env=dict(os.environ, PYTHONPATH=root), capture_output=True, text=True,
        timeout=300)
    assert result.returncode == 0, result.stderr[-2000:]
    assert result.stdout.startswith("steps ")
    assert (run / "curves.png").exists() and (run / "history.csv").exists()
    bad = subprocess.run([sys.executable, str(script), "--early_stopping", "bleu"],
                         cwd=tmp_path, env=dict(os.environ, PYTHONPATH=root),
                         capture_output=True, text=True, timeout=60)
    assert bad.returncode == 2 and bad.stderr.startswith("error: argument --early_stopping")
