"""The packaging configuration in pyproject.toml, checked without a build.

The wheel itself is built, installed into a bare virtualenv and exercised by
`.ci/run` (its wheel step, `.ci/check_wheel.py`); these checks read the
configuration that step depends on.
"""

import ast
import fnmatch
import pathlib
import re

import pytest
import setuptools

try:
    import tomllib
except ImportError:  # Python 3.10
    tomllib = pytest.importorskip("tomli")

import keras_structattn

ROOT = pathlib.Path(__file__).resolve().parents[1]
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())
PROJECT = PYPROJECT["project"]
SETUPTOOLS = PYPROJECT["tool"]["setuptools"]


def requirement_names(requirements):
    """Lower-case distribution names (extras and version specifiers dropped)."""
    return {re.match(r"[A-Za-z0-9._-]+", r).group(0).lower() for r in requirements}


def discovered_packages():
    find = SETUPTOOLS["packages"]["find"]
    assert set(find) <= {"include", "exclude", "where"}, find
    return setuptools.find_packages(
        where=str(ROOT / find.get("where", ["."])[0]),
        include=find.get("include", ["*"]),
        exclude=find.get("exclude", []),
    )


def test_the_wheel_packages_are_keras_structattn_alone():
    packages = discovered_packages()
    assert packages, "no package discovered"
    assert all(p == "keras_structattn" or p.startswith("keras_structattn.") for p in packages)
    # Every package of the library is in, subpackages included.
    library = {
        ".".join(path.parent.relative_to(ROOT).parts)
        for path in (ROOT / "keras_structattn").rglob("__init__.py")
    }
    assert set(packages) == library
    # The zoo next to it exists as packages but is not installed.
    for zoo in ("models", "recipes"):
        assert (ROOT / zoo / "__init__.py").exists()
        assert zoo not in packages


def test_package_data_covers_the_library_data_files():
    packages = set(discovered_packages())
    patterns = SETUPTOOLS["package-data"]
    data_files = [
        path for path in (ROOT / "keras_structattn").rglob("*")
        if path.is_file() and path.suffix not in (".py", ".pyc") and "__pycache__" not in path.parts
    ]
    assert any(p.parent.name == "tatoeba_en_de" for p in data_files)
    for path in data_files:
        # The nearest enclosing package owns the file (setuptools' rule).
        parent = path.parent
        while ".".join(parent.relative_to(ROOT).parts) not in packages:
            parent = parent.parent
        package = ".".join(parent.relative_to(ROOT).parts)
        relative = path.relative_to(parent).as_posix()
        globs = patterns.get("*", []) + patterns.get(package, [])
        assert any(fnmatch.fnmatch(relative, g) for g in globs), (package, relative)


def test_core_dependencies_are_keras_and_numpy():
    assert requirement_names(PROJECT["dependencies"]) == {"keras", "numpy"}
    keras = next(r for r in PROJECT["dependencies"] if r.lower().startswith("keras"))
    assert keras.replace(" ", "") == "keras>=3.15,<4"


def test_extras_and_their_union():
    extras = PROJECT["optional-dependencies"]
    assert set(extras) == {"text", "vision", "jax", "lmdb", "test", "all"}
    assert {"tensorflow", "tensorflow-text", "sentencepiece", "sacrebleu", "tensorboard"} <= (
        requirement_names(extras["text"])
    )
    assert "pycocoevalcap" in requirement_names(extras["vision"])
    assert extras["jax"] == ["jax[cpu]"]
    assert {"pytest", "hypothesis", "ruff", "build"} <= requirement_names(extras["test"])
    others = [r for name, reqs in extras.items() if name != "all" for r in reqs]
    # The same requirement strings, so that `all` pins what each extra pins.
    assert sorted(set(extras["all"])) == sorted(set(others))
    assert len(extras["all"]) == len(set(extras["all"]))
    # TensorFlow only through the extras.
    assert "tensorflow" not in requirement_names(PROJECT["dependencies"])


def test_one_version_source():
    assert "version" not in PROJECT
    assert "version" in PROJECT["dynamic"]
    assert SETUPTOOLS["dynamic"]["version"] == {"attr": "keras_structattn.__version__"}
    # setuptools reads the attribute statically (without importing Keras):
    # it must be a plain string literal in the package's __init__.
    tree = ast.parse((ROOT / "keras_structattn" / "__init__.py").read_text())
    literals = [
        node.value.value
        for node in tree.body
        if isinstance(node, ast.Assign)
        and [getattr(t, "id", None) for t in node.targets] == ["__version__"]
        and isinstance(node.value, ast.Constant)
    ]
    assert literals == [keras_structattn.__version__]
    assert re.fullmatch(r"\d+\.\d+\.\d+", keras_structattn.__version__)


def test_ci_runs_ruff_and_the_wheel_check():
    ci = (ROOT / ".ci" / "run").read_text()
    assert ".venv/bin/ruff check ." in ci
    assert ".ci/check_wheel.py" in ci and (ROOT / ".ci" / "check_wheel.py").exists()
    ruff = PYPROJECT["tool"]["ruff"]
    assert ruff["line-length"] == 100 and ruff["target-version"] == "py310"
    isort = ruff["lint"]["isort"]
    assert isort["force-single-line"] is True
    assert set(isort["known-first-party"]) == {
        "keras_structattn", "models", "recipes", "tests", "benchmarks"
    }
