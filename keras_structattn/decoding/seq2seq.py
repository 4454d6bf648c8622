"""Decoding an encoder-decoder model with beam or greedy search.

The model provides the tensor2tensor/KerasHub-shaped decoding protocol:

* `encode(source_ids) -> (encoder_outputs, encoder_mask)`, the mask
  batch-leading (`[B, S]`; the batch size is read from it, so the source
  may be token ids, float features or a dict of them),
* `initial_cache(encoder_outputs, encoder_mask, max_decode_length) -> cache`
  (a dict of batch-leading tensors: fixed-shape buffers, so XLA compiles one
  program per input shape),
* `decode_step(ids [B, 1], cache, index) -> (logits [B, V], cache)`,
* `vocab_size`.

`models.translation.transformer.Transformer`, the LSTM seq2seq models and the
captioner (`models.captioning.transformer_captioner.TransformerCaptioner`) implement it.
"""

import keras
from keras import ops

from keras_structattn.decoding.beam_search import beam_search
from keras_structattn.decoding.greedy_search import greedy_search
from keras_structattn.decoding.tokens import EOS_ID


def generate(
    model,
    source_ids,
    *,
    max_decode_length,
    beam_size=4,
    alpha=0.6,
    eos_id=EOS_ID,
    return_all_beams=False,
):
    """Decodes a batch of sources.

    Args:
        model: a model with the decoding protocol of this module.
        source_ids: what `model.encode` takes: int `[B, S]`, 0-padded, for
            the translation models; image features (a float grid or a dict
            of region tensors) for the captioner.
        max_decode_length: the most target tokens (EOS included).
        beam_size: 1 for greedy search.
        alpha: GNMT length-penalty exponent (beam search).
        eos_id: the end-of-sentence id.
        return_all_beams: return every beam, best first.

    Returns:
        `(ids, scores)`: int32 `[B, max_decode_length]` (or
        `[B, beam, max_decode_length]`), EOS included, 0 after it; and the
        scores `[B]` (or `[B, beam]`): length-penalised log-probabilities
        for beam search, the plain sum of log-probabilities for greedy.
    """
    encoder_outputs, encoder_mask = model.encode(source_ids, training=False)
    cache = model.initial_cache(encoder_outputs, encoder_mask, max_decode_length)
    start = ops.zeros((ops.shape(encoder_mask)[0],), "int32")

    def step_fn(ids, cache, index):
        return model.decode_step(ids, cache, index)

    if beam_size == 1 and not return_all_beams:
        return greedy_search(
            step_fn, start, cache, max_decode_length=max_decode_length, eos_id=eos_id
        )
    return beam_search(
        step_fn,
        start,
        cache,
        vocab_size=model.vocab_size,
        max_decode_length=max_decode_length,
        beam_size=beam_size,
        alpha=alpha,
        eos_id=eos_id,
        return_all_beams=return_all_beams,
    )


def compiled_generate(model, **options):
    """`generate` compiled with XLA for the current backend.

    Args:
        model: as in `generate`.
        **options: the other keyword arguments of `generate`
            (`max_decode_length`, `beam_size`, `alpha`, `eos_id`,
            `return_all_beams`), fixed for the compiled function.

    Returns:
        A function of `source_ids` (as in `generate`) returning what
        `generate` returns (one compiled program per input shape: feed
        batches padded to a few fixed lengths).
    """

    return compile_function(lambda source_ids: generate(model, source_ids, **options),
                            getattr(model, "variables", ()))


def compile_function(fn, variables=()):
    """`fn` compiled with XLA for the current backend, reading `variables` live.

    TensorFlow's `tf.function` reads variables when it runs. `jax.jit` would
    instead bake the values a closure sees at tracing into the program, so
    on JAX the variables' current values are passed in at every call and
    bound with a `keras.StatelessScope`: a function compiled once keeps
    seeing the weights as training changes them (self-critical training
    samples from the model it is updating).

    Args:
        fn: a function of tensors (nested structures allowed).
        variables: the Keras variables `fn` reads (e.g. `model.variables`).

    Returns:
        The compiled function, called like `fn` (other backends: `fn`).
    """
    backend = keras.backend.backend()
    if backend == "tensorflow":
        import tensorflow as tf

        return tf.function(fn, jit_compile=True, reduce_retracing=False)
    if backend == "jax":
        import jax

        variables = list(variables)

        def pure(values, *args):
            with keras.StatelessScope(state_mapping=list(zip(variables, values))):
                return fn(*args)

        compiled = jax.jit(pure)
        return lambda *args: compiled([v.value for v in variables], *args)
    return fn
