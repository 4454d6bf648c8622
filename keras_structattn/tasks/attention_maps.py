"""Pictures of attention over an image: areas per word, regions, quadrants.

Li et al. (2019, arXiv:1810.10126, Fig. 3) show which image areas a
captioner with area attention attends to while it writes each word. Given
the caption-to-image attention weights over areas `[heads, T, num_areas]`
(`MultiHeadAreaAttention(return_attention_scores=True)`) and the layer's
`area_coordinates()`, `top_areas` picks, for each word, the area with the
largest weight averaged over heads, and `draw_word_areas` draws one panel
per word: the image with that area outlined and the word beneath, and given
the weights, lit by them (`spotlight`) above their colour scale.

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


def fitted_size(image_size, longest):
    """`(width, height)` of an image of `image_size` (w, h) scaled so that its
    longer side is `longest` pixels: real images keep their aspect ratio."""
    w, h = (max(1, int(v)) for v in image_size)
    scale = longest / max(w, h)
    return max(1, round(w * scale)), max(1, round(h * scale))


def area_rectangle(area, grid_shape, size):
    """The pixel rectangle of a grid area in a panel of `size` pixels.

    Args:
        area: `(row, col, height, width)` in grid cells.
        grid_shape: `(rows, cols)` of the grid.
        size: the panel side in pixels (square), or its `(width, height)`
            (the grid covers the whole image, whatever its aspect).

    Returns:
        `(x0, y0, x1, y1)` inclusive pixel corners.
    """
    row, col, height, width = (int(v) for v in area)
    rows, cols = grid_shape
    size_w, size_h = (size, size) if np.ndim(size) == 0 else size
    cell_h, cell_w = size_h / rows, size_w / cols
    return (round(col * cell_w), round(row * cell_h),
            round((col + width) * cell_w) - 1, round((row + height) * cell_h) - 1)


def draw_word_areas(image, words, areas, grid_shape, panel_size=PANEL_SIZE, title=(), *,
                    weights=None, coordinates=None):
    """One panel per word: the image, the word's top area outlined, the word.

    With `weights` (and their areas' `coordinates`) each panel is also a
    spotlight of the word's weights over the areas (`spotlight`: a pixel
    shows the largest weight of the areas that cover it, over the largest
    weight of any word, so that the panels compare), with the colour scale
    of that shading below the panels.

    Args:
        image: uint8 `[H, W, 3]` (any size; each panel scales its longer
            side to `panel_size`, keeping its aspect; the grid features
            cover the whole image).
        words: the T words (the query of each row of `areas`).
        areas: int `[T, 4]` from `top_areas`.
        grid_shape: `(rows, cols)` of the feature grid.
        panel_size: the panels' longer side in pixels.
        title: lines of text above the panels (the caption).
        weights: optional float `[T, num_areas]` (or `[heads, T,
            num_areas]`, averaged over heads), the words' weights over the
            areas.
        coordinates: int `[num_areas, 4]` `(row, col, height, width)` of
            the areas of `weights`.

    Returns:
        A `PIL.Image.Image` (RGB).
    """
    from PIL import Image
    from PIL import ImageDraw

    if len(words) != len(areas):
        raise ValueError(f"{len(words)} words but {len(areas)} areas: one area per word")
    if (weights is None) != (coordinates is None):
        raise ValueError("`weights` and `coordinates` go together (the areas' weights)")
    base = Image.fromarray(np.asarray(image, np.uint8)).convert("RGB")
    panel_w, panel_h = fitted_size(base.size, panel_size)
    base = base.resize((panel_w, panel_h), Image.NEAREST)
    panels = [base] * len(words)
    if weights is not None:
        weights = np.asarray(weights, np.float64)
        weights = weights.mean(axis=0) if weights.ndim == 3 else weights
        if weights.shape != (len(words), len(coordinates)):
            raise ValueError(f"`weights` must be [T={len(words)}, num_areas="
                             f"{len(coordinates)}]; got shape {weights.shape}")
        rectangles = [area_rectangle(a, grid_shape, (panel_w, panel_h)) for a in coordinates]
        pixels = np.asarray(base, np.float64)
        largest = float(weights.max())
        panels = [spotlight(pixels, rectangles, row, largest) for row in weights]
    columns = min(PANELS_PER_ROW, max(1, len(words)))
    rows = max(1, -(-len(words) // columns))
    height = panel_h + LABEL_HEIGHT
    header = TITLE_LINE * len(title) + (6 if title else 0)
    scale = SCALE_HEIGHT if weights is not None else 0
    canvas = Image.new("RGB", (max(columns * panel_w, 300), rows * height + header + scale),
                       (255, 255, 255))
    draw = ImageDraw.Draw(canvas)
    _title(draw, title, 0, 0)
    for k, (word, area, panel) in enumerate(zip(words, areas, panels)):
        left, top = (k % columns) * panel_w, header + (k // columns) * height
        canvas.paste(panel, (left, top))
        x0, y0, x1, y1 = area_rectangle(area, grid_shape, (panel_w, panel_h))
        outline(draw, (left + x0, top + y0, left + x1, top + y1), OUTLINE)
        draw.text((left + 4, top + panel_h + 3), word, fill=(0, 0, 0))
    if weights is not None:
        weight_scale(draw, 4, header + rows * height + 2, min(160, canvas.width - 8), largest)
    return canvas


def outline(draw, rectangle, color):
    """A box outline that shows on any background: `color` inside a black
    edge (a red outline alone vanishes on a red shape)."""
    x0, y0, x1, y1 = rectangle
    draw.rectangle((x0 - 1, y0 - 1, x1 + 1, y1 + 1), outline=(0, 0, 0), width=4)
    draw.rectangle((x0, y0, x1, y1), outline=tuple(color), width=2)


SCALE_HEIGHT = 30  # a colour scale's strip and its labels


def draw_scale(draw, left, top, width, colors, low, high, what):
    """A colour scale: the strip of `colors(values in [0, 1])` from `low`
    to `high` (their labels at its ends) and what it measures."""
    strip = colors(np.linspace(0.0, 1.0, max(2, width)))
    for x, color in enumerate(strip):
        draw.line((left + x, top, left + x, top + 9), fill=tuple(int(c) for c in color))
    draw.rectangle((left, top, left + width - 1, top + 9), outline=(0, 0, 0))
    draw.text((left, top + 12), low, fill=(0, 0, 0))
    draw.text((left + width - 6 * len(high), top + 12), high, fill=(0, 0, 0))
    draw.text((left + width // 2 - 3 * len(what), top + 12), what, fill=(0, 0, 0))


def brightness_colors(values):
    """The spotlight's shading as a scale: grey at `DIM` to white."""
    v = DIM + (1.0 - DIM) * np.clip(np.asarray(values, np.float64), 0.0, 1.0)
    return np.round(255 * np.repeat(v[..., None], 3, -1)).astype(np.uint8)


