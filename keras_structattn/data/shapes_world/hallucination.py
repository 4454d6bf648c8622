"""Object hallucination in generated Shapes world captions, after CHAIR.

CHAIR (Rohrbach, Hendricks, Burns, Darrell and Saenko, 2018, "Object
Hallucination in Image Captioning", EMNLP, arXiv:1809.02156) counts the
objects a caption mentions that the image does not contain: CHAIR_i, the
share of mentioned objects that are hallucinated, and CHAIR_s, the share
of captions with at least one. Shapes world knows every object, so the
same counts are exact here, over *colour-shape pairs*: a caption that says
"a red circle" claims that the scene has a red circle, which is what a
shape -> colour confounder (`shapes_world.config.Bias`) tempts a model to
say whatever the image shows.

A claim is a colour word directly before a shape word, singular or plural,
with any of its synonyms ("a small red disc", "two blue boxes"): the
order of every generated noun phrase (size, colour, shape; see
`describe.noun_phrase`). Generic nouns ("a red shape") claim no shape.

For a bias `SHAPE=COLOR`, `biased_pair` counts the captions that claim
the biased pair on images without such an object, over all images and
over the *conflict* images: those holding the biased shape in another
colour only, where the confounder and the image disagree.
"""

import json

from keras_structattn.data.shapes_world.describe import PLURALS
from keras_structattn.data.shapes_world.describe import SHAPE_WORDS
from keras_structattn.data.shapes_world.scenes import COLOR_NAMES

# Every singular and plural word of a shape, to its shape.
_SHAPE_OF = {}
for _shape, _words in SHAPE_WORDS.items():
    for _word in _words:
        _SHAPE_OF[_word] = _shape
        _SHAPE_OF[PLURALS[_word]] = _shape


def colour_shape_claims(caption):
    """The `(colour, shape)` pairs a caption states, in order, repeats kept.

    Args:
        caption: a lower-case caption, words separated by spaces.

    Returns:
        A list of `(colour, shape)` with canonical names ("disc" is
        "circle").
    """
    words = caption.split()
    return [
        (words[i - 1], _SHAPE_OF[word])
        for i, word in enumerate(words)
        if i > 0 and word in _SHAPE_OF and words[i - 1] in COLOR_NAMES
    ]


def is_colour_or_shape(word):
    """Whether `word` names a colour or a shape (any synonym or plural)."""
    return word in COLOR_NAMES or word in _SHAPE_OF


def scene_pairs(scenes_file):
    """`{image_id: set of (colour, shape)}` of a `scenes_<split>.json`."""
    with open(scenes_file, encoding="utf-8") as f:
        scenes = json.load(f)["scenes"]
    return {
        int(scene["image_id"]): {(o["color"], o["shape"]) for o in scene["shapes"]}
        for scene in scenes
    }


def hallucination_rates(captions, pairs, bias=None):
    """CHAIR-style rates of colour-shape claims.

    Args:
        captions: `{image_id: caption}` (or a list of COCO results
            `{"image_id", "caption"}`).
        pairs: `{image_id: set of (colour, shape)}` (`scene_pairs`); every
            captioned image must be there.
        bias: optional `(shape, colour)` of the world's confounder.

    Returns:
        A dict: `captions`, `claims` (counts); `chair_i`, the share of claims
        absent from their scene; `chair_s`, the share of captions with at
        least one absent claim; with `bias`, `conflict_images` (images with
        the biased shape in other colours only), `biased_pair` (share of all
        captions claiming the absent biased pair) and
        `biased_pair_conflict` (the same share over the conflict images;
        None without any).

    Raises:
        KeyError: naming a captioned image without a scene.
    """
    if isinstance(captions, list):
        captions = {int(r["image_id"]): r["caption"] for r in captions}
    claims = absent_claims = hallucinating = 0
    biased = biased_conflict = conflict_images = 0
    for image_id, caption in captions.items():
        if image_id not in pairs:
            raise KeyError(f"image {image_id}: no scene (is it from another split?)")
        present = pairs[image_id]
        stated = colour_shape_claims(caption)
        absent = [p for p in stated if p not in present]
        claims += len(stated)
        absent_claims += len(absent)
        hallucinating += bool(absent)
        if bias is not None:
            shape, colour = bias
            says_biased = (colour, shape) in absent
            conflict = (colour, shape) not in present and any(s == shape for _, s in present)
            biased += says_biased
            conflict_images += conflict
            biased_conflict += says_biased and conflict
    count = len(captions)
    out = {
        "captions": count,
        "claims": claims,
        "chair_i": absent_claims / claims if claims else 0.0,
        "chair_s": hallucinating / count if count else 0.0,
    }
    if bias is not None:
        out.update(
            conflict_images=conflict_images,
            biased_pair=biased / count if count else 0.0,
            biased_pair_conflict=biased_conflict / conflict_images if conflict_images else None,
        )
    return out
