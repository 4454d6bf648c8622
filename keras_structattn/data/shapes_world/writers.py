"""Writing Shapes world in the real formats.

Layout under `out_dir` (task files only for the generated tasks):

    manifest.json                  config, sizes, counters, file list, timing
    scenes_<split>.json            scene graphs: shapes, signs, token boxes
    features_<split>.npz           images and features (`split_features`)
    images/<split>/<file_name>     PNG images (only with `png=True`)
    captions/captions_<split>.json COCO captions (pycocotools `COCO()`)
    vqa/questions_<split>.json     VQA v2 questions
    vqa/annotations_<split>.json   VQA v2 annotations (10 answers each)
    textvqa/imdb_<split>.npy       mmf / M4C TextVQA imdb
    refs/refs.json                 RefCOCO-style refs, all splits ("split" key)
    refs/instances.json            COCO instances of the referred images

Ids: `image_id = (split index + 1) * 1_000_000 + scene index`; caption,
question and ref ids are `image_id * 10 + k` (k < 10 per scene and task);
instance ids `image_id * 100 + shape index`. `file_name` is
`shapes_world_<split>_<index:06d>.png`, the same in every file. Records
keep the format's keys and add a few of their own (`facts`, and where it
applies `group`, `bias_conflict`, `needs_relation`, `answer_source`,
`answer_tokens`), which the reference readers ignore.

Formats:

- COCO captions: `{"info", "licenses", "type": "captions", "images":
  [{id, file_name, width, height}], "annotations": [{id, image_id,
  caption}]}`.
- VQA v2 (the format the official VQA evaluation code reads): questions `{"info", "task_type":
  "Open-Ended", "data_type": "shapes_world", "data_subtype": split,
  "license", "questions": [{question_id, image_id, question}]}`;
  annotations `{..., "annotations": [{question_id, image_id,
  question_type, answer_type, multiple_choice_answer, answers: [{answer,
  answer_confidence, answer_id}] * 10}]}`. `question_type` is the Shapes
  world type ("count", "color", "shape", "exist", "relation"), not a
  question prefix.
- TextVQA imdb: `np.save` of an object array, element 0 a header
  `{"version", "dataset_name", "dataset_type", "has_answer"}`, then one
  dict per question with M4C's keys: `image_id` (int), `image_name`,
  `image_width`, `image_height`, `question_id`, `question`,
  `question_tokens`, `ocr_tokens` (as the OCR read them), `ocr_info`
  (`{word, bounding_box: {top_left_x, top_left_y, width, height,
  rotation, roll, pitch, yaw}}`, normalised), `ocr_normalized_boxes`
  float32 [T, 4], `obj_normalized_boxes` float32 [N, 4], `answers` (10),
  `valid_answers`, `set_name`, `feature_path` (`features_<split>.npz`),
  `feature_index` (row in it), `question_type`. Load with
  `np.load(path, allow_pickle=True)`.
- RefCOCO: refs `{ref_id, ann_id, image_id, split, category_id,
  file_name, sent_ids, sentences: [{sent_id, raw, sent, tokens}]}`;
  instances: COCO detection `{"images", "annotations": [{id, image_id,
  category_id, bbox [x, y, w, h] pixels, area, iscrowd, color, size}],
  "categories": [{id, name, supercategory}]}` (no segmentation).
"""

import json
import os
import struct
import zlib

import numpy as np

from keras_structattn.data.shapes_world.config import SPLITS
from keras_structattn.data.shapes_world.scenes import SHAPES

DATA_TYPE = "shapes_world"
IMDB_VERSION = 1


def features_path(folder, split):
    """The path of a split's features file (`features_<split>.npz`: images,
    region and grid features) in a written world's `folder`."""
    return os.path.join(folder, f"features_{split}.npz")


def file_name(scene):
    """The image file name of a scene, the same in every file format.

    Args:
        scene: a `Scene`.

    Returns:
        `shapes_world_<split>_<index:06d>.png`.
    """
    return f"shapes_world_{scene.split}_{scene.index:06d}.png"


def write_png(path, image):
    """Writes a uint8 RGB `[H, W, 3]` image as PNG (stdlib zlib + struct).

    Args:
        path: the file to write.
        image: uint8 array-like `[H, W, 3]`.
    """
    image = np.ascontiguousarray(image, np.uint8)
    if image.ndim != 3 or image.shape[2] != 3:
        raise ValueError(f"Argument `image` must be uint8 [H, W, 3]. Received shape {image.shape}")
    height, width, _ = image.shape
    # Each row is prefixed with filter type 0 (none).
    raw = np.concatenate([np.zeros((height, 1), np.uint8), image.reshape(height, -1)], axis=1)

    def chunk(tag, data):
        body = tag + data
        crc = struct.pack(">I", zlib.crc32(body) & 0xFFFFFFFF)
        return struct.pack(">I", len(data)) + body + crc

    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)  # 8-bit RGB
    with open(path, "wb") as f:
        f.write(b"\x89PNG\r\n\x1a\n")
        f.write(chunk(b"IHDR", header))
        f.write(chunk(b"IDAT", zlib.compress(raw.tobytes(), 6)))
        f.write(chunk(b"IEND", b""))


