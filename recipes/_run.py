"""Run folders: what a recipe's `--output_dir` holds, and resuming one.

A run folder holds a run once `run.json` is in it: the settings that define
the run (hparams set, model, vocabulary flags, seed...), written last by
`RunFolder.commit` after the run's other defining files (hparams, vocabulary)
and only once the model has been built from them, so a command that fails
before that leaves no half-made run to refuse the corrected command. Every
file is written under a temporary name and renamed into place: a file of
the run is whole or absent.

Resuming (or decoding, evaluating...) checks the command against the saved
settings: a flag given on the command line with another value than the
run's is a usage error naming both values; a flag left out takes the run's
value. Flags that may change on resume (training length, checkpoint
interval, verbosity...) are simply not settings.
"""

import json
import os

from recipes._cli import RUN_FILE
from recipes._cli import UsageError
from recipes._cli import emit
from recipes._cli import require_run
from recipes._cli import usage

HPARAMS_FILE = "hparams.json"
AVERAGED_WEIGHTS = "averaged.weights.h5"
AVERAGED_LIST = "averaged.json"  # the checkpoints `averaged.weights.h5` averages


def write_atomically(path, content):
    """Writes `content` to `path` through a temporary file and a rename.

    Args:
        path: the destination; its folder must exist.
        content: a `str` (written as UTF-8), `bytes`, or a callable
            `content(temporary_path)` that writes the file itself.
    """
    folder, name = os.path.split(os.path.abspath(path))
    # The suffix keeps the extension last: writers such as Keras' check it.
    partial = os.path.join(folder, f".partial.{name}")
    try:
        if callable(content):
            content(partial)
        else:
            mode = "wb" if isinstance(content, bytes) else "w"
            with open(partial, mode, **({} if mode == "wb" else {"encoding": "utf-8"})) as f:
                f.write(content)
        os.replace(partial, path)
    finally:
        if os.path.exists(partial):
            os.remove(partial)


def write_json(path, value):
    """`write_atomically` of `value` as indented JSON."""
    write_atomically(path, json.dumps(value, indent=2) + "\n")


def save_pictures(folder, pictures, items):
    """Writes `visualize`'s PNGs, each whole or absent, and names each on
    stdout with its text.

    Args:
        folder: the pictures' folder (made if needed).
        pictures: `(name, PIL image, text)` triples; `<name>.png` each.
        items: what the pictures show, plural (the status line).

    Returns:
        The paths written.
    """
    os.makedirs(folder, exist_ok=True)
    written = []
    for name, picture, text in pictures:
        path = os.path.join(folder, f"{name}.png")
        write_atomically(path, lambda partial, p=picture: p.save(partial, format="PNG"))
        written.append(path)
        emit(f"{path}\t{text}")
    print(f"[visualize] {len(written)} {items} -> {folder}")
    return written


class RunFolder:
    """The run folder of a recipe.

    Args:
        path: the folder (`--output_dir`); it need not exist yet.
    """

    def __init__(self, path):
        self.path = os.fspath(path)

    def file(self, *names):
        """The path of a file in the folder."""
        return os.path.join(self.path, *names)

    @property
    def holds_run(self):
        """True once a run has been committed here."""
        return os.path.exists(self.file(RUN_FILE))

    def settings(self):
        """The settings `commit` saved (a dict), or None if no run is here."""
        if not self.holds_run:
            return None
        with open(self.file(RUN_FILE), encoding="utf-8") as f:
            return json.load(f)

    def require_run(self, command):
        """Raises `UsageError` unless the folder holds a run."""
        require_run(self.path, command)

    def resolve_settings(self, given, defaults):
        """The run's settings: the saved ones, checked against the command.

        Args:
            given: the defining flags' values on the command line by name,
                None where a flag was left out.
            defaults: the value of each setting for a new run.

        Returns:
            The settings dict: the saved ones for an existing run, else
            `defaults` updated with the given flags.

        Raises:
            UsageError: if a given flag differs from the saved run's value;
                the message names both values.
        """
        saved = self.settings()
        if saved is None:
            return {**defaults, **{k: v for k, v in given.items() if v is not None}}
        differences = [
            f"--{name} {value} (the run has {saved.get(name)})"
            for name, value in given.items()
            if value is not None and value != saved.get(name)
        ]
        if differences:
            raise UsageError(
                f"{self.path} holds a run made with other settings: "
                + "; ".join(differences)
                + ". Leave these flags out to use the run's, or use a new --output_dir"
            )
        return saved

    def resolve_hparams(self, overrides, set_name, check_set=None):
        """The run's hparams: the saved ones, which `--hparams` must agree
        with; for a new run the set `set_name`'s, checked by
        `check_set(hparams)` (raising `UsageError`), with `overrides`
        checked but not yet applied.

        Returns:
            `(hparams, saved)`: `saved` is True for an existing run's.
        """
        # Here, not at the top: the flags' checks import this module and must
        # stay light (no Keras).
        from keras_structattn.training.hparams import HParams
        from models import registry

        if self.holds_run:
            saved = HParams.load(self.file(HPARAMS_FILE))
            self.check_hparams(saved, usage(saved.parse, overrides))
            return saved, True
        hparams = usage(registry.get, set_name)
        if check_set is not None:
            check_set(hparams)
        usage(hparams.parse, overrides)
        return hparams, False

    def check_hparams(self, saved, wanted):
        """Raises `UsageError` if `--hparams` asks for other values than the run's.

        Args:
            saved: the run's `HParams`.
            wanted: the saved ones with the command's overrides applied.
        """
        saved_values, wanted_values = saved.values(), wanted.values()
        differences = [
            f"{name}={wanted_values[name]!r} (the run has {saved_values[name]!r})"
            for name in sorted(saved_values)
            if wanted_values[name] != saved_values[name]
        ]
        if differences:
            raise UsageError(
                f"{self.path} holds a run with other hparams: --hparams "
                + ", ".join(differences)
                + ". Use a new --output_dir to change them"
            )

    def commit(self, settings, files):
        """Writes the run's defining files, then `run.json`: the run exists.

        Args:
            settings: the dict for `run.json`.
            files: `{name: content}` for `write_atomically`, written first.
        """
        os.makedirs(self.path, exist_ok=True)
        for name, content in files.items():
            write_atomically(self.file(name), content)
        write_json(self.file(RUN_FILE), settings)

    # -------------------------------------------------------------- weights

    def averaged_weights(self, newest_checkpoint):
        """The averaged weights file, if it averages the newest checkpoint.

        Args:
            newest_checkpoint: the path of the run's newest checkpoint, or
                None.

        Returns:
            `(path, note)`: the path to use or None, and a note to print
            (why an average on disk is not used), or None.
        """
        path = self.file(AVERAGED_WEIGHTS)
        if not os.path.exists(path):
            return None, None
        averaged = []
        if os.path.exists(self.file(AVERAGED_LIST)):
            with open(self.file(AVERAGED_LIST), encoding="utf-8") as f:
                averaged = json.load(f)["checkpoints"]
        if newest_checkpoint is None or os.path.basename(newest_checkpoint) in averaged:
            return path, None
        return None, (
            f"{path} averages {', '.join(averaged) or 'unknown checkpoints'}, older than "
            f"the newest checkpoint {os.path.basename(newest_checkpoint)}: not used "
            "(run `average` again to average the newest)"
        )

    def save_average_list(self, checkpoint_paths):
        """Records which checkpoints `averaged.weights.h5` averages."""
        write_json(self.file(AVERAGED_LIST),
                   {"checkpoints": [os.path.basename(p) for p in checkpoint_paths]})
