"""Scenes of Shapes world: shapes, text signs, placement and rendering.

A scene is 1-10 flat shapes (a shape, a colour and a size each) and 0-4
text signs on a dark canvas of `canvas_size` pixels, drawn with NumPy from a
fixed palette (no anti-aliasing, no noise, so every pixel has exactly one
palette colour).

**Boxes** are integer pixel boxes `(x1, y1, x2, y2)` with `x2`, `y2`
exclusive: the shape covers pixel columns `x1 .. x2 - 1`. Every shape
touches all four sides of its box (a pixel is inside a shape when its centre
is; the triangle gets half a pixel of slack so that its apex row is never
empty). The normalised box that `ops.spatial_relations` takes is the pixel
box divided by `canvas_size` (exact in binary floating point for 64 or 128).

**Layout.** Top-level shapes are at least one background pixel apart,
except deliberate partial overlaps (the layout's `overlap_probability`; the boxes share
5-30 % of the smaller box, never two shapes of one colour). Some small
shapes are *nested* in a large one of another colour: their box, grown by
one pixel, lies inside the large shape's pixels, so the small box is
strictly inside the large box (spatial label 2, "inside"). Shapes are drawn
largest first, so nested and overlapping small shapes are on top.

**Signs** are white plates holding 1-3 words of `LEXICON`, one OCR token per
word (the token box spans the word's columns and the plate's rows). A sign
is put *on* a large shape (strictly inside its visible pixels, one pixel of
margin), *next to* a shape (1-2 background pixels away on one side) or
*free*. The words are drawn as a per-letter code of ink pixels, not as
readable glyphs: models get the words from the OCR tokens, as TextVQA models
get them from an OCR system.
"""

import dataclasses
import functools

import numpy as np

from keras_structattn.data.shapes_world.layouts import get_layout

SHAPES = ("circle", "square", "triangle", "diamond")
# Palette RGB of the shape colours (far apart, none near the background).
COLORS = {
    "red": (220, 40, 40),
    "green": (40, 170, 60),
    "blue": (50, 90, 230),
    "yellow": (235, 210, 40),
    "purple": (150, 70, 200),
    "orange": (245, 140, 30),
}
COLOR_NAMES = tuple(COLORS)
SIZES = ("small", "large")
BACKGROUND_RGB = (25, 25, 25)
SIGN_PLATE_RGB = (240, 240, 240)
SIGN_INK_RGB = (0, 0, 0)
# Palette index of every pixel: 0 background, 1..6 the colours (in
# COLOR_NAMES order), 7 sign plate, 8 sign ink.
PALETTE = np.array([BACKGROUND_RGB, *COLORS.values(), SIGN_PLATE_RGB, SIGN_INK_RGB], np.uint8)
BACKGROUND, PLATE, INK = 0, 7, 8
NUM_PALETTE = len(PALETTE)

# The words of the signs (shop-front vocabulary, 3-8 letters).
LEXICON = (
    "open", "stop", "cafe", "shop", "exit", "sale", "hotel", "bank", "pizza",
    "taxi", "bus", "park", "museum", "fresh", "fish", "market", "hot", "dog",
    "bar", "book", "store", "coffee", "tea", "bakery", "garage", "school",
    "police", "post", "office", "gym", "zoo", "music", "bike", "rent", "food",
    "city", "north", "south", "river", "lake",
)

# Sizes, and how often large shapes, duplicates, nesting and overlaps occur:
# the world's layout (`layouts.LAYOUTS`).
# Below 5 pixels a circle, a diamond and a square can look alike.
MIN_SIDE = 5
OVERLAP_RANGE = (0.05, 0.30)  # intersection / smaller box area
# Number of words on a sign (1, 2, 3) and placement mode probabilities.
SIGN_WORD_PROBABILITIES = (0.4, 0.35, 0.25)
ON_SHAPE_WORD_PROBABILITIES = (0.6, 0.4, 0.0)
SIGN_PLACEMENTS = ("on", "next_to", "free")
SIGN_PLACEMENT_PROBABILITIES = (0.5, 0.3, 0.2)
NO_SIGN_PROBABILITY = 0.1
MAX_SCENE_TRIES = 50


