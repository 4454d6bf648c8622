"""VQA questions: count, colour, shape, existence and relation.

One question of each type per scene where the scene allows one (a type with
no valid question is skipped and counted as `vqa_skipped/<type>`):

- `count` (answer_type number): "how many red shapes are there?"; answers
  "0".."10".
- `color` (other): "what color is the big circle?"; answers: colours.
- `shape` (other): "what shape is the purple object?"; answers: shapes.
- `exist` (yes/no): "is there a green triangle?"; answers: yes / no.
- `relation` (other or yes/no): "what is above the green triangle?", "what
  color is the shape left of the box?", "is the red disc below the blue
  square?"; answers: shapes, colours, yes / no.

Every object a question names is uniquely described (`describe`), and a
relation question's answer is the only shape in that relation to it
(`relations` gives the exact definition). A yes/no relation question is
asked only when either the relation or its opposite holds, so "no" is as
unambiguous as "yes".

**Balance.** Within a type the answer is drawn first, uniformly among the
distinct answers the scene allows, then a question with that answer
(relation questions first draw the form: what-shape 0.4, what-colour 0.3,
yes/no 0.3). This keeps every answer's share of a type low, e.g. "1" does
not dominate counting, and yes / no are near 50 / 50.
"""

from keras_structattn.data.shapes_world import describe as d
from keras_structattn.data.shapes_world.answers import ANSWER_TYPES
from keras_structattn.data.shapes_world.answers import annotate
from keras_structattn.data.shapes_world.relations import DIRECTIONS
from keras_structattn.data.shapes_world.relations import OPPOSITE
from keras_structattn.data.shapes_world.relations import RELATIONS
from keras_structattn.data.shapes_world.relations import relation_holds
from keras_structattn.data.shapes_world.relations import stated_relation
from keras_structattn.data.shapes_world.scenes import COLOR_NAMES
from keras_structattn.data.shapes_world.scenes import SHAPES
from keras_structattn.data.shapes_world.scenes import SIZES

QUESTION_TYPES = ("count", "color", "shape", "exist", "relation")
# Words for "X <relation> L" in "what is ... ?" questions.
QUESTION_RELATION_WORDS = dict(d.RELATION_WORDS, contains=("around",))
RELATION_FORMS = ("what_shape", "what_color", "yes_no")
# Relations asked in yes/no form ("is A inside B?"; "contains" is asked as
# the reverse "inside").
ASKED_YES_NO = DIRECTIONS + ("inside",)
RELATION_FORM_PROBABILITIES = (0.4, 0.3, 0.3)


def relation_form(question):
    """The form of a relation question (`RELATION_FORMS`), read from its
    text: the records keep only `question_type` "relation", and the forms
    differ in what they test (yes/no: a relation between two named shapes;
    what-shape / what-colour: find the one shape in a relation to a
    landmark, then name an attribute of it).

    The three templates begin differently: "is ..." (yes/no), "what color
    is the ..." (what-colour) and "what is ..." / "what shape is ..."
    (what-shape); see `_relation_yes_no` and `_relation_what`.

    Args:
        question: a relation question's text.

    Returns:
        "yes_no", "what_color" or "what_shape".

    Raises:
        ValueError: for a text none of the templates begins with.
    """
    text = question.strip().lower()
    if text.startswith("is "):
        return "yes_no"
    if text.startswith("what color is the "):
        return "what_color"
    if text.startswith(("what is ", "what shape is ")):
        return "what_shape"
    raise ValueError(f"Not a Shapes world relation question: {question!r}")


def _draw(rng, candidates):
    """Answer-first draw from `[(answer, ...)]`."""
    answers = sorted({c[0] for c in candidates})
    answer = d.choice(rng, answers)
    return d.choice(rng, [c for c in candidates if c[0] == answer])


def _unique(i, f):
    return {"kind": "unique", "node": f"o{i}", "filter": f}


