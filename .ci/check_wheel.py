"""Checks an installed keras_structattn wheel in a bare environment.

`.ci/run` installs the wheel with keras, numpy and jax only (no TensorFlow)
into a fresh virtualenv outside the checkout and runs this script from
outside the checkout with KERAS_BACKEND=jax. It checks that:

* the library is imported from the installed wheel, and neither TensorFlow
  nor the checkout's `models`/`recipes` packages can be imported;
* `import keras_structattn` and `import keras_structattn.layers` work with
  nothing else installed (the third-party modules they import are
  printed);
* the wheel (`--wheel`) holds `keras_structattn/` and its dist-info only,
  the package data is installed, and the installed version is the one the
  wheel's name carries;
* one layer of each kind builds and runs on small random inputs (every
  extra input passed by keyword), with the expected output shapes and
  finite values, and one layer survives a `.keras` save and reload.

Usage: python -I check_wheel.py [--wheel PATH]
"""

import argparse
import collections
import importlib.metadata
import importlib.util
import os
import sys
import tempfile
import time
import zipfile

BASE_MODULES = set(sys.modules)
START = time.perf_counter()


def check(condition, message):
    if not condition:
        raise SystemExit(f"check_wheel: FAILED: {message}")
    print(f"ok  {message} ({time.perf_counter() - START:.1f} s)")


def third_party_top_level(names):
    tops = {name.split(".")[0] for name in names}
    return sorted(t for t in tops if t not in sys.stdlib_module_names and not t.startswith("_"))


def check_wheel_contents(path):
    """The wheel's version (from its name), after checking what it holds."""
    name, version = os.path.basename(path).split("-")[:2]
    check(name == "keras_structattn", f"wheel {os.path.basename(path)}")
    with zipfile.ZipFile(path) as wheel:
        files = wheel.namelist()
    tops = collections.Counter(f.split("/")[0] for f in files)
    print("    wheel entries:", ", ".join(f"{t}/ ({n} files)" for t, n in sorted(tops.items())))
    allowed = {"keras_structattn", f"keras_structattn-{version}.dist-info"}
    check(set(tops) <= allowed, f"the wheel holds only {sorted(allowed)}")
    data = "keras_structattn/tasks/translation/tatoeba_en_de/deu-eng.tsv.gz"
    check(data in files, f"the wheel holds {data}")
    return version


def check_environment(expected_version):
    check(os.environ.get("KERAS_BACKEND") == "jax", "KERAS_BACKEND=jax")
    for name in ("tensorflow", "models", "recipes"):
        check(importlib.util.find_spec(name) is None, f"`{name}` is not importable")

    import keras_structattn
    import keras_structattn.layers  # noqa: F401

    imported = third_party_top_level(set(sys.modules) - BASE_MODULES)
    print("    third-party modules imported by keras_structattn(.layers):", ", ".join(imported))
    check("tensorflow" not in imported, "keras_structattn imports no TensorFlow")
    location = os.path.realpath(keras_structattn.__file__)
    print("    keras_structattn from", os.path.dirname(location))
    check("site-packages" in location, "keras_structattn comes from the installed wheel")
    # keras_structattn.tasks.translation needs the `text` extra: look, don't import.
    folder = "tasks/translation/tatoeba_en_de"
    data = os.path.join(os.path.dirname(location), *folder.split("/"), "deu-eng.tsv.gz")
    check(os.path.isfile(data), f"package data keras_structattn/{folder}/ is installed")
    installed = importlib.metadata.version("keras-structattn")
    print(f"    keras_structattn.__version__ = {keras_structattn.__version__}, "
          f"distribution version = {installed}")
    check(keras_structattn.__version__ == installed, "one version: __version__ == metadata")
    if expected_version is not None:
        check(installed == expected_version, f"version {installed} is the wheel's")