@dataclasses.dataclass(frozen=True)
class Shape:
    """One shape of a scene.

    Attributes:
        shape: one of `SHAPES`.
        color: one of `COLOR_NAMES`.
        size: "small" or "large".
        box: pixel box `(x1, y1, x2, y2)`, `x2` and `y2` exclusive.
        parent: index of the shape it is nested in, or None.
    """

    shape: str
    color: str
    size: str
    box: tuple
    parent: int = None

    @property
    def side(self):
        return self.box[2] - self.box[0]


@dataclasses.dataclass(frozen=True)
class Sign:
    """One text sign: a plate with 1-3 words, one OCR token per word.

    Attributes:
        words: the true words.
        box: pixel box of the plate.
        token_boxes: one pixel box per word.
        placement: "on" (strictly inside shape `anchor`), "next_to" (beside
            shape `anchor`) or "free" (`anchor` None).
        anchor: shape index or None.
        ocr_words: the words as the simulated OCR reads them (equal to
            `words` unless `ocr_noise` > 0).
    """

    words: tuple
    box: tuple
    token_boxes: tuple
    placement: str
    anchor: int
    ocr_words: tuple


@dataclasses.dataclass
class Scene:
    """A generated scene, its image and its spatial relation labels.

    Attributes:
        split: "train", "val" or "test".
        index: scene index within the split.
        image_id: int id (see `config.image_id`).
        canvas: side in pixels.
        shapes: list of `Shape`.
        signs: list of `Sign`.
        image: uint8 `[canvas, canvas, 3]`.
        palette_map: uint8 `[canvas, canvas]` palette index of each pixel.
        labels: int32 `[M, M]` spatial labels (`spatial_relations_numpy`,
            default distance threshold) of the nodes `shapes + signs +
            tokens` in that order; see `node`.
    """

    split: str
    index: int
    image_id: int
    canvas: int
    shapes: list
    signs: list
    image: np.ndarray
    palette_map: np.ndarray
    labels: np.ndarray = None

    @property
    def tokens(self):
        """`[(sign index, word index)]` of every OCR token, in reading order."""
        return [(s, w) for s, sign in enumerate(self.signs) for w in range(len(sign.words))]

    def node(self, name):
        """Index into `labels` / `node_boxes()` of "o3" (shape 3), "s1", "t4"."""
        index = self._node_indices.get(name)
        if index is not None:
            return index
        kind, i = name[0], int(name[1:])
        if kind == "o":
            return i
        if kind == "s":
            return len(self.shapes) + i
        if kind == "t":
            return len(self.shapes) + len(self.signs) + i
        raise ValueError(f"Unknown node name {name!r}: expected o<i>, s<i> or t<i>.")

    @functools.cached_property
    def _node_indices(self):
        names = [f"o{i}" for i in range(len(self.shapes))]
        names += [f"s{i}" for i in range(len(self.signs))]
        names += [f"t{i}" for i in range(sum(len(s.words) for s in self.signs))]
        return {name: k for k, name in enumerate(names)}

    @functools.cached_property
    def _node_boxes(self):
        boxes = [o.box for o in self.shapes] + [s.box for s in self.signs]
        boxes += [b for s in self.signs for b in s.token_boxes]
        boxes = np.array(boxes, np.int64).reshape(-1, 4)
        boxes.flags.writeable = False
        return boxes

    def node_boxes(self):
        """int `[M, 4]` pixel boxes of shapes, signs, then tokens (read-only)."""
        return self._node_boxes

    def normalized_boxes(self, kind="o"):
        """float32 `[n, 4]` normalised boxes of the shapes ("o"), signs ("s")
        or tokens ("t")."""
        if kind == "o":
            boxes = [o.box for o in self.shapes]
        elif kind == "s":
            boxes = [s.box for s in self.signs]
        else:
            boxes = [b for s in self.signs for b in s.token_boxes]
        return (np.array(boxes, np.float64).reshape(-1, 4) / self.canvas).astype(np.float32)

    def to_dict(self):
        """A JSON-ready description (the `scenes_<split>.json` records)."""
        tokens = self.tokens
        return {
            "image_id": self.image_id,
            "split": self.split,
            "index": self.index,
            "width": self.canvas,
            "height": self.canvas,
            "shapes": [
                {
                    "shape": o.shape, "color": o.color, "size": o.size,
                    "box": list(o.box), "parent": o.parent,
                }
                for o in self.shapes
            ],
            "signs": [
                {
                    "words": list(s.words), "ocr_words": list(s.ocr_words),
                    "box": list(s.box), "token_boxes": [list(b) for b in s.token_boxes],
                    "placement": s.placement, "anchor": s.anchor,
                    "tokens": [t for t, (si, _) in enumerate(tokens) if si == k],
                }
                for k, s in enumerate(self.signs)
            ],
        }


