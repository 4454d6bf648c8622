"""Every hparams set of the model zoo, by name.

Each family declares its sets in `models/<family>/hparams_sets.py` (`SETS`:
name -> a function returning the set's values, plain data); this module
imports each of those modules explicitly, so every set is known as soon as
it is imported, whatever was imported before:

    from models import registry
    registry.get("muan_tiny")                       # an HParams
    registry.resolve("transformer_tiny", "num_heads=2")
    registry.registered(model_types=("vqa",))       # names, sorted

Neither this module nor the sets modules import Keras (`get` and `resolve`
import `keras_structattn.training.hparams`, which loads it), so listing the sets
(`registered`, `model_type`, `architecture`) stays fast: the recipes'
`--list_hparams_sets`.
"""

from models.captioning import hparams_sets as captioning_sets
from models.textvqa import hparams_sets as textvqa_sets
from models.translation import hparams_sets as translation_sets
from models.vqa import hparams_sets as vqa_sets

FAMILIES = {
    "translation": translation_sets,
    "captioning": captioning_sets,
    "vqa": vqa_sets,
    "textvqa": textvqa_sets,
}


def _collect():
    sets, family_of = {}, {}
    for family, module in FAMILIES.items():
        for name, function in module.SETS.items():
            if name in sets:
                raise ValueError(f"hparams set {name!r} is declared by both "
                                 f"{family_of[name]} and {family}")
            sets[name], family_of[name] = function, family
    return sets, family_of


_SETS, _FAMILY = _collect()


def _check(name):
    if name not in _SETS:
        raise ValueError(f"Unknown hparams set {name!r}. Registered: {', '.join(registered())}")


def values(name):
    """The set `name`'s hyper-parameters, a fresh dict (no Keras)."""
    _check(name)
    return dict(_SETS[name]())


def model_type(name):
    """The set's `model_type` (the recipe family it belongs to)."""
    return values(name)["model_type"]


def architecture(name):
    """The set's `architecture` where it has one (the VL sets), else None."""
    return values(name).get("architecture")


def family(name):
    """The models/ family that declares the set."""
    _check(name)
    return _FAMILY[name]


def registered(model_types=None):
    """The sorted names of the sets (of `model_types` only, if given)."""
    names = sorted(_SETS)
    if model_types is not None:
        names = [name for name in names if model_type(name) in model_types]
    return names


def get(name):
    """A fresh `keras_structattn.training.hparams.HParams` of the set `name`."""
    from keras_structattn.training.hparams import HParams  # noqa: PLC0415 (loads Keras)

    return HParams(**values(name))


def resolve(name, overrides=None):
    """`get(name)` with `"a=1,b=2"` overrides applied (`HParams.parse`)."""
    return get(name).parse(overrides)
