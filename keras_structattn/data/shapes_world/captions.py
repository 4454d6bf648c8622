"""Captions: five references per scene from varied templates.

Each scene gets `NUM_REFERENCES` distinct captions, each from a template
*group*, with synonyms for relations drawn per caption (shapes and sizes
have one word each, `_phrase`):

| group | example |
| --- | --- |
| count | "five shapes on a dark background" |
| shape_counts | "two circles, a square and a diamond" |
| attributes | "a large red square, a small blue circle and a yellow triangle" |
| relation | "a red circle to the left of a blue square" |
| nested | "a small green triangle inside a large yellow circle" |
| text | "a blue square with the word cafe on it" |
| biggest | "a large red square and four smaller shapes" |

The groups the scene allows are used in random order (none is first on
purpose, so no template is in every image's references), then more draws
of every group until five distinct strings exist.
Every caption records the facts it states (`describe` module docstring).
"""

from keras_structattn.data.shapes_world import describe as d
from keras_structattn.data.shapes_world.layouts import get_layout
from keras_structattn.data.shapes_world.relations import DIRECTIONS
from keras_structattn.data.shapes_world.relations import stated_relation
from keras_structattn.data.shapes_world.scenes import SHAPES

NUM_REFERENCES = 5
_MAX_DRAWS = 60


def _phrase(filter_, rng):
    """"a small red circle": one word per shape and size, no synonyms. With
    synonyms (circle / disc, square / box / block, triangle alone) a
    captioner unsure of a shape says "triangle", the word whose probability
    no synonym shares (measured: every shape word of a trained model's test
    captions; docs/captioning.md)."""
    return d.noun_phrase(filter_, rng, "a", synonyms=False)


def _full(shape, rng, sized):
    """A describing filter of a shape: colour and shape, and the size when
    `sized` (the layout's `always_size`) or else 40 % of the time (drawn
    either way, so that `sized` changes no other draw)."""
    sometimes = rng.random() < 0.4
    attributes = ("size", "color", "shape") if sized or sometimes else ("color", "shape")
    return d.values(shape, attributes)


def _attributes_fact(scene, i, f):
    return {"kind": "attributes", "node": f"o{i}", "values": f}


def _count(scene, rng, sized):
    n = len(scene.shapes)
    noun = "shape" if n == 1 else "shapes"
    what = "one shape" if n == 1 else f"{d.NUMBER_WORDS[n]} {noun}"
    text = d.choice(rng, (
        f"{what} on a dark background",
        f"a picture of {what}",
        f"an image with {what}",
        f"{what} on a black canvas",
    ))
    return text, [{"kind": "count", "of": "shapes", "filter": {}, "count": n}]


def _shape_counts(scene, rng, sized):
    present = [s for s in SHAPES if any(o.shape == s for o in scene.shapes)]
    order = rng.permutation(len(present))
    parts, facts = [], []
    for k in order:
        shape = present[k]
        count = len(d.matching(scene.shapes, {"shape": shape}))
        parts.append(d.count_phrase(count, {"shape": shape}, rng, synonyms=False))
        facts.append({"kind": "count", "of": "shapes", "filter": {"shape": shape}, "count": count})
    prefix = d.choice(rng, ("", "a dark image with ", "there are ", "a picture showing "))
    if prefix == "there are " and len(parts) == 1 and parts[0].startswith("a"):
        prefix = "there is "
    return prefix + d.join_list(parts), facts


def _attributes(scene, rng, sized):
    n = len(scene.shapes)
    chosen = sorted(rng.choice(n, size=min(3, n), replace=False).tolist())
    parts, facts = [], []
    for i in chosen:
        f = _full(scene.shapes[i], rng, sized)
        parts.append(_phrase(f, rng))
        facts.append(_attributes_fact(scene, i, f))
    text = d.join_list(parts)
    if n > len(chosen):
        text += d.choice(rng, (" among other shapes", " and more shapes", ""))
    return text, facts


def _pair_text(scene, a, relation, b, rng, sized):
    fa, fb = _full(scene.shapes[a], rng, sized), _full(scene.shapes[b], rng, sized)
    pa, pb = _phrase(fa, rng), _phrase(fb, rng)
    word = d.relation_word(relation, rng)
    text = d.choice(
        rng, (f"{pa} {word} {pb}", f"{pa} is {word} {pb}", f"there is {pa} {word} {pb}")
    )
    facts = [
        {"kind": "relation", "a": f"o{a}", "relation": relation, "b": f"o{b}"},
        _attributes_fact(scene, a, fa),
        _attributes_fact(scene, b, fb),
    ]
    return text, facts


def _direction_pairs(scene):
    n = len(scene.shapes)
    out = []
    for a in range(n):
        for b in range(n):
            relation = stated_relation(scene, f"o{a}", f"o{b}") if a != b else None
            if relation in DIRECTIONS:
                out.append((a, relation, b))
    return out


