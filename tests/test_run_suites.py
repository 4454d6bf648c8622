"""The parallel suite runner covers what the README promises."""

import pathlib

from tests import run_suites

ROOT = pathlib.Path(__file__).resolve().parent.parent


def files_of(args):
    """The test files a part's pytest arguments select (paths less ignores)."""
    ignored = [a.split("=", 1)[1] for a in args if a.startswith("--ignore=")]
    files = set()
    for arg in args:
        if arg.startswith("--"):
            continue
        path = ROOT / arg
        found = [path] if path.is_file() else path.rglob("test_*.py")
        files.update(str(f.relative_to(ROOT)) for f in found)
    return {f for f in files if not any(f == i or f.startswith(i + "/") for i in ignored)}


def test_parts_cover_both_backends():
    """TensorFlow runs every test file but the model tests once; JAX the
    JAX_PATHS' files (the model tests among them) once."""
    every = {str(f.relative_to(ROOT)) for f in (ROOT / "tests").rglob("test_*.py")}
    models = {f for f in every if f.startswith("tests/models/")}
    jax_files = files_of(run_suites.JAX_PATHS)
    assert models and models <= jax_files
    for backend, expected in (("tensorflow", every - models), ("jax", jax_files)):
        parts = [files_of(args) for _, b, args in run_suites.PARTS if b == backend]
        assert set().union(*parts) == expected
        assert sum(len(p) for p in parts) == len(expected)  # no file twice
    assert "tests/recipes/test_caption_catt.py" in every and len(jax_files) > 20


def test_failures_give_a_non_zero_exit(monkeypatch):
    calls = []

    def fake(name, backend, args, extra):
        calls.append((name, extra))
        return name, 1 if backend == "jax" else 0, 0.0, "summary"

    monkeypatch.setattr(run_suites, "run_part", fake)
    assert run_suites.main(["--jobs", "2", "--", "-x"]) == 1
    assert len(calls) == len(run_suites.PARTS) and all(e == ["-x"] for _, e in calls)
