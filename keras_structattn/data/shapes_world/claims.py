"""Fact claims of Shapes world captions, checked against the scene.

CIDEr-D compares n-grams with the references; it cannot tell a caption
that names the image's red circle from one that names a red circle the
image does not hold. Shapes world knows every object, so here a caption's
*claims* are read with the generator's own vocabulary (`describe`) and
checked against the scene.

**Reading.** A noun phrase is `[determiner | number] [size | "smaller"]
[colour] noun`, the order in which every generated phrase puts its words
(`describe.noun_phrase`); the noun is a shape word (any synonym, singular
or plural) or a generic one ("shape", "object"). A relation is
`phrase ["is"] <relation words> phrase` with the relation words of
`describe.RELATION_WORDS`, both phrases noun phrases. Words in other
places (sign texts, "a picture of") claim nothing.

**Atomic claims**, by category:

| category | claim | true when the scene has |
| --- | --- | --- |
| shape | `("shape", s)` | a shape s |
| colour | `("colour", c, s or None)` | a c shape (of shape s) |
| size | `("size", z, c or None, s or None)` | a z (c) (s) shape |
| count | `("count", filter, k)` | exactly k shapes matching the filter |
| relation | `("relation", fa, R, fb)` | shapes a != b matching fa, fb with "a R b" |

("a R b" as `relations.holds` defines it.)

A numbered phrase ("two red circles", "one shape", "no triangles")
claims a count, and but for "no" the existence claims of its words too;
"N smaller shapes" after the biggest shape claims N + 1 shapes in all;
"a ..." claims existence only. Relations are stored in one
direction of each opposite pair ("left of", "above", "inside": "A right of
B" is "B left of A"), and their filters leave the size out (a size is its
own claim), so that "a red circle left of a blue square" and "a small red
disc to the left of a blue box" make the same relation claim.

**Scores** (`fact_scores`): precision is the share of a caption's claims
that are true of its scene; recall the share of the *references'* claims
(the union over the image's references, all true by construction) that
the caption also makes; F1 their harmonic mean. Counts are summed over
the split before dividing (micro-averaged), in all and per category.
"""

import collections
import re

from keras_structattn.data.shapes_world.describe import GENERIC_NOUNS
from keras_structattn.data.shapes_world.describe import NUMBER_WORDS
from keras_structattn.data.shapes_world.describe import PLURALS
from keras_structattn.data.shapes_world.describe import RELATION_WORDS
from keras_structattn.data.shapes_world.describe import SHAPE_WORDS
from keras_structattn.data.shapes_world.describe import SIZE_WORDS
from keras_structattn.data.shapes_world.relations import OPPOSITE
from keras_structattn.data.shapes_world.relations import holds
from keras_structattn.data.shapes_world.relations import relation_labels
from keras_structattn.data.shapes_world.scenes import COLOR_NAMES

CATEGORIES = ("shape", "colour", "size", "count", "relation")
# The canonical direction of each opposite pair of relations.
_CANONICAL = ("left of", "above", "inside")

# Noun word -> (shape or None for a generic noun, plural).
_NOUNS = {}
for _shape, _words in SHAPE_WORDS.items():
    for _word in _words:
        _NOUNS[_word] = (_shape, False)
        _NOUNS[PLURALS[_word]] = (_shape, True)
for _word in GENERIC_NOUNS:
    _NOUNS[_word] = (None, False)
    _NOUNS[PLURALS[_word]] = (None, True)
_SIZES = {word: size for size, words in SIZE_WORDS.items() for word in words}
_NUMBERS = {word: k for k, word in enumerate(NUMBER_WORDS)}
_NUMBERS["no"] = 0
_ARTICLES = ("a", "an", "the")
# Relation phrases as word tuples, longest first ("to the left of" before "left of").
_RELATION_PHRASES = sorted(
    ((tuple(words.split()), relation)
     for relation, phrases in RELATION_WORDS.items() for words in phrases),
    key=lambda item: -len(item[0]))


class _Phrase(collections.namedtuple("_Phrase", "start end number smaller filter")):
    """A noun phrase: words `start..end-1`, its number (or None), whether it
    reads "smaller", and its filter over "size", "color", "shape"."""


def _noun_phrases(words):
    """The noun phrases of a word list, in order (`_Phrase`s)."""
    phrases = []
    for end, word in enumerate(words, start=1):
        if word not in _NOUNS:
            continue
        shape, _ = _NOUNS[word]
        filter_ = {} if shape is None else {"shape": shape}
        i, smaller, number = end - 2, False, None
        if i >= 0 and words[i] in COLOR_NAMES:
            filter_["color"] = words[i]
            i -= 1
        if i >= 0 and words[i] in _SIZES:
            filter_["size"] = _SIZES[words[i]]
            i -= 1
        elif i >= 0 and words[i] == "smaller":
            smaller = True
            i -= 1
        if i >= 0 and words[i] in _NUMBERS:
            number = _NUMBERS[words[i]]
            i -= 1
        elif i >= 0 and words[i] in _ARTICLES:
            i -= 1
        phrases.append(_Phrase(i + 1, end, number, smaller, filter_))
    return phrases


def _filter_key(filter_, keep=("size", "color", "shape")):
    return tuple(sorted((k, v) for k, v in filter_.items() if k in keep))


