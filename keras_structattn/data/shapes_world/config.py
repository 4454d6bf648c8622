"""Generation settings of Shapes world and their argument checks.

Every bad value raises a `ValueError` that names the argument, the allowed
values and what was received, before any scene is drawn.
"""

import dataclasses

SPLITS = ("train", "val", "test")
TASKS = ("captions", "vqa", "refs", "textvqa")
# Ids are `(split index + 1) * SPLIT_ID_STRIDE + scene index`; see `image_id`.
SPLIT_ID_STRIDE = 1_000_000
MIN_CANVAS = 32
MAX_OBJECTS = 10


def _int_at_least(name, value, low, high=None):
    if isinstance(value, bool) or not isinstance(value, int) or value < low or (
        high is not None and value > high
    ):
        allowed = f">= {low}" if high is None else f"in {low}..{high}"
        raise ValueError(
            f"Argument `{name}` must be an integer {allowed}. Received: {name}={value!r}"
        )
    return value


def _fraction(name, value, high=1.0, closed=False):
    ok = isinstance(value, (int, float)) and not isinstance(value, bool)
    ok = ok and (0.0 <= value <= high if closed else 0.0 <= value < high)
    if not ok:
        bracket = "]" if closed else ")"
        raise ValueError(
            f"Argument `{name}` must be a number in [0, {high}{bracket}. "
            f"Received: {name}={value!r}"
        )
    return float(value)


def parse_tasks(tasks):
    """Normalises `tasks` ("all", one name, or a list of names) to a tuple.

    Args:
        tasks: "all", one of `TASKS`, or an iterable of them.

    Returns:
        A tuple of task names in the order of `TASKS`.
    """
    if isinstance(tasks, str):
        names = list(TASKS) if tasks == "all" else [tasks]
    else:
        try:
            names = list(tasks)
        except TypeError:
            names = [tasks]
    if not names:
        raise ValueError(
            f"Argument `tasks` must name at least one of {list(TASKS)} or be 'all'. "
            f"Received: tasks={tasks!r}"
        )
    for name in names:
        if name not in TASKS:
            raise ValueError(
                f"Argument `tasks` must be 'all' or hold only {list(TASKS)}. "
                f"Received: tasks={tasks!r}"
            )
    return tuple(t for t in TASKS if t in names)


@dataclasses.dataclass(frozen=True)
class Bias:
    """A spurious shape -> colour correlation in some splits (CATT, Table 2).

    In the splits listed in `splits`, an object of shape `shape` gets colour
    `color` with probability `strength` and one of the other colours
    (uniformly) otherwise; in the other splits its colour is uniform over all
    colours, as for every other shape. With the default splits, val is
    in-distribution and test breaks the correlation, so the val - test gap on
    the questions marked `bias_conflict` measures reliance on it.

    Args:
        shape: one of `scenes.SHAPES`.
        color: one of `scenes.COLOR_NAMES`.
        strength: probability in [0, 1] of `color` given `shape`.
        splits: the biased splits, a subset of ("train", "val", "test").
    """

    shape: str = "circle"
    color: str = "red"
    strength: float = 0.9
    splits: tuple = ("train", "val")

    def __post_init__(self):
        from keras_structattn.data.shapes_world.scenes import COLOR_NAMES
        from keras_structattn.data.shapes_world.scenes import SHAPES

        if self.shape not in SHAPES:
            raise ValueError(
                f"Argument `bias.shape` must be one of {list(SHAPES)}. "
                f"Received: shape={self.shape!r}"
            )
        if self.color not in COLOR_NAMES:
            raise ValueError(
                f"Argument `bias.color` must be one of {list(COLOR_NAMES)}. "
                f"Received: color={self.color!r}"
            )
        _fraction("bias.strength", self.strength, closed=True)
        splits = (self.splits,) if isinstance(self.splits, str) else tuple(self.splits)
        if not splits or any(s not in SPLITS for s in splits):
            raise ValueError(
                f"Argument `bias.splits` must be a non-empty subset of {list(SPLITS)}. "
                f"Received: splits={self.splits!r}"
            )
        object.__setattr__(self, "splits", splits)

    @classmethod
    def parse(cls, text):
        """Parses the CLI form `SHAPE=COLOR[:STRENGTH][@SPLIT,SPLIT]`.

        E.g. "circle=red:0.9" or "square=blue:0.8@train".

        Args:
            text: the CLI string; left-out parts take the defaults.

        Returns:
            A `Bias`.
        """
        if not isinstance(text, str) or "=" not in text:
            raise ValueError(
                "Argument `bias` must look like SHAPE=COLOR[:STRENGTH][@SPLIT,...], "
                f"e.g. 'circle=red:0.9'. Received: bias={text!r}"
            )
        splits = cls.splits
        if "@" in text:
            text, split_text = text.split("@", 1)
            splits = tuple(s for s in split_text.split(",") if s)
        shape, rest = text.split("=", 1)
        strength = cls.strength
        if ":" in rest:
            rest, strength_text = rest.split(":", 1)
            try:
                strength = float(strength_text)
            except ValueError:
                raise ValueError(
                    "Argument `bias` strength must be a number in [0, 1]. "
                    f"Received: {strength_text!r}"
                ) from None
        return cls(shape=shape.strip(), color=rest.strip(), strength=strength, splits=splits)

    def applies_to(self, split):
        """Whether `split` (a split name) is one of the biased splits."""
        return split in self.splits


