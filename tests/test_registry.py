"""`models.registry`: every family's hparams sets, known without import-order
tricks and without Keras; the recipes' `--list_hparams_sets`; the model
families' import graph (no circle, no recipes)."""

import ast
import json
import os
import subprocess
import sys

import pytest

from models import registry

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# The sets each recipe takes, by model_type.
RECIPES = {
    "translate": ("transformer", "lstm"),
    "caption": ("captioner", "catt_captioner", "updown_captioner"),
    "vqa": ("vqa",),
    "grounding": ("grounding",),
    "textvqa": ("textvqa",),
}
SOME_SETS = {
    "transformer_tiny": "transformer", "lstm_attention_base": "lstm",
    "captioner_tiny_area2x2": "captioner", "transformer_captioner_tiny": "catt_captioner",
    "updown_catt_tiny": "updown_captioner", "mcan_pa_tiny": "vqa", "muan_tiny": "vqa",
    "muan_d128_gate_bias": "vqa", "catt_vqa_tiny_nocatt": "vqa",
    "muan_grounding_tiny": "grounding", "sa_m4c_tiny": "textvqa",
    "m4c_6n_tiny": "textvqa", "m4c_6n_base": "textvqa",
}


def _python(code):
    result = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True,
                            text=True, check=True, timeout=300)
    return result.stdout


def test_registry_alone_knows_every_set_without_keras():
    out = json.loads(_python(
        "import json, sys\n"
        "from models import registry\n"
        "names = registry.registered()\n"
        "types = {n: registry.model_type(n) for n in names}\n"
        "print(json.dumps(dict(types=types, keras='keras' in sys.modules,"
        " tf='tensorflow' in sys.modules)))\n"
    ))
    assert not out["keras"] and not out["tf"]
    assert len(out["types"]) == 74
    for name, model_type in SOME_SETS.items():
        assert out["types"][name] == model_type
    assert set(out["types"].values()) == {t for types in RECIPES.values() for t in types}


def test_registry_alone_gets_every_set():
    out = json.loads(_python(
        "import json\n"
        "from models import registry\n"
        "print(json.dumps({n: registry.get(n).values() for n in registry.registered()}))\n"
    ))
    assert sorted(out) == registry.registered()
    for name, values in out.items():
        assert values == registry.values(name)
        assert values["model_type"] == registry.model_type(name)


def test_get_resolve_and_errors():
    hparams = registry.resolve("muan_tiny", "num_blocks=2")
    assert hparams.num_blocks == 2 and hparams.architecture == "muan"
    assert registry.get("muan_tiny").num_blocks == 4  # a fresh set each time
    with pytest.raises(ValueError, match="Unknown hparams set 'muan_huge'"):
        registry.get("muan_huge")
    assert registry.registered(("grounding",)) == ["muan_grounding_base", "muan_grounding_tiny"]
    assert registry.family("sa_m4c_base") == "textvqa"


def test_sets_modules_import_no_keras():
    """The sets modules and the registry import nothing but each other at
    module import (`registry.get` imports `HParams`, and so Keras, when
    called)."""
    for path in _model_files():
        module = _module_name(path)
        if module.endswith("hparams_sets") or module in ("models.registry", "models._sets"):
            for imported in _imports(path, top_level=True):
                if imported in sys.stdlib_module_names:
                    continue
                package = os.path.isdir(os.path.join(ROOT, *imported.split(".")))
                assert imported.startswith("models.") and (
                    imported.endswith("hparams_sets") or imported == "models._sets" or package
                ), (module, imported)
    for folder in ("translation", "captioning", "vqa", "textvqa"):  # nothing imported there
        assert not _imports(os.path.join(ROOT, "models", folder, "__init__.py"))


def test_seq2seq_constructor_defaults_are_the_sets_data():
    """The translation and captioning models take their constructor
    defaults (`HPARAMS`) from their family's sets data, written once there
    (so that listing needs no Keras); every set of the model carries them."""
    from models.captioning import hparams_sets as captioning
    from models.captioning.catt_captioner import CATTCaptioner
    from models.captioning.transformer_captioner import TransformerCaptioner
    from models.captioning.updown import UpDownCaptioner
    from models.translation import hparams_sets as translation
    from models.translation.lstm_seq2seq import LSTMSeq2Seq
    from models.translation.transformer import Transformer

    for cls, data in ((Transformer, translation.TRANSFORMER), (LSTMSeq2Seq, translation.LSTM),
                      (TransformerCaptioner, captioning.TRANSFORMER_CAPTIONER),
                      (CATTCaptioner, captioning.CATT_CAPTIONER),
                      (UpDownCaptioner, captioning.UPDOWN)):
        assert cls.HPARAMS is data and cls.hparam_defaults() == data, cls.__name__
        assert all(registry.model_type(name) != cls.model_type
                   or set(data) <= set(registry.values(name)) for name in registry.registered())


@pytest.mark.parametrize("recipe", sorted(RECIPES))
def test_list_hparams_sets(recipe):
    result = subprocess.run(
        [sys.executable, "-m", f"recipes.{recipe}", "--list_hparams_sets"], cwd=ROOT,
        capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    names = [line.split("\t")[0] for line in lines]
    assert names == registry.registered(RECIPES[recipe])
    for line in lines:
        name, model_type, architecture = line.split("\t")
        assert model_type == registry.model_type(name) and model_type in RECIPES[recipe]
        assert architecture == (registry.architecture(name) or "-")


# ------------------------------------------------------------ import graph


def _model_files():
    for folder, _, files in os.walk(os.path.join(ROOT, "models")):
        for name in sorted(files):
            if name.endswith(".py"):
                yield os.path.join(folder, name)


def _module_name(path):
    module = os.path.relpath(path, ROOT)[:-3].replace(os.sep, ".")
    return module[: -len(".__init__")] if module.endswith(".__init__") else module


def _imports(path, top_level=False):
    """The modules `path` imports (`from models.x import y` counts `models.x.y`
    when that is a module); only at module import with `top_level`."""
    with open(path, encoding="utf-8") as f:
        tree = ast.parse(f.read())
    modules = set()
    known = {_module_name(p) for p in _model_files()}
    for node in tree.body if top_level else ast.walk(tree):
        if isinstance(node, ast.Import):
            modules.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            modules.add(node.module)
            modules.update(f"{node.module}.{alias.name}" for alias in node.names
                           if f"{node.module}.{alias.name}" in known)
    return modules


def test_models_have_no_import_circle_and_no_recipes():
    graph = {}
    for path in _model_files():
        imports = _imports(path)
        assert not any(m == "recipes" or m.startswith("recipes.") for m in imports), path
        graph[_module_name(path)] = {m for m in imports if m.startswith("models")}
    # Importing a module imports its packages' __init__ (they import nothing).
    state = {}

    def visit(module, stack):
        state[module] = "open"
        for other in graph.get(module, ()):
            if state.get(other) == "open":
                raise AssertionError(f"import circle: {' -> '.join(stack + [other])}")
            if other not in state:
                visit(other, stack + [other])
        state[module] = "done"

    for module in sorted(graph):
        if module not in state:
            visit(module, [module])
    assert "models.vqa.build" not in set().union(
        *(imports for module, imports in graph.items() if module != "models.vqa.build"))