# --------------------------------------------------------------------------
# Pixel geometry.


@functools.lru_cache(maxsize=None)
def shape_mask(shape, side):
    """bool `[side, side]`: the pixels of `shape` drawn in a box of `side`.

    A pixel belongs to the shape when its centre does (with a 1e-9
    tolerance); the triangle (apex up, base down) is widened by half a pixel
    so that its top row holds one or two pixels. Every shape touches all
    four sides of its box. The array is read-only (it is cached).
    """
    if shape not in SHAPES:
        raise ValueError(f"Argument `shape` must be one of {list(SHAPES)}. Received: {shape!r}")
    centres = np.arange(side) + 0.5
    x, y = centres[None, :], centres[:, None]
    half = side / 2.0
    eps = 1e-9
    if shape == "square":
        mask = np.ones((side, side), bool)
    elif shape == "circle":
        mask = (x - half) ** 2 + (y - half) ** 2 <= half * half + eps
    elif shape == "triangle":
        mask = np.abs(x - half) <= y / side * half + 0.5 + eps
    else:  # diamond
        mask = np.abs(x - half) + np.abs(y - half) <= half + eps
    mask = np.broadcast_to(mask, (side, side)).copy()
    mask.flags.writeable = False
    return mask


def _window_ok(mask, height, width):
    """bool `[rows - height + 1, cols - width + 1]`: whether
    `mask[r:r+height, c:c+width]` is all True (an integral-image test,
    exact); None if the window does not fit."""
    rows, cols = mask.shape
    if height > rows or width > cols or height < 1 or width < 1:
        return None
    integral = np.zeros((rows + 1, cols + 1), np.int64)
    integral[1:, 1:] = np.cumsum(np.cumsum(mask, 0), 1)
    sums = (
        integral[height:, width:]
        - integral[:-height, width:]
        - integral[height:, :-width]
        + integral[:-height, :-width]
    )
    return sums == height * width


def _windows(mask, height, width):
    """`[(row, col)]` top-left corners of the all-True windows of `mask`."""
    ok = _window_ok(mask, height, width)
    return np.zeros((0, 2), np.int64) if ok is None else np.argwhere(ok)


def _side_range(size, canvas, layout):
    low, high = layout.size_fractions[size]
    return max(MIN_SIDE, round(low * canvas)), max(MIN_SIDE, round(high * canvas))