def check_layers():
    import keras
    import numpy as np
    from keras import ops

    from keras_structattn import layers

    check(keras.backend.backend() == "jax", "Keras runs on JAX")
    rng = np.random.default_rng(0)
    batch, q_len, k_len, dim = 2, 5, 7, 16

    def normal(*shape):
        return rng.normal(size=shape).astype("float32")

    def boxes(n):
        corner = rng.uniform(0.0, 0.6, size=(batch, n, 2))
        size = rng.uniform(0.05, 0.4, size=(batch, n, 2))
        return np.concatenate([corner, corner + size], axis=-1).astype("float32")

    def finite(name, outputs, shapes):
        outputs = outputs if isinstance(outputs, (tuple, list)) else (outputs,)
        got = [tuple(ops.shape(o)) for o in outputs]
        check(got == shapes, f"{name}: output shapes {got}")
        for o in outputs:
            check(bool(np.all(np.isfinite(ops.convert_to_numpy(o)))), f"{name}: finite outputs")

    query, value = normal(batch, q_len, dim), normal(batch, k_len, dim)
    out = (batch, q_len, dim)

    area = layers.MultiHeadAreaAttention(num_heads=2, key_dim=8, max_area_width=3)
    finite("MultiHeadAreaAttention", area(query, value, use_causal_mask=False), [out])

    relations = rng.integers(0, 15, size=(batch, q_len, k_len)).astype("int32")
    graph = layers.GraphMultiHeadAttention(num_heads=12, key_dim=4, relation_bias=True)
    finite("GraphMultiHeadAttention", graph(query, value, relations=relations), [out])

    gated = layers.GatedMultiHeadAttention(num_heads=2, key_dim=8)  # self-attention
    finite("GatedMultiHeadAttention", gated(query, query), [out])

    vectors = layers.PositionalMultiHeadAttention(
        num_heads=2, key_dim=8, position_type="vectors", position_dim=6
    )
    y = vectors(query, value, query_positions=normal(batch, q_len, 6),
                key_positions=normal(batch, k_len, 6))
    finite("PositionalMultiHeadAttention (vectors)", y, [out])
    box = layers.PositionalMultiHeadAttention(num_heads=2, key_dim=8, position_type="boxes")
    y = box(query, value, query_boxes=boxes(q_len), key_boxes=boxes(k_len))
    finite("PositionalMultiHeadAttention (boxes)", y, [out])

    causal = layers.CATTAttention(num_heads=2, key_dim=8, dictionary_size=9, fusion="concat")
    finite("CATTAttention", causal(query, value), [(batch, q_len, 2 * dim)])
    dictionary = normal(11, dim)
    finite("CATTAttention (dictionary=)", causal(query, value, dictionary=dictionary),
           [(batch, q_len, 2 * dim)])

    visual = normal(batch, k_len, 12)
    stack = layers.UnifiedAttentionStack(num_blocks=2, hidden_size=dim, num_heads=2)
    finite("UnifiedAttentionStack", stack(query, visual),
           [out, (batch, k_len, dim)])

    encoder = layers.CATTEncoder(num_layers=2, hidden_size=dim, filter_size=32, num_heads=2,
                                 dictionary_size=9)
    finite("CATTEncoder", encoder(value), [(batch, k_len, dim)] * 2)

    # Save and reload one layer inside a model; the reloaded model computes
    # the same outputs.
    inputs = keras.Input((q_len, dim))
    memory = keras.Input((k_len, dim))
    model = keras.Model(
        [inputs, memory],
        layers.GraphMultiHeadAttention(num_heads=12, key_dim=4, relation_bias=True)(inputs, memory),
    )
    with tempfile.TemporaryDirectory() as folder:
        path = os.path.join(folder, "graph.keras")
        model.save(path)
        reloaded = keras.saving.load_model(path)
    a = ops.convert_to_numpy(model([query, value]))
    b = ops.convert_to_numpy(reloaded([query, value]))
    check(np.allclose(a, b, atol=1e-6), "a .keras save and reload gives the same outputs")


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--wheel", help="the wheel file that was installed")
    args = parser.parse_args()
    version = None if args.wheel is None else check_wheel_contents(args.wheel)
    check_environment(version)
    check_layers()
    print("check_wheel: all checks passed")


if __name__ == "__main__":
    main()
