"""Fixed (not learned) features of Shapes world images, from pixels only.

Both feature kinds read the *palette map* of an image: the palette index of
each pixel (0 background, 1..6 the colours of `scenes.COLOR_NAMES`, 7 sign
plate, 8 sign ink), recovered from the RGB image by exact palette look-up
(`palette_indices`). Nothing else about the scene is used, so the features
carry what a perfect low-level detector would see, and nothing more.

**Region features** (`REGION_FEATURE_DIM` = 30 per box; the "bottom-up"
features of region-based models such as MCAN, MUAN, M4C):

- dims 0-8: palette histogram of the box's pixels (fractions, sums to 1).
- dims 9-24: 4x4 occupancy grid of the box: in each cell, the fraction of
  pixels whose palette index is the box's *main* index (the most frequent
  non-background index, lowest on ties; background if the box is all
  background).
- dims 25-29: normalised box `x1, y1, x2, y2` and area; left out with
  `geometry=False` (a world made with `Config.region_geometry=False`),
  for models that must learn positions from the boxes alone (MCAN sees
  none; MCAN+PA reads the boxes: docs/vqa.md).

**Grid features** (`grid_feature_dim()` = 36 per cell; for grid-based
captioners): the image is cut into `grid_size x grid_size` cells, each cell
into 2x2 sub-cells, and each sub-cell gives its 9-bin palette histogram;
a cell's feature is the four histograms (top-left, top-right, bottom-left,
bottom-right) concatenated. Cell edges are `floor(i * canvas / grid)`.
"""

import numpy as np

from keras_structattn.data.shapes_world.scenes import NUM_PALETTE
from keras_structattn.data.shapes_world.scenes import PALETTE

OCCUPANCY = 4
GEOMETRY_DIM = 5
REGION_FEATURE_DIM = NUM_PALETTE + OCCUPANCY * OCCUPANCY + GEOMETRY_DIM
SUB_CELLS = 2


def grid_feature_dim():
    """Size of one grid-cell feature (2x2 sub-cells x 9 palette bins).

    Returns:
        An int.
    """
    return SUB_CELLS * SUB_CELLS * NUM_PALETTE


def palette_indices(image):
    """uint8 `[H, W]` palette index of each pixel of an RGB image.

    Args:
        image: uint8 `[H, W, 3]`, every pixel a `PALETTE` colour.

    Returns:
        uint8 `[H, W]`.

    Raises:
        ValueError: if a pixel is not a palette colour.
    """
    image = np.asarray(image, np.uint8)
    codes = (
        (image[..., 0].astype(np.int64) << 16)
        | (image[..., 1].astype(np.int64) << 8)
        | image[..., 2]
    )
    palette_codes = (
        (PALETTE[:, 0].astype(np.int64) << 16)
        | (PALETTE[:, 1].astype(np.int64) << 8)
        | PALETTE[:, 2]
    )
    order = np.argsort(palette_codes)
    pos = np.clip(np.searchsorted(palette_codes[order], codes), 0, len(order) - 1)
    found = palette_codes[order][pos] == codes
    if not found.all():
        raise ValueError("Argument `image` holds colours outside the Shapes world palette.")
    return order[pos].astype(np.uint8)


def region_feature_dim(geometry=True):
    """Size of one region feature: `REGION_FEATURE_DIM`, 5 less without the
    box geometry."""
    return REGION_FEATURE_DIM if geometry else REGION_FEATURE_DIM - GEOMETRY_DIM


def region_features(palette_map, boxes, geometry=True):
    """Region features of pixel boxes (see the module docstring).

    Args:
        palette_map: uint8 `[H, W]` palette indices (square image).
        boxes: int `[N, 4]` pixel boxes `(x1, y1, x2, y2)`, `x2`/`y2`
            exclusive, non-empty.
        geometry: whether the last 5 dims (the normalised box and area)
            are included.

    Returns:
        float32 `[N, region_feature_dim(geometry)]`.
    """
    canvas = palette_map.shape[0]
    boxes = np.asarray(boxes, np.int64).reshape(-1, 4)
    out = np.zeros((len(boxes), REGION_FEATURE_DIM), np.float32)
    for n, (x1, y1, x2, y2) in enumerate(boxes):
        crop = palette_map[y1:y2, x1:x2]
        h, w = crop.shape
        hist = np.bincount(crop.ravel(), minlength=NUM_PALETTE).astype(np.float64)
        main = int(np.argmax(hist[1:])) + 1 if hist[1:].any() else 0
        rows = (np.arange(h) * OCCUPANCY) // h
        cols = (np.arange(w) * OCCUPANCY) // w
        cell = (rows[:, None] * OCCUPANCY + cols[None, :]).ravel()
        hits = np.bincount(cell, weights=(crop.ravel() == main), minlength=OCCUPANCY**2)
        sizes = np.bincount(cell, minlength=OCCUPANCY**2)
        occupancy = np.divide(hits, sizes, out=np.zeros_like(hits), where=sizes > 0)
        box_geometry = np.array([x1, y1, x2, y2, (x2 - x1) * (y2 - y1) / canvas],
                                np.float64) / canvas
        out[n] = np.concatenate([hist / hist.sum(), occupancy, box_geometry])
    return out if geometry else out[:, : region_feature_dim(False)]


def grid_features(palette_map, grid_size):
    """Grid features `[grid_size, grid_size, grid_feature_dim()]` float32.

    Args:
        palette_map: uint8 `[H, W]` palette indices.
        grid_size: cells per side.

    Returns:
        float32 `[grid_size, grid_size, grid_feature_dim()]`.
    """
    h, w = palette_map.shape
    fine = grid_size * SUB_CELLS
    # Pixel y belongs to fine row r iff floor(r h / fine) <= y < floor((r+1) h / fine).
    rows = np.searchsorted((np.arange(1, fine) * h) // fine, np.arange(h), side="right")
    cols = np.searchsorted((np.arange(1, fine) * w) // fine, np.arange(w), side="right")
    cell = (rows[:, None] * fine + cols[None, :]) * NUM_PALETTE + palette_map
    counts = np.bincount(cell.ravel(), minlength=fine * fine * NUM_PALETTE)
    counts = counts.reshape(fine, fine, NUM_PALETTE).astype(np.float32)
    counts /= np.maximum(counts.sum(-1, keepdims=True), 1.0)
    # [fine, fine, P] -> [grid, 2, grid, 2, P] -> [grid, grid, 2, 2, P].
    cells = counts.reshape(grid_size, SUB_CELLS, grid_size, SUB_CELLS, NUM_PALETTE)
    return cells.transpose(0, 2, 1, 3, 4).reshape(grid_size, grid_size, grid_feature_dim())