def _dump(path, obj):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w", encoding="utf-8") as f:
        json.dump(obj, f, separators=(",", ":"))


def _images(split):
    return [
        {"id": s.image_id, "file_name": file_name(s), "width": s.canvas, "height": s.canvas}
        for s in split.scenes
    ]


def coco_captions(split):
    """The COCO captions dict of a split.

    Args:
        split: a generated `Split` with the captions task.

    Returns:
        A dict in the COCO captions format (module docstring).
    """
    annotations = []
    for scene, captions in zip(split.scenes, split.tasks["captions"]):
        for k, c in enumerate(captions):
            annotations.append({
                "id": scene.image_id * 10 + k, "image_id": scene.image_id,
                "caption": c["caption"], "group": c["group"], "facts": c["facts"],
            })
    return {
        "info": {"description": f"Shapes world captions, {split.name} split", "version": "1.0"},
        "licenses": [],
        "type": "captions",
        "images": _images(split),
        "annotations": annotations,
    }


def _answers(answers):
    return [
        {"answer": a, "answer_confidence": c, "answer_id": k + 1}
        for k, (a, c) in enumerate(answers)
    ]


def vqa_files(split, bias):
    """The VQA v2 question and annotation files of a split.

    Args:
        split: a generated `Split` with the vqa task.
        bias: the world's `Bias`, or None; with one, each annotation also
            says whether it conflicts with the bias (`bias_conflict`).

    Returns:
        `(questions dict, annotations dict)` in VQA v2 format.
    """
    head = {
        "info": {"description": f"Shapes world VQA, {split.name} split", "version": "1.0"},
        "task_type": "Open-Ended",
        "data_type": DATA_TYPE,
        "data_subtype": split.name,
        "license": {},
    }
    questions, annotations = [], []
    for scene, records in zip(split.scenes, split.tasks["vqa"]):
        for k, r in enumerate(records):
            qid = scene.image_id * 10 + k
            questions.append(
                {"question_id": qid, "image_id": scene.image_id, "question": r["question"]}
            )
            ann = {
                "question_id": qid,
                "image_id": scene.image_id,
                "question_type": r["question_type"],
                "answer_type": r["answer_type"],
                "multiple_choice_answer": r["answer"],
                "answers": _answers(r["answers"]),
                "facts": r["facts"],
            }
            if bias is not None:
                ann["bias_conflict"] = r["bias_conflict"]
            annotations.append(ann)
    return dict(head, questions=questions), dict(head, annotations=annotations)


def textvqa_imdb(split, bias):
    """The mmf imdb (object array, header first) of a split.

    Args:
        split: a generated `Split` with the textvqa task.
        bias: the world's `Bias`, or None.

    Returns:
        A NumPy object array: the header, then one dict per question.
    """
    entries = [{
        "version": IMDB_VERSION,
        "dataset_name": DATA_TYPE,
        "dataset_type": split.name,
        "has_answer": True,
    }]
    for row, (scene, records) in enumerate(zip(split.scenes, split.tasks["textvqa"])):
        ocr_tokens = [w for sign in scene.signs for w in sign.ocr_words]
        ocr_boxes = scene.normalized_boxes("t")
        ocr_info = [
            {
                "word": w,
                "bounding_box": {
                    "top_left_x": float(b[0]), "top_left_y": float(b[1]),
                    "width": float(b[2] - b[0]), "height": float(b[3] - b[1]),
                    "rotation": 0.0, "roll": 0.0, "pitch": 0.0, "yaw": 0.0,
                },
            }
            for w, b in zip(ocr_tokens, ocr_boxes)
        ]
        for k, r in enumerate(records):
            answers = [a for a, _ in r["answers"]]
            entry = {
                "image_id": scene.image_id,
                "image_name": file_name(scene)[:-4],
                "image_width": scene.canvas,
                "image_height": scene.canvas,
                "question_id": scene.image_id * 10 + k,
                "question": r["question"],
                "question_tokens": r["question"].rstrip("?").split(),
                "question_type": r["question_type"],
                "answer_type": r["answer_type"],
                "answer_source": r["answer_source"],
                "answer_tokens": list(r["answer_tokens"]),
                "ocr_tokens": list(ocr_tokens),
                "ocr_info": ocr_info,
                "ocr_normalized_boxes": ocr_boxes,
                "obj_normalized_boxes": scene.normalized_boxes("o"),
                "answers": answers,
                "valid_answers": list(answers),
                "set_name": split.name,
                "feature_path": f"features_{split.name}.npz",
                "feature_index": row,
                "facts": r["facts"],
            }
            if bias is not None:
                entry["bias_conflict"] = r["bias_conflict"]
            entries.append(entry)
    array = np.empty(len(entries), dtype=object)
    array[:] = entries
    return array


