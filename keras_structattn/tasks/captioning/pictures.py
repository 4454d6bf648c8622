"""Pictures of a captioner's attention streams, word by word.

A CATT captioner (Yang et al., 2021, arXiv:2103.03493) attends to the
image with two streams: in-sample attention (IS) over the image's regions,
and cross-sample attention (CS), over the encoder's CS output (one entry
per region: Transformer+CATT) or over a global visual dictionary (Up-Down
+CATT). `draw_caption_streams` draws, for a few words of a caption (colours
and shapes first, the words a colour-shape confounder acts on), the IS
weights as a spotlight over the region boxes beside the CS ones
(`keras_structattn.tasks.attention_maps`). `draw_caption_attention` draws
a captioner's attention for one caption: those streams, or for a grid
captioner with area attention the most attended area of each word.

Drawing needs Pillow (the `vision` extra), imported on first use.
"""

import numpy as np
from keras import ops

from keras_structattn.data.shapes_world.hallucination import is_colour_or_shape
from keras_structattn.tasks import attention_maps

DRAWN_WORDS = 4


def drawn_positions(words, count=DRAWN_WORDS):
    """The positions of the words to draw: the first `count` colour or
    shape words, else the first `count` words."""
    chosen = [t for t, w in enumerate(words) if is_colour_or_shape(w)][:count]
    return chosen or list(range(min(count, len(words))))


def caption_line(words):
    """The caption the picture is of, for its title."""
    return "caption: " + (" ".join(w for w in words if w != "<eos>") or "(empty)")


def draw_caption_streams(image, words, boxes, mask, is_weights, cs_weights=None,
                         cs_over="regions"):
    """IS attention beside CS attention, one row per drawn word.

    Args:
        image: uint8 `[H, W, 3]`.
        words: the caption's words, `<eos>` last (one per attention row).
        boxes: float `[R, 4]`, the regions' boxes (as the features').
        mask: bool `[R]`, the real regions.
        is_weights: float `[T, R]`, each word's IS weights over the regions,
            or `[heads, T, R]` (averaged over heads).
        cs_weights: float `[T, R]` (`cs_over="regions"`) or `[T, K]` (over
            a dictionary's entries, `cs_over="dictionary"`), or either with
            a leading heads axis; None draws the IS attention alone.
        cs_over: what the CS weights are over.

    Returns:
        A `PIL.Image.Image` (RGB).
    """
    is_weights, cs_weights = (w if w is None or np.ndim(w) == 2 else np.asarray(w).mean(0)
                              for w in (is_weights, cs_weights))
    real = np.asarray(mask, bool)
    boxes = np.asarray(boxes)[real]
    rows = []
    caption = caption_line(words)
    for k, t in enumerate(drawn_positions(words)):
        word = f'"{words[t]}"'
        left = attention_maps.draw_region_weights(
            image, boxes, is_weights[t][real],
            title=([caption] if k == 0 else []) + [f"{word}: in-sample (regions)"])
        if cs_weights is None:
            right = None
        elif cs_over == "regions":
            right = attention_maps.draw_region_weights(
                image, boxes, cs_weights[t][real], title=[f"{word}: cross-sample ([V_C]_E)"])
        else:
            right = attention_maps.draw_dictionary_weights(
                {f"{word}: the visual dictionary": cs_weights[t]}, left.height)
        rows.append(left if right is None else attention_maps.beside(left, right))
    return attention_maps.stacked(rows)


def draw_caption_attention(model, features, decoder_inputs, words, image, *, layer=0,
                           grid_shape=None):
    """A captioner's caption-to-image attention over one image, as a picture.

    With `grid_shape`, a grid captioner's (the Transformer captioner with
    area attention): the most attended area of each word, averaged over
    heads, outlined on a spotlight of the word's weights over all areas,
    with its colour scale (`attention_maps.draw_word_areas`), from its
    `encdec_attention(features, decoder_inputs, layer)` and
    `area_coordinates(layer)`. Otherwise a region captioner's IS and CS
    streams (`draw_caption_streams`): an Up-Down captioner's
    `attention_weights(features, decoder_inputs)` (CS over its dictionary),
    else a CATT captioner's `encdec_attention(...)` pair (CS over the
    regions).

    Args:
        model: the captioner.
        features: its encoder input for the one image (a batch of 1; a
            regions dict has `boxes` and `mask`).
        decoder_inputs: int `[1, T]`, the caption shifted right with 0.
        words: the caption's `T` words, `<eos>` last.
        image: uint8 `[H, W, 3]`.
        layer: the decoder layer (block) whose attention is drawn.
        grid_shape: `(height, width)` of the feature grid, for a grid model.

    Returns:
        A `PIL.Image.Image` (RGB).
    """
    def first(weights):
        return None if weights is None else ops.convert_to_numpy(weights)[0]

    if grid_shape is not None:
        weights = first(model.encdec_attention(features, decoder_inputs, layer=layer))
        coordinates = model.area_coordinates(layer)
        areas = attention_maps.top_areas(weights, coordinates)
        return attention_maps.draw_word_areas(image, words, areas, grid_shape=grid_shape,
                                              title=[caption_line(words)], weights=weights,
                                              coordinates=coordinates)
    if hasattr(model, "attention_weights"):
        weights, cs_over = model.attention_weights(features, decoder_inputs), "dictionary"
    else:
        weights = model.encdec_attention(features, decoder_inputs, layer=layer)
        cs_over = "regions"
    is_weights, cs_weights = (first(w) for w in weights)
    return draw_caption_streams(image, words, features["boxes"][0], features["mask"][0],
                                is_weights, cs_weights, cs_over=cs_over)
