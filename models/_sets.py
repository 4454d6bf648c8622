"""What the families' `hparams_sets.py` share: sets as plain dicts.

A set is a function returning a dict of hyper-parameters (bool, int, float
or str) with a `model_type`; `models.registry` turns it into an `HParams`.
No Keras here (the sets modules and the registry must import without it).
"""

import functools
import types


def derive(values, **changes):
    """A copy of the set `values` with `changes` applied, checked as
    `HParams.override` checks them: known names, the same type (an int is
    accepted for a float).

    Raises:
        ValueError: for an unknown name or a value of another type.
    """
    values = dict(values)
    for name, value in changes.items():
        if name not in values:
            raise ValueError(f"Unknown hyper-parameter {name!r}. Known: "
                             f"{', '.join(sorted(values))}")
        default = values[name]
        if isinstance(default, float) and isinstance(value, int) and not isinstance(value, bool):
            value = float(value)
        if type(value) is not type(default):
            raise ValueError(f"Hyper-parameter {name!r} is a {type(default).__name__}; "
                             f"received {value!r}.")
        values[name] = value
    return values


def take_hparams(defaults, kwargs):
    """Pops a model's hyper-parameters from its constructor's `kwargs`,
    each `defaults[name]` where absent (`defaults`: the model's data here,
    e.g. `hparams_sets.TRANSFORMER`): a namespace (`hp.hidden_size`)."""
    return types.SimpleNamespace(
        **{name: kwargs.pop(name, default) for name, default in defaults.items()}
    )


def model_set(model_type, model_values, training_values, **changes):
    """A model's set: its `model_type`, its values (its constructor's
    defaults) and its training values, with `changes` applied (`derive`)."""
    return derive(dict(model_type=model_type, **model_values, **training_values), **changes)


def sets_of(function, changes_by_name):
    """`{name: a function returning function(**changes)}` for each `(name,
    changes)` of `changes_by_name` (a dict or pairs): part of a `SETS`."""
    if isinstance(changes_by_name, dict):
        changes_by_name = changes_by_name.items()
    return {name: functools.partial(function, **changes) for name, changes in changes_by_name}
