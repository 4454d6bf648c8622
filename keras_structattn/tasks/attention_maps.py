"""Pictures of attention over an image: areas per word, regions, quadrants.

Li et al. (2019, arXiv:1810.10126, Fig. 3) show which image areas a
captioner with area attention attends to while it writes each word. Given
the caption-to-image attention weights over areas `[heads, T, num_areas]`
(`MultiHeadAreaAttention(return_attention_scores=True)`) and the layer's
`area_coordinates()`, `top_areas` picks, for each word, the area with the
largest weight averaged over heads, and `draw_word_areas` draws one panel
per word: the image with that area outlined and the word beneath.

For region features (VQA, grounding), `draw_region_weights` lights each
region box by its attention weight (MCAN's AttFlat weights, Yu et al.,
2019, arXiv:1906.10770, Fig. 7; MUAN's answer-token attention), and
`draw_quadrants` draws the four parts of a unified attention map
(text-text, text-visual, visual-text, visual-visual: MUAN, Yu et al., 2019,
arXiv:1908.04107, Fig. 6) as heat maps; `beside` puts two pictures side by
side and `stacked` one above another. `draw_dictionary_weights` draws
weights over entries that have no place in the image, CATT's cross-sample
attention over a global dictionary (Yang et al., 2021, arXiv:2103.03493):
the top entries as bars.

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


DIM = 0.25  # the brightness of what no region lights
TARGET_OUTLINE = (0, 200, 0)
TITLE_LINE = 14


def _title(draw, lines, left, top):
    for k, line in enumerate(lines):
        draw.text((left + 4, top + 2 + k * TITLE_LINE), line, fill=(0, 0, 0))


def draw_region_weights(image, boxes, weights, title=(), size=PANEL_SIZE * 2, outlines=None):
    """The image as a spotlight of the regions' attention weights.

    The image is dimmed to `DIM` of its brightness, and each region's box
    is lit back in proportion to its weight: a pixel of a box of weight w
    shows `DIM + (1 - DIM) * w / max(w)` of its colour (where boxes
    overlap, the larger weight wins), so the most attended region is at
    full brightness, and it is outlined in red (unless `outlines` says what
    to outline).

    Args:
        image: uint8 `[H, W, 3]`.
        boxes: float `[N, 4]` normalised `[x1, y1, x2, y2]` (real regions
            only).
        weights: float `[N]`, the regions' attention weights.
        title: lines of text above the image (question, answer).
        size: the image side in pixels (it is scaled to a square).
        outlines: optional `[(box, rgb)]`: boxes to outline instead of the
            top region (grounding: the predicted and the referred box).

    Returns:
        A `PIL.Image.Image` (RGB).
    """
    from PIL import Image
    from PIL import ImageDraw

    boxes = np.asarray(boxes, np.float64).reshape(-1, 4)
    weights = np.asarray(weights, np.float64).reshape(-1)
    if len(boxes) != len(weights):
        raise ValueError(f"{len(boxes)} boxes but {len(weights)} weights: one weight per box")
    base = Image.fromarray(np.asarray(image, np.uint8)).convert("RGB")
    pixels = np.asarray(base.resize((size, size), Image.NEAREST), np.float64)
    light = np.zeros((size, size))
    top = float(weights.max()) if len(weights) and weights.max() > 0 else 1.0
    for box, weight in zip(boxes, weights):
        x0, y0, x1, y1 = (int(round(float(v) * (size - 1))) for v in box)
        region = light[y0:y1 + 1, x0:x1 + 1]
        np.maximum(region, max(0.0, weight) / top, out=region)
    scale = DIM + (1.0 - DIM) * light
    shaded = Image.fromarray(np.round(pixels * scale[..., None]).astype(np.uint8))
    if outlines is None:
        outlines = [(boxes[int(np.argmax(weights))], OUTLINE)] if len(weights) else []
    for box, color in outlines:
        x0, y0, x1, y1 = (float(v) * (size - 1) for v in box)
        ImageDraw.Draw(shaded).rectangle((x0, y0, x1, y1), outline=tuple(color), width=2)
    header = TITLE_LINE * len(title) + (6 if title else 0)
    canvas = Image.new("RGB", (size, size + header), (255, 255, 255))
    canvas.paste(shaded, (0, header))
    _title(ImageDraw.Draw(canvas), title, 0, 0)
    return canvas


def heat_colors(values):
    """White (0) to dark red (1) for values in [0, 1]: uint8 `[..., 3]`."""
    v = np.clip(np.asarray(values, np.float64), 0.0, 1.0)[..., None]
    low, high = np.array([255.0, 255.0, 255.0]), np.array([160.0, 0.0, 0.0])
    return np.round(low + (high - low) * v).astype(np.uint8)


def draw_quadrants(scores, text_length, words, num_regions, cell=14):
    """The four quadrants of a unified attention map as heat maps.

    Args:
        scores: float `[heads, S, S]` or `[S, S]` attention weights of the
            unified sequence `[text; regions]` (averaged over heads).
        text_length: m, the number of text positions first in it.
        words: labels of the real text positions, the first `len(words)`
            (<= m) of them; padded text positions are left out.
        num_regions: real regions after the text (padding left out).
        cell: pixels per attention weight.

    Returns:
        A `PIL.Image.Image`: A_TT and A_TV on top, A_VT and A_VV below,
        each normalised by the largest weight of the map, queries as rows.
    """
    from PIL import Image
    from PIL import ImageDraw

    scores = np.asarray(scores, np.float64)
    if scores.ndim == 3:
        scores = scores.mean(axis=0)
    m = int(text_length)
    if scores.ndim != 2 or scores.shape[0] != scores.shape[1] or m > scores.shape[0]:
        raise ValueError(f"`scores` must be [S, S] (or [heads, S, S]) with S >= text_length "
                         f"{m}; got shape {np.shape(scores)}")
    words = [str(w) for w in list(words)[:m]]
    keep = np.r_[np.arange(len(words)), m + np.arange(min(num_regions, scores.shape[0] - m))]
    scores = scores[np.ix_(keep, keep)]
    m = len(words)
    top = scores.max() if scores.max() > 0 else 1.0
    colors = heat_colors(scores / top)
    n = len(keep) - m
    label = 60
    gap = 6
    width = label + (m + n) * cell + gap
    canvas = Image.new("RGB", (width, label + (m + n) * cell + gap + 2 * TITLE_LINE),
                       (255, 255, 255))
    draw = ImageDraw.Draw(canvas)
    _title(draw, ["unified attention (rows: queries)", "text | regions"], 0, 0)
    origin = 2 * TITLE_LINE + 4

    def offset(index):
        return index * cell + (gap if index >= m else 0)

    for i in range(m + n):
        for j in range(m + n):
            x, y = label + offset(j), origin + offset(i)
            draw.rectangle((x, y, x + cell - 1, y + cell - 1), fill=tuple(colors[i, j]))
    names = words + [f"r{k}" for k in range(n)]
    for i, name in enumerate(names):
        draw.text((2, origin + offset(i)), name[:9], fill=(0, 0, 0))
    return canvas


def beside(left, right):
    """Two pictures side by side on white, tops aligned."""
    from PIL import Image

    canvas = Image.new("RGB", (left.width + right.width + 8, max(left.height, right.height)),
                       (255, 255, 255))
    canvas.paste(left, (0, 0))
    canvas.paste(right, (left.width + 8, 0))
    return canvas


def stacked(pictures):
    """Pictures one above another on white, left-aligned."""
    from PIL import Image

    width = max(p.width for p in pictures)
    height = sum(p.height for p in pictures) + 8 * (len(pictures) - 1)
    canvas = Image.new("RGB", (width, height), (255, 255, 255))
    top = 0
    for picture in pictures:
        canvas.paste(picture, (0, top))
        top += picture.height + 8
    return canvas


def draw_dictionary_weights(weights, height, top=10, width=300):
    """CS-ATT weights over dictionaries as bar charts: per dictionary, its
    `top` most attended entries (entry index, weight), the longest bar the
    largest weight of that dictionary, with the share of the weight the
    whole top takes.

    Args:
        weights: `{title: float [K]}`, one chart each, stacked.
        height: the picture's height in pixels (at least what the charts need).
        top: entries shown per dictionary.
        width: the picture's width in pixels.

    Returns:
        A `PIL.Image.Image` (RGB).
    """
    from PIL import Image
    from PIL import ImageDraw

    bar, line = 12, 14
    needed = sum(2 * line + top * (bar + 2) + 10 for _ in weights)
    canvas = Image.new("RGB", (width, max(height, needed)), (255, 255, 255))
    draw = ImageDraw.Draw(canvas)
    y = 2
    for title, values in weights.items():
        values = np.asarray(values, np.float64)
        order = np.argsort(-values, kind="stable")[:top]
        draw.text((4, y), f"CS-ATT: {title}"[:52], fill=(0, 0, 0))
        draw.text((4, y + line), f"top {len(order)} of {len(values)} entries: "
                  f"{100 * values[order].sum():.1f}% of the weight", fill=(0, 0, 0))
        y += 2 * line
        largest = values[order[0]] if len(order) and values[order[0]] > 0 else 1.0
        for index in order:
            length = int(round((width - 120) * max(0.0, values[index]) / largest))
            draw.text((4, y), f"#{index}", fill=(0, 0, 0))
            draw.rectangle((48, y, 48 + max(1, length), y + bar - 1), fill=(160, 0, 0))
            draw.text((52 + length, y), f"{values[index]:.3f}", fill=(0, 0, 0))
            y += bar + 2
        y += 10
    return canvas