def _phrase_claims(phrase):
    f = phrase.filter
    if phrase.smaller:  # "four smaller shapes" beside the biggest one
        return [] if phrase.number is None else [("count", (), phrase.number + 1)]
    claims = []
    if phrase.number is not None:
        claims.append(("count", _filter_key(f), phrase.number))
        if phrase.number == 0:
            return claims
    if "shape" in f:
        claims.append(("shape", f["shape"]))
    if "color" in f:
        claims.append(("colour", f["color"], f.get("shape")))
    if "size" in f:
        claims.append(("size", f["size"], f.get("color"), f.get("shape")))
    return claims


def _relation_claims(words, phrases):
    ends = {p.end: p for p in phrases}
    starts = {p.start: p for p in phrases}
    claims = []
    for at in range(len(words)):
        for phrase_words, relation in _RELATION_PHRASES:
            if tuple(words[at:at + len(phrase_words)]) != phrase_words:
                continue
            left = ends.get(at - 1 if at and words[at - 1] == "is" else at)
            right = starts.get(at + len(phrase_words))
            if left is not None and right is not None and left.number is None \
                    and right.number is None:
                a = _filter_key(left.filter, ("color", "shape"))
                b = _filter_key(right.filter, ("color", "shape"))
                if relation not in _CANONICAL:
                    a, b, relation = b, a, OPPOSITE[relation]
                claims.append(("relation", a, relation, b))
            break  # the longest phrase at this position only
    return claims


def caption_claims(caption):
    """The atomic claims of a caption (module docstring), repeats removed.

    Args:
        caption: a caption (punctuation and case are ignored).

    Returns:
        A list of claim tuples, in reading order; the category of a claim
        is its first element (`CATEGORIES`).
    """
    words = re.findall(r"[a-z]+", caption.lower())
    phrases = _noun_phrases(words)
    claims = [c for p in phrases for c in _phrase_claims(p)] + _relation_claims(words, phrases)
    return list(dict.fromkeys(claims))


class SceneFacts:
    """Checks claims against one scene's shapes.

    Args:
        shapes: the scene's shapes, dicts with "shape", "color", "size" and
            the pixel "box" (a `scenes_<split>.json` record's "shapes").
        canvas: the image side in pixels.
    """

    def __init__(self, shapes, canvas):
        self.shapes = [dict(o) for o in shapes]
        self.canvas = canvas
        self._labels = None

    def _matching(self, filter_):
        return [i for i, o in enumerate(self.shapes) if all(o[k] == v for k, v in filter_)]

    def _holds(self, a, relation, b):
        if self._labels is None:
            self._labels = relation_labels([o["box"] for o in self.shapes], self.canvas)
        return holds(relation, int(self._labels[a][b]), self.shapes[a]["box"],
                     self.shapes[b]["box"])

    def is_true(self, claim):
        """Whether a claim (`caption_claims`) holds in the scene."""
        kind = claim[0]
        if kind == "shape":
            return bool(self._matching((("shape", claim[1]),)))
        if kind == "colour":
            f = (("color", claim[1]),) + ((("shape", claim[2]),) if claim[2] else ())
            return bool(self._matching(f))
        if kind == "size":
            f = [("size", claim[1]), ("color", claim[2]), ("shape", claim[3])]
            return bool(self._matching(tuple((k, v) for k, v in f if v is not None)))
        if kind == "count":
            return len(self._matching(claim[1])) == claim[2]
        if kind == "relation":
            _, fa, relation, fb = claim
            return any(self._holds(a, relation, b)
                       for a in self._matching(fa) for b in self._matching(fb) if a != b)
        raise ValueError(f"Unknown claim kind {kind!r} in {claim!r}.")


def _ratio(numerator, denominator):
    return numerator / denominator if denominator else 0.0


def fact_scores(captions, references, scenes):
    """Fact precision, recall and F1 of captions (module docstring).

    Args:
        captions: `{image_id: caption}`.
        references: `{image_id: [reference caption, ...]}`.
        scenes: `{image_id: SceneFacts}`.

    Returns:
        A dict: `precision`, `recall`, `f1` over all claims, `claims` and
        `true_claims` (counts), `claims_per_caption`, and per category
        `<category>_precision`, `<category>_recall`, `<category>_f1`.

    Raises:
        KeyError: naming a captioned image without references or scene.
    """
    made, true, wanted, recalled = (collections.Counter() for _ in range(4))
    for image_id, caption in captions.items():
        if image_id not in scenes or image_id not in references:
            raise KeyError(f"image {image_id}: no scene or references (another split?)")
        scene = scenes[image_id]
        claims = caption_claims(caption)
        true_claims = {c for c in claims if scene.is_true(c)}
        reference_claims = {c for r in references[image_id] for c in caption_claims(r)}
        for c in claims:
            made[c[0]] += 1
            true[c[0]] += c in true_claims
        for c in reference_claims:
            wanted[c[0]] += 1
            recalled[c[0]] += c in true_claims
    out = {}
    for name, keys in [("", CATEGORIES)] + [(f"{c}_", (c,)) for c in CATEGORIES]:
        p = _ratio(sum(true[k] for k in keys), sum(made[k] for k in keys))
        r = _ratio(sum(recalled[k] for k in keys), sum(wanted[k] for k in keys))
        out.update({f"{name}precision": p, f"{name}recall": r,
                    f"{name}f1": _ratio(2 * p * r, p + r)})
    out.update(claims=sum(made.values()), true_claims=sum(true.values()),
               claims_per_caption=_ratio(sum(made.values()), len(captions)))
    return out


def scene_facts(scenes):
    """`{image_id: SceneFacts}` of the scene records of a `scenes_<split>.json`."""
    return {int(s["image_id"]): SceneFacts(s["shapes"], s["width"]) for s in scenes}
