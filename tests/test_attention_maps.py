"""Attention pictures (`keras_structattn.tasks.attention_maps`): the top area per
word is the argmax of the head-averaged weights, and the PNG outlines that
area's cells."""

import numpy as np
import pytest

from keras_structattn.ops.areas import area_coordinates
from keras_structattn.tasks import attention_maps

PIL = pytest.importorskip("PIL")


def test_top_area_is_the_argmax_of_the_head_mean():
    rng = np.random.default_rng(0)
    coordinates = area_coordinates(16, 4, 2, 2)
    weights = rng.random((3, 5, len(coordinates)))
    got = attention_maps.top_areas(weights, coordinates)
    for t in range(5):
        best = max(range(len(coordinates)), key=lambda a: weights[:, t, a].sum())
        np.testing.assert_array_equal(got[t], coordinates[best])


def test_png_outlines_the_top_area(tmp_path):
    grid = (4, 4)
    coordinates = area_coordinates(16, 4, 2, 2)
    # Word 0 attends the 2x2 area at row 1, column 2; word 1 the cell (3, 0).
    wanted = [(1, 2, 2, 2), (3, 0, 1, 1)]
    weights = np.zeros((2, 2, len(coordinates)))
    for t, area in enumerate(wanted):
        index = [tuple(c) for c in coordinates].index(area)
        weights[:, t, index] = 1.0
    areas = attention_maps.top_areas(weights, coordinates)
    image = np.zeros((32, 32, 3), np.uint8)  # black: the outline is the only red
    picture = attention_maps.draw_word_areas(image, ["disc", "<eos>"], areas, grid,
                                             panel_size=64)
    path = tmp_path / "attention.png"
    picture.save(path)
    pixels = np.asarray(PIL.Image.open(path).convert("RGB"))
    red = np.all(pixels == attention_maps.OUTLINE, axis=-1)
    for k, (row, col, height, width) in enumerate(wanted):
        panel = red[:64, k * 64:(k + 1) * 64]
        ys, xs = np.nonzero(panel)
        # 16-pixel cells: the outline spans exactly the area's cells.
        assert (xs.min(), ys.min()) == (col * 16, row * 16)
        assert (xs.max(), ys.max()) == ((col + width) * 16 - 1, (row + height) * 16 - 1)


def test_word_areas_lit_by_their_weights_above_a_colour_scale():
    """Given the weights, each panel is a spotlight of them: a pixel shows
    the largest weight of the areas covering it over the largest of any
    word (one scale for every panel), drawn below the panels."""
    grid, size = (4, 4), 64  # 16-pixel cells
    coordinates = [tuple(c) for c in area_coordinates(16, 4, 2, 2)]
    weights = np.zeros((2, len(coordinates)))
    weights[0, coordinates.index((1, 2, 2, 2))] = 0.6
    weights[0, coordinates.index((0, 0, 1, 1))] = 0.2
    weights[1, coordinates.index((3, 0, 1, 1))] = 0.3
    areas = attention_maps.top_areas(weights, coordinates)
    image = np.full((32, 32, 3), 200, np.uint8)
    picture = attention_maps.draw_word_areas(image, ["disc", "<eos>"], areas, grid,
                                             panel_size=size, weights=weights[None],
                                             coordinates=coordinates)
    pixels = np.asarray(picture.convert("RGB")).astype(int)
    panels = size + attention_maps.LABEL_HEIGHT
    assert pixels.shape[0] == panels + attention_maps.SCALE_HEIGHT
    dim = attention_maps.DIM

    def shown(weight):
        return 200 * (dim + (1 - dim) * weight / 0.6)

    for (x, y), weight in (((48, 32), 0.6), ((8, 8), 0.2), ((8, 56), 0.0),
                           ((64 + 8, 56), 0.3), ((64 + 48, 32), 0.0)):
        np.testing.assert_allclose(pixels[y, x], shown(weight), atol=1)
    strip = pixels[panels + 2 + 5]
    np.testing.assert_allclose(strip[5], 255 * dim, atol=3)
    np.testing.assert_allclose(strip[160], 255, atol=6)
    with pytest.raises(ValueError, match="go together"):
        attention_maps.draw_word_areas(image, ["disc"], areas[:1], grid, weights=weights[:1])


def test_mismatched_lengths_raise():
    with pytest.raises(ValueError, match="one area per word"):
        attention_maps.draw_word_areas(np.zeros((4, 4, 3)), ["a"], np.zeros((2, 4)), (2, 2))
    with pytest.raises(ValueError, match="num_areas"):
        attention_maps.top_areas(np.zeros((2, 3)), np.zeros((4, 4)))


