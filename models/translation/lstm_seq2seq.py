"""LSTM encoder-decoder with multi-head (area) Luong attention (Li et al., 2019, §4.1.2).

A stack of LSTMs encodes the source. The decoder is a stack of LSTM cells
with *input feeding* (Luong et al., 2015): at each step the top cell's
output `h` queries the encoder outputs with multiplicative multi-head
attention, the attentional vector `a = tanh(W [context; h])` gives the
logits and is fed, with the next target embedding, to the next step.
With `max_area_width > 1` the attention is area attention over spans of
encoder outputs (keys: area means of the projected outputs; values: area
sums), the paper's setting where it helped LSTMs most; padded source
positions, and areas touching them, get no weight.

The decoder step is one function: `ops.scan` runs it over the target for
teacher-forced training, and `decode_step` runs it once per generated token
with the LSTM states and the previous attentional vector as the cache, so
both give the same logits. Token ids follow tensor2tensor: 0 is padding and
the start symbol (its embedding is zero), 1 is EOS.

Dropout (`dropout`) is applied to the embeddings, between encoder layers and
to the attentional vector; the recurrent cells themselves have none (a
stateful random draw inside `scan` does not compose across backends).
"""

import keras
from keras import ops

from keras_structattn import checks
from keras_structattn.layers._masking import set_keras_mask
from keras_structattn.layers.blocks import check_sizes
from keras_structattn.layers.dropout import Dropout
from keras_structattn.layers.transformer import make_attention
from models.translation import hparams_sets
from models.translation.base import Seq2Seq


def _time_loop(step, init, xs, output_like):
    """Runs `carry, y = step(carry, x)` over time-major `xs`; returns the ys.

    On JAX this is `ops.scan` (reverse-differentiable). On TensorFlow,
    Keras' `scan` builds a `tf.while_loop` without `maximum_iterations`, whose
    gradient XLA cannot compile; so the loop is a `while_loop` with that
    bound, selecting each `y` into a preallocated `[T, ...]` buffer.
    """
    if keras.backend.backend() == "jax":
        return ops.scan(step, init, xs)[1]
    steps = xs.shape[0]
    if steps is None:
        steps = ops.shape(xs)[0]
    buffer = ops.zeros((steps,) + tuple(ops.shape(output_like)), output_like.dtype)
    times = ops.reshape(ops.arange(steps), (-1,) + (1,) * len(output_like.shape))

    def body(i, carry, ys):
        carry, y = step(carry, ops.take(xs, i, axis=0))
        # A select, not `slice_update`: TF's dynamic-update-slice has no
        # gradient.
        ys = ops.where(times == i, ops.expand_dims(y, 0), ys)
        return i + 1, carry, ys

    _, _, ys = ops.while_loop(
        lambda i, carry, ys: i < steps, body, (0, init, buffer),
        maximum_iterations=steps,
    )
    return ys


