"""A recipe's run folder (`--output_dir`): resuming it checks the command.

The files and their atomic writing are `keras_structattn.training.run_folder`'s.
Resuming (or decoding, evaluating...) checks the command against the saved
settings: a flag given on the command line with another value than the
run's is a usage error naming both values; a flag left out takes the run's
value. Flags that may change on resume (training length, checkpoint
interval, verbosity...) are simply not settings.
"""

import os

from keras_structattn.training import run_folder
from keras_structattn.training.hparams import HParams
from keras_structattn.training.run_folder import write_atomically
from recipes._cli import emit
from recipes._cli import refuse
from recipes._cli import usage

HPARAMS_FILE = "hparams.json"


def save_pictures(folder, pictures, items):
    """Writes `(name, PIL image, text)` triples as `<name>.png` (whole or
    absent) and `path<TAB>text` on stdout; returns the paths."""
    os.makedirs(folder, exist_ok=True)
    written = []
    for name, picture, text in pictures:
        path = os.path.join(folder, f"{name}.png")
        write_atomically(path, lambda partial, p=picture: p.save(partial, format="PNG"))
        written.append(path)
        emit(f"{path}\t{text}")
    print(f"[visualize] {len(written)} {items} -> {folder}")
    return written


def resolve_settings(run, args, given, defaults):
    """`run.resolve_settings(given, defaults)` with the run's precision:
    `--precision` (`auto` or left out: the run's, else this machine's
    choice, `keras_structattn.training.precision`), made the dtype policy
    of the models built from now on."""
    from keras_structattn.training import precision  # here: it loads Keras

    flag = None if args.precision in (None, "auto") else args.precision
    settings = run.resolve_settings(dict(given, precision=flag),
                                    {**defaults, "precision": precision.resolve("auto")},
                                    getattr(args, "_data", None) or {})
    # Runs made before the setting existed trained in float32.
    precision.use(settings.get("precision", "float32"))
    return settings


class RunFolder(run_folder.RunFolder):
    """The run folder of a recipe, checked against the command line."""

    def resolve_settings(self, given, defaults, data=None):
        """The saved settings, which the flags `given` (None: left out) must
        agree with (`UsageError`), else `defaults` updated with them and
        `data`, the data flags of the new run (`_cli.remember_data`; {}:
        the recipe's embedded data) under "data"."""
        saved = self.settings()
        if saved is None:
            return {**defaults, **{k: v for k, v in given.items() if v is not None},
                    "data": data or {}}
        differences = [f"--{name} {value} (the run has {saved.get(name)})"
                       for name, value in given.items()
                       if value is not None and value != saved.get(name)]
        refuse((differences, f"{self.path} holds a run made with other settings: "
                f"{'; '.join(differences)}. Leave these flags out to use the run's, or use "
                "a new --output_dir"))
        return saved

    def resolve_hparams(self, overrides, set_name, check_set=None):
        """`(hparams, saved)`: the run's, which `--hparams` must agree with;
        else the set `set_name`'s, checked by `check_set(hparams)`, with
        `overrides` checked but not yet applied."""
        from models import registry  # here: it imports every model

        if self.holds_run:
            saved = HParams.load(self.file(HPARAMS_FILE))
            have, wanted = saved.values(), usage(saved.parse, overrides).values()
            differences = [f"{name}={wanted[name]!r} (the run has {have[name]!r})"
                           for name in sorted(have) if wanted[name] != have[name]]
            refuse((differences, f"{self.path} holds a run with other hparams: --hparams "
                    f"{', '.join(differences)}. Use a new --output_dir to change them"))
            return saved, True
        hparams = usage(registry.get, set_name)
        if check_set is not None:
            check_set(hparams)
        usage(hparams.parse, overrides)
        return hparams, False
