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

    A subclass sets `model_type`, calls `super().__init__` (the `Seq2Seq`
    arguments), `_keep_config(locals())` and `_set_image_input(...)` in its
    constructor, and implements `build`, `encode`, `decode`, `initial_cache`
    and `decode_step`.

    Call arguments:
        inputs: `(features, decoder_inputs)`: the image features and the
            int caption `[B, T]` shifted right with 0, or `[B, K, T]` (K
            captions per image, each image encoded once).
        training: whether dropout is active.

    Returns:
        float32 logits `[B, T, vocab_size]` (`[B, K, T, vocab_size]`).
    """

    embeds_source = False

    def call(self, inputs, training=None):
        return decode_captions(self, inputs, training)
