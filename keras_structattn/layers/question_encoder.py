"""The question encoder of the MCAN family: word embedding, then an LSTM.

MCAN (Yu et al., 2019, "Deep Modular Co-Attention Networks for Visual
Question Answering", CVPR, arXiv:1906.10770, Sec. 4.1) embeds each word of
the question (padded to 14 tokens) with 300-d GloVe vectors, kept
trainable, and runs a one-layer unidirectional LSTM over all the steps,
padding included; the padded words are masked later, as keys of the
attentions. MUAN (Yu et al., 2019, arXiv:1908.04107) does the same with a
learned token prepended to the words (its `[ans]` token, which also serves
as the question's summary). See docs/vqa.md.
"""

import keras
import numpy as np
from keras import ops

from keras_structattn import checks
from keras_structattn.layers.blocks import sub_seed


@keras.saving.register_keras_serializable(package="keras_structattn")
class QuestionEncoder(keras.layers.Layer):
    """Word embedding, an optional prepended token, and a one-layer LSTM.

    `Embedding(vocab_size, word_dim)` of the token ids (0 = padding), then,
    with `prepend_token=True`, a learned `[word_dim]` vector put before the
    first word (MUAN's `[ans]` token: the same as a vocabulary row every
    question starts with), then a unidirectional `LSTM(hidden_size)` over
    every step, padding included (as MCAN: the LSTM reads the padded steps
    after the words, so the words' outputs do not depend on the padding;
    padded positions are masked later, as attention keys, with
    `question_mask`). No Keras implicit mask is used (the embedding has
    `mask_zero=False`): masks are explicit booleans.

    Initialisation is Keras' (Glorot kernels, orthogonal recurrent kernel,
    forget-gate bias 1, embeddings uniform in +-0.05), not PyTorch's
    defaults used by the MCAN code; GloVe rows, when given, replace the
    embeddings.

    Args:
        vocab_size: number of token ids (0 = padding).
        hidden_size: the LSTM's width (the model width d).
        word_dim: the embedding width (300 for GloVe).
        embeddings: None, or a NumPy `[vocab_size, word_dim]` matrix of
            initial embeddings (GloVe rows); they stay trainable. Not part
            of the config: the weights carry them (a model loaded from a
            `.keras` file has the trained embeddings; one rebuilt from the
            config alone starts from the random initializer).
        prepend_token: put a learned token before the words.
        embeddings_initializer: of the embeddings when `embeddings` is None
            (and of the prepended token).
        seed: int seed of the initializers.
        **kwargs: `keras.layers.Layer` arguments (`name`, `dtype`, ...).

    Call arguments:
        question: int `[B, T]` token ids, 0 = padding.
        training: unused (no dropout), for the Keras signature.

    Returns:
        `[B, T, hidden_size]`, or `[B, T + 1, hidden_size]` with the
        prepended token first.
    """

    def __init__(
        self,
        vocab_size,
        hidden_size,
        *,
        word_dim=300,
        embeddings=None,
        prepend_token=False,
        embeddings_initializer="uniform",
        seed=None,
        **kwargs,
    ):
        super().__init__(**kwargs)
        checks.positive_int("vocab_size", vocab_size)
        checks.positive_int("hidden_size", hidden_size)
        checks.positive_int("word_dim", word_dim)
        checks.boolean("prepend_token", prepend_token)
        if embeddings is not None:
            embeddings = np.asarray(embeddings, dtype="float32")
            if embeddings.shape != (vocab_size, word_dim):
                raise ValueError(
                    "Argument `embeddings` must be a [vocab_size, word_dim] = "
                    f"[{vocab_size}, {word_dim}] matrix. Received: shape {embeddings.shape}"
                )
        self.vocab_size = vocab_size
        self.hidden_size = hidden_size
        self.word_dim = word_dim
        self.prepend_token = prepend_token
        self.embeddings_initializer = keras.initializers.get(embeddings_initializer)
        self.seed = seed
        self._initial_embeddings = embeddings

        def seeded(identifier, index):
            config = keras.initializers.serialize(keras.initializers.get(identifier))
            config = dict(config, config=dict(config["config"]))
            if "seed" in config["config"]:
                config["config"]["seed"] = sub_seed(seed, index)
            return keras.initializers.deserialize(config)

        self.embedding = keras.layers.Embedding(
            vocab_size,
            word_dim,
            embeddings_initializer=seeded(self.embeddings_initializer, 0),
            name="embedding",
            dtype=self.dtype_policy,
        )
        self._token_initializer = seeded(self.embeddings_initializer, 1)
        self.lstm = keras.layers.LSTM(
            hidden_size,
            return_sequences=True,
            kernel_initializer=seeded("glorot_uniform", 2),
            recurrent_initializer=seeded("orthogonal", 3),
            name="lstm",
            dtype=self.dtype_policy,
        )

    def build(self, question_shape):
        self.embedding.build(question_shape)
        if self._initial_embeddings is not None:
            self.embedding.embeddings.assign(self._initial_embeddings)
        self.token = None
        if self.prepend_token:
            self.token = self.add_weight(
                shape=(self.word_dim,), initializer=self._token_initializer, name="token"
            )
        length = question_shape[1]
        if length is not None and self.prepend_token:
            length += 1
        self.lstm.build((question_shape[0], length, self.word_dim))

    def call(self, question, training=None):
        words = self.embedding(question)
        if self.prepend_token:
            token = ops.cast(self.token, words.dtype)
            token = ops.broadcast_to(token[None, None, :], (ops.shape(words)[0], 1, self.word_dim))
            words = ops.concatenate([token, words], axis=1)
        return self.lstm(words, training=training)

    def question_mask(self, question):
        """The boolean key mask of the encoder's output steps.

        Args:
            question: int `[B, T]` token ids, 0 = padding.

        Returns:
            bool `[B, T]` (True = a real word), or `[B, T + 1]` with the
            prepended token first (always True).
        """
        mask = ops.not_equal(question, 0)
        if self.prepend_token:
            first = ops.ones_like(mask[:, :1])
            mask = ops.concatenate([first, mask], axis=1)
        return mask

    def compute_output_shape(self, question_shape):
        length = question_shape[1]
        if length is not None and self.prepend_token:
            length += 1
        return (question_shape[0], length, self.hidden_size)

    def get_config(self):
        config = super().get_config()
        config.update(
            vocab_size=self.vocab_size,
            hidden_size=self.hidden_size,
            word_dim=self.word_dim,
            prepend_token=self.prepend_token,
            embeddings_initializer=keras.initializers.serialize(self.embeddings_initializer),
            seed=self.seed,
        )
        return config
