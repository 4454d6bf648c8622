"""A tensor2tensor-style Transformer for translation, with optional area attention.

The model maps `(source_ids, decoder_inputs)` to float32 logits over the
target vocabulary. Conventions of tensor2tensor: token id 0 is padding (and
the decoder's start symbol: `decoder_inputs` is the target shifted right
with a 0), id 1 is EOS (`keras_structattn.decoding.tokens`); embeddings are scaled by
`sqrt(hidden_size)` and the embedding of id 0 is zero; float32 `[sin | cos]`
timing signals; pre-norm blocks with a final layer norm; optionally one
embedding matrix shared by source, target and the softmax (`Seq2Seq`,
`models/translation/base.py`).

Area attention (Li et al., 2019, arXiv:1810.10126, section 4.1) is used in
the first `num_area_layers` layers, in the attention kinds listed in
`area_attention_kinds` (encoder self-attention, decoder self-attention and
encoder-decoder attention by default, as in the paper).

Hyper-parameter sets (`models/translation/hparams_sets.py`): `transformer_tiny`,
`transformer_small`, `transformer_base` (the constructor's defaults),
`transformer_big`, each with an `_area` variant (area attention of width 3
in the first 2 layers).
"""

import math

import keras
from keras import ops

from keras_structattn import checks
from keras_structattn.layers.area_attention import KEY_MODES
from keras_structattn.layers.blocks import check_sizes
from keras_structattn.layers.dropout import Dropout
from keras_structattn.layers.transformer import TransformerDecoderBlock
from keras_structattn.layers.transformer import TransformerEncoderBlock
from keras_structattn.ops.attend_areas import VALUE_MODES
from keras_structattn.ops.positions import timing_signal
from models.translation import hparams_sets
from models.translation.base import Seq2Seq

AREA_KINDS = ("encoder_self", "decoder_self", "encdec")


def area_kinds(text):
    """Parses `area_attention_kinds` ("encoder_self,decoder_self,encdec")."""
    kinds = tuple(k.strip() for k in text.split(",") if k.strip())
    unknown = [k for k in kinds if k not in AREA_KINDS]
    if unknown:
        raise ValueError(
            f"Unknown area attention kind(s) {unknown} in area_attention_kinds="
            f"{text!r}; allowed: {', '.join(AREA_KINDS)}"
        )
    return kinds


# ------------------------------------------------------------------- model


class TimingEmbedding:
    """Mixin of a `Seq2Seq`: tensor2tensor's embedding of token ids at
    positions (the Transformers' and `CATTCaptioner`'s)."""

    # ------------------------------------------------------------ embedding

    def _embed_at(self, embedding, ids, positions):
        """Scaled embedding (zero for padding) plus float32 timing signal."""
        x = self._embed(embedding, ids)
        x = x * ops.cast(math.sqrt(self.hidden_size), x.dtype)
        signal = timing_signal(positions, self.hidden_size)
        return x + ops.cast(signal, x.dtype)


