"""`Seq2Seq`: the base of the encoder-decoder models over token ids.

What the Transformer (`models/translation/transformer.py`), the LSTM seq2seq
(`models/translation/lstm_seq2seq.py`) and the captioners share:

* Hyper-parameters. A model's `HPARAMS` is a dict of its family's keras-free
  `hparams_sets.py` (e.g. `hparams_sets.TRANSFORMER`): the keyword arguments
  its constructor takes besides `vocab_size` and `seed`, with their
  defaults, so each default is written once, as the sets' data.
  `from_hparams` builds a model from an `HParams`, and `get_config` returns
  the constructor's arguments.
* Embeddings with the shared softmax. A source and a target
  `keras.layers.Embedding` (normal, stddev `hidden_size ** -0.5`), or with
  `shared_embedding_and_softmax_weights` one matrix for both and for the
  output projection (Press & Wolf, 2017, arXiv:1608.05859); the embedding of
  `PAD_ID` is zero, and logits are float32.
* The decoding protocol of `keras_structattn.decoding.seq2seq`: `encode`,
  `initial_cache`, `decode_step`, plus `decode` (the teacher-forced pass)
  and `call((source_ids, decoder_inputs))`.

Token ids follow `keras_structattn.decoding.tokens` (tensor2tensor's convention):
`PAD_ID` pads and starts the decoder, `EOS_ID` ends a sentence.

Seeds: the model's random sublayers (the embedding initializers first,
then the subclass's, in the order it makes them) are seeded by
`keras_structattn.layers.blocks.sub_seed`.
"""

import types

import keras
from keras import ops

from keras_structattn.decoding.tokens import PAD_ID
from keras_structattn.layers.blocks import sub_seed
from models._sets import take_hparams


