"""`Captioner`: the base of the image captioners.

What `TransformerCaptioner`, `CATTCaptioner` and `UpDownCaptioner` share:
a `Seq2Seq` (`models/translation/base.py`: the caption embedding tied to
the softmax, `hparam_defaults`/`from_hparams`/`get_config`, the decoding
protocol) whose source is an image (`ImageInput`, `image_input.py`: a grid
or bottom-up regions, so no source embedding), called on `(features,
decoder_inputs)` with one caption `[B, T]` or K captions `[B, K, T]` per
image (`decode_captions`: each image encoded once). Their training values
are the family's (`hparams_sets.captioning_training_defaults`).
"""

from models.captioning.image_input import ImageInput
from models.captioning.image_input import decode_captions
from models.translation.base import Seq2Seq


class Captioner(ImageInput, Seq2Seq):
    """Base of the captioners (see the module docstring).

    A subclass sets `model_type` and `HPARAMS` (which hold the image input's
    `encoder_input`, `grid_height`, `grid_width` and, but for Up-Down,
    `grid_positions`), checks them in `_check_hparams(hp)`, makes its layers
    in `_make_captioner(hp)` (the image input is checked and kept first:
    `_set_image_input`), and implements `build`, `encode`, `decode`,
    `initial_cache` and `decode_step`.

    Call arguments:
        inputs: `(features, decoder_inputs)`: the image features and the
            int caption `[B, T]` shifted right with 0, or `[B, K, T]` (K
            captions per image, each image encoded once).
        training: whether dropout is active.

    Returns:
        float32 logits `[B, T, vocab_size]` (`[B, K, T, vocab_size]`).
    """

    embeds_source = False

    def _make_layers(self, hp):
        self._set_image_input(hp)
        self._make_captioner(hp)

    def _make_captioner(self, hp):
        """Makes the captioner's layers, the image input's hparams kept."""
        raise NotImplementedError

    @staticmethod
    def _input_shapes(input_shape):
        """`(feature_shape or None, target_shape [B, T])` of `build`'s
        `input_shape` (a `[B, K, T]` target, K captions per image, gives
        `(None, T)`)."""
        feature_shape, target_shape = None, (None, None)
        if input_shape is not None and len(input_shape) == 2:
            feature_shape, target_shape = input_shape
        target_shape = tuple(target_shape)
        if len(target_shape) == 3:  # [B, K, T]: K captions per image
            target_shape = (None, target_shape[2])
        return feature_shape, target_shape

    def call(self, inputs, training=None):
        return decode_captions(self, inputs, training)