@keras.saving.register_keras_serializable(package="keras_structattn")
class LSTMSeq2Seq(Seq2Seq):
    """2-layer (by default) LSTM seq2seq with multi-head (area) attention.

    The defaults are tensor2tensor's `lstm_attention` (and
    `lstm_area_attention_base` with `max_area_width=2`): `hparams_sets.LSTM`,
    the class's `HPARAMS`.

    Args:
        vocab_size: size of the joint vocabulary.
        hidden_size: LSTM cells, embedding and attention width.
        num_hidden_layers: LSTM layers of the encoder and of the decoder.
        num_heads: attention heads (key_dim = hidden_size // num_heads).
        dropout: see the module docstring.
        shared_embedding_and_softmax_weights: one matrix for source and
            target embeddings and the output projection.
        max_area_width: 1 for regular attention, > 1 for area attention
            over spans of up to this many encoder outputs.
        area_key_mode, area_value_mode: area attention's key and value
            modes (`MultiHeadAreaAttention`).
        seed: int seed of the embeddings' initialisation and of dropout.

    Call arguments and returns: as `Seq2Seq`'s.
    """

    model_type = "lstm"
    HPARAMS = hparams_sets.LSTM
    # The recipe's schedule peaks at constant / sqrt(warmup * hidden_size):
    # about 1e-3 for these defaults.

    def _check_hparams(self, hp):
        check_sizes(hp.hidden_size, hp.num_heads, dropout=hp.dropout)
        checks.positive_int("num_hidden_layers", hp.num_hidden_layers)
        checks.positive_int("max_area_width", hp.max_area_width)

    def _make_layers(self, hp):
        hidden_size, num_hidden_layers = hp.hidden_size, hp.num_hidden_layers
        self.num_hidden_layers = num_hidden_layers
        self.encoder_layers = [
            keras.layers.LSTM(
                hidden_size, return_sequences=True, return_state=True,
                name=f"encoder_lstm_{i}",
            )
            for i in range(num_hidden_layers)
        ]
        self.decoder_cells = [
            keras.layers.LSTMCell(hidden_size, name=f"decoder_cell_{i}")
            for i in range(num_hidden_layers)
        ]
        area = None
        if hp.max_area_width > 1:
            area = {name: getattr(hp, name) for name in hparams_sets.AREAS}
        self.attention = make_attention(
            hp.num_heads, hidden_size // hp.num_heads, 0.0, area=area, seed=self._next_seed(),
            name="attention",
        )
        self.attentional = keras.layers.Dense(
            hidden_size, activation="tanh", use_bias=False, name="attentional"
        )
        self.dropout_layer = Dropout(
            hp.dropout, seed=self._next_seed(), name="dropout"
        )

    def build(self, input_shape=None):
        hidden = self.hidden_size
        self._build_embeddings()
        for layer in self.encoder_layers:
            layer.build((None, None, hidden))
        self.decoder_cells[0].build((None, 2 * hidden))  # [embedding; attentional]
        for cell in self.decoder_cells[1:]:
            cell.build((None, hidden))
        self.attention.build((None, 1, hidden), (None, None, hidden))
        self.attentional.build((None, 2 * hidden))
        self.built = True

    # ------------------------------------------------------------- pieces

    def encode(self, source_ids, training=False):
        """Returns `(encoder state dict, padding mask bool [B, S])`.

        The dict holds the top layer's outputs `[B, S, H]` and each layer's
        final `(h, c)` (taken at the last real token: padding is masked).
        """
        source_ids = ops.cast(source_ids, "int32")
        mask = self.padding_mask(source_ids)
        x = self.dropout_layer(self._embed(self.source_embedding, source_ids), training=training)
        states = []
        for i, layer in enumerate(self.encoder_layers):
            x, h, c = layer(x, mask=mask, training=training)
            set_keras_mask(x, None)  # masks are explicit here
            states.append((h, c))
            if i + 1 < len(self.encoder_layers):
                x = self.dropout_layer(x, training=training)
        return {"outputs": x, "states": states}, mask

    def initial_cache(self, encoder, encoder_mask, max_decode_length=None):
        """Decoder state: LSTM states, the attentional vector and the
        encoder outputs projected once by the attention (a static cache;
        batch-leading, for beam search). `max_decode_length` is unused (the
        LSTM state has a fixed size)."""
        cache = {
            "encoder_memory": self.attention.project_memory(encoder["outputs"]),
            "encoder_mask": encoder_mask,
            "attentional": ops.zeros_like(encoder["states"][-1][0]),
        }
        for i, (h, c) in enumerate(encoder["states"]):
            cache[f"h{i}"], cache[f"c{i}"] = h, c
        return cache

    def _step(self, embedded, cache, training=False):
        """One decoder step: `embedded [B, H]` -> (attentional [B, H], cache)."""
        x = ops.concatenate([embedded, cache["attentional"]], axis=-1)
        new_cache = dict(cache)
        for i, cell in enumerate(self.decoder_cells):
            x, (h, c) = cell(x, [cache[f"h{i}"], cache[f"c{i}"]], training=training)
            new_cache[f"h{i}"], new_cache[f"c{i}"] = h, c
        mask = ops.expand_dims(ops.cast(cache["encoder_mask"], "bool"), 1)
        context, _ = self.attention(
            ops.expand_dims(x, 1), None, attention_mask=mask,
            cache=cache["encoder_memory"], training=False,
        )
        context = context[:, 0, :]
        attentional = self.attentional(ops.concatenate([context, x], axis=-1))
        new_cache["attentional"] = attentional
        return attentional, new_cache

    # ---------------------------------------------------------- forward

    def decode(self, decoder_inputs, encoder, encoder_mask, training=False):
        """Teacher-forced logits `[B, T, V]`: the decoder step run over the
        whole shifted target (`_time_loop`)."""
        cache = self.initial_cache(encoder, encoder_mask)
        embedded = self.dropout_layer(
            self._embed(self.target_embedding, ops.cast(decoder_inputs, "int32")),
            training=training,
        )

        # The recurrent state is the loop's carry; the encoder keys, values
        # and mask are constants the step closes over.
        names = ["attentional"] + [
            f"{kind}{i}" for i in range(self.num_hidden_layers) for kind in "hc"
        ]
        constants = {k: v for k, v in cache.items() if k not in names}

        def step(carry, x):
            _, state = self._step(x, dict(zip(names, carry), **constants))
            return tuple(state[name] for name in names), state["attentional"]

        outputs = _time_loop(
            step, tuple(cache[name] for name in names),
            ops.transpose(embedded, (1, 0, 2)), cache["attentional"],
        )
        outputs = ops.transpose(outputs, (1, 0, 2))
        return self._logits(self.dropout_layer(outputs, training=training))

    def decode_step(self, ids, cache, index):
        """Logits `[B, V]` of the next token after `ids [B, 1]`, and the cache."""
        embedded = self._embed(self.target_embedding, ops.cast(ids, "int32"))[:, 0, :]
        attentional, cache = self._step(embedded, cache)
        return self._logits(attentional), cache