def refcoco_files(splits):
    """RefCOCO refs and COCO instances over the given splits.

    Args:
        splits: the generated `Split`s with the refs task.

    Returns:
        `(refs list, instances dict)` in the RefCOCO layout.
    """
    refs, images, annotations = [], [], []
    for split in splits:
        for scene, records in zip(split.scenes, split.tasks["refs"]):
            images.append({
                "id": scene.image_id, "file_name": file_name(scene),
                "width": scene.canvas, "height": scene.canvas, "split": split.name,
            })
            for i, o in enumerate(scene.shapes):
                x1, y1, x2, y2 = o.box
                annotations.append({
                    "id": scene.image_id * 100 + i, "image_id": scene.image_id,
                    "category_id": SHAPES.index(o.shape) + 1,
                    "bbox": [x1, y1, x2 - x1, y2 - y1], "area": (x2 - x1) * (y2 - y1),
                    "iscrowd": 0, "color": o.color, "size": o.size,
                })
            for k, r in enumerate(records):
                ref_id = scene.image_id * 10 + k
                sent_ids = [ref_id * 10 + j for j in range(len(r["sentences"]))]
                target = scene.shapes[r["target"]]
                refs.append({
                    "ref_id": ref_id,
                    "ann_id": scene.image_id * 100 + r["target"],
                    "image_id": scene.image_id,
                    "split": split.name,
                    "category_id": SHAPES.index(target.shape) + 1,
                    "file_name": file_name(scene),
                    "sent_ids": sent_ids,
                    "sentences": [
                        {"sent_id": sid, "raw": s, "sent": s, "tokens": s.split()}
                        for sid, s in zip(sent_ids, r["sentences"])
                    ],
                    "needs_relation": r["needs_relation"],
                    "facts": r["facts"],
                    "bias_conflict": r["bias_conflict"],
                })
    categories = [{"id": k + 1, "name": s, "supercategory": "shape"} for k, s in enumerate(SHAPES)]
    instances = {
        "info": {"description": "Shapes world instances (RefCOCO layout)", "version": "1.0"},
        "licenses": [],
        "images": images,
        "annotations": annotations,
        "categories": categories,
    }
    return refs, instances


def write(world, out_dir, png=False, compress=True):
    """Writes a `ShapesWorld` to `out_dir` (layout in the module docstring).

    Args:
        world: a `ShapesWorld` from `generate`.
        out_dir: output folder (created).
        png: also write one PNG per image under `images/<split>/`.
        compress: `np.savez_compressed` for the feature files.

    Returns:
        A dict `{kind: [paths]}` of the written files.
    """
    from keras_structattn.data.shapes_world.report import summarize

    os.makedirs(out_dir, exist_ok=True)
    bias = world.config.bias
    written = {}

    def add(kind, path):
        written.setdefault(kind, []).append(path)

    for name, split in world.splits.items():
        path = os.path.join(out_dir, f"scenes_{name}.json")
        _dump(path, {"split": name, "scenes": [s.to_dict() for s in split.scenes]})
        add("scenes", path)
        path = features_path(out_dir, name)
        (np.savez_compressed if compress else np.savez)(path, **split.features)
        add("features", path)
        if png:
            folder = os.path.join(out_dir, "images", name)
            os.makedirs(folder, exist_ok=True)
            for scene in split.scenes:
                write_png(os.path.join(folder, file_name(scene)), scene.image)
            add("images", folder)
        if "captions" in world.tasks:
            path = os.path.join(out_dir, "captions", f"captions_{name}.json")
            _dump(path, coco_captions(split))
            add("captions", path)
        if "vqa" in world.tasks:
            questions, annotations = vqa_files(split, bias)
            for kind, obj in (("questions", questions), ("annotations", annotations)):
                path = os.path.join(out_dir, "vqa", f"{kind}_{name}.json")
                _dump(path, obj)
                add("vqa", path)
        if "textvqa" in world.tasks:
            path = os.path.join(out_dir, "textvqa", f"imdb_{name}.npy")
            os.makedirs(os.path.dirname(path), exist_ok=True)
            np.save(path, textvqa_imdb(split, bias), allow_pickle=True)
            add("textvqa", path)
    if "refs" in world.tasks:
        refs, instances = refcoco_files([world.splits[s] for s in SPLITS if s in world.splits])
        for name, obj in (("refs.json", refs), ("instances.json", instances)):
            path = os.path.join(out_dir, "refs", name)
            _dump(path, obj)
            add("refs", path)
    path = os.path.join(out_dir, "manifest.json")
    manifest = {
        "dataset": DATA_TYPE,
        "config": world.config.to_dict(),
        "tasks": list(world.tasks),
        "summary": summarize(world),
        "files": {k: [os.path.relpath(p, out_dir) for p in v] for k, v in written.items()},
    }
    with open(path, "w", encoding="utf-8") as f:
        json.dump(manifest, f, indent=1)
    add("manifest", path)
    return written
