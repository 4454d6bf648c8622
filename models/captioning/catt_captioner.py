"""Transformer+CATT: an image captioner with causal-intervention attention.

Yang, Zhang, Qi, Cai and Hua, "Causal Attention for Vision-Language Tasks",
CVPR 2021, arXiv:2103.03493, Sec. 3.3 and Fig. 5 (captioning, Sec. 4.1 and
Table 3); docs/catt_attention.md and docs/captioning.md.

The image (bottom-up regions, or a grid; `models/captioning/image_input.py`) is
embedded and encoded by a `CATTEncoder`: every block carries the
in-sample (IS) stream, ordinary self-attention over the regions, and the
cross-sample (CS) stream, the same queries over a global image dictionary
of K entries (the first block) and over the previous block's CS output
(later blocks), with shared weights. The caption decoder (`CATTDecoder`)
does the same over a global *word* dictionary, and each stream attends to
its own encoder memory (IS to `[V_I]_E`, CS to `[V_C]_E`). The word
predictor reads `[Z^; X^]`, the concatenated streams of the last block
(the paper's Eq. 4 and Sec. 3.3: the predictor takes both samples), with
one Dense `2 * hidden -> vocab`.

Post-norm blocks, as the paper's Transformer (Vaswani et al.) and the
released LXMERT+CATT code; word embeddings scaled by `sqrt(hidden)` plus
the sinusoid timing signal; 0 pads and starts a caption, 1 is EOS
(`keras_structattn.decoding.tokens`).

`dictionary_size=0` gives the model's **non-CATT twin**: no dictionaries,
no CS stream, the predictor on `Z^` alone; its weights are exactly the CATT
model's IS weights (the predictor aside), which is how the paper's
"Transformer" baseline relates to "Transformer+CATT".

Dictionaries: before training, `keras_structattn.training.dictionaries.
fit_dictionaries` sets them to K-means centres of what they stand in for
(`dictionary_samples`): the image dictionary over the embedded training
regions (the first encoder block's input), the word dictionary over the
embedded training words with their positions (the first decoder block's
input). Without it they keep the uniform(0, 0.01) initializer of the
released code: the paper's "w/o Init" ablation (Table 6, -1.9 CIDEr-D).

Decoding follows `keras_structattn.decoding.seq2seq` (`encode`,
`initial_cache`, `decode_step`); the CS self-attention context of a later
decoder block is kept in a buffer (`CATTDecoder.call_cached`).

Hyper-parameter sets: `catt_captioner_base` (the paper's 6 + 6 layers of
width 512, 8 heads, K = 500 for both dictionaries), `catt_captioner_tiny`
(CPU sizes for Shapes world), and their twins `transformer_captioner_base`
and `transformer_captioner_tiny` (`dictionary_size=0`).
"""

import keras
import numpy as np
from keras import ops

from keras_structattn import checks
from keras_structattn.decoding.tokens import PAD_ID
from keras_structattn.layers.catt_transformer import CATTDecoder
from keras_structattn.layers.catt_transformer import CATTEncoder
from models.captioning import hparams_sets
from models.captioning.base import Captioner
from models.translation.transformer import TimingEmbedding
from models.translation.transformer import check_stacks
from models.translation.transformer import make_input_dropouts