def _relation(scene, rng, sized):
    pairs = _direction_pairs(scene)
    if not pairs:
        return None
    return _pair_text(scene, *d.choice(rng, pairs), rng, sized)


def _nested(scene, rng, sized):
    pairs = [(i, o.parent) for i, o in enumerate(scene.shapes) if o.parent is not None]
    pairs = [(c, p) for c, p in pairs if stated_relation(scene, f"o{c}", f"o{p}") == "inside"]
    if not pairs:
        return None
    c, p = d.choice(rng, pairs)
    fc, fp = _full(scene.shapes[c], rng, sized), _full(scene.shapes[p], rng, sized)
    pc, pp = _phrase(fc, rng), _phrase(fp, rng)
    if rng.random() < 0.5:
        text = f"{pc} {d.relation_word('inside', rng)} {pp}"
        fact = {"kind": "relation", "a": f"o{c}", "relation": "inside", "b": f"o{p}"}
    else:
        text = f"{pp} {d.relation_word('contains', rng)} {pc}"
        fact = {"kind": "relation", "a": f"o{p}", "relation": "contains", "b": f"o{c}"}
    return text, [fact, _attributes_fact(scene, c, fc), _attributes_fact(scene, p, fp)]


def _text(scene, rng, sized):
    options = []
    for k, sign in enumerate(scene.signs):
        if sign.anchor is None:
            continue
        relation = stated_relation(scene, f"s{k}", f"o{sign.anchor}")
        if relation is not None:
            options.append((k, relation))
    if not options:
        return None
    k, relation = d.choice(rng, options)
    sign = scene.signs[k]
    words = d.sign_text(sign)
    f = _full(scene.shapes[sign.anchor], rng, sized)
    shape = _phrase(f, rng)
    noun = "word" if len(sign.words) == 1 else "words"
    if relation == "inside":
        text = d.choice(rng, (
            f"{shape} with the {noun} {words} on it",
            f"the {noun} {words} written on {shape}",
        ))
    else:
        word = d.relation_word(relation, rng)
        text = d.choice(
            rng, (f"a sign saying {words} {word} {shape}", f"the {noun} {words} {word} {shape}")
        )
    facts = [
        {"kind": "text", "node": f"s{k}", "text": words},
        {"kind": "relation", "a": f"s{k}", "relation": relation, "b": f"o{sign.anchor}"},
        _attributes_fact(scene, sign.anchor, f),
    ]
    return text, facts


def _biggest(scene, rng, sized):
    n = len(scene.shapes)
    if n < 2:
        return None
    sides = [o.side for o in scene.shapes]
    top = max(sides)
    if sides.count(top) > 1:
        return None
    i = sides.index(top)
    f = _full(scene.shapes[i], rng, sized)
    rest = "one smaller shape" if n == 2 else f"{d.NUMBER_WORDS[n - 1]} smaller shapes"
    text = f"{_phrase(f, rng)} and {rest}"
    facts = [
        {"kind": "biggest", "node": f"o{i}"},
        {"kind": "count", "of": "shapes", "filter": {}, "count": n},
        _attributes_fact(scene, i, f),
    ]
    return text, facts


GROUPS = {
    "count": _count,
    "shape_counts": _shape_counts,
    "attributes": _attributes,
    "relation": _relation,
    "nested": _nested,
    "text": _text,
    "biggest": _biggest,
}


def make_captions(scene, rng, counters, layout=None):
    """Five reference captions of a scene.

    Args:
        scene: a `Scene`.
        rng: the captions' `np.random.Generator`.
        counters: a `Counter`; `caption_duplicates` counts references that
            repeat an earlier one because the scene allowed no more distinct
            captions (only in tiny one-shape scenes).
        layout: the world's `layouts.Layout` (default: `default`'s): its
            `caption_groups` are the groups drawn from, and with
            `always_size` every noun phrase states the size.

    Returns:
        A list of `NUM_REFERENCES` dicts `{"caption", "group", "facts"}`.
    """
    layout = layout or get_layout("default")
    sized = layout.always_size
    groups = {g: GROUPS[g] for g in layout.caption_groups}
    available = [g for g, make in groups.items() if make(scene, rng, sized) is not None]
    # Groups in random order, none first on purpose: a group in every
    # image's references would let one blind template score well.
    plan = [available[i] for i in rng.permutation(len(available))]
    out, seen = [], set()
    draws = 0
    while len(out) < NUM_REFERENCES and draws < _MAX_DRAWS:
        group = plan[draws] if draws < len(plan) else d.choice(rng, available)
        draws += 1
        text, facts = GROUPS[group](scene, rng, sized)
        if text not in seen:
            seen.add(text)
            out.append({"caption": text, "group": group, "facts": facts})
    while len(out) < NUM_REFERENCES:
        counters["caption_duplicates"] += 1
        out.append(dict(out[len(out) % max(1, len(seen))]))
    return out
