"""TextVQA-style questions: answers read from the scene's signs.

Up to `QUESTIONS_PER_SCENE` = 2 questions per scene with text (see
`make_textvqa` for how they are drawn). Types (`question_type`):

- `written_on` (answer from the OCR tokens): "what is written on the blue
  square?"; answer: the sign's 1-2 words.
- `direction` (OCR): "what word is right of the red circle?", "what does the
  sign below the box say?"; answer: the sign's 1-3 words.
- `host_shape` (answer from the vocabulary): "what shape has the word cafe
  on it?"; answer: a shape.
- `host_color` (vocabulary): "what color is the shape with cafe written on
  it?"; answer: a colour.
- `count_signs` (vocabulary): "how many signs are there?"; answer: "1".."4".

An OCR answer is the sign's words joined by spaces; the question record
keeps the indices of those OCR tokens (`answer_tokens`), so a pointer
network (M4C) has to copy 1-3 tokens in order. The host questions name a
sign by its text, which is then unique among the scene's signs. Scenes
without signs get no question (counted as `textvqa_no_text`); shortfalls
are counted as `textvqa_skipped`.

**The relations asked about are not the SA-M4C graph's.** A direction
("right of") is `relations.extent_direction` of the sign's plate and the
shape: every pixel of one beside every pixel of the other, sharing a row
(left/right) or a column (above/below), at any distance; "written on" is
`relations.written_on`: the plate drawn on the shape's visible pixels.
The graph labels pairs by the 45-degree sector of their box centres
within a distance threshold (`ops.spatial_relations_numpy`) and the
recipe builds it from jittered boxes, so it is evidence about the answer,
not the answer (docs/textvqa.md). The shape is uniquely described, and no
other sign is in the relation asked about to it.
"""

from keras_structattn.data.shapes_world import describe as d
from keras_structattn.data.shapes_world.answers import ANSWER_TYPES
from keras_structattn.data.shapes_world.answers import annotate
from keras_structattn.data.shapes_world.relations import DIRECTIONS
from keras_structattn.data.shapes_world.relations import extent_direction
from keras_structattn.data.shapes_world.relations import written_on

QUESTIONS_PER_SCENE = 2
OCR_TYPES = ("written_on", "direction")
VOCAB_TYPES = ("host_shape", "host_color", "count_signs")
QUESTION_TYPES = OCR_TYPES + VOCAB_TYPES
SECOND_OCR_PROBABILITY = 0.5
VOCAB_WEIGHTS = {"host_shape": 1.0, "host_color": 1.0, "count_signs": 0.5}


def _tokens_of(scene, k):
    return [t for t, (s, _) in enumerate(scene.tokens) if s == k]


def _hosted(scene):
    """`[(sign, host)]` of the signs written on a shape (`written_on`)."""
    return [(k, host) for k in range(len(scene.signs))
            if (host := written_on(scene, k)) is not None]


def _written_on(scene, rng, exclude=()):
    candidates = []
    hosted = _hosted(scene)
    for k, host in hosted:
        # One sign per host (the generator's rule); checked, not assumed.
        if k in exclude or [h for _, h in hosted].count(host) > 1:
            continue
        for f in d.unique_filters(scene.shapes, host):
            candidates.append((k, host, f))
    if not candidates:
        return None
    k, host, f = d.choice(rng, candidates)
    phrase = d.noun_phrase(f, rng)
    options = [f"what is written on {phrase}?", f"what does {phrase} say?"]
    if len(scene.signs[k].words) == 1:
        options.append(f"what word is on {phrase}?")
    facts = [
        {"kind": "unique", "node": f"o{host}", "filter": f},
        {"kind": "text", "node": f"s{k}", "text": d.sign_text(scene.signs[k])},
        {"kind": "written_on", "node": f"s{k}", "b": f"o{host}", "only": True},
    ]
    return d.choice(rng, options), d.sign_text(scene.signs[k]), "text", facts, k


def _direction(scene, rng, exclude=()):
    candidates = []
    plates = [sign.box for sign in scene.signs]
    for i, shape in enumerate(scene.shapes):
        filters = d.unique_filters(scene.shapes, i)
        if not filters:
            continue
        directions = [extent_direction(box, shape.box) for box in plates]
        for relation in DIRECTIONS:
            hits = [k for k, found in enumerate(directions) if found == relation]
            if len(hits) == 1 and hits[0] not in exclude:
                candidates.extend((hits[0], relation, i, f) for f in filters)
    if not candidates:
        return None
    k, relation, i, f = d.choice(rng, candidates)
    phrase = d.noun_phrase(f, rng)
    word = d.relation_word(relation, rng)
    options = [f"what is written {word} {phrase}?", f"what does the sign {word} {phrase} say?"]
    if len(scene.signs[k].words) == 1:
        options.append(f"what word is {word} {phrase}?")
    facts = [
        {"kind": "unique", "node": f"o{i}", "filter": f},
        {"kind": "text", "node": f"s{k}", "text": d.sign_text(scene.signs[k])},
        {"kind": "extent", "a": f"s{k}", "relation": relation, "b": f"o{i}", "only": True},
    ]
    return d.choice(rng, options), d.sign_text(scene.signs[k]), "text", facts, k


