"""Run folders: the files of a training run, each whole or absent.

A run folder holds a run once `run.json` is in it: the settings that define
the run, written last by `RunFolder.commit` after the run's other defining
files (hparams, vocabulary), so that a run that failed before that leaves
no half-made run behind. Every file is written under a temporary name and
renamed into place (`write_atomically`). A folder may also hold averaged
weights (`averaged.weights.h5`) with the list of checkpoints they average.
"""

import json
import os

from keras_structattn.data.json_files import atomic_open

RUN_FILE = "run.json"
AVERAGED_WEIGHTS = "averaged.weights.h5"
AVERAGED_LIST = "averaged.json"  # the checkpoints `averaged.weights.h5` averages


def write_atomically(path, content):
    """Writes `content` to `path` through a temporary file and a rename.

    Args:
        path: the destination; its folder must exist.
        content: a `str` (written as UTF-8), `bytes`, or a callable
            `content(temporary_path)` that writes the file itself.
    """
    if not callable(content):
        with atomic_open(path, "wb" if isinstance(content, bytes) else "w") as f:
            f.write(content)
        return
    folder, name = os.path.split(os.path.abspath(path))
    # A writer given a path (Keras' `save_weights`) checks its extension,
    # so the temporary name keeps it last (`atomic_open`'s ends in .partial).
    partial = os.path.join(folder, f".partial.{name}")
    try:
        content(partial)
        os.replace(partial, path)
    finally:
        if os.path.exists(partial):
            os.remove(partial)


def write_json(path, value):
    """Writes `value` as indented JSON with `write_atomically`.

    Args:
        path: the destination; its folder must exist.
        value: a JSON-serialisable value.
    """
    write_atomically(path, json.dumps(value, indent=2) + "\n")


class RunFolder:
    """The folder of a training run.

    Args:
        path: the folder; it need not exist yet.
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
        """Records which checkpoints `averaged.weights.h5` averages.

        Args:
            checkpoint_paths: the averaged checkpoints' paths.
        """
        write_json(self.file(AVERAGED_LIST),
                   {"checkpoints": [os.path.basename(p) for p in checkpoint_paths]})