def sign_geometry(canvas):
    """`(plate height, pixels per letter, gap between words)` in pixels."""
    return max(4, round(canvas / 16)), max(1, canvas // 64), max(1, canvas // 64)


def _sign_size(words, canvas):
    height, letter, gap = sign_geometry(canvas)
    width = 2 + sum(len(w) * letter for w in words) + gap * (len(words) - 1)
    return height, width


def _token_boxes(words, x1, y1, canvas):
    height, letter, gap = sign_geometry(canvas)
    boxes, x = [], x1 + 1
    for word in words:
        boxes.append((x, y1, x + len(word) * letter, y1 + height))
        x += len(word) * letter + gap
    return tuple(boxes)


def _separated(x1, y1, x2, y2, box):
    """Whether boxes (arrays allowed) are at least one pixel apart."""
    bx1, by1, bx2, by2 = box
    return (x1 >= bx2 + 1) | (x2 + 1 <= bx1) | (y1 >= by2 + 1) | (y2 + 1 <= by1)


# --------------------------------------------------------------------------
# Sampling.


def _sample_color(rng, shape, bias, split):
    if bias is not None and bias.applies_to(split) and shape == bias.shape:
        if rng.random() < bias.strength:
            return bias.color
        others = [c for c in COLOR_NAMES if c != bias.color]
        return others[rng.integers(len(others))]
    return COLOR_NAMES[rng.integers(len(COLOR_NAMES))]


def _sample_attributes(rng, config, split):
    layout = get_layout(config.layout)
    n = int(rng.integers(config.min_objects, config.max_objects + 1))
    attrs, large = [], 0
    for _ in range(n):
        shape = SHAPES[rng.integers(len(SHAPES))]
        color = _sample_color(rng, shape, config.bias, split)
        size = ("large" if rng.random() < layout.large_probability and large < layout.max_large
                else "small")
        large += size == "large"
        attrs.append([shape, color, size])
    # Exact duplicates (same shape, colour and size) make counting and
    # referring expressions need more than attributes.
    if n >= 2 and rng.random() < layout.duplicate_probability:
        j = int(rng.integers(1, n))
        i = int(rng.integers(0, j))
        if attrs[i][2] == "small" or large < layout.max_large or attrs[j][2] == "large":
            attrs[j] = list(attrs[i])
    return attrs


def _place_top_level(rng, order, sides, attrs, parents, canvas, overlap_probability):
    """Places the shapes of `order` (largest first); None if one has no room.

    Returns `{index: (x1, y1)}`.
    """
    placed = {}
    for k in order:
        side = sides[k]
        span = np.arange(canvas - side + 1)
        x1, y1 = span[None, :], span[:, None]
        x2, y2 = x1 + side, y1 + side
        free = np.ones((span.size, span.size), bool)
        for j, (px, py) in placed.items():
            free &= _separated(x1, y1, x2, y2, (px, py, px + sides[j], py + sides[j]))
        candidates = None
        # Partial overlaps only between shapes of different colours, never
        # with a shape that holds a nested one (it could hide the child).
        partners = [
            j for j in placed
            if attrs[j][1] != attrs[k][1] and j not in parents and k not in parents
        ]
        if partners and rng.random() < overlap_probability:
            j = partners[rng.integers(len(partners))]
            px, py = placed[j]
            box = (px, py, px + sides[j], py + sides[j])
            iw = np.clip(np.minimum(x2, box[2]) - np.maximum(x1, box[0]), 0, None)
            ih = np.clip(np.minimum(y2, box[3]) - np.maximum(y1, box[1]), 0, None)
            share = iw * ih / min(side, sides[j]) ** 2
            ok = (share >= OVERLAP_RANGE[0]) & (share <= OVERLAP_RANGE[1])
            for i, (qx, qy) in placed.items():
                if i != j:
                    ok &= _separated(x1, y1, x2, y2, (qx, qy, qx + sides[i], qy + sides[i]))
            flat = np.flatnonzero(ok)
            if flat.size:
                candidates = flat
        if candidates is None:
            candidates = np.flatnonzero(free)
        if candidates.size == 0:
            return None
        pick = candidates[rng.integers(candidates.size)]
        placed[k] = (int(pick % span.size), int(pick // span.size))
    return placed


def _try_scene(rng, config, split, counters):
    canvas, layout = config.canvas_size, get_layout(config.layout)
    attrs = _sample_attributes(rng, config, split)
    n = len(attrs)
    # (`integers(low, high)` excludes high: + 1 includes the top of the range.)
    ranges = [_side_range(a[2], canvas, layout) for a in attrs]
    sides = [int(rng.integers(low, high + 1)) for low, high in ranges]

    # Nesting: a small shape inside a large one of another colour, one child
    # per parent. The child's side shrinks until it fits in the parent's
    # pixels with a one-pixel margin (triangles and diamonds hold less).
    nested = {}  # child -> (parent, dx, dy)
    free_parents = [i for i in range(n) if attrs[i][2] == "large"]
    smalls = [i for i in range(n) if attrs[i][2] == "small"]
    rng.shuffle(smalls)
    min_child = max(MIN_SIDE, round(0.08 * canvas))
    for c in smalls:
        if not free_parents or rng.random() >= layout.nest_probability:
            continue
        options = [p for p in free_parents if attrs[p][1] != attrs[c][1]]
        if not options:
            counters["nest_same_color"] += 1
            continue
        p = options[rng.integers(len(options))]
        mask = shape_mask(attrs[p][0], sides[p])
        for side in range(sides[c], min_child - 1, -1):
            spots = _windows(mask, side + 2, side + 2)
            if len(spots):
                r, col = spots[rng.integers(len(spots))]
                nested[c] = (p, int(col) + 1, int(r) + 1)
                sides[c] = side
                free_parents.remove(p)
                break
        else:
            counters["nest_no_room"] += 1

    parents = {p for p, _, _ in nested.values()}
    top = [i for i in range(n) if i not in nested]
    order = sorted(top, key=lambda i: (-sides[i], i))
    placed = _place_top_level(rng, order, sides, attrs, parents, canvas,
                              layout.overlap_probability)
    if placed is None:
        return None
    shapes = []
    for i in range(n):
        if i in nested:
            p, dx, dy = nested[i]
            x1, y1 = placed[p][0] + dx, placed[p][1] + dy
            parent = p
        else:
            (x1, y1), parent = placed[i], None
        shapes.append(
            Shape(
                attrs[i][0], attrs[i][1], attrs[i][2],
                (x1, y1, x1 + sides[i], y1 + sides[i]),
                parent,
            )
        )

    image, palette_map, id_map = render_shapes(shapes, canvas)
    signs = _place_signs(rng, config, shapes, image, palette_map, id_map, counters)
    return shapes, signs, image, palette_map


def render_shapes(shapes, canvas):
    """Draws shapes largest first (index order among equals).

    Returns:
        `(image uint8 [C, C, 3], palette_map uint8 [C, C], id_map int [C, C])`
        with `id_map` the index of the visible shape, -1 for background.
    """
    palette_map = np.zeros((canvas, canvas), np.uint8)
    id_map = np.full((canvas, canvas), -1, np.int64)
    for k in draw_order(shapes):
        o = shapes[k]
        x1, y1, x2, y2 = o.box
        mask = shape_mask(o.shape, o.side)
        palette_map[y1:y2, x1:x2][mask] = 1 + COLOR_NAMES.index(o.color)
        id_map[y1:y2, x1:x2][mask] = k
    return PALETTE[palette_map], palette_map, id_map


def draw_order(shapes):
    """Indices of `shapes` in drawing order: larger sides first."""
    return sorted(range(len(shapes)), key=lambda i: (-shapes[i].side, i))


def _ink(word, letter, height):
    """bool `[height, len(word) * letter]`: the letter code of a word.

    Each letter is a column block whose interior rows are inked by the bits
    of a fixed hash of the letter (at least one row), on plate rows 1 ..
    height - 2.
    """
    inner = height - 2
    ink = np.zeros((height, len(word) * letter), bool)
    for i, ch in enumerate(word):
        code = (ord(ch) * 2654435761) >> 7
        rows = [r for r in range(inner) if (code >> r) & 1] or [inner // 2]
        for r in rows:
            ink[1 + r, i * letter : (i + 1) * letter] = True
    return ink


def _draw_sign(image, palette_map, id_map, words, x1, y1, canvas, sign_id):
    height, width = _sign_size(words, canvas)
    palette_map[y1 : y1 + height, x1 : x1 + width] = PLATE
    id_map[y1 : y1 + height, x1 : x1 + width] = sign_id
    _, letter, _ = sign_geometry(canvas)
    for word, (tx1, ty1, tx2, ty2) in zip(words, _token_boxes(words, x1, y1, canvas)):
        region = palette_map[ty1:ty2, tx1:tx2]
        region[_ink(word, letter, height)] = INK
    rows, cols = slice(y1, y1 + height), slice(x1, x1 + width)
    image[rows, cols] = PALETTE[palette_map[rows, cols]]


def _sign_words(rng, probabilities):
    k = 1 + int(rng.choice(3, p=probabilities))
    return tuple(LEXICON[i] for i in rng.choice(len(LEXICON), size=k, replace=False))


def _spots_on(id_map, host, shapes, height, width):
    """Plate corners strictly inside the visible pixels of shape `host`."""
    x1, y1, x2, y2 = shapes[host].box
    visible = id_map[y1:y2, x1:x2] == host
    spots = _windows(visible, height + 2, width + 2)
    return [(int(c) + x1 + 1, int(r) + y1 + 1) for r, c in spots]


def _spots_next_to(free, box, side, height, width):
    """Plate corners 1-2 background pixels beside `box` on `side`, the
    plate's centre within a quarter of the shape's side of its centre.

    `free[r, c]`: whether the plate grown by one pixel, with its corner at
    `(r, c)`, covers only background (the plate's own corner is (r+1, c+1)).
    """
    if free is None:
        return []
    x1, y1, x2, y2 = box
    cx2, cy2 = x1 + x2, y1 + y2  # twice the centre
    reach = (x2 - x1) / 4.0
    rows, cols = free.shape
    out = []
    for gap in (1, 2):
        if side in ("left", "right"):
            px = x2 + gap if side == "right" else x1 - gap - width
            if not 1 <= px <= cols:
                continue
            for py in range(1, rows + 1):
                if abs(2 * py + height - cy2) <= 2 * reach and free[py - 1, px - 1]:
                    out.append((px, py))
        else:
            py = y2 + gap if side == "below" else y1 - gap - height
            if not 1 <= py <= rows:
                continue
            for px in range(1, cols + 1):
                if abs(2 * px + width - cx2) <= 2 * reach and free[py - 1, px - 1]:
                    out.append((px, py))
    return out


def _place_signs(rng, config, shapes, image, palette_map, id_map, counters):
    canvas = config.canvas_size
    if config.max_signs == 0 or rng.random() < NO_SIGN_PROBABILITY:
        count = 0
    else:
        count = int(rng.integers(1, config.max_signs + 1))
    signs = []
    hosted = set()
    holders = {o.parent for o in shapes if o.parent is not None}
    for k in range(count):
        hosts = [
            i for i, o in enumerate(shapes)
            if o.size == "large" and i not in holders and i not in hosted
        ]
        # Without a free large shape a sign cannot go "on" one: the mode is
        # drawn among the other two (renormalised), not counted as a fallback.
        p = np.array(SIGN_PLACEMENT_PROBABILITIES) * [bool(hosts), 1.0, 1.0]
        mode = SIGN_PLACEMENTS[rng.choice(3, p=p / p.sum())]
        # Three words rarely fit inside a shape: signs meant to go on one
        # have one or two.
        words = _sign_words(
            rng, ON_SHAPE_WORD_PROBABILITIES if mode == "on" else SIGN_WORD_PROBABILITIES
        )
        height, width = _sign_size(words, canvas)
        spot = anchor = None
        if mode == "on":
            rng.shuffle(hosts)
            for host in hosts:
                spots = _spots_on(id_map, host, shapes, height, width)
                if spots:
                    spot, anchor = spots[rng.integers(len(spots))], host
                    break
            if spot is None:
                counters["sign_on_fallback"] += 1
                mode = "next_to"
        # Background everywhere under the plate grown by one pixel.
        free = _window_ok(id_map == -1, height + 2, width + 2)
        if mode == "next_to":
            anchors = [i for i, o in enumerate(shapes) if o.parent is None]
            rng.shuffle(anchors)
            for a in anchors:
                sides = ["left", "right", "above", "below"]
                rng.shuffle(sides)
                for side in sides:
                    spots = _spots_next_to(free, shapes[a].box, side, height, width)
                    if spots:
                        spot, anchor = spots[rng.integers(len(spots))], a
                        break
                if spot is not None:
                    break
            if spot is None:
                counters["sign_next_to_fallback"] += 1
                mode = "free"
        if mode == "free":
            corners = np.zeros((0, 2), np.int64) if free is None else np.argwhere(free)
            if len(corners):
                r, c = corners[rng.integers(len(corners))]
                spot = (int(c) + 1, int(r) + 1)
            else:
                counters["signs_dropped"] += 1
                continue
        x1, y1 = spot
        if mode == "on":
            hosted.add(anchor)
        _draw_sign(image, palette_map, id_map, words, x1, y1, canvas, -2 - k)
        signs.append(
            Sign(
                words=words,
                box=(x1, y1, x1 + width, y1 + height),
                token_boxes=_token_boxes(words, x1, y1, canvas),
                placement=mode,
                anchor=anchor,
                ocr_words=words,
            )
        )
    return signs


def _ocr_read(rng, word, noise):
    """`word` with one character substituted, deleted or inserted, with
    probability `noise` (a random draw is made either way, so the noise
    level never changes the layout of later scenes' draws)."""
    draw, op, pos, letter = rng.random(), rng.integers(3), rng.random(), rng.integers(26)
    if draw >= noise:
        return word
    i = int(pos * len(word))
    ch = chr(ord("a") + int(letter))
    if op == 0:
        return word[:i] + ch + word[i + 1 :]
    if op == 1 and len(word) > 1:
        return word[:i] + word[i + 1 :]
    return word[:i] + ch + word[i:]


def sample_scene(rng, config, split, index, image_id, counters):
    """Draws one scene.

    Args:
        rng: the scene's `np.random.Generator`.
        config: a `Config`.
        split: the split name (for the bias).
        index: scene index in the split.
        image_id: int image id.
        counters: a `collections.Counter` for retries and fallbacks:
            `scene_restarts` (no room for a shape: the scene is drawn
            again), `nest_same_color` / `nest_no_room` (a planned nesting
            dropped), `sign_on_fallback` / `sign_next_to_fallback` (a sign
            placed another way), `signs_dropped` (no room at all).

    Returns:
        A `Scene` with its relation labels.
    """
    from keras_structattn.data.shapes_world.relations import relation_labels

    for _ in range(MAX_SCENE_TRIES):
        result = _try_scene(rng, config, split, counters)
        if result is not None:
            break
        counters["scene_restarts"] += 1
    else:
        raise RuntimeError(
            f"Could not place {config.max_objects} shapes on a {config.canvas_size}-pixel "
            f"canvas in {MAX_SCENE_TRIES} tries: lower `max_objects` or raise `canvas_size`."
        )
    shapes, signs, image, palette_map = result
    signs = [
        dataclasses.replace(
            s, ocr_words=tuple(_ocr_read(rng, w, config.ocr_noise) for w in s.words)
        )
        for s in signs
    ]
    scene = Scene(split, index, image_id, config.canvas_size, shapes, signs, image, palette_map)
    scene.labels = relation_labels(scene.node_boxes(), scene.canvas)
    return scene
