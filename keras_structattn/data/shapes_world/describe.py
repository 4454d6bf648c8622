"""Words for shapes and relations, attribute filters and uniqueness.

Text is lower case without punctuation (captions and questions alike, apart
from the question mark), so a whitespace split is its tokenisation.

A *filter* is a dict over the attributes "shape", "color", "size" (e.g.
`{"color": "red", "shape": "circle"}`); a shape matches it when every given
attribute is equal. A shape is *uniquely described* by a filter that it
alone matches among the scene's shapes.

Facts. Every generated text carries the list of facts it states, as JSON
dicts, so that each can be checked against the scene:

- `{"kind": "count", "of": "shapes"|"signs", "filter": F, "count": k}`:
  exactly k shapes match F (signs: k signs in the scene);
- `{"kind": "attributes", "node": "o3", "values": F}`: shape 3 matches F;
- `{"kind": "unique", "node": "o3", "filter": F}`: shape 3 is the only
  shape matching F;
- `{"kind": "exists", "filter": F, "value": bool}`: some shape matches F;
- `{"kind": "relation", "a": "o3", "relation": R, "b": "o1"}`: R holds
  (`relations.holds`); nodes may be shapes "o", signs "s" or OCR tokens
  "t";
- `{"kind": "only", "node": N, "relation": R, "b": B, "among": "shapes"|
  "signs", "filter": F}`: of the shapes matching F (or of all signs), N is
  the only one in relation R to B;
- `{"kind": "text", "node": "s0", "text": "fresh fish"}`: sign 0 says that;
- `{"kind": "unique_text", "node": "s0", "text": T}`: no other sign says T;
- `{"kind": "biggest", "node": "o3"}`: shape 3 has the largest box, strictly.
"""

import functools

ATTRIBUTES = ("size", "color", "shape")
SHAPE_WORDS = {
    "circle": ("circle", "disc"),
    "square": ("square", "box", "block"),
    "triangle": ("triangle",),
    "diamond": ("diamond", "rhombus"),
}
PLURALS = {
    "circle": "circles", "disc": "discs", "square": "squares", "box": "boxes",
    "block": "blocks", "triangle": "triangles", "diamond": "diamonds",
    "rhombus": "rhombuses", "shape": "shapes", "object": "objects",
}
SIZE_WORDS = {"small": ("small", "little"), "large": ("large", "big")}
GENERIC_NOUNS = ("shape", "object")
RELATION_WORDS = {
    "left of": ("left of", "to the left of", "on the left of"),
    "right of": ("right of", "to the right of", "on the right of"),
    "above": ("above", "over"),
    "below": ("below", "under", "beneath"),
    "inside": ("inside", "in", "within"),
    "contains": ("containing", "with", "holding"),
}
NUMBER_WORDS = (
    "zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten",
)
# Filters used to describe a single shape, from short to long.
ATTRIBUTE_SETS = (
    ("shape",),
    ("color",),
    ("color", "shape"),
    ("size", "shape"),
    ("size", "color"),
    ("size", "color", "shape"),
)


def choice(rng, options):
    """One element of a sequence, drawn with `rng`."""
    return options[int(rng.integers(len(options)))]


def values(shape, attributes):
    """The filter of `shape` restricted to `attributes`."""
    return {a: getattr(shape, a) for a in ATTRIBUTES if a in attributes}


def matches(shape, filter_):
    return all(getattr(shape, a) == v for a, v in filter_.items())


def matching(shapes, filter_):
    """Indices of the shapes that match `filter_`."""
    return [i for i, o in enumerate(shapes) if matches(o, filter_)]


@functools.lru_cache(maxsize=256)
def _unique_sets(shapes):
    """Per shape, the attribute sets of `ATTRIBUTE_SETS` that single it out."""
    keys = [tuple(getattr(o, a) for a in ATTRIBUTES) for o in shapes]
    out = []
    for i in range(len(shapes)):
        sets = []
        for attributes in ATTRIBUTE_SETS:
            index = [ATTRIBUTES.index(a) for a in attributes]
            mine = [keys[i][k] for k in index]
            if sum([key[k] for k in index] == mine for key in keys) == 1:
                sets.append(attributes)
        out.append(tuple(sets))
    return tuple(out)


def unique_filters(shapes, i, sets=ATTRIBUTE_SETS):
    """Filters (from `sets`) under which shape i is the only match."""
    return [values(shapes[i], a) for a in _unique_sets(tuple(shapes))[i] if a in sets]


def article(phrase):
    return ("an " if phrase[0] in "aeiou" else "a ") + phrase


def noun_phrase(filter_, rng, determiner="the", plural=False, synonyms=True):
    """Words for a filter, e.g. "the small red circle", "a red shape".

    Args:
        filter_: dict over "size", "color", "shape".
        rng: `np.random.Generator` for synonyms.
        determiner: "the", "a" (a / an) or "" (none).
        plural: plural noun (the determiner is then dropped if "a").
        synonyms: draw shape / size synonyms; False gives canonical words.
    """
    words = []
    if "size" in filter_:
        words.append(choice(rng, SIZE_WORDS[filter_["size"]]) if synonyms else filter_["size"])
    if "color" in filter_:
        words.append(filter_["color"])
    if "shape" in filter_:
        noun = choice(rng, SHAPE_WORDS[filter_["shape"]]) if synonyms else filter_["shape"]
    else:
        noun = choice(rng, GENERIC_NOUNS) if synonyms else "shape"
    words.append(PLURALS[noun] if plural else noun)
    phrase = " ".join(words)
    if determiner == "the":
        return "the " + phrase
    if determiner == "a" and not plural:
        return article(phrase)
    return phrase


def count_phrase(k, filter_, rng, synonyms=True):
    """"two red circles", "a square", "no triangles" (`synonyms`: as in
    `noun_phrase`)."""
    if k == 0:
        return "no " + noun_phrase(filter_, rng, determiner="", plural=True, synonyms=synonyms)
    if k == 1:
        return noun_phrase(filter_, rng, determiner="a", synonyms=synonyms)
    return NUMBER_WORDS[k] + " " + noun_phrase(filter_, rng, determiner="", plural=True,
                                               synonyms=synonyms)


def join_list(items):
    """"a, b and c"."""
    if len(items) == 1:
        return items[0]
    return ", ".join(items[:-1]) + " and " + items[-1]


def relation_word(relation, rng):
    return choice(rng, RELATION_WORDS[relation])


def sign_text(sign):
    return " ".join(sign.words)


def referenced_shapes(facts):
    """Indices of the shapes named by nodes in `facts`."""
    out = set()
    for fact in facts:
        for key in ("node", "a", "b"):
            node = fact.get(key)
            if isinstance(node, str) and node.startswith("o"):
                out.add(int(node[1:]))
    return out


def bias_conflict(scene, facts, bias):
    """Whether `facts` involve a shape or a filter that breaks `bias`.

    True when a named shape, or a filter with both a shape and a colour, has
    the biased shape in another colour than the biased one (the cases where
    leaning on the correlation gives a wrong answer).
    """
    if bias is None:
        return False
    for i in referenced_shapes(facts):
        o = scene.shapes[i]
        if o.shape == bias.shape and o.color != bias.color:
            return True
    for fact in facts:
        f = fact.get("filter") or fact.get("values") or {}
        if f.get("shape") == bias.shape and f.get("color", bias.color) != bias.color:
            return True
    return False