class TransformerDecoding(TimingEmbedding):
    """Mixin of a `Seq2Seq` with the stacks of `make_stacks`: the
    Transformer decoder's teacher-forced pass and incremental decoding
    (`Transformer`'s and `TransformerCaptioner`'s). It reads the
    `target_embedding`, `target_dropout`, `decoder_blocks` and
    `decoder_norm` that `make_stacks` makes, and checks the hparams of
    `make_stacks`.
    """

    def _check_hparams(self, hp):
        check_stacks(hp)
        check_area_layers(hp)

    def _build_stacks(self, hidden, target_hidden):
        """Builds the stacks of `make_stacks` on the encoder's `hidden` and
        the decoder's `target_hidden` shapes."""
        for block in self.encoder_blocks:
            block.build(hidden)
        for block in self.decoder_blocks:
            block.build(target_hidden, hidden)
        self.encoder_norm.build(hidden)
        self.decoder_norm.build(target_hidden)

    def decode(self, decoder_inputs, encoder_outputs, encoder_mask, training=False):
        """Logits `[B, T, V]` of the whole (shifted) target, causally."""
        decoder_inputs = ops.cast(decoder_inputs, "int32")
        positions = ops.arange(ops.shape(decoder_inputs)[1])
        x = self._embed_at(self.target_embedding, decoder_inputs, positions)
        x = self.target_dropout(x, training=training)
        for block in self.decoder_blocks:
            x = block(
                x, encoder_outputs, encoder_padding_mask=encoder_mask, training=training
            )
        return self._logits(self.decoder_norm(x))

    # --------------------------------------------------- incremental decoding

    def initial_cache(self, encoder_outputs, encoder_mask, max_decode_length):
        """Fixed-shape decoding state, batch-leading (beam search tiles it).

        Returns:
            A dict: the encoder padding mask and, per decoder layer, the
            self-attention key/value buffers `[B, max_decode_length, N, d]`
            and the projected encoder keys/values.
        """
        batch = ops.shape(encoder_outputs)[0]
        cache = {"encoder_mask": encoder_mask}
        for i, block in enumerate(self.decoder_blocks):
            layer = block.empty_cache(batch, max_decode_length)
            layer.update(block.encoder_cache(encoder_outputs))
            cache[f"layer_{i}"] = layer
        return cache

    def decode_step(self, ids, cache, index):
        """Logits of the token after position `index`.

        Args:
            ids: int `[B, 1]`, the decoder input at position `index` (0 at
                position 0).
            cache: from `initial_cache` (or a previous step).
            index: int scalar tensor.

        Returns:
            `(logits float32 [B, V], cache)`.
        """
        ids = ops.cast(ids, "int32")
        x = self._embed_at(self.target_embedding, ids, ops.reshape(index, (1,)))
        new_cache = {"encoder_mask": cache["encoder_mask"]}
        for i, block in enumerate(self.decoder_blocks):
            x, new_cache[f"layer_{i}"] = block.call_cached(
                x, cache[f"layer_{i}"], index, cache["encoder_mask"]
            )
        return self._logits(self.decoder_norm(x))[:, 0, :], new_cache


@keras.saving.register_keras_serializable(package="keras_structattn")
class Transformer(TransformerDecoding, Seq2Seq):
    """Encoder-decoder Transformer over token ids.

    The defaults are tensor2tensor's `transformer_base`
    (`hparams_sets.TRANSFORMER`, the class's `HPARAMS`).

    Args:
        vocab_size: size of the (joint) vocabulary.
        hidden_size, filter_size, num_hidden_layers, num_heads: sizes.
        layer_prepostprocess_dropout, attention_dropout, relu_dropout:
            tensor2tensor's three dropouts.
        shared_embedding_and_softmax_weights: one matrix for source and
            target embeddings and the output projection (joint vocabulary);
            otherwise three separate ones.
        num_area_layers: the first layers that use area attention.
        area_attention_kinds: comma-separated subset of `encoder_self`,
            `decoder_self`, `encdec`.
        max_area_width, max_area_height, memory_height, area_key_mode,
            area_value_mode: the area arguments (`MultiHeadAreaAttention`).
        seed: int seed of the initializers and dropouts.

    Call arguments and returns: as `Seq2Seq`'s.
    """

    model_type = "transformer"
    HPARAMS = hparams_sets.TRANSFORMER

    def _make_layers(self, hp):
        make_stacks(self, hp, dict.fromkeys(AREA_KINDS, area_arguments(hp)))

    # -------------------------------------------------------------- forward

    def build(self, input_shape=None):
        source_shape, target_shape = (None, None), (None, None)
        if input_shape is not None and len(input_shape) == 2:
            source_shape, target_shape = input_shape
        hidden = (source_shape[0], source_shape[1], self.hidden_size)
        target_hidden = (target_shape[0], target_shape[1], self.hidden_size)
        self._build_embeddings(source_shape, target_shape)
        self._build_stacks(hidden, target_hidden)
        self.built = True

    def encode(self, source_ids, training=False):
        """Returns `(encoder_outputs [B, S, H], padding_mask bool [B, S])`."""
        source_ids = ops.cast(source_ids, "int32")
        mask = self.padding_mask(source_ids)
        positions = ops.arange(ops.shape(source_ids)[1])
        x = self._embed_at(self.source_embedding, source_ids, positions)
        x = self.input_dropout(x, training=training)
        for block in self.encoder_blocks:
            x = block(x, padding_mask=mask, training=training)
        return self.encoder_norm(x), mask