def _count(scene, rng):
    shapes = scene.shapes
    filters = [{}]
    filters += [{"shape": s} for s in SHAPES]
    filters += [{"color": c} for c in COLOR_NAMES]
    filters += [{"color": o.color, "shape": o.shape} for o in shapes]
    filters += [{"size": o.size, "shape": o.shape} for o in shapes]
    seen, candidates = set(), []
    for f in filters:
        key = tuple(sorted(f.items()))
        if key not in seen:
            seen.add(key)
            candidates.append((str(len(d.matching(shapes, f))), f))
    answer, f = _draw(rng, candidates)
    plural = d.noun_phrase(f, rng, determiner="", plural=True)
    question = d.choice(rng, (
        f"how many {plural} are there?",
        f"how many {plural} are in the image?",
        f"how many {plural} can you see?",
    ))
    facts = [{"kind": "count", "of": "shapes", "filter": f, "count": int(answer)}]
    return question, answer, "number", facts


def _attribute(scene, rng, asked):
    """"what color is ...?" (asked="color") or "what shape is ...?"."""
    sets = [s for s in d.ATTRIBUTE_SETS if asked not in s]
    candidates = []
    for i, o in enumerate(scene.shapes):
        for f in d.unique_filters(scene.shapes, i, sets):
            candidates.append((getattr(o, asked), i, f))
    if not candidates:
        return None
    answer, i, f = _draw(rng, candidates)
    phrase = d.noun_phrase(f, rng)
    if asked == "color":
        question = d.choice(rng, (f"what color is {phrase}?", f"what is the color of {phrase}?"))
    else:
        question = d.choice(rng, (f"what shape is {phrase}?", f"what is the shape of {phrase}?"))
    facts = [_unique(i, f), {"kind": "attributes", "node": f"o{i}", "values": {asked: answer}}]
    return question, answer, asked, facts


def _exist(scene, rng):
    shapes = scene.shapes
    present = {(o.color, o.shape) for o in shapes}
    yes = [{"color": c, "shape": s} for c, s in sorted(present)]
    yes += [{"size": o.size, "color": o.color, "shape": o.shape} for o in shapes]
    colors = {o.color for o in shapes}
    kinds = {o.shape for o in shapes}
    # "No" questions ask for a combination that is nearly there: its colour
    # or its shape is in the scene.
    no = [
        {"color": c, "shape": s}
        for c in COLOR_NAMES for s in SHAPES
        if (c, s) not in present and (c in colors or s in kinds)
    ]
    no += [
        {"size": z, "color": o.color, "shape": o.shape}
        for o in shapes for z in SIZES
        if not d.matching(shapes, {"size": z, "color": o.color, "shape": o.shape})
    ]
    candidates = [("yes", f) for f in yes] + [("no", f) for f in no]
    answer, f = _draw(rng, candidates)
    phrase = d.noun_phrase(f, rng, determiner="a")
    plural = d.noun_phrase(f, rng, determiner="", plural=True)
    question = d.choice(rng, (
        f"is there {phrase}?",
        f"are there any {plural}?",
        f"is there {phrase} in the image?",
    ))
    facts = [{"kind": "exists", "filter": f, "value": answer == "yes"}]
    return question, answer, "yes/no", facts


def _landmarks(scene):
    """`[(index, filter)]`: every uniquely described shape, every filter."""
    return [(i, f) for i in range(len(scene.shapes)) for f in d.unique_filters(scene.shapes, i)]


