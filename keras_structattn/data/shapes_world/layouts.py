"""Layouts of Shapes world: what kinds of scenes and captions are drawn.

A layout fixes the shapes' sizes and how often each arrangement occurs
(large shapes, nesting, partial overlaps, signs), the number of shapes, and
which caption template groups (`captions.GROUPS`) the references use.

- `default`: the world every recipe trains on without flags (2-8 shapes of
  12-17 % or 28-36 % of the canvas, nesting, overlaps, signs, all seven
  caption groups).
- `large_objects`: the world of the area-attention comparison
  (docs/captioning.md, "Area vs regular attention"). 2-4 shapes, no signs,
  no nesting or overlap; large shapes are 36-45 % of the canvas, so on the
  8x8 grid of the grid features (8 pixels a cell at 64 pixels) a large
  shape spans 3-5 cells a side and a small one (12-17 %) 2, at most 3.
  Captions come from the groups whose facts need whole objects (attributes, relations,
  the biggest shape) and every noun phrase states the size: "a large red
  circle to the left of a small blue square". In the grid features a cell
  inside a large shape shows one colour and nothing of the outline, so a
  large shape's shape and size are visible only by combining the cells it
  covers: what an area (a rectangle of cells whose keys are averaged and
  values summed, Li et al., 2019, arXiv:1810.10126, Eq. 3-4) gives a model
  in one attention step.
"""

import dataclasses


@dataclasses.dataclass(frozen=True)
class Layout:
    """The scene and caption settings of a layout (see the module docstring).

    Attributes:
        name: the layout's name (`LAYOUTS` key).
        size_fractions: `{size: (low, high)}` side of a shape as a fraction
            of the canvas, inclusive.
        large_probability: probability that a shape is large.
        max_large: most large shapes in a scene.
        duplicate_probability: probability of two shapes alike in shape,
            colour and size.
        nest_probability: probability that a small shape is nested in a
            large one.
        overlap_probability: probability of a partial overlap per shape.
        min_objects, max_objects, max_signs: the `Config` values the layout
            is drawn with unless the caller gives others.
        caption_groups: the template groups of the references, a subset of
            `captions.GROUPS` in its order.
        always_size: whether every noun phrase of a caption states the size
            (otherwise 40 % of them do).
    """

    name: str
    size_fractions: dict
    large_probability: float
    max_large: int
    duplicate_probability: float
    nest_probability: float
    overlap_probability: float
    min_objects: int
    max_objects: int
    max_signs: int
    caption_groups: tuple
    always_size: bool = False


LAYOUTS = {
    "default": Layout(
        name="default",
        size_fractions={"small": (0.12, 0.17), "large": (0.28, 0.36)},
        large_probability=0.35,
        max_large=3,
        duplicate_probability=0.3,
        nest_probability=0.3,
        overlap_probability=0.15,
        min_objects=2,
        max_objects=8,
        max_signs=3,
        caption_groups=("count", "shape_counts", "attributes", "relation", "nested", "text",
                        "biggest"),
    ),
    "large_objects": Layout(
        name="large_objects",
        size_fractions={"small": (0.12, 0.17), "large": (0.36, 0.45)},
        large_probability=0.5,
        max_large=2,
        duplicate_probability=0.0,
        nest_probability=0.0,
        overlap_probability=0.0,
        min_objects=2,
        max_objects=4,
        max_signs=0,
        caption_groups=("attributes", "relation", "biggest"),
        always_size=True,
    ),
}


def get_layout(name):
    """The `Layout` called `name`.

    Args:
        name: a key of `LAYOUTS`.

    Returns:
        A `Layout`.

    Raises:
        ValueError: for an unknown name.
    """
    if name not in LAYOUTS:
        raise ValueError(
            f"Argument `layout` must be one of {list(LAYOUTS)}. Received: layout={name!r}"
        )
    return LAYOUTS[name]
