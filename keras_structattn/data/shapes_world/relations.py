"""The spatial relations Shapes world states, defined by the library's op.

Every relation in a caption, question, answer or referring expression is a
fact about the spatial labels of `keras_structattn.ops.spatial_graph.
spatial_relations_numpy` (the SA-M4C graph, default `distance_threshold`
0.5) over the normalised boxes of the scene, plus, for directions, a
pixel-exact separation of the boxes. For "A <relation> B":

| relation | label(A, B) | and also |
| --- | --- | --- |
| inside | 2 (A strictly inside B) | |
| contains | 1 (A strictly contains B) | |
| left of | 7 or 8 (A's centre within 45 deg of due left of B's) | A.x2 <= B.x1 |
| right of | 11 or 4 | A.x1 >= B.x2 |
| above | 9 or 10 | A.y2 <= B.y1 |
| below | 5 or 6 | A.y1 >= B.y2 |

(Boxes are pixel boxes with exclusive `x2`, `y2`, so `A.x2 <= B.x1` means
no column in common.) The separation keeps the four directions unambiguous
to a reader: they are disjoint, and "A left of B" is never said of boxes
that overlap or of a shape half below another. Pairs whose centres are at
least `0.5 * sqrt(2)` apart (normalised) have label 0 and no stated
relation. The reverse pair always has the reverse relation (the op gives
the opposite sector).
"""

import numpy as np

from keras_structattn.ops.relation_tables import CONTAINS
from keras_structattn.ops.relation_tables import INSIDE

DIRECTION_LABELS = {
    "left of": (7, 8),
    "right of": (11, 4),
    "above": (9, 10),
    "below": (5, 6),
}
DIRECTIONS = tuple(DIRECTION_LABELS)
RELATIONS = DIRECTIONS + ("inside", "contains")
OPPOSITE = {
    "left of": "right of",
    "right of": "left of",
    "above": "below",
    "below": "above",
    "inside": "contains",
    "contains": "inside",
}


def relation_labels(boxes, canvas):
    """Spatial labels `[M, M]` of pixel boxes `[M, 4]` on a `canvas` image.

    A thin call of `spatial_relations_numpy` on `boxes / canvas` with the
    default distance threshold. (The op's module imports Keras; it is
    imported here on first use so that this module alone stays NumPy-only.)

    Args:
        boxes: pixel boxes `[M, 4]`, `(x1, y1, x2, y2)`.
        canvas: the image side in pixels.

    Returns:
        int32 `[M, M]` labels, as `ops.spatial_relations_numpy` gives them.
    """
    from keras_structattn.ops.spatial_graph import spatial_relations_numpy

    boxes = np.asarray(boxes, np.float64).reshape(-1, 4)
    if len(boxes) == 0:
        return np.zeros((0, 0), np.int32)
    return spatial_relations_numpy(boxes / canvas)


def holds(relation, label, box_a, box_b):
    """Whether "A <relation> B" holds, from the label of (A, B) and the boxes.

    Args:
        relation: one of `RELATIONS`.
        label: int spatial label of the ordered pair (A, B).
        box_a, box_b: pixel boxes `(x1, y1, x2, y2)`.

    Returns:
        A bool.
    """
    if relation == "inside":
        return label == INSIDE
    if relation == "contains":
        return label == CONTAINS
    if label not in DIRECTION_LABELS[relation]:
        return False
    if relation == "left of":
        return box_a[2] <= box_b[0]
    if relation == "right of":
        return box_a[0] >= box_b[2]
    if relation == "above":
        return box_a[3] <= box_b[1]
    return box_a[1] >= box_b[3]


def stated_relations(scene):
    """`[M][M]` nested list: the relation stated for each node pair, or None.

    Computed once per scene from `scene.labels` and cached on it (each pair
    has at most one relation: the six are mutually exclusive).

    Args:
        scene: a `Scene`.

    Returns:
        The nested list, indexed like `scene.node_boxes()`.
    """
    cached = getattr(scene, "_stated_relations", None)
    if cached is None:
        boxes = scene.node_boxes().tolist()
        labels = scene.labels.tolist()
        cached = [[None] * len(boxes) for _ in boxes]
        for i, box_a in enumerate(boxes):
            for j, box_b in enumerate(boxes):
                if i == j:
                    continue
                for relation in RELATIONS:
                    if holds(relation, labels[i][j], box_a, box_b):
                        cached[i][j] = relation
                        break
        scene._stated_relations = cached
    return cached


def stated_relation(scene, a, b):
    """The one relation of `RELATIONS` that holds for nodes a, b, or None.

    Args:
        scene: a `Scene`.
        a, b: node names ("o3", "s0", "t2").

    Returns:
        A relation name, or None.
    """
    return stated_relations(scene)[scene.node(a)][scene.node(b)]


def relation_holds(scene, a, relation, b):
    """Whether "a <relation> b" holds for node names a, b of `scene`.

    Args:
        scene: a `Scene`.
        a, b: node names ("o3", "s0", "t2").
        relation: one of `RELATIONS`.

    Returns:
        A bool.
    """
    return stated_relations(scene)[scene.node(a)][scene.node(b)] == relation
