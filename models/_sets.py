"""What the families' `hparams_sets.py` share: sets as plain dicts.

A set is a function returning a dict of hyper-parameters (bool, int, float
or str) with a `model_type`; `models.registry` turns it into an `HParams`.
No Keras here (the sets modules and the registry must import without it).
"""


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
