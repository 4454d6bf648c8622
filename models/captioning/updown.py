"""The Up-Down (BUTD) captioner, and BUTD+CATT.

Anderson et al., "Bottom-Up and Top-Down Attention for Image Captioning and
Visual Question Answering", CVPR 2018 (arXiv:1707.07998, Sec. 3.2), as
implemented by ruotianluo/self-critical.pytorch (`TopDownCore`, `Attention`,
`AttModel`). Two LSTMs per word:

* the top-down attention LSTM (Sec. 3.2.1, Eq. 2) reads
  `[h2_{t-1}; v_mean; W_e x_t]`: the language LSTM's previous output, the
  mean of the image's region vectors and the embedded previous word;
* its output `h1_t` queries the regions with additive attention (Eq. 3-5,
  `TopDownAttention`): `a_i = w^T tanh(W_v v_i + W_h h1_t)`,
  `alpha = softmax(a)`, `v^_t = sum_i alpha_i v_i`;
* the language LSTM (Sec. 3.2.2, Eq. 6) reads `[v^_t; h1_t]`, and its
  output `h2_t`, after dropout, gives the word logits (Eq. 7).

Region vectors: `v_i = Dropout(ReLU(W f_i + b))` of the bottom-up features
(self-critical.pytorch's `att_embed`), padding regions zeroed and masked out
of the attention and of the mean. Only the features are used: the boxes of
the regions dict are accepted (the input is the Transformer captioner's)
but the Up-Down model has no box geometry. A grid `[B, H, W, C]` is read
as `H * W` regions, row-major, none masked.

BUTD+CATT (Yang et al., "Causal Attention for Vision-Language Tasks", CVPR
2021, arXiv:2103.03493, supplementary; docs/catt_attention.md, "Up-Down
variant"): the same query `h1_t` also attends over a global visual
dictionary of `dictionary_size` entries (K = 1000 in the supplementary)
with the same additive scorer (`CATTTopDownAttention`; IS-ATT over the
regions, CS-ATT over the dictionary), and the language LSTM reads
`[v^_IS; v^_CS; h1_t]`. The dictionary lives in the space of the `v_i`:
`keras_structattn.training.dictionaries.fit_dictionaries` sets it to K-means centres
of the training images' region vectors (the paper's initialisation). See
docs/captioning.md ("Up-Down and Up-Down+CATT").

Dropout (`dropout`, self-critical.pytorch's `drop_prob_lm`) is where that
code puts it: on the region vectors, on the word embeddings and on `h2`
before the softmax. The recurrent step itself has none, so the
teacher-forced pass and `decode_step` run one step function (and a
stateful random draw inside a loop, which does not compose across
backends, is avoided).

Hyper-parameter sets (`models/captioning/hparams_sets.py`): `updown_base` and
`updown_catt_base` (the paper's sizes), `updown_tiny` and
`updown_catt_tiny` (CPU sizes for Shapes world).
"""

import keras
import numpy as np
from keras import ops

from keras_structattn import checks
from keras_structattn.layers.blocks import check_sizes
from keras_structattn.layers.catt_top_down_attention import CATTTopDownAttention
from keras_structattn.layers.dropout import Dropout
from keras_structattn.layers.top_down_attention import TopDownAttention
from models.captioning import hparams_sets
from models.captioning.base import Captioner
from models.translation.lstm_seq2seq import _time_loop

# The recurrent state carried from word to word.
STATE_NAMES = ("h1", "c1", "h2", "c2")


