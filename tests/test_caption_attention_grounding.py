"""The word parser of `benchmarks.caption_attention_grounding`."""

from benchmarks.caption_attention_grounding import matches
from benchmarks.caption_attention_grounding import phrases


def test_each_colour_and_shape_word_gets_its_noun_phrase():
    words = "a large red square and a small blue circle <eos>".split()
    found = phrases(words)
    assert [(t, kind, value) for t, kind, value, _ in found] == [
        (2, "color", "red"), (3, "shape", "square"), (7, "color", "blue"), (8, "shape", "circle")]
    assert found[0][3] == found[1][3] == {"size": "large", "color": "red", "shape": "square"}
    assert found[2][3] == {"size": "small", "color": "blue", "shape": "circle"}


def test_a_shape_without_colour_and_words_between_start_new_phrases():
    found = phrases("a triangle left of a green shape".split())
    assert [(kind, value, f) for _, kind, value, f in found] == [
        ("shape", "triangle", {"shape": "triangle"}), ("color", "green", {"color": "green"})]
    shape = {"shape": "triangle", "color": "red", "size": "small"}
    assert matches(shape, {"shape": "triangle"}) and not matches(shape, {"color": "green"})


def test_areas_stand_for_the_object_covering_most_of_their_pixels():
    import numpy as np

    from benchmarks.caption_attention_grounding import area_objects

    shapes = [{"box": [0, 0, 16, 16]}, {"box": [20, 4, 30, 14]}]
    # Cells of 8 pixels: (row, col, height, width).
    areas = np.array([[0, 0, 2, 2], [0, 2, 1, 1], [0, 2, 2, 2], [3, 3, 1, 1], [1, 1, 1, 2]])
    # [1, 1, 1, 2] covers pixels x 8-24, y 8-16: 8x8 of shape 0, 4x6 of shape 1.
    assert area_objects(areas, shapes, 8).tolist() == [0, 1, 1, -1, 0]


def test_cell_cover_spreads_each_area_over_its_cells():
    import numpy as np

    from benchmarks.caption_attention_grounding import cell_cover
    from benchmarks.caption_attention_grounding import single_cells

    coordinates = np.array([[0, 0, 1, 1], [1, 1, 2, 2], [2, 0, 1, 3]])
    cover = cell_cover(coordinates, (3, 3))
    np.testing.assert_allclose(cover.sum(1), 1.0)
    expected = np.zeros((3, 9))
    expected[0, 0] = 1.0
    expected[1, [4, 5, 7, 8]] = 0.25
    expected[2, [6, 7, 8]] = 1.0 / 3.0
    np.testing.assert_allclose(cover, expected)
    # One-cell areas cover the grid row-major: the identity.
    np.testing.assert_allclose(cell_cover(single_cells((2, 3)), (2, 3)), np.eye(6))
