"""`compile_function`: compiled once, it reads the weights as they are at
each call (self-critical training samples from the model it updates; a
plain `jax.jit` closure would keep the weights seen at tracing)."""

import keras
import numpy as np

from keras_structattn.decoding.seq2seq import compile_function


def test_compiled_function_reads_the_current_weights():
    layer = keras.layers.Dense(2, use_bias=False)
    layer.build((None, 3))
    compiled = compile_function(lambda x: layer(x), layer.variables)
    x = np.ones((1, 3), "float32")
    before = keras.ops.convert_to_numpy(compiled(x))
    layer.kernel.assign(layer.kernel * 2.0)
    after = keras.ops.convert_to_numpy(compiled(x))
    np.testing.assert_allclose(after, 2.0 * before, rtol=1e-6)
    np.testing.assert_allclose(after, x @ keras.ops.convert_to_numpy(layer.kernel), rtol=1e-6)
