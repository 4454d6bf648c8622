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

**TextVQA's questions use another rule** (`extent_direction`,
`written_on`): were their relations the graph's labels, SA-M4C's graph
(built from the same labels) would hand over the answer (Kant et al.,
2020, arXiv:2007.12146; docs/textvqa.md, "The questions' relations").
Captions, VQA and referring expressions keep the rule above.
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


def extent_direction(box_a, box_b):
    """The direction of A from B by pixel extents, or None (TextVQA's rule).

    "A right of B": every pixel of A lies right of every pixel of B
    (`A.x1 >= B.x2`, no column in common) and A and B share at least one
    pixel row (`A.y1 < B.y2` and `B.y1 < A.y2`), so that A is beside B, not
    beside and above it; "left of" mirrored; "above" and "below" the same
    with rows and columns swapped. At most one holds, and none for boxes
    that overlap or lie diagonally apart. There is no distance limit.

    This is a rule on the pixels of the objects: a drawn shape touches all
    four sides of its box in every row and column between them
    (`scenes.shape_mask`) and a sign plate fills its box, so the extents of
    the object masks are the boxes. It is independent of the SA-M4C graph
    (`spatial_relations_numpy`), which labels a pair by the 45-degree
    sector of the centre offset and gives no direction beyond its distance
    threshold: a sign "right of" a shape by this rule may be in any graph
    sector from upper-right to lower-right, or in none.

    Args:
        box_a, box_b: pixel boxes `(x1, y1, x2, y2)`, `x2`, `y2` exclusive.

    Returns:
        One of `DIRECTIONS`, or None.
    """
    ax1, ay1, ax2, ay2 = box_a
    bx1, by1, bx2, by2 = box_b
    rows = ay1 < by2 and by1 < ay2
    columns = ax1 < bx2 and bx1 < ax2
    if rows and ax1 >= bx2:
        return "right of"
    if rows and ax2 <= bx1:
        return "left of"
    if columns and ay2 <= by1:
        return "above"
    if columns and ay1 >= by2:
        return "below"
    return None


def written_on(scene, k):
    """The shape index sign `k` is written on, or None (TextVQA's rule).

    A sign is written on shape B when the generator drew its plate on B's
    visible pixels (`placement == "on"`, `anchor` B): every pixel of the
    plate, grown by one pixel, was a pixel of B's mask not covered by
    another shape (`scenes._spots_on`). That is B's mask, not the graph's
    box containment (label 2), which a sign on a shape's bare box corner
    would also have.

    Args:
        scene: a `Scene`.
        k: a sign index.

    Returns:
        An int, or None.
    """
    sign = scene.signs[k]
    return sign.anchor if sign.placement == "on" else None
