"""The parallel suite runner covers what the README promises."""

from tests import run_suites


def test_parts_cover_both_backends():
    by_backend = {}
    for _, backend, args in run_suites.PARTS:
        by_backend.setdefault(backend, []).extend(args)
    # TensorFlow: the layers, the recipes, and everything else.
    assert sorted(by_backend["tensorflow"]) == sorted(
        ["tests/layers", "tests/recipes", "tests", "--ignore=tests/layers",
         "--ignore=tests/recipes"])
    assert sorted(by_backend["jax"]) == sorted(run_suites.JAX_PATHS)


def test_failures_give_a_non_zero_exit(monkeypatch):
    calls = []

    def fake(name, backend, args, extra):
        calls.append((name, extra))
        return name, 1 if backend == "jax" else 0, 0.0, "summary"

    monkeypatch.setattr(run_suites, "run_part", fake)
    assert run_suites.main(["--jobs", "2", "--", "-x"]) == 1
    assert len(calls) == len(run_suites.PARTS) and all(e == ["-x"] for _, e in calls)