@keras.saving.register_keras_serializable(package="keras_structattn")
class UpDownCaptioner(Captioner):
    """The Up-Down captioner (Anderson et al., 2018), optionally with CATT.

    See the module docstring. From `ImageInput` it takes the captioners'
    checks of a grid and of a regions dict and `memory_length`, not their
    embedding (M4C's norms, box geometry and grid positions are not the
    Up-Down model's). The defaults are the paper's sizes (1000-wide
    LSTMs and word embeddings, a 512-wide attention, dropout 0.5, as
    self-critical.pytorch's `updown` configuration): `hparams_sets.UPDOWN`,
    the class's `HPARAMS`. Training values
    (`hparams_sets.UPDOWN_TRAINING`): `batch_size` counts images (each with its
    captions, `[B, K, T]` decoder inputs), `max_length` is the longest
    caption in tokens (EOS included); the recipe's
    `WarmupRsqrtDecay(constant, warmup, hidden_size)` peaks at
    `constant / sqrt(warmup * hidden_size)`: 0.5 / sqrt(1000 * 1000) = 5e-4,
    self-critical.pytorch's Up-Down learning rate; no label smoothing and
    Adam's (0.9, 0.999, 1e-8), as there.

    Args:
        vocab_size: size of the caption vocabulary.
        hidden_size: width of both LSTMs, of the region vectors `v_i` and
            of the word embeddings.
        attention_size: width of the additive scorer (`TopDownAttention`).
        dropout: rate on the region vectors, the word embeddings and the
            language LSTM's output.
        shared_embedding_and_softmax_weights: one matrix for the word
            embedding and the output projection (the paper has two).
        encoder_input: `"regions"` (a dict `{"features": [B, R, C],
            "boxes": [B, R, 4], "mask": [B, R] bool}`; the boxes are not
            used) or `"grid"` (float `[B, H, W, C]`, read as `H * W`
            regions, row-major).
        grid_height, grid_width: the grid's `H` and `W` (static).
        dictionary_size: 0 for BUTD; K > 0 for BUTD+CATT with a K-entry
            visual dictionary (1000 in CATT's supplementary).
        share_scorer: CS-ATT scores the dictionary with the IS-ATT scorer
            (the paper's choice); False gives it its own (W_v, W_h, w).
        seed: int seed of the embeddings, the feature and LSTM kernels and
            the dropout. The scorer's initializers are unseeded: one seeded
            initializer would give its two equal-shaped projections equal
            kernels.
        **kwargs: `keras.Model` arguments.

    Call arguments and returns: as `Captioner`'s.
    """

    model_type = "updown_captioner"
    HPARAMS = hparams_sets.UPDOWN

    def _check_hparams(self, hp):
        check_sizes(hp.hidden_size, 1, dropout=hp.dropout)
        checks.positive_int("attention_size", hp.attention_size)
        checks.non_negative_int("dictionary_size", hp.dictionary_size)
        checks.boolean("share_scorer", hp.share_scorer)

    def _make_captioner(self, hp):
        self.attention_size = hp.attention_size
        self.dictionary_size = hp.dictionary_size

        self.feature_embedding = keras.layers.Dense(
            hp.hidden_size,
            activation="relu",
            kernel_initializer=keras.initializers.GlorotUniform(seed=self._next_seed()),
            name="feature_embedding",
        )
        self.attention_lstm = self._lstm_cell("attention_lstm")
        self.language_lstm = self._lstm_cell("language_lstm")
        if hp.dictionary_size:
            self.attention = CATTTopDownAttention(
                hp.attention_size,
                dictionary_size=hp.dictionary_size,
                share_weights=hp.share_scorer,
                name="attention",
            )
        else:
            self.attention = TopDownAttention(hp.attention_size, name="attention")
        self.dropout_layer = Dropout(
            hp.dropout, seed=self._next_seed(), name="dropout"
        )

    def _lstm_cell(self, name):
        return keras.layers.LSTMCell(
            self.hidden_size,
            kernel_initializer=keras.initializers.GlorotUniform(seed=self._next_seed()),
            recurrent_initializer=keras.initializers.Orthogonal(seed=self._next_seed()),
            name=name,
        )

    @property
    def is_catt(self):
        """Whether the model is BUTD+CATT (a visual dictionary)."""
        return bool(self.dictionary_size)

    @property
    def _is_scorer(self):
        """The `TopDownAttention` scoring the regions."""
        return self.attention.attention if self.is_catt else self.attention

    @property
    def _cs_scorer(self):
        """The `TopDownAttention` scoring the dictionary (CATT only)."""
        return self.attention.cs_attention or self.attention.attention

    # ---------------------------------------------------------------- build

    def build(self, input_shape=None):
        feature_shape, target_shape = self._input_shapes(input_shape)
        if feature_shape is not None:
            if self.encoder_input == "grid":
                self._check_grid_shape(feature_shape)
                channels = tuple(feature_shape)[-1]
            else:
                channels = self._region_shapes(feature_shape)["features"][-1]
            self.feature_embedding.build((None, None, channels))
        hidden = self.hidden_size
        self._build_embeddings(target_shape=target_shape)
        # [h2_{t-1}; v_mean; W_e x_t] and [v^ (IS, CS); h1].
        self.attention_lstm.build((None, 3 * hidden))
        self.language_lstm.build((None, (3 if self.is_catt else 2) * hidden))
        self.attention.build((None, hidden), (None, None, hidden))
        self.built = True

    # -------------------------------------------------------------- encoder

    def _region_vectors(self, features, training=False):
        """`(v [B, R, hidden], mask bool [B, R])`: `Dropout(ReLU(W f + b))`,
        zero for padding regions."""
        if self.encoder_input == "grid":
            if isinstance(features, dict):
                self._check_grid_shape(features)
            features = ops.convert_to_tensor(features)
            self._check_grid_shape(features.shape)
            features = ops.reshape(features, (-1, self.memory_length, features.shape[-1]))
            mask = ops.ones((ops.shape(features)[0], self.memory_length), "bool")
        else:
            self._region_shapes(features)
            mask = ops.cast(features["mask"], "bool")
            features = features["features"]
        v = self.feature_embedding(ops.cast(features, self.compute_dtype))
        v = self.dropout_layer(v, training=training)
        # Zeroing padding regions keeps whatever fills them (even NaN) out
        # of the mean and of the attention's sums.
        return ops.where(mask[..., None], v, ops.zeros_like(v)), mask

    def encode(self, features, training=False):
        """Embeds the image's regions.

        Args:
            features: a regions dict or a grid (see the class docstring).
            training: whether dropout is active.

        Returns:
            `(v [B, R, hidden_size], mask bool [B, R])`: the region vectors
            (zero where masked; `R = H * W` for a grid, mask all True).
        """
        self._build_for(features)
        return self._region_vectors(features, training=training)

    # -------------------------------------------------------------- decoder

    def initial_cache(self, encoded, encoder_mask, max_decode_length=None):
        """The state before the first word (`max_decode_length` is unused:
        the LSTM state has a fixed size).

        Returns:
            A dict of batch-leading tensors: `regions` (the `v_i`), their
            scorer projection `projected` (`W_v v_i + b`, computed once per
            image, as self-critical.pytorch's `p_att_feats`), `mask`, `mean`
            (the masked mean of the `v_i`, zero for an image with no
            region) and the zero LSTM states `h1`, `c1`, `h2`, `c2`.
        """
        mask = ops.cast(encoder_mask, "bool")
        weights = ops.cast(mask, "float32")[..., None]
        # The sum in float32 (mixed precision); an empty image's mean is 0.
        total = ops.sum(ops.cast(encoded, "float32") * weights, axis=1)
        mean = total / ops.maximum(ops.sum(weights, axis=1), 1.0)
        zeros = ops.zeros((ops.shape(encoded)[0], self.hidden_size), encoded.dtype)
        return {
            "regions": encoded,
            "projected": self._is_scorer.value_projection(encoded),
            "mask": mask,
            "mean": ops.cast(mean, encoded.dtype),
            "h1": zeros,
            "c1": zeros,
            "h2": zeros,
            "c2": zeros,
        }

    def _dictionary(self):
        """`(D [K, hidden], W_v D + b)` of CS-ATT (batch-free, so computed
        once per pass rather than cached per row), or None for BUTD."""
        if not self.is_catt:
            return None
        dictionary = ops.cast(self.attention.global_dictionary.dictionary, self.compute_dtype)
        return dictionary, self._cs_scorer.value_projection(dictionary)

    def _step(self, word, cache, dictionary=None):
        """One word (Eq. 2-6): `word` `[B, hidden]` is the embedded previous
        word; `dictionary` is `_dictionary()`.

        Returns:
            `(h2 [B, hidden], (is_weights [B, R], cs_weights [B, K] or
            None), cache)`.
        """
        x = ops.concatenate([cache["h2"], cache["mean"], word], axis=-1)
        h1, (_, c1) = self.attention_lstm(x, [cache["h1"], cache["c1"]])
        is_context, is_weights = self._is_scorer.attend(
            h1, cache["regions"], cache["mask"], projected_value=cache["projected"]
        )
        contexts, cs_weights = [is_context], None
        if dictionary is not None:
            entries, projected = dictionary
            cs_context, cs_weights = self._cs_scorer.attend(
                h1, entries, projected_value=projected
            )
            contexts.append(cs_context)
        x = ops.concatenate(contexts + [h1], axis=-1)
        h2, (_, c2) = self.language_lstm(x, [cache["h2"], cache["c2"]])
        cache = dict(cache, h1=h1, c1=c1, h2=h2, c2=c2)
        return h2, (is_weights, cs_weights), cache

    def _embed_words(self, ids, training=False):
        ids = ops.cast(ids, "int32")
        return self.dropout_layer(self._embed(self.target_embedding, ids), training=training)

    def decode(self, decoder_inputs, encoded, encoder_mask, training=False):
        """Teacher-forced logits `[B, T, V]`: `_step` run over the shifted
        caption (`_time_loop`: `ops.scan` on JAX, a bounded while loop on
        TensorFlow), then dropout on the `h2` and the softmax."""
        cache = self.initial_cache(encoded, encoder_mask)
        words = self._embed_words(decoder_inputs, training=training)
        dictionary = self._dictionary()
        constants = {k: v for k, v in cache.items() if k not in STATE_NAMES}

        def step(carry, word):
            h2, _, state = self._step(word, dict(zip(STATE_NAMES, carry), **constants),
                                      dictionary)
            return tuple(state[name] for name in STATE_NAMES), h2

        outputs = _time_loop(
            step,
            tuple(cache[name] for name in STATE_NAMES),
            ops.transpose(words, (1, 0, 2)),
            cache["h2"],
        )
        outputs = ops.transpose(outputs, (1, 0, 2))
        return self._logits(self.dropout_layer(outputs, training=training))

    def decode_step(self, ids, cache, index):
        """`(logits float32 [B, V], cache)` of the word after `ids [B, 1]`
        (`index` is unused: the state is the LSTMs')."""
        word = self._embed_words(ids)[:, 0, :]
        h2, _, cache = self._step(word, cache, self._dictionary())
        return self._logits(h2), cache

    # ------------------------------------------------------- visualisation

    def attention_weights(self, features, decoder_inputs):
        """The teacher-forced attention of each word (no dropout).

        Args:
            features: the image features, as for `encode`.
            decoder_inputs: int `[B, T]` (static T), the caption shifted
                right with 0.

        Returns:
            `(is_weights, cs_weights)`: float32 `[B, T, R]` over the regions
            (grid cells row-major; each row sums to 1, 0 for an image with
            every region masked) and, for BUTD+CATT, float32 `[B, T, K]`
            over the dictionary entries (None for BUTD).
        """
        encoded, mask = self.encode(features, training=False)
        cache = self.initial_cache(encoded, mask)
        words = self._embed_words(decoder_inputs)
        dictionary = self._dictionary()
        is_weights, cs_weights = [], []
        for t in range(decoder_inputs.shape[1]):
            _, (is_w, cs_w), cache = self._step(words[:, t], cache, dictionary)
            is_weights.append(is_w)
            cs_weights.append(cs_w)
        cs = ops.stack(cs_weights, axis=1) if dictionary is not None else None
        return ops.stack(is_weights, axis=1), cs

    # --------------------------------------------- CATT dictionary protocol

    def global_dictionaries(self):
        """`{"visual": GlobalDictionary}` for BUTD+CATT, `{}` for BUTD
        (`keras_structattn.training.dictionaries`)."""
        if not self.is_catt:
            return {}
        if not self.built:
            raise ValueError(
                "The model has no dictionary until it is built: call it on a batch "
                "(or `encode` one) first."
            )
        return {"visual": self.attention.global_dictionary}

    def dictionary_samples(self, inputs):
        """`{"visual": float32 NumPy [N, hidden_size]}`: the region vectors
        `v_i` (no dropout) of the real regions (mask True) of a batch
        `inputs = (features, decoder_inputs)`, where the dictionary lives
        (`keras_structattn.training.dictionaries.fit_dictionaries`)."""
        features = inputs[0] if isinstance(inputs, (tuple, list)) else inputs
        v, mask = self.encode(features, training=False)
        v = np.asarray(ops.convert_to_numpy(ops.cast(v, "float32")))
        mask = np.asarray(ops.convert_to_numpy(mask)).astype(bool)
        return {"visual": v[mask]}
