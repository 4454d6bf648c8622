"""The word parser of `benchmarks.caption_attention_grounding`."""

from benchmarks.caption_attention_grounding import matches
from benchmarks.caption_attention_grounding import phrases


def test_each_colour_and_shape_word_gets_its_noun_phrase():
    words = "a large red square and a small blue circle <eos>".split()
    found = phrases(words)
    assert [(t, kind, value) for t, kind, value, _ in found] == [
        (2, "color", "red"), (3, "shape", "square"), (7, "color", "blue"), (8, "shape", "circle")]
    assert found[0][3] == found[1][3] == {"color": "red", "shape": "square"}
    assert found[2][3] == {"color": "blue", "shape": "circle"}


def test_a_shape_without_colour_and_words_between_start_new_phrases():
    found = phrases("a triangle left of a green shape".split())
    assert [(kind, value, f) for _, kind, value, f in found] == [
        ("shape", "triangle", {"shape": "triangle"}), ("color", "green", {"color": "green"})]
    shape = {"shape": "triangle", "color": "red", "size": "small"}
    assert matches(shape, {"shape": "triangle"}) and not matches(shape, {"color": "green"})