@dataclasses.dataclass(frozen=True)
class Config:
    """All settings that decide the generated data (sizes aside).

    Args:
        seed: int seed; scene `i` of split `s` draws from
            `np.random.default_rng([seed, s, i])`, so changing the size of one
            split never changes the scenes of another.
        canvas_size: image side in pixels, >= 32.
        min_objects: fewest shapes per scene, >= 1.
        max_objects: most shapes per scene, min_objects..10.
        max_signs: most text signs per scene, 0..4.
        grid_size: cells per side of the grid features, 1..canvas_size // 4.
        answer_noise: per-annotator probability in [0, 0.4] of a noisy
            answer (at most 4 of the 10 are noisy, so the majority holds).
        ocr_noise: per-token probability in [0, 1) that an OCR token carries
            a one-character error (the answers keep the true words).
        bias: `Bias` or None.
        layout: a `layouts.LAYOUTS` name: the shapes' sizes, how often
            nesting, overlaps and large shapes occur, and the caption
            templates.
        region_geometry: whether region and OCR features end with the
            normalised box and area (`features.region_features`); the
            boxes are written beside them either way.
    """

    seed: int = 0
    canvas_size: int = 64
    min_objects: int = 2
    max_objects: int = 8
    max_signs: int = 3
    grid_size: int = 8
    answer_noise: float = 0.15
    ocr_noise: float = 0.0
    bias: Bias = None
    layout: str = "default"
    region_geometry: bool = True

    def __post_init__(self):
        from keras_structattn.data.shapes_world.layouts import get_layout

        _int_at_least("seed", self.seed, 0)
        get_layout(self.layout)
        if not isinstance(self.region_geometry, bool):
            raise ValueError("Argument `region_geometry` must be True or False. "
                             f"Received: region_geometry={self.region_geometry!r}")
        _int_at_least("canvas_size", self.canvas_size, MIN_CANVAS)
        _int_at_least("min_objects", self.min_objects, 1)
        if isinstance(self.max_objects, bool) or not isinstance(self.max_objects, int) or not (
            self.min_objects <= self.max_objects <= MAX_OBJECTS
        ):
            raise ValueError(
                f"Argument `max_objects` must be an integer in min_objects..{MAX_OBJECTS} "
                f"({self.min_objects}..{MAX_OBJECTS}). Received: max_objects={self.max_objects!r}"
            )
        _int_at_least("max_signs", self.max_signs, 0, 4)
        _int_at_least("grid_size", self.grid_size, 1, self.canvas_size // 4)
        _fraction("answer_noise", self.answer_noise, high=0.4, closed=True)
        _fraction("ocr_noise", self.ocr_noise)
        if self.bias is not None and not isinstance(self.bias, Bias):
            raise ValueError(
                "Argument `bias` must be None, a `Bias` or a string like 'circle=red:0.9'. "
                f"Received: bias={self.bias!r}"
            )

    def to_dict(self):
        """The settings as a JSON-ready dict (the manifest's `config`)."""
        out = dataclasses.asdict(self)
        out["bias"] = None if self.bias is None else dataclasses.asdict(self.bias)
        if out["bias"] is not None:
            out["bias"]["splits"] = list(out["bias"]["splits"])
        return out


def image_id(split, index):
    """The int image id of scene `index` of `split` (COCO ids are ints).

    Args:
        split: "train", "val" or "test".
        index: the scene index within the split.

    Returns:
        `(split position + 1) * 1_000_000 + index`.
    """
    return (SPLITS.index(split) + 1) * SPLIT_ID_STRIDE + index


def check_sizes(sizes):
    """Checks `{split: size}`: non-negative ints below the id stride, not all 0.

    Args:
        sizes: `{split name: number of scenes}`.

    Returns:
        `sizes`, unchanged (raises ValueError otherwise).
    """
    for split, size in sizes.items():
        _int_at_least(split, size, 0, SPLIT_ID_STRIDE - 1)
    if not any(sizes.values()):
        raise ValueError(
            "Arguments `train`, `val` and `test` must not all be 0. "
            f"Received: {dict(sizes)}"
        )
    return sizes