@keras.saving.register_keras_serializable(package="keras_structattn")
class CATTCaptioner(TimingEmbedding, Captioner):
    """Transformer+CATT image captioner (and, with `dictionary_size=0`, its twin).

    See the module docstring. The defaults are the paper's model
    (`hparams_sets.CATT_CAPTIONER`, the class's `HPARAMS`); the training values
    are the Transformer captioner's (`TransformerCaptioner`: batches of
    images with 5 captions each, a warm-up then rsqrt decay).

    Args:
        vocab_size: size of the caption vocabulary.
        hidden_size, filter_size, num_hidden_layers, num_heads: sizes (the
            encoder and the decoder each have `num_hidden_layers` blocks).
        layer_prepostprocess_dropout, attention_dropout, relu_dropout:
            dropouts of the inputs and sublayer outputs, of the attention
            weights and after the FFN activation.
        dictionary_size: K of both global dictionaries (500 in the paper);
            0 for the non-CATT twin.
        share_weights: one set of attention, FFN and norm weights for the
            IS and CS streams (the paper); False is its "w/o Share".
        encoder_input, grid_height, grid_width, grid_positions: the image
            features (`models/captioning/image_input.py`); regions by default, as the
            paper's bottom-up features.
        seed: int seed of the initializers and dropouts.
        **kwargs: `keras.Model` arguments.

    Call arguments and returns: as `Captioner`'s.
    """

    model_type = "catt_captioner"
    # No `shared_embedding_and_softmax_weights`: the predictor reads [Z^; X^]
    # (2 * hidden wide), no tying with the hidden-wide word embedding.
    HPARAMS = hparams_sets.CATT_CAPTIONER

    def _check_hparams(self, hp):
        check_stacks(hp)
        if hp.dictionary_size:
            checks.positive_int("dictionary_size", hp.dictionary_size)
        else:
            checks.non_negative_int("dictionary_size", hp.dictionary_size)
        checks.boolean("share_weights", hp.share_weights)

    def _make_captioner(self, hp):
        self.num_hidden_layers = hp.num_hidden_layers
        self.dictionary_size = hp.dictionary_size
        make_input_dropouts(self, hp.layer_prepostprocess_dropout)
        stack_args = dict(
            dictionary_size=hp.dictionary_size or None,
            share_weights=hp.share_weights,
            attention_dropout=hp.attention_dropout,
            relu_dropout=hp.relu_dropout,
            layer_dropout=hp.layer_prepostprocess_dropout,
        )
        sizes = (hp.num_hidden_layers, hp.hidden_size, hp.filter_size, hp.num_heads)
        self.encoder = CATTEncoder(*sizes, seed=self._next_seed(), name="encoder", **stack_args)
        self.decoder = CATTDecoder(*sizes, seed=self._next_seed(), name="decoder", **stack_args)
        self._make_image_layers()

    @property
    def predictor_width(self):
        """The predictor's input width: `2 * hidden_size` (`[Z^; X^]`), or
        `hidden_size` for the twin."""
        return (2 if self.dictionary_size else 1) * self.hidden_size

    # The word embedding of the Transformer: scaled, plus the timing signal.

    # ---------------------------------------------------------------- build

    def build(self, input_shape=None):
        feature_shape, target_shape = self._input_shapes(input_shape)
        hidden = self._build_image_layers(feature_shape)
        target_hidden = (target_shape[0], target_shape[1], self.hidden_size)
        self.target_embedding.build(target_shape)
        self.output_projection.build((None, self.predictor_width))
        self.encoder.build(hidden)
        self.decoder.build(target_hidden, hidden, hidden)
        self.built = True

    # ------------------------------------------------------------ protocol

    def encode(self, features, training=False):
        """Encodes the image.

        Returns:
            `(encoded, mask bool [B, L])`: `encoded` a dict with the IS
            output `"is"` `[B, L, hidden]` and, with dictionaries, the CS
            output `"cs"` (the decoder's two memories).
        """
        self._build_for(features)
        x, mask = self.embed_image(features)
        x = self.input_dropout(x, training=training)
        z, c = self.encoder(x, padding_mask=mask, training=training)
        encoded = {"is": z} if c is None else {"is": z, "cs": c}
        return encoded, mask

    def _embed_words(self, decoder_inputs, training=False):
        decoder_inputs = ops.cast(decoder_inputs, "int32")
        positions = ops.arange(ops.shape(decoder_inputs)[1])
        x = self._embed_at(self.target_embedding, decoder_inputs, positions)
        return self.target_dropout(x, training=training)

    def decode(self, decoder_inputs, encoded, encoder_mask, training=False):
        """Logits `[B, T, V]` of the whole shifted caption, causally."""
        x = self._embed_words(decoder_inputs, training)
        y = self.decoder(x, encoded["is"], encoded.get("cs"),
                         encoder_padding_mask=encoder_mask, training=training)
        return self._logits(y)

    def initial_cache(self, encoded, encoder_mask, max_decode_length):
        """The decoding state: the encoder mask and the decoder's caches
        (`CATTDecoder.initial_cache`), batch-leading, fixed shapes."""
        cache = self.decoder.initial_cache(encoded["is"], encoded.get("cs"), max_decode_length)
        cache["encoder_mask"] = encoder_mask
        return cache

    def decode_step(self, ids, cache, index):
        """`(logits float32 [B, V], cache)` of the word after position
        `index`, whose decoder input is `ids` `[B, 1]`."""
        ids = ops.cast(ids, "int32")
        x = self._embed_at(self.target_embedding, ids, ops.reshape(index, (1,)))
        mask = cache["encoder_mask"]
        blocks = {k: v for k, v in cache.items() if k != "encoder_mask"}
        y, new_cache = self.decoder.call_cached(x, blocks, index, mask)
        new_cache["encoder_mask"] = mask
        return self._logits(y)[:, 0, :], new_cache

    # --------------------------------------------------------- dictionaries

    def global_dictionaries(self):
        """`{"image": ..., "words": ...}` `GlobalDictionary` layers (empty
        for the twin); see `keras_structattn.training.dictionaries`."""
        if not self.dictionary_size:
            return {}
        return {
            "image": self.encoder.global_dictionary,
            "words": self.decoder.global_dictionary,
        }

    def dictionary_samples(self, inputs):
        """The vectors each dictionary stands in for, for a training batch.

        Args:
            inputs: `(features, decoder_inputs)` as `call` takes them.

        Returns:
            `{"image": [N, hidden], "words": [M, hidden]}` NumPy arrays: the
            embedded real regions (or grid cells), what the first encoder
            block attends to, and the embedded words of the captions with
            their position signal, start token included and padding left
            out, what the first decoder block attends to (no dropout).
        """
        features, decoder_inputs = inputs
        self._build_for(features)
        x, mask = self.embed_image(features)
        ids = np.asarray(ops.convert_to_numpy(decoder_inputs)).astype("int32")
        ids = ids.reshape(-1, ids.shape[-1])
        words = ops.convert_to_numpy(self._embed_words(ids))
        # Position 0 holds the start token (PAD_ID); later padding is not a word.
        real = (ids != PAD_ID) | (np.arange(ids.shape[1]) == 0)
        image = ops.convert_to_numpy(x)[ops.convert_to_numpy(mask)]
        return {"image": image, "words": words[real]}

    # ------------------------------------------------------- visualisation

    def encdec_attention(self, features, decoder_inputs, layer=-1):
        """Each word's attention over the image, IS and CS, in one block.

        A teacher-forced pass (no dropout) up to decoder block `layer`.

        Args:
            features: the image features, as for `encode`.
            decoder_inputs: int `[B, T]`, the caption shifted right with 0.
            layer: the decoder block (default the last).

        Returns:
            `(is_weights, cs_weights)`, float32 `[B, num_heads, T, L]`: the
            IS stream's weights over the regions (`[V_I]_E`) and the CS
            stream's over the encoder's CS output (`[V_C]_E`, one entry per
            region); `cs_weights` is None for the twin.
        """
        encoded, mask = self.encode(features, training=False)
        scores = self.decoder.cross_attention_scores(
            self._embed_words(decoder_inputs), encoded["is"], encoded.get("cs"), layer, mask)
        return tuple(None if w is None else ops.cast(w, "float32") for w in scores)
