"""Whether a trained captioner attends to the objects its words name.

For each test image of a Shapes world captioning run, the run's beam-search
caption is fed back teacher-forced and, for every colour or shape word, the
region its attention weights most (Up-Down's top-down attention, or a CATT
captioner's in-sample attention; mean over heads) is compared with the
scene: does that region's shape have the word's colour (or shape), and is
it an object that the word's noun phrase ("a large red diamond") describes?
For a grid captioner (`--model area`) the attention of the first decoder
layer is over areas (rectangles of grid cells; single cells without area
attention), and an area stands for the object whose box covers most of its
pixels (none: a miss). The script prints, per word kind, the share of words
whose most attended region matches, next to the share expected if the
region were drawn at random (the mean over images of the matching regions'
share). For a grid captioner two more measures, because with mean-pooled
area keys (Li et al., 2019, Eq. 3) an area's logit is the mean of its
cells' logits, so the single most attended area is always one cell and says
nothing about sizes: the attention *mass* on the objects (each area's weight
spread evenly over its cells, the share of that mass on cells whose object
matches, against the matching cells' share of the grid), and the
attention-weighted mean area size in cells when the phrase names a large
and a small shape, against the mean over all areas (uniform attention).

Usage:
    python -m benchmarks.caption_attention_grounding --output_dir RUN [--split test]
"""

import argparse
import collections

import numpy as np

from keras_structattn.data.shapes_world.scenes import COLOR_NAMES
from keras_structattn.data.shapes_world.scenes import SHAPES
from keras_structattn.data.shapes_world.scenes import SIZES


def phrases(words):
    """`(position, kind, value, phrase_filter)` of each colour and shape word:
    kind "color" or "shape", and the filter of the noun phrase it is in
    (its size, colour and shape words)."""
    out, current = [], {}
    for t, word in enumerate(words):
        if word in SIZES:
            current = {"size": word}
        elif word in COLOR_NAMES:
            current = {"color": word} if "color" in current or "shape" in current else current
            current["color"] = word
            out.append([t, "color", word, current])
        elif word in SHAPES:
            current["shape"] = word
            out.append([t, "shape", word, current])
            current = {}
        elif word not in ("a", "an"):
            current = {}
    return out


def area_objects(coordinates, shapes, cell):
    """The object each area stands for: the index of the shape whose box
    covers most of the area's pixels, -1 where none does.

    Args:
        coordinates: int `[A, 4]` areas `(row, col, height, width)` in cells.
        shapes: the scene's shapes (`box` `[x1, y1, x2, y2]` in pixels).
        cell: a cell's side in pixels.

    Returns:
        int `[A]`.
    """
    rows, cols, heights, widths = (coordinates[:, k].astype(float) for k in range(4))
    x1, y1 = cols * cell, rows * cell
    x2, y2 = x1 + widths * cell, y1 + heights * cell
    overlaps = np.zeros((len(coordinates), len(shapes) + 1))
    for j, shape in enumerate(shapes):
        bx1, by1, bx2, by2 = shape["box"]
        overlaps[:, j + 1] = (np.clip(np.minimum(x2, bx2) - np.maximum(x1, bx1), 0, None)
                              * np.clip(np.minimum(y2, by2) - np.maximum(y1, by1), 0, None))
    return np.argmax(overlaps, axis=1) - 1


def single_cells(grid):
    """`[H * W, 4]` one-cell areas `(row, col, 1, 1)`, row-major."""
    rows, cols = np.divmod(np.arange(grid[0] * grid[1]), grid[1])
    return np.stack([rows, cols, np.ones_like(rows), np.ones_like(rows)], axis=1)


def cell_cover(coordinates, grid):
    """`[A, H * W]`: row `a` is 1 / |a| on the cells of area `a`, so that
    `weights @ cover` spreads each area's attention evenly over its cells."""
    cover = np.zeros((len(coordinates), grid[0] * grid[1]))
    for a, (row, col, height, width) in enumerate(coordinates):
        for r in range(row, row + height):
            cover[a, r * grid[1] + col: r * grid[1] + col + width] = 1.0 / (height * width)
    return cover