def spotlight(pixels, rectangles, weights, largest):
    """An image dimmed to `DIM` of its brightness, each rectangle lit back
    in proportion to its weight: a pixel shows `DIM + (1 - DIM) * w /
    largest` of its colour, w the largest weight of the rectangles that
    cover it.

    Args:
        pixels: float `[H, W, 3]`, the image.
        rectangles: `(x0, y0, x1, y1)` inclusive pixel corners, one per weight.
        weights: float `[N]` (negative ones light nothing).
        largest: the weight shown at full brightness (> 0; else nothing is lit).

    Returns:
        A `PIL.Image.Image` (RGB).
    """
    from PIL import Image

    light = np.zeros(pixels.shape[:2])
    if largest > 0:
        for (x0, y0, x1, y1), weight in zip(rectangles, weights):
            region = light[y0:y1 + 1, x0:x1 + 1]
            np.maximum(region, max(0.0, float(weight)) / largest, out=region)
    scale = DIM + (1.0 - DIM) * light
    return Image.fromarray(np.round(pixels * scale[..., None]).astype(np.uint8))


def weight_scale(draw, left, top, width, largest):
    """The colour scale of a `spotlight` whose full brightness is `largest`."""
    lit = largest > 0
    draw_scale(draw, left, top, width, brightness_colors, "0",
               f"{largest:.2g}" if lit else "-", "weight" if lit else "no weight")


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
        size: the image's longer side in pixels (its aspect is kept).
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
    width, height = fitted_size(base.size, size)
    pixels = np.asarray(base.resize((width, height), Image.NEAREST), np.float64)
    top = float(weights.max()) if len(weights) else 0.0
    corner = np.array([width - 1, height - 1, width - 1, height - 1], np.float64)
    shaded = spotlight(pixels, [tuple(int(round(v)) for v in box * corner) for box in boxes],
                       weights, top)
    if outlines is None:
        outlines = [(boxes[int(np.argmax(weights))], OUTLINE)] if len(weights) else []
    for box, color in outlines:
        outline(ImageDraw.Draw(shaded), tuple(np.asarray(box, np.float64) * corner), color)
    header = TITLE_LINE * len(title) + (6 if title else 0)
    canvas = Image.new("RGB", (max(width, 200), height + header + SCALE_HEIGHT),
                       (255, 255, 255))
    canvas.paste(shaded, (0, header))
    draw = ImageDraw.Draw(canvas)
    _title(draw, title, 0, 0)
    # What the shading means: a box's brightness is its weight over the largest.
    weight_scale(draw, 4, header + height + 4, min(160, canvas.width - 8), top)
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
    bottom = origin + offset(m + n) + 4
    grown = Image.new("RGB", (max(width, 170), bottom + SCALE_HEIGHT), (255, 255, 255))
    grown.paste(canvas.crop((0, 0, width, bottom)), (0, 0))
    draw_scale(ImageDraw.Draw(grown), 4, bottom, 160, heat_colors, "0", f"{top:.2g}",
               "weight")
    return grown


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