class Seq2Seq(keras.Model):
    """Base of the encoder-decoder models (see the module docstring).

    A subclass sets `model_type` (the hparam naming its family), `HPARAMS`
    (its hyper-parameters and their defaults, data of its family's
    `hparams_sets`) and, if its source is not token ids, `embeds_source =
    False` (then there is no `source_embedding`); it checks the values in
    `_check_hparams(hp)` and makes its layers in `_make_layers(hp)` (after
    the embeddings; the constructor is the base's), and implements
    `encode`, `decode`, `initial_cache` and `decode_step`; `self.hp` holds
    its values.

    Args:
        vocab_size: size of the (joint) vocabulary, an int >= 2 (`PAD_ID`
            and `EOS_ID` are ids of it).
        seed: int seed of the model's initializers and dropouts.
        **kwargs: the hyper-parameters of `HPARAMS` (each defaults to its
            value there), and `keras.Model` arguments. Of those the base
            reads `hidden_size`, the embedding width, and
            `shared_embedding_and_softmax_weights` (False where the model
            has no such hparam): one matrix for source and target
            embeddings and the output projection (joint vocabulary);
            otherwise three separate ones (without a source embedding,
            `embeds_source = False`: one matrix for the target embedding
            and the output projection, or two).

    Call arguments:
        inputs: `(source_ids [B, S], decoder_inputs [B, T])` of ints, the
            decoder inputs being the targets shifted right with `PAD_ID`.
        training: whether dropout is active.

    Returns:
        float32 logits `[B, T, vocab_size]`.
    """

    model_type = None
    # False for models whose source is not token ids (the captioners): no
    # `source_embedding` is made (it is None), and sharing ties the target
    # embedding to the softmax only.
    embeds_source = True
    # The constructor's hyper-parameters and their defaults (a dict of the
    # family's `hparams_sets`).
    HPARAMS = {}

    def __init__(self, vocab_size, seed=None, **kwargs):
        hp = take_hparams(self.HPARAMS, kwargs)
        self._check_hparams(hp)
        super().__init__(**kwargs)
        if isinstance(vocab_size, bool) or not isinstance(vocab_size, int) or vocab_size < 2:
            raise ValueError(
                "Argument `vocab_size` must be an int >= 2 (the padding and EOS ids are "
                f"tokens of it). Received: {vocab_size!r}"
            )
        self._constructor_config = dict(vocab_size=vocab_size, seed=seed, **vars(hp))
        self.vocab_size = vocab_size
        self.hidden_size = hp.hidden_size
        self.seed = seed
        self._seed_count = 0
        self.source_embedding = None
        if self.embeds_source:
            self.source_embedding = self._embedding("source_embedding")
        if getattr(hp, "shared_embedding_and_softmax_weights", False):
            self.target_embedding = self.source_embedding
            if self.target_embedding is None:
                self.target_embedding = self._embedding("target_embedding")
            self.output_projection = None
        else:
            self.target_embedding = self._embedding("target_embedding")
            self.output_projection = keras.layers.Dense(
                vocab_size, use_bias=False, name="output_projection"
            )
        self._make_layers(hp)

    def _next_seed(self):
        """`sub_seed` of the next random sublayer made."""
        self._seed_count += 1
        return sub_seed(self.seed, self._seed_count - 1)

    def _embedding(self, name):
        initializer = keras.initializers.RandomNormal(
            stddev=self.hidden_size**-0.5, seed=self._next_seed()
        )
        return keras.layers.Embedding(
            self.vocab_size, self.hidden_size, embeddings_initializer=initializer, name=name
        )

    # ---------------------------------------------------- hyper-parameters

    @classmethod
    def hparam_defaults(cls):
        """The constructor's hyper-parameters and their defaults, by name
        (a copy of `HPARAMS`)."""
        return dict(cls.HPARAMS)

    def _check_hparams(self, hp):
        """Raises ValueError for a bad value of `hp` (a namespace of the
        constructor's hyper-parameters), before any layer is made."""

    def _make_layers(self, hp):
        """Makes the model's layers but the embeddings (made before, in
        this order: their seeds come first)."""
        raise NotImplementedError

    @property
    def hp(self):
        """The constructor's hyper-parameters, a namespace (`hp.hidden_size`)."""
        return types.SimpleNamespace(**{name: self._constructor_config[name]
                                        for name in self.HPARAMS})

    @classmethod
    def from_hparams(cls, hparams, vocab_size, seed=None, **kwargs):
        """Builds the model of a `keras_structattn.training.hparams.HParams` set."""
        values = {name: getattr(hparams, name) for name in cls.hparam_defaults()}
        return cls(vocab_size=vocab_size, seed=seed, **values, **kwargs)

    def get_config(self):
        config = super().get_config()
        config.update(self._constructor_config)
        return config

    # ---------------------------------------------------------- embeddings

    def _build_embeddings(self, source_shape=(None, None), target_shape=(None, None)):
        if self.source_embedding is not None:
            self.source_embedding.build(source_shape)
        if self.target_embedding is not self.source_embedding:
            self.target_embedding.build(target_shape)
        if self.output_projection is not None:
            self.output_projection.build((None, self.hidden_size))

    @staticmethod
    def padding_mask(ids):
        """Bool `[B, L]`: True where `ids` is not `PAD_ID`."""
        return ops.not_equal(ids, PAD_ID)

    def _embed(self, embedding, ids):
        """`embedding(ids)`, zero where `ids` is `PAD_ID`."""
        x = embedding(ids)
        return x * ops.cast(ops.expand_dims(self.padding_mask(ids), -1), x.dtype)

    def _logits(self, x):
        """float32 logits `[..., vocab_size]` of decoder features `x`."""
        if self.output_projection is None:
            table = ops.cast(self.target_embedding.embeddings, x.dtype)
            logits = ops.matmul(x, ops.transpose(table))
        else:
            logits = self.output_projection(x)
        return ops.cast(logits, "float32")

    # ------------------------------------------------------------ protocol

    def call(self, inputs, training=None):
        source_ids, decoder_inputs = inputs
        encoded, mask = self.encode(source_ids, training=training)
        return self.decode(decoder_inputs, encoded, mask, training=training)

    def encode(self, source_ids, training=False):
        """`(encoded, padding mask bool [B, S])`: what `decode` and
        `initial_cache` read (a tensor or a nested structure)."""
        raise NotImplementedError

    def decode(self, decoder_inputs, encoded, encoder_mask, training=False):
        """Logits `[B, T, vocab_size]` of the whole shifted target."""
        raise NotImplementedError

    def initial_cache(self, encoded, encoder_mask, max_decode_length):
        """The decoding state before the first step: a dict of tensors with
        a leading batch axis and fixed shapes (beam search tiles it)."""
        raise NotImplementedError

    def decode_step(self, ids, cache, index):
        """`(logits float32 [B, vocab_size], cache)` for the token after
        `ids` `[B, 1]`, the decoder input at position `index` (an int scalar
        tensor)."""
        raise NotImplementedError