def matches(shape, filter_):
    return all(shape[k] == v for k, v in filter_.items())


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--output_dir", required=True)
    parser.add_argument("--split", default="test")
    given = parser.parse_args()
    import json
    import os

    from keras import ops

    from keras_structattn.tasks.captioning import batches
    from recipes.caption import build_parser
    from recipes.caption import commands

    args = build_parser().parse_args(["evaluate", "--output_dir", given.output_dir,
                                      "--split", given.split])
    trained = commands.load_trained(args)
    model, vocab, settings, _ = trained
    split = commands.load_splits(args, settings, (given.split,))[given.split]
    with open(os.path.join(given.output_dir, "shapes_world", f"scenes_{given.split}.json"),
              encoding="utf-8") as f:
        scenes = {int(s["image_id"]): s for s in json.load(f)["scenes"]}
    image_ids = [r.image_id for r in split.records]
    captions = commands.caption_images(trained, split.store, image_ids, args)
    grid = settings["feature_kind"] == "grid"
    if grid:
        coordinates = model.area_coordinates(0)
        with open(os.path.join(given.output_dir, "shapes_world", "manifest.json"),
                  encoding="utf-8") as f:
            canvas = json.load(f)["config"]["canvas_size"]
        cell = canvas / settings["feature_shape"][0]
        areas = coordinates[:, 2] * coordinates[:, 3]
        cover = cell_cover(coordinates, settings["feature_shape"][:2])
        uniform_size = float(np.mean(areas))
    hits, chance, counts = collections.Counter(), collections.Counter(), collections.Counter()
    mass, mass_chance = collections.Counter(), collections.Counter()
    sizes = collections.defaultdict(list)
    for image_id, caption in zip(image_ids, captions):
        decoder_inputs, words = batches.teacher_forced_input(vocab, caption)
        features = commands.feature_batch(split.store, [image_id], settings["feature_kind"])
        if hasattr(model, "attention_weights"):
            weights = model.attention_weights(features, decoder_inputs)[0]
        else:
            weights = model.encdec_attention(features, decoder_inputs, layer=0)[0]
        weights = ops.convert_to_numpy(weights)[0]
        weights = weights.mean(0) if weights.ndim == 3 else weights
        shapes = scenes[image_id]["shapes"]
        # What each attended unit stands for: an object index, -1 for none.
        objects = (area_objects(coordinates, shapes, cell) if grid
                   else np.arange(weights.shape[-1]))
        candidates = objects if grid else objects[: len(shapes)]
        if grid:
            cell_objects = area_objects(single_cells(settings["feature_shape"][:2]), shapes, cell)
        for t, kind, value, phrase in phrases(words):
            top = int(np.argmax(weights[t][: len(candidates)]))
            if grid:
                cell_mass = weights[t][: len(areas)] @ cover  # [cells], sums to 1
                if "size" in phrase:
                    sizes[phrase["size"]].append(float(weights[t][: len(areas)] @ areas))
            for name, test in ((f"{kind} word", {kind: value}), (f"{kind} word's phrase", phrase)):
                found = [o >= 0 and matches(shapes[o], test) for o in candidates]
                counts[name] += 1
                hits[name] += found[top]
                chance[name] += np.mean(found)
                if grid:
                    on = np.array([o >= 0 and matches(shapes[o], test) for o in cell_objects])
                    mass[name] += float(cell_mass @ on)
                    mass_chance[name] += float(np.mean(on))
    print(f"run {given.output_dir} ({settings['model']}, {settings['hparams_set']}), "
          f"{given.split} split, {len(image_ids)} captions: the most attended "
          f"{'area of decoder layer 0' if grid else 'region'} when the word is produced")
    print(f"{'word':24s} {'words':>6s} {'on a match':>11s} {'at random':>10s}")
    for name in counts:
        print(f"{name:24s} {counts[name]:6d} {hits[name] / counts[name]:11.1%} "
              f"{chance[name] / counts[name]:10.1%}")
    if grid:
        print(f"{'attention mass (cells)':24s} {'words':>6s} {'on a match':>11s} {'uniform':>10s}")
        for name in counts:
            print(f"{name:24s} {counts[name]:6d} {mass[name] / counts[name]:11.1%} "
                  f"{mass_chance[name] / counts[name]:10.1%}")
    for size, cells in sorted(sizes.items()):
        print(f"attention-weighted area size when the phrase names a {size} shape: "
              f"{np.mean(cells):.2f} cells ({len(cells)} words; uniform attention: "
              f"{uniform_size:.2f})")


if __name__ == "__main__":
    main()
