"""Pictures of area attention over an image: the most attended area per word.

Li et al. (2019, arXiv:1810.10126, Fig. 3) show which image areas a
captioner with area attention attends to while it writes each word. Given
the caption-to-image attention weights over areas `[heads, T, num_areas]`
(`MultiHeadAreaAttention(return_attention_scores=True)`) and the layer's
`area_coordinates()`, `top_areas` picks, for each word, the area with the
largest weight averaged over heads, and `draw_word_areas` draws one panel
per word: the image with that area outlined and the word beneath.

Drawing needs Pillow (the `vision` extra), imported on first use.
"""

import numpy as np

OUTLINE = (255, 32, 32)
PANEL_SIZE = 192
LABEL_HEIGHT = 18
PANELS_PER_ROW = 6


def top_areas(weights, coordinates):
    """The most attended area of each query, averaged over heads.

    Args:
        weights: float `[heads, T, num_areas]` (or `[T, num_areas]`).
        coordinates: int `[num_areas, 4]` of `(row, col, height, width)`.

    Returns:
        int `[T, 4]`: the `(row, col, height, width)` of each query's top
        area.
    """
    weights = np.asarray(weights, np.float64)
    if weights.ndim == 3:
        weights = weights.mean(axis=0)
    coordinates = np.asarray(coordinates)
    if weights.ndim != 2 or weights.shape[-1] != len(coordinates):
        raise ValueError(
            f"`weights` must be [heads, T, num_areas] with num_areas = {len(coordinates)} "
            f"(the rows of `coordinates`); got shape {np.shape(weights)}"
        )
    return coordinates[np.argmax(weights, axis=-1)]


def area_rectangle(area, grid_shape, size):
    """The pixel rectangle of a grid area in a square panel of `size` pixels.

    Args:
        area: `(row, col, height, width)` in grid cells.
        grid_shape: `(rows, cols)` of the grid.
        size: the panel side in pixels.

    Returns:
        `(x0, y0, x1, y1)` inclusive pixel corners.
    """
    row, col, height, width = (int(v) for v in area)
    rows, cols = grid_shape
    cell_h, cell_w = size / rows, size / cols
    return (round(col * cell_w), round(row * cell_h),
            round((col + width) * cell_w) - 1, round((row + height) * cell_h) - 1)


def draw_word_areas(image, words, areas, grid_shape, panel_size=PANEL_SIZE):
    """One panel per word: the image, the word's top area outlined, the word.

    Args:
        image: uint8 `[H, W, 3]` (any size; each panel scales it to
            `panel_size` square, as the grid features cover the whole
            image).
        words: the T words (the query of each row of `areas`).
        areas: int `[T, 4]` from `top_areas`.
        grid_shape: `(rows, cols)` of the feature grid.
        panel_size: panel side in pixels.

    Returns:
        A `PIL.Image.Image` (RGB).
    """
    from PIL import Image
    from PIL import ImageDraw

    if len(words) != len(areas):
        raise ValueError(f"{len(words)} words but {len(areas)} areas: one area per word")
    base = Image.fromarray(np.asarray(image, np.uint8)).convert("RGB")
    base = base.resize((panel_size, panel_size), Image.NEAREST)
    columns = min(PANELS_PER_ROW, max(1, len(words)))
    rows = max(1, -(-len(words) // columns))
    height = panel_size + LABEL_HEIGHT
    canvas = Image.new("RGB", (columns * panel_size, rows * height), (255, 255, 255))
    draw = ImageDraw.Draw(canvas)
    for k, (word, area) in enumerate(zip(words, areas)):
        left, top = (k % columns) * panel_size, (k // columns) * height
        canvas.paste(base, (left, top))
        x0, y0, x1, y1 = area_rectangle(area, grid_shape, panel_size)
        draw.rectangle((left + x0, top + y0, left + x1, top + y1), outline=OUTLINE, width=2)
        draw.text((left + 4, top + panel_size + 3), word, fill=(0, 0, 0))
    return canvas
