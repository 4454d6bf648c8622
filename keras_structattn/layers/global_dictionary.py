"""CATT's global dictionary: the `[K, d]` weight that stands for the training set.

Yang et al., "Causal Attention for Vision-Language Tasks", CVPR 2021,
arXiv:2103.03493. CS-ATT (cross-sample attention, Eq. 7) attends over a
global dictionary `D [K, d]`: K centres of the training features (K-means,
the paper; `GlobalDictionary.adapt`) or uniform(0, 0.01) (the only released
code), trained by backprop either way. See docs/catt_attention.md.

`GlobalDictionary` is the layer; `uniform_dictionary_initializer`,
`resolve_dictionary_initializer` and `own_dictionary` are the helpers the
CATT layers (`catt_attention`, `catt_top_down_attention`,
`catt_transformer`) share.
"""

import keras
import numpy as np
from keras import ops

from keras_structattn import checks
from keras_structattn.layers.blocks import clone_initializer
from keras_structattn.ops import kmeans


def uniform_dictionary_initializer():
    """uniform(0, 0.01): the dictionary initialisation of the released code
    (the paper's "w/o Init" ablation; the paper fits K-means centres)."""
    return keras.initializers.RandomUniform(minval=0.0, maxval=0.01)


def resolve_dictionary_initializer(initializer=None):
    """`initializer` as a Keras initializer; None gives uniform(0, 0.01)."""
    if initializer is None:
        return uniform_dictionary_initializer()
    return keras.initializers.get(initializer)


def own_dictionary(size, dim, initializer, dtype):
    """A layer's own `GlobalDictionary` (named `global_dictionary`), with a
    fresh copy of `initializer` so that no two dictionaries share draws."""
    return GlobalDictionary(
        size,
        dim=dim,
        initializer=clone_initializer(initializer),
        name="global_dictionary",
        dtype=dtype,
    )


@keras.saving.register_keras_serializable(package="keras_structattn")
class GlobalDictionary(keras.layers.Layer):
    """A trainable global dictionary `[size, dim]` for cross-sample attention.

    The dictionary stands for "other samples" in CS-ATT. Three ways to set
    it, all trainable afterwards:

    * `initializer`: default uniform(0, 0.01), as the released code
      (`torch.rand / 100`); any Keras initializer.
    * `adapt(data, ...)`: mini-batch K-means with k-means++ seeding over
      training features, the paper's initialisation (see
      `keras_structattn.ops.kmeans`); reports the inertia in
      `self.inertia`.
    * `set_centers(centers)`: given centres, e.g. a K-means run elsewhere.

    The weight is float32 under mixed precision (the variable dtype); the
    layer's output is cast to the compute dtype.

    Args:
        size: K, the number of entries (500 in the paper's Transformer and
            LXMERT models).
        dim: entry width. If None, taken from the last axis of the first
            input (or of the centres given to `set_centers`/`adapt`). When
            known, the layer is built at once.
        initializer, regularizer, constraint: for the weight.
        **kwargs: base `keras.layers.Layer` arguments (`name`, `dtype`, ...).

    Call arguments:
        inputs: any tensor `[..., dim]`; only its last axis is used (to
            build). Calling on the features ties the dictionary into a
            functional model: `D = GlobalDictionary(500)(features)`.

    Returns:
        The dictionary `[size, dim]` (no batch axis) in the compute dtype.
    """

    def __init__(
        self,
        size=500,
        dim=None,
        initializer=None,
        regularizer=None,
        constraint=None,
        **kwargs,
    ):
        super().__init__(**kwargs)
        checks.positive_int("size", size)
        if dim is not None:
            checks.positive_int("dim", dim)
        self.size = size
        self.dim = dim
        if initializer is None:
            initializer = uniform_dictionary_initializer()
        self.initializer = keras.initializers.get(initializer)
        self.regularizer = keras.regularizers.get(regularizer)
        self.constraint = keras.constraints.get(constraint)
        self.inertia = None
        self.kmeans_history = None
        if dim is not None:
            self.build((dim,))

    def build(self, input_shape=None):
        if self.built:
            return
        self._check_width(input_shape)
        dim = self.dim
        if input_shape is not None and input_shape[-1] is not None:
            dim = input_shape[-1]
        if dim is None:
            raise ValueError(
                "GlobalDictionary needs `dim`, or an input or centres to take it from."
            )
        self.dim = int(dim)
        self.dictionary = self.add_weight(
            name="dictionary",
            shape=(self.size, self.dim),
            initializer=self.initializer,
            regularizer=self.regularizer,
            constraint=self.constraint,
        )
        self.built = True

    def _check_width(self, input_shape):
        if input_shape is None or input_shape[-1] is None or self.dim is None:
            return
        if input_shape[-1] != self.dim:
            raise ValueError(
                f"GlobalDictionary has dim={self.dim} but its input has "
                f"{input_shape[-1]} features. Received: input_shape={tuple(input_shape)}"
            )

    def call(self, inputs=None):
        if inputs is not None:
            self._check_width(inputs.shape)
        return ops.cast(self.dictionary, self.compute_dtype)

    def compute_output_shape(self, input_shape=None):
        dim = self.dim if self.dim is not None else input_shape[-1]
        return (self.size, dim)

    def compute_mask(self, inputs, mask=None):
        return None

    def set_centers(self, centers):
        """Sets the dictionary to the given `[size, dim]` centres."""
        centers = np.asarray(centers, dtype="float32")
        if centers.ndim != 2 or centers.shape[0] != self.size or (
            self.dim is not None and centers.shape[1] != self.dim
        ):
            raise ValueError(
                f"Argument `centers` must be [size, dim] = [{self.size}, "
                f"{self.dim if self.dim is not None else 'dim'}]. "
                f"Received: centers.shape={centers.shape}"
            )
        self.build((centers.shape[1],))
        self.dictionary.assign(centers)

    def adapt(self, data, batch_size=None, steps=None, **kmeans_options):
        """Sets the dictionary to K-means centres of `data` (the paper's init).

        Mini-batch K-means with greedy k-means++ seeding on the host
        (`keras_structattn.ops.kmeans.minibatch_kmeans`, vectorised NumPy).

        Args:
            data: feature vectors `[..., dim]`: a NumPy array or backend
                tensor (leading axes are flattened), a batched
                `tf.data.Dataset` (of arrays or `(features, ...)` tuples),
                or a list of batches. It is read several times.
            batch_size: rows per mini-batch for arrays (default 1024); None
                for datasets and lists, which come batched.
            steps: batches per pass (default: all).
            **kmeans_options: keyword arguments of `minibatch_kmeans`:
                `epochs` (3), `init_size`, `seed` (the same seed gives the
                same centres), `shuffle`, `ignore_zero_rows` (skip all-zero
                padding rows), `compute_inertia` (the exact inertia, stored
                in `self.inertia`), `verbose`.
        """
        result = kmeans.minibatch_kmeans(
            data, self.size, batch_size=batch_size, steps=steps, **kmeans_options
        )
        self.set_centers(result.centers)
        self.inertia = result.inertia
        self.kmeans_history = result.history

    def get_config(self):
        config = super().get_config()
        config.update(
            size=self.size,
            dim=self.dim,
            initializer=keras.initializers.serialize(self.initializer),
            regularizer=keras.regularizers.serialize(self.regularizer),
            constraint=keras.constraints.serialize(self.constraint),
        )
        return config