def _host(scene, rng, asked):
    texts = [d.sign_text(s) for s in scene.signs]
    candidates = [(k, host) for k, host in _hosted(scene) if texts.count(texts[k]) == 1]
    if not candidates:
        return None
    k, host = d.choice(rng, candidates)
    text = texts[k]
    noun = "word" if len(scene.signs[k].words) == 1 else "words"
    generic = d.choice(rng, d.GENERIC_NOUNS)
    if asked == "shape":
        question = d.choice(rng, (
            f"what shape has the {noun} {text} on it?",
            f"what shape is {text} written on?",
        ))
    else:
        question = d.choice(rng, (
            f"what color is the {generic} with {text} written on it?",
            f"what color is the {generic} that says {text}?",
        ))
    answer = getattr(scene.shapes[host], asked)
    facts = [
        {"kind": "text", "node": f"s{k}", "text": text},
        {"kind": "unique_text", "node": f"s{k}", "text": text},
        {"kind": "written_on", "node": f"s{k}", "b": f"o{host}", "only": False},
        {"kind": "attributes", "node": f"o{host}", "values": {asked: answer}},
    ]
    return question, answer, asked, facts, None


def _count_signs(scene, rng):
    n = len(scene.signs)
    question = d.choice(rng, (
        "how many signs are there?",
        "how many signs can you see?",
        "how many signs are in the image?",
    ))
    facts = [{"kind": "count", "of": "signs", "filter": {}, "count": n}]
    return question, str(n), "number", facts, None


def _pick(rng, makers, types, weights=None):
    """The question of a type drawn from `types` (by `weights`) among those
    that have one; None if none has."""
    types, weights = list(types), list(weights or [1.0] * len(types))
    while types:
        total = sum(weights)
        k = int(rng.choice(len(types), p=[w / total for w in weights]))
        question_type = types.pop(k)
        weights.pop(k)
        result = makers[question_type]()
        if result is not None:
            return question_type, result
    return None


def make_textvqa(scene, rng, config, counters):
    """The TextVQA questions of a scene.

    The first question has an OCR answer when the scene allows one. The
    second is, with probability `SECOND_OCR_PROBABILITY`, another OCR
    question about another sign, otherwise (or if there is none) a
    vocabulary question (host_shape, host_color, count_signs weighted
    1 : 1 : 0.5).

    Args:
        scene: a `Scene`.
        rng: the task's `np.random.Generator`.
        config: a `Config`.
        counters: a `Counter` (`textvqa_no_text`, `textvqa_skipped`).

    Returns:
        A list of dicts `{"question", "question_type", "answer_type",
        "answer_source" ("ocr" or "vocab"), "answer", "answers",
        "answer_tokens" (OCR token indices or []), "facts",
        "bias_conflict"}`.
    """
    if not scene.signs:
        counters["textvqa_no_text"] += 1
        return []
    used = set()
    makers = {
        "written_on": lambda: _written_on(scene, rng, used),
        "direction": lambda: _direction(scene, rng, used),
        "host_shape": lambda: _host(scene, rng, "shape"),
        "host_color": lambda: _host(scene, rng, "color"),
        "count_signs": lambda: _count_signs(scene, rng),
    }
    picked = []
    first = _pick(rng, makers, OCR_TYPES)
    if first is not None:
        picked.append(first)
        used.add(first[1][4])
    while len(picked) < QUESTIONS_PER_SCENE:
        result = None
        if picked and rng.random() < SECOND_OCR_PROBABILITY:
            result = _pick(rng, makers, OCR_TYPES)
        if result is None:
            vocab = [t for t in VOCAB_TYPES if t not in {p[0] for p in picked}]
            result = _pick(rng, makers, vocab, [VOCAB_WEIGHTS[t] for t in vocab])
        if result is None:
            counters["textvqa_skipped"] += QUESTIONS_PER_SCENE - len(picked)
            break
        picked.append(result)
        if result[1][4] is not None:
            used.add(result[1][4])
    out = []
    for question_type, (question, answer, kind, facts, sign) in picked:
        out.append({
            "question": question,
            "question_type": question_type,
            "answer_type": ANSWER_TYPES[kind],
            "answer_source": "ocr" if question_type in OCR_TYPES else "vocab",
            "answer": answer,
            "answers": annotate(rng, answer, kind, config.answer_noise),
            "answer_tokens": [] if sign is None else _tokens_of(scene, sign),
            "facts": facts,
            "bias_conflict": d.bias_conflict(scene, facts, config.bias),
        })
    return out
