"""TensorFlow, imported on first use.

The Python-side vocabularies (`encode` / `decode`), the bucket arithmetic and
recorded batches (`recorded.py`) work without TensorFlow, e.g. on a JAX
accelerator machine; only the in-graph parts (`tf_encode`, `tf_decode`, the
`tf.data` pipeline) need it, and they import it when first used.
"""


def _missing(what, error):
    return ModuleNotFoundError(
        f"{what} is needed here (the in-graph tokenisers and the tf.data pipeline) "
        "and TensorFlow is not installed: pip install tensorflow, or replay "
        "recorded batches (keras_structattn.tasks.translation.recorded)"
    )


class _LazyTensorFlow:
    def __getattr__(self, name):
        try:
            import tensorflow
        except ModuleNotFoundError as error:
            raise _missing(f"`tf.{name}`", error) from error
        return getattr(tensorflow, name)


def import_tensorflow_text():
    """`tensorflow_text`, with the explanation above when TensorFlow is missing."""
    try:
        import tensorflow  # noqa: F401
    except ModuleNotFoundError as error:
        raise _missing("`tensorflow_text`", error) from error
    import tensorflow_text

    return tensorflow_text


tf = _LazyTensorFlow()