def _relation_what(scene, rng, landmarks, form):
    shapes = scene.shapes
    candidates = []
    for j, f in landmarks:
        for relation in RELATIONS:
            hits = [
                i for i in range(len(shapes))
                if i != j and relation_holds(scene, f"o{i}", relation, f"o{j}")
            ]
            if len(hits) == 1:
                i = hits[0]
                answer = shapes[i].shape if form == "what_shape" else shapes[i].color
                candidates.append((answer, i, relation, j, f))
    if not candidates:
        return None
    answer, i, relation, j, f = _draw(rng, candidates)
    word = d.choice(rng, QUESTION_RELATION_WORDS[relation])
    landmark = d.noun_phrase(f, rng)
    if form == "what_shape":
        question = d.choice(
            rng, (f"what is {word} {landmark}?", f"what shape is {word} {landmark}?")
        )
        kind = "shape"
    else:
        noun = d.choice(rng, d.GENERIC_NOUNS)
        question = f"what color is the {noun} {word} {landmark}?"
        kind = "color"
    facts = [
        _unique(j, f),
        {"kind": "only", "node": f"o{i}", "relation": relation, "b": f"o{j}",
         "among": "shapes", "filter": {}},
        {"kind": "attributes", "node": f"o{i}", "values": {kind: answer}},
    ]
    return question, answer, kind, facts


def _relation_yes_no(scene, rng, landmarks):
    filters = {}
    for i, f in landmarks:
        filters.setdefault(i, []).append(f)
    candidates = []
    for a in filters:
        for b in filters:
            if a == b:
                continue
            # Pairs in no stated relation give no question either way.
            true_relation = stated_relation(scene, f"o{a}", f"o{b}")
            if true_relation is None:
                continue
            for relation in (true_relation, OPPOSITE[true_relation]):
                answer = "yes" if relation == true_relation else "no"
                if relation not in ASKED_YES_NO:
                    continue
                for fa in filters[a]:
                    for fb in filters[b]:
                        candidates.append((answer, a, fa, relation, b, fb, true_relation))
    if not candidates:
        return None
    answer, a, fa, relation, b, fb, true_relation = _draw(rng, candidates)
    word = d.relation_word(relation, rng)
    question = f"is {d.noun_phrase(fa, rng)} {word} {d.noun_phrase(fb, rng)}?"
    facts = [
        _unique(a, fa),
        _unique(b, fb),
        {"kind": "relation", "a": f"o{a}", "relation": true_relation, "b": f"o{b}"},
    ]
    return question, answer, "yes/no", facts


def _relation(scene, rng):
    landmarks = _landmarks(scene)
    forms = list(RELATION_FORMS)
    weights = list(RELATION_FORM_PROBABILITIES)
    while forms:
        total = sum(weights)
        k = int(rng.choice(len(forms), p=[w / total for w in weights]))
        form = forms.pop(k)
        weights.pop(k)
        if form == "yes_no":
            result = _relation_yes_no(scene, rng, landmarks)
        else:
            result = _relation_what(scene, rng, landmarks, form)
        if result is not None:
            return result
    return None


def make_vqa(scene, rng, config, counters):
    """The VQA questions of a scene, one per type where possible.

    Args:
        scene: a `Scene`.
        rng: the task's `np.random.Generator`.
        config: a `Config` (answer noise and bias).
        counters: a `Counter`; `vqa_skipped/<type>` counts types that the
            scene allows no question of.

    Returns:
        A list of dicts `{"question", "question_type", "answer_type",
        "answer", "answers" [(answer, confidence)] * 10, "facts",
        "bias_conflict"}`.
    """
    out = []
    makers = {
        "count": lambda: _count(scene, rng),
        "color": lambda: _attribute(scene, rng, "color"),
        "shape": lambda: _attribute(scene, rng, "shape"),
        "exist": lambda: _exist(scene, rng),
        "relation": lambda: _relation(scene, rng),
    }
    for question_type in QUESTION_TYPES:
        result = makers[question_type]()
        if result is None:
            counters[f"vqa_skipped/{question_type}"] += 1
            continue
        question, answer, kind, facts = result
        out.append({
            "question": question,
            "question_type": question_type,
            "answer_type": ANSWER_TYPES[kind],
            "answer": answer,
            "answers": annotate(rng, answer, kind, config.answer_noise),
            "facts": facts,
            "bias_conflict": d.bias_conflict(scene, facts, config.bias),
        })
    return out
