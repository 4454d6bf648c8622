"""Whether a trained region captioner attends to the objects its words name.

For each test image of a Shapes world captioning run, the run's beam-search
caption is fed back teacher-forced and, for every colour or shape word, the
region its attention weights most (Up-Down's top-down attention, or a CATT
captioner's in-sample attention; mean over heads) is compared with the
scene: does that region's shape have the word's colour (or shape), and is
it an object that the word's noun phrase ("a red diamond") describes? The
script prints, per word kind, the share of words whose most attended region
matches, next to the share expected if the region were drawn at random
(the mean over images of the matching regions' share).

Usage:
    python -m benchmarks.caption_attention_grounding --output_dir RUN [--split test]
"""

import argparse
import collections

import numpy as np

from keras_structattn.data.shapes_world.scenes import COLOR_NAMES
from keras_structattn.data.shapes_world.scenes import SHAPES


def phrases(words):
    """`(position, kind, value, phrase_filter)` of each colour and shape word:
    kind "color" or "shape", and the filter of the noun phrase it is in."""
    out, current = [], {}
    for t, word in enumerate(words):
        if word in COLOR_NAMES:
            current = {"color": word}
            out.append([t, "color", word, current])
        elif word in SHAPES:
            current["shape"] = word
            out.append([t, "shape", word, current])
            current = {}
        elif word not in ("large", "small", "a", "an"):
            current = {}
    return out


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
    hits, chance, counts = collections.Counter(), collections.Counter(), collections.Counter()
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
        for t, kind, value, phrase in phrases(words):
            top = int(np.argmax(weights[t][: len(shapes)]))
            for name, test in ((f"{kind} word", {kind: value}), (f"{kind} word's phrase", phrase)):
                counts[name] += 1
                hits[name] += matches(shapes[top], test)
                chance[name] += np.mean([matches(s, test) for s in shapes])
    print(f"run {given.output_dir} ({settings['model']}), {given.split} split, "
          f"{len(image_ids)} captions: the most attended region when the word is produced")
    print(f"{'word':24s} {'words':>6s} {'on a match':>11s} {'at random':>10s}")
    for name in counts:
        print(f"{name:24s} {counts[name]:6d} {hits[name] / counts[name]:11.1%} "
              f"{chance[name] / counts[name]:10.1%}")


if __name__ == "__main__":
    main()
