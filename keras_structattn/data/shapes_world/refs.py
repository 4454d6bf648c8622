"""Referring expressions with target boxes (RefCOCO-style grounding).

Up to `REFS_PER_SCENE` = 2 referred shapes per scene, each with
`SENTENCES_PER_REF` = 2 phrasings. A shape is referred to either

- by attributes alone, with a filter only it matches ("the small red
  circle", "the purple shape"), or
- by attributes and a relation to a uniquely described landmark ("the red
  circle left of the blue square"): the relation holds for the target and
  for none of the other shapes with the attributes named (its
  *distractors*; the attributes are size, colour and shape, or colour and
  shape when that already singles it out with the relation).

A shape with an exact duplicate (same shape, colour and size) has no
attribute-only expression, so its expression *needs* the relation
(`needs_relation`): those are chosen first. Other shapes use a relation
with probability 0.3 when one exists. Shapes that nothing distinguishes
are not referred to (counted as `refs_skipped` when fewer than 2 shapes of
a scene could be referred to).
"""

from keras_structattn.data.shapes_world import describe as d
from keras_structattn.data.shapes_world.relations import RELATIONS
from keras_structattn.data.shapes_world.relations import relation_holds

REFS_PER_SCENE = 2
SENTENCES_PER_REF = 2
RELATION_PROBABILITY = 0.3
FULL = ("size", "color", "shape")


def _relation_options(scene, i):
    """`[(relation, landmark, landmark filter)]` that single out shape i."""
    shapes = scene.shapes
    f = d.values(shapes[i], FULL)
    distractors = [j for j in d.matching(shapes, f) if j != i]
    out = []
    for landmark in range(len(shapes)):
        if landmark == i:
            continue
        filters = d.unique_filters(shapes, landmark)
        if not filters:
            continue
        for relation in RELATIONS:
            if not relation_holds(scene, f"o{i}", relation, f"o{landmark}"):
                continue
            if any(relation_holds(scene, f"o{j}", relation, f"o{landmark}") for j in distractors):
                continue
            out.extend((relation, landmark, lf) for lf in filters)
    return out


def _sentences(rng, make):
    out = []
    for _ in range(8):
        text = make()
        if text not in out:
            out.append(text)
        if len(out) == SENTENCES_PER_REF:
            break
    return out


def _expression(scene, rng, i, use_relation):
    shapes = scene.shapes
    if use_relation:
        options = _relation_options(scene, i)
        relation, landmark, lf = d.choice(rng, options)
        # The target is described by size, colour and shape, or by colour
        # and shape when no other shape of that colour and shape is in the
        # relation too.
        f = d.values(shapes[i], FULL)
        short = d.values(shapes[i], ("color", "shape"))
        if rng.random() < 0.6 and not any(
            relation_holds(scene, f"o{j}", relation, f"o{landmark}")
            for j in d.matching(shapes, short) if j != i
        ):
            f = short

        def make():
            det = d.choice(rng, ("the", ""))
            target = d.noun_phrase(f, rng, determiner=det)
            return f"{target} {d.relation_word(relation, rng)} {d.noun_phrase(lf, rng)}".strip()

        facts = [
            {"kind": "attributes", "node": f"o{i}", "values": f},
            {"kind": "only", "node": f"o{i}", "relation": relation, "b": f"o{landmark}",
             "among": "shapes", "filter": f},
            {"kind": "unique", "node": f"o{landmark}", "filter": lf},
        ]
    else:
        f = d.choice(rng, d.unique_filters(shapes, i))

        def make():
            det = d.choice(rng, ("the", ""))
            return d.noun_phrase(f, rng, determiner=det)

        facts = [{"kind": "unique", "node": f"o{i}", "filter": f}]
    return _sentences(rng, make), facts


def make_refs(scene, rng, config, counters):
    """The referring expressions of a scene.

    Args:
        scene: a `Scene`.
        rng: the task's `np.random.Generator`.
        config: a `Config`.
        counters: a `Counter` (`refs_skipped`).

    Returns:
        A list of dicts `{"target" (shape index), "sentences" [str],
        "needs_relation", "facts", "bias_conflict"}`.
    """
    shapes = scene.shapes
    needs, plain = [], []
    for i in range(len(shapes)):
        unique = bool(d.unique_filters(shapes, i))
        relational = bool(_relation_options(scene, i))
        if not unique and relational:
            needs.append(i)
        elif unique:
            plain.append((i, relational))
    order = [needs[k] for k in rng.permutation(len(needs))][:1]
    rest = [(i, True) for i in needs if i not in order] + plain
    rest = [rest[k] for k in rng.permutation(len(rest))]
    out = []
    for i in order:
        sentences, facts = _expression(scene, rng, i, use_relation=True)
        out.append((i, sentences, True, facts))
    for i, relational in rest:
        if len(out) == REFS_PER_SCENE:
            break
        needs_relation = i in needs
        use_relation = needs_relation or (relational and rng.random() < RELATION_PROBABILITY)
        sentences, facts = _expression(scene, rng, i, use_relation)
        out.append((i, sentences, needs_relation, facts))
    if len(out) < REFS_PER_SCENE:
        counters["refs_skipped"] += REFS_PER_SCENE - len(out)
    return [
        {
            "target": i,
            "sentences": sentences,
            "needs_relation": needs_relation,
            "facts": facts,
            "bias_conflict": d.bias_conflict(scene, facts, config.bias),
        }
        for i, sentences, needs_relation, facts in out
    ]