def check_stacks(hp):
    """Checks the sizes and dropouts of `make_stacks` (the Transformers' and
    `CATTCaptioner`'s), `hp` a namespace of them."""
    check_sizes(
        hp.hidden_size,
        hp.num_heads,
        hp.filter_size,
        layer_prepostprocess_dropout=hp.layer_prepostprocess_dropout,
        attention_dropout=hp.attention_dropout,
        relu_dropout=hp.relu_dropout,
    )
    checks.positive_int("num_hidden_layers", hp.num_hidden_layers)


def check_area_layers(hp):
    """Checks the area hparams of a Transformer (translation or captioning)
    `hp`: `num_area_layers`, `area_attention_kinds` and the area sizes and
    modes."""
    checks.positive_int("max_area_width", hp.max_area_width)
    checks.positive_int("max_area_height", hp.max_area_height)
    checks.one_of("area_key_mode", hp.area_key_mode, KEY_MODES)
    checks.one_of("area_value_mode", hp.area_value_mode, VALUE_MODES)
    if not 0 <= hp.num_area_layers <= hp.num_hidden_layers:
        raise ValueError(
            f"Argument `num_area_layers` must be in [0, {hp.num_hidden_layers}]"
            f" (num_hidden_layers). Received: {hp.num_area_layers!r}"
        )
    area_kinds(hp.area_attention_kinds)


def area_arguments(hp, **changes):
    """The area arguments (`MultiHeadAreaAttention`) of `hp`, `changes`
    applied (a captioner has no `memory_height`: it passes its own)."""
    names = ("max_area_width", "max_area_height", "memory_height", "area_key_mode",
             "area_value_mode")
    return {name: changes[name] if name in changes else getattr(hp, name) for name in names}


def make_input_dropouts(model, rate):
    """The encoder and decoder input dropouts of `model` (seeded in this
    order with `model._next_seed()`)."""
    for attribute, name in (("input_dropout", "encoder_input_dropout"),
                            ("target_dropout", "decoder_input_dropout")):
        setattr(model, attribute, Dropout(rate, seed=model._next_seed(), name=name))


def make_stacks(model, hp, areas):
    """Makes the encoder and decoder stacks of `model` (the Transformer's and
    the captioner's): its input dropouts, blocks and final layer norms.

    The sublayers are seeded in this order with `model._next_seed()`, and
    `Transformer`'s decoding methods read them by these attribute names.

    Args:
        model: a `Seq2Seq` under construction.
        hp: a namespace of `hparams_sets.TRANSFORMER_STACKS`'s names (the
            sizes and tensor2tensor's three dropouts), `num_area_layers` and
            `area_attention_kinds`.
        areas: the area arguments of each attention kind ("encoder_self",
            "decoder_self", "encdec"), used in the first `num_area_layers`
            layers by the kinds of `area_attention_kinds` (the others
            attend regularly).
    """
    kinds = area_kinds(hp.area_attention_kinds)

    def area_for(kind, layer):
        return areas[kind] if layer < hp.num_area_layers and kind in kinds else None

    make_input_dropouts(model, hp.layer_prepostprocess_dropout)
    block_args = dict(
        attention_dropout=hp.attention_dropout,
        relu_dropout=hp.relu_dropout,
        layer_dropout=hp.layer_prepostprocess_dropout,
    )
    sizes = (hp.hidden_size, hp.filter_size, hp.num_heads)
    model.encoder_blocks = [
        TransformerEncoderBlock(
            *sizes,
            area=area_for("encoder_self", i), seed=model._next_seed(),
            name=f"encoder_{i}", **block_args,
        )
        for i in range(hp.num_hidden_layers)
    ]
    model.decoder_blocks = [
        TransformerDecoderBlock(
            *sizes,
            self_area=area_for("decoder_self", i),
            encdec_area=area_for("encdec", i),
            seed=model._next_seed(),
            name=f"decoder_{i}", **block_args,
        )
        for i in range(hp.num_hidden_layers)
    ]
    model.encoder_norm = keras.layers.LayerNormalization(epsilon=1e-6, name="encoder_norm")
    model.decoder_norm = keras.layers.LayerNormalization(epsilon=1e-6, name="decoder_norm")