def test_region_lighting_follows_the_weights(tmp_path):
    image = np.full((16, 16, 3), 200, np.uint8)
    boxes = np.array([[0.0, 0.0, 0.4, 0.4], [0.6, 0.6, 1.0, 1.0], [0.6, 0.0, 1.0, 0.4]])
    weights = np.array([0.2, 0.7, 0.1])
    picture = attention_maps.draw_region_weights(image, boxes, weights, title=("Q", "A"),
                                                 size=100)
    path = tmp_path / "regions.png"
    picture.save(path)
    pixels = np.asarray(PIL.Image.open(path).convert("RGB")).astype(int)
    header = 2 * attention_maps.TITLE_LINE + 6  # the two title lines
    assert pixels.shape[0] == header + 100 + attention_maps.SCALE_HEIGHT  # the scale below

    def center(box):
        x = int((box[0] + box[2]) / 2 * 99)
        y = int((box[1] + box[3]) / 2 * 99) + header
        return pixels[y, x]

    # A box of weight w shows DIM + (1 - DIM) * w / max(w) of the colour;
    # what no box covers shows DIM.
    dim = attention_maps.DIM
    for box, weight in zip(boxes, weights):
        np.testing.assert_allclose(center(box), 200 * (dim + (1 - dim) * weight / 0.7), atol=1)
    np.testing.assert_allclose(pixels[header + 50, 5], 200 * dim, atol=1)
    # Only the top region is outlined.
    red = np.all(pixels[header:header + 100] == attention_maps.OUTLINE, axis=-1)
    ys, xs = np.nonzero(red)
    assert xs.min() >= 59 and ys.min() >= 59
    # Inside a black edge: it shows on a red shape too.
    assert (pixels[header + ys.min() - 1, xs.min() + 5] == 0).all()
    # The scale: grey at DIM on the left, white on the right, as the shading.
    strip = pixels[header + 100 + 8]
    np.testing.assert_allclose(strip[5], 255 * dim, atol=3)
    np.testing.assert_allclose(strip[160], 255, atol=6)  # the strip ends at x = 163


def test_real_images_keep_their_aspect_ratio():
    wide = np.zeros((30, 60, 3), np.uint8)
    wide[:, 30:] = 255  # the right half white: a squashed picture would move it
    picture = attention_maps.draw_region_weights(wide, np.array([[0.0, 0.0, 1.0, 1.0]]),
                                                 np.array([1.0]), size=120)
    pixels = np.asarray(picture.convert("RGB")).astype(int)
    assert picture.height == 60 + attention_maps.SCALE_HEIGHT
    assert (pixels[30, 40] == 0).all() and (pixels[30, 80] == 255).all()
    panels = attention_maps.draw_word_areas(wide, ["a"], np.array([[0, 0, 1, 1]]), (2, 2),
                                            panel_size=120, title=["caption: a"])
    assert panels.height == attention_maps.TITLE_LINE + 6 + 60 + attention_maps.LABEL_HEIGHT


def test_quadrants_draw_each_weight_in_its_cell():
    rng = np.random.default_rng(1)
    m, n = 3, 2
    # Text positions 0-2 real, 3 padded; regions 4-5 real, 6 padded: both
    # paddings are left out.
    scores = rng.random((2, m + 1 + n + 1, m + 1 + n + 1))
    picture = attention_maps.draw_quadrants(scores, m + 1, ["[ans]", "what", "color"], n,
                                            cell=10)
    pixels = np.asarray(picture.convert("RGB")).astype(int)
    keep = [0, 1, 2, 4, 5]
    mean = scores.mean(0)[np.ix_(keep, keep)]
    expected = attention_maps.heat_colors(mean / mean.max())
    origin, label, gap = 2 * attention_maps.TITLE_LINE + 4, 60, 6
    for i in range(m + n):
        for j in range(m + n):
            x = label + j * 10 + (gap if j >= m else 0) + 5
            y = origin + i * 10 + (gap if i >= m else 0) + 5
            np.testing.assert_array_equal(pixels[y, x], expected[i, j])


def test_dictionary_weights_bars_are_proportional_and_sorted():
    from keras_structattn.tasks.attention_maps import draw_dictionary_weights

    weights = np.array([0.1, 0.6, 0.0, 0.3])
    picture = draw_dictionary_weights({"words": weights}, height=50, top=3, width=300)
    assert picture.height >= 50 and picture.width == 300
    pixels = np.asarray(picture)
    red = (pixels[..., 0] == 160) & (pixels[..., 1] == 0) & (pixels[..., 2] == 0)
    rows = [r for r in range(pixels.shape[0]) if red[r].any()]
    lengths = [int(red[r].sum()) for r in rows]
    # Three bars of 12 rows each, largest first, lengths in ratio 0.6 : 0.3 : 0.1.
    bars = [lengths[k] for k in range(0, len(lengths), 12)]
    assert len(bars) == 3
    np.testing.assert_allclose(np.array(bars) / bars[0], [1.0, 0.5, 1 / 6], atol=0.02)


def test_stacked_keeps_every_picture():
    from PIL import Image

    from keras_structattn.tasks.attention_maps import stacked

    top, bottom = Image.new("RGB", (30, 10), (1, 2, 3)), Image.new("RGB", (50, 20), (4, 5, 6))
    picture = np.asarray(stacked([top, bottom]))
    assert picture.shape == (38, 50, 3)
    assert (picture[:10, :30] == (1, 2, 3)).all() and (picture[18:, :50] == (4, 5, 6)).all()
