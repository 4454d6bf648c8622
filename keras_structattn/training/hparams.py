"""Hyper-parameters with command-line overrides, tensor2tensor style.

`HParams` is a flat set of named values; `parse` applies `--hparams
"a=1,b=2"` overrides, and a recipe saves the result next to its
checkpoints (`HParams.save`) so that decoding and evaluation rebuild
exactly the trained model (`HParams.load`). The named sets
(`--hparams_set NAME`) are the model zoo's: `models.registry` knows them
all (each family declares its own in `models/<family>/hparams_sets.py`).

    from models import registry
    hparams = registry.resolve("transformer_tiny", "num_hidden_layers=3,max_area_width=2")

A list-valued hyper-parameter is a comma-separated string, and the overrides
split only at a comma followed by `name=`, so it can be set on the command
line: `"num_area_layers=1,area_attention_kinds=encoder_self,encdec"` is two
overrides, the second with the value `"encoder_self,encdec"`.
"""

import json
import os
import re

# A comma that starts a new override: followed by `name=` (an identifier).
_OVERRIDE_SEPARATOR = re.compile(r",(?=\s*[A-Za-z_]\w*\s*=)")


class HParams:
    """A flat set of named hyper-parameters (bool, int, float or str).

    Attribute access reads them (`hparams.hidden_size`). Types are fixed by
    the registered defaults: an override must parse as the same type.

    Args:
        **values: the hyper-parameters by name.
    """

    def __init__(self, **values):
        for name, value in values.items():
            _check_value(name, value)
        object.__setattr__(self, "_values", dict(values))

    def __getattr__(self, name):
        values = object.__getattribute__(self, "_values")
        if name in values:
            return values[name]
        raise AttributeError(f"HParams has no hyper-parameter {name!r}")

    def __setattr__(self, name, value):
        raise AttributeError("HParams are read-only; use `override`.")

    def __eq__(self, other):
        return isinstance(other, HParams) and self.values() == other.values()

    def __repr__(self):
        items = ", ".join(f"{k}={v!r}" for k, v in sorted(self._values.items()))
        return f"HParams({items})"

    def values(self):
        """Returns a copy of the hyper-parameters as a dict."""
        return dict(self._values)

    def override(self, **changes):
        """Returns a copy with some values replaced.

        Args:
            **changes: new values by name, of the type of the current ones
                (an int is accepted for a float).

        Returns:
            A new `HParams`.

        Raises:
            ValueError: for an unknown name or a value of another type.
        """
        values = self.values()
        for name, value in changes.items():
            if name not in values:
                raise ValueError(
                    f"Unknown hyper-parameter {name!r}. Known: "
                    f"{', '.join(sorted(values))}"
                )
            default = values[name]
            if (
                isinstance(default, float)
                and isinstance(value, int)
                and not isinstance(value, bool)
            ):
                value = float(value)
            if type(value) is not type(default):
                raise ValueError(
                    f"Hyper-parameter {name!r} is {_a_type(default)}; "
                    f"received {value!r}."
                )
            values[name] = value
        return HParams(**values)

    def parse(self, overrides):
        """Applies `"a=1,b=x"` overrides (values parsed as the default's type).

        The string splits at each comma followed by `name=`; any other comma
        belongs to the value before it, so a string hyper-parameter holding a
        comma-separated list is set whole: `"a=1,kinds=x,y,b=2"` is the three
        overrides `a=1`, `kinds=x,y` and `b=2`. Empty items (`"a=1,,b=2"`,
        a trailing comma) are ignored.

        Args:
            overrides: a comma-separated string of `name=value`, or "" / None.

        Returns:
            A new `HParams`.

        Raises:
            ValueError: for an item without `=`, an unknown name, a name given
                twice, or a value that does not parse as the default's type.
        """
        if not overrides:
            return self
        changes = {}
        for item in _OVERRIDE_SEPARATOR.split(overrides):
            item = item.strip().strip(",").strip()
            if not item:
                continue
            if "=" not in item:
                raise ValueError(
                    f"Bad hparams override {item!r}: expected name=value "
                    f"(in {overrides!r})."
                )
            name, text = (part.strip() for part in item.split("=", 1))
            if name not in self._values:
                raise ValueError(
                    f"Unknown hyper-parameter {name!r} in --hparams. Known: "
                    f"{', '.join(sorted(self._values))}"
                )
            if name in changes:
                raise ValueError(
                    f"Hyper-parameter {name!r} is given twice in --hparams "
                    f"{overrides!r}."
                )
            default = self._values[name]
            if "," in text and not isinstance(default, str):
                raise ValueError(
                    f"Bad hparams override {item!r}: {name!r} is "
                    f"{_a_type(default)}, so the text after its first comma "
                    "must be another name=value override (only a string "
                    "hyper-parameter takes a comma-separated value)."
                )
            changes[name] = _parse_as(name, text, default)
        return self.override(**changes)

    def to_json(self):
        """The hyper-parameters as a JSON string (sorted keys)."""
        return json.dumps(self._values, indent=2, sort_keys=True)

    def save(self, path):
        """Writes the hyper-parameters as JSON (creating the directory).

        Args:
            path: the file to write.
        """
        directory = os.path.dirname(path)
        if directory:
            os.makedirs(directory, exist_ok=True)
        with open(path, "w", encoding="utf-8") as f:
            f.write(self.to_json() + "\n")

    @classmethod
    def load(cls, path):
        """Reads hyper-parameters written by `save`.

        Args:
            path: a file written by `save`.

        Returns:
            An `HParams`.
        """
        if not os.path.exists(path):
            raise FileNotFoundError(f"No hparams file at {path}")
        with open(path, encoding="utf-8") as f:
            return cls(**json.load(f))


def _a_type(value):
    """`value`'s type name with its article: "a bool", "an int", "a str"."""
    type_name = type(value).__name__
    article = "an" if type_name[0] in "aeiou" else "a"
    return f"{article} {type_name}"


def _check_value(name, value):
    if not isinstance(value, (bool, int, float, str)):
        raise ValueError(
            f"Hyper-parameter {name!r} must be a bool, int, float or str; "
            f"received {value!r}."
        )


def _parse_as(name, text, default):
    if isinstance(default, bool):
        lowered = text.lower()
        if lowered in ("true", "1", "yes"):
            return True
        if lowered in ("false", "0", "no"):
            return False
        raise ValueError(
            f"Hyper-parameter {name!r} is a bool (true/false, 1/0, yes/no); "
            f"received {text!r}."
        )
    try:
        if isinstance(default, int):
            return int(text)
        if isinstance(default, float):
            return float(text)
    except ValueError:
        raise ValueError(
            f"Hyper-parameter {name!r} is {_a_type(default)}; received {text!r}."
        ) from None
    return text
