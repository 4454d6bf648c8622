"""Relation labels and the head/relation tables of spatially aware attention.

SA-M4C (Kant et al., 2020, arXiv:2007.12146, Section 4.2) gives each
attention head a subset of the spatial relations between boxes; a head
attends from query i to key j only where the label of the pair `(i, j)` is
in its subset. Labels (`spatial_graph.spatial_relations`; the rules are in
docs/graph_attention.md):

| label | meaning |
| --- | --- |
| 0 | no relation (valid boxes too far apart) |
| 1 / 2 | contains / inside |
| 3 | overlap (IoU >= 0.5) |
| 4..11 | the 8 direction sectors of 45 degrees |
| 12 | self |
| 13 `IMPLICIT` | an edge every head may use (e.g. to the question tokens) |
| 14 `BLOCKED` | an edge no head may use (padding, tokens outside the graph) |

The two extra labels let one `[B, L, L]` int matrix express the whole
TextVQA mask (question | objects | OCR | decoder), so no float mask per head
ever travels as an input. A table is a boolean NumPy array
`[num_heads, NUM_LABELS]`: `table[h, label]` says whether head h may use an
edge with that label; `IMPLICIT` is always allowed and `BLOCKED` never.

A label outside 0..14 is an error where the labels are known
(`check_relations`: eager calls, NumPy inputs) and means `BLOCKED` inside
compiled code (`blocked_if_out_of_range`), on every backend.
"""

import numpy as np
from keras import ops

from keras_structattn import checks

NUM_SPATIAL_LABELS = 13  # 0..12
CONTAINS, INSIDE, OVERLAP, SELF = 1, 2, 3, 12
FIRST_DIRECTION, LAST_DIRECTION = 4, 11
IMPLICIT = 13
BLOCKED = 14
NUM_LABELS = 15


def _check_labels(name, labels):
    for label in labels:
        if isinstance(label, bool) or not isinstance(label, (int, np.integer)) or not (
            0 <= label < NUM_SPATIAL_LABELS
        ):
            raise ValueError(
                f"Argument `{name}` must hold spatial relation labels in 0..12. "
                f"Received: {label!r} in {name}={labels!r}"
            )


def check_relations(name, relations):
    """Raises a ValueError if known `relations` hold a label outside 0..14.

    Does nothing while the values are unknown (`checks.known_values`):
    compiled code reads such labels as `BLOCKED` (`blocked_if_out_of_range`).

    Args:
        name: the argument's name, for the error.
        relations: int labels, a tensor or array-like of any shape.
    """
    values = checks.known_values(relations)
    if values is None:
        return
    bad = (values < 0) | (values >= NUM_LABELS)
    if bad.any():
        index = tuple(int(i) for i in np.argwhere(bad)[0])
        count = int(bad.sum())
        raise ValueError(
            f"Argument `{name}` must hold relation labels in 0..{NUM_LABELS - 1} (0..12 "
            f"spatial, {IMPLICIT} = IMPLICIT, {BLOCKED} = BLOCKED). Received: "
            f"{name}[{', '.join(map(str, index))}] = {values[index].item()!r} ({count} "
            f"label{'s' if count > 1 else ''} out of range; the labels run from "
            f"{values.min().item()!r} to {values.max().item()!r})."
        )


def blocked_if_out_of_range(labels):
    """int32 `labels` with every value outside 0..14 replaced by `BLOCKED`.

    The rule of compiled code, where `check_relations` cannot see values:
    an out-of-range label is an edge no head may use, on every backend. (A
    plain look-up of the table differs by backend: labels above 14 raise on
    TensorFlow and are filled on JAX, where every head then attends, and
    negative labels wrap round from the end.)
    """
    labels = ops.cast(labels, "int32")
    in_range = ops.logical_and(
        ops.greater_equal(labels, 0), ops.less(labels, NUM_LABELS)
    )
    return ops.where(in_range, labels, BLOCKED)


def table_from_sets(head_relations):
    """A head/relation table from an explicit subset of labels per head.

    Args:
        head_relations: a sequence (one entry per head) of iterables of
            spatial labels in 0..12.

    Returns:
        A boolean array `[num_heads, NUM_LABELS]`; the `IMPLICIT` column is
        True and the `BLOCKED` column False for every head.
    """
    if isinstance(head_relations, (str, bytes)) or not hasattr(head_relations, "__len__"):
        raise ValueError(
            "Argument `head_relations` must be a list with one list of labels "
            f"(0..12) per head. Received: head_relations={head_relations!r}"
        )
    if len(head_relations) == 0:
        raise ValueError("Argument `head_relations` must name at least one head. Received: []")
    table = np.zeros((len(head_relations), NUM_LABELS), bool)
    for h, labels in enumerate(head_relations):
        if isinstance(labels, (str, bytes)) or not hasattr(labels, "__iter__"):
            raise ValueError(
                f"Argument `head_relations[{h}]` must be a list of labels in 0..12. "
                f"Received: {labels!r}"
            )
        labels = list(labels)
        _check_labels(f"head_relations[{h}]", labels)
        table[h, labels] = True
    table[:, IMPLICIT] = True
    return table


def sets_from_table(table):
    """The inverse of `table_from_sets`: sorted spatial labels per head.

    Args:
        table: a boolean array-like `[num_heads, NUM_LABELS]`.

    Returns:
        A list of `num_heads` sorted lists of spatial labels (0..12).
    """
    table = np.asarray(table, bool)
    return [
        sorted(int(label) for label in np.flatnonzero(row[:NUM_SPATIAL_LABELS]))
        for row in table
    ]


def context_head_relations(context_size=3):
    """The SA-M4C assignment of the 12 spatial relations to 12 heads.

    Head h (0-based) is responsible for label h + 1 (head 11: self). A
    direction head (labels 4..11) also accepts the `(context_size - 1) / 2`
    neighbouring directions on each side, wrapping within the 8 directions
    (11 + 1 -> 4, 4 - 1 -> 11); the contains, inside, overlap and self heads
    accept only their own label. This is the released code's window,
    centred on the head's own direction; the paper's text describes a
    window running forward over all relation types and reports `c = 2`
    best (its Table 2), a count that does not measure the same thing (see
    docs/graph_attention.md).

    Args:
        context_size: an odd int in 1..7 (7 or more gives every direction
            head all 8 directions).

    Returns:
        A list of 12 sorted label lists, for `table_from_sets`.
    """
    if (
        isinstance(context_size, bool)
        or not isinstance(context_size, int)
        or context_size < 1
        or context_size % 2 == 0
    ):
        raise ValueError(
            "Argument `context_size` must be an odd positive integer (1, 3, 5, ...). "
            f"Received: context_size={context_size!r}"
        )
    reach = min((context_size - 1) // 2, 4)
    heads = []
    for h in range(12):
        label = h + 1
        if FIRST_DIRECTION <= label <= LAST_DIRECTION:
            offset = label - FIRST_DIRECTION
            labels = {FIRST_DIRECTION + (offset + d) % 8 for d in range(-reach, reach + 1)}
        else:
            labels = {label}
        heads.append(sorted(labels))
    return heads


def all_relations(num_heads):
    """Every head accepts every spatial label (plain attention over the graph).

    Args:
        num_heads: the number of heads.

    Returns:
        A list of `num_heads` lists `[0, 1, ..., 12]`, for `table_from_sets`.
    """
    return [list(range(NUM_SPATIAL_LABELS)) for _ in range(num_heads)]
