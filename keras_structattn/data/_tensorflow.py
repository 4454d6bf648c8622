"""TensorFlow, imported on first use.

The Python-side vocabularies (`encode` / `decode`), the bucket arithmetic and
recorded batches (`recorded.py`) work without TensorFlow, e.g. on a JAX
accelerator machine; only the in-graph parts (`tf_encode`, `tf_decode`, the
`tf.data` pipeline) need it, and they import it when first used.
"""


class _LazyTensorFlow:
    def __getattr__(self, name):
        try:
            import tensorflow
        except ModuleNotFoundError as error:
            raise ModuleNotFoundError(
                f"`tf.{name}` is needed here (the in-graph tokenisers and the tf.data "
                "pipeline) and TensorFlow is not installed: pip install tensorflow, "
                "or replay recorded batches (keras_structattn.data.recorded)"
            ) from error
        return getattr(tensorflow, name)


tf = _LazyTensorFlow()
