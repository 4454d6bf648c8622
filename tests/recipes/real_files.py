"""Small files in the official formats, written by hand from the formats'
own descriptions (not with the library's writers), for the recipes' tests
on real data: VQA v2 questions and annotations, bottom-up-attention
per-image `.npz`, GloVe text, RefCOCO's `refs(unc).p` with COCO instances,
Karpathy's `dataset_coco.json` with COCO-named grid features.

Each image shows one coloured object; its features say which (a one-hot
block plus noise), so that a model can learn something in a few steps,
though the tests only need the commands to run.
"""

import json
import pickle

import numpy as np

COLORS = ("red", "green", "blue")
WIDTH, HEIGHT = 640, 480  # pixels, as COCO's images
FEATURE_DIM = 12


def _features(rng, color, count):
    features = rng.normal(0, 0.1, (count, FEATURE_DIM)).astype(np.float32)
    features[:, COLORS.index(color) * 4:(COLORS.index(color) + 1) * 4] += 1
    return features


def pixel_boxes(rng, count):
    """`[count, 4]` pixel boxes (x1, y1, x2, y2) inside a COCO-sized image."""
    x1 = rng.uniform(0, WIDTH / 2, count)
    y1 = rng.uniform(0, HEIGHT / 2, count)
    return np.stack([x1, y1, x1 + rng.uniform(20, WIDTH / 2, count),
                     y1 + rng.uniform(20, HEIGHT / 2, count)], -1).astype(np.float32)


def image_colors(image_ids):
    return {image_id: COLORS[image_id % 3] for image_id in image_ids}


def write_bottom_up_folder(folder, image_ids, regions=5, seed=0, **override):
    """bottom-up-attention per-image `.npz` (`<image_id>.npz`): `features`
    [N, C], pixel `boxes` [N, 4], `image_w`, `image_h`, `num_boxes`;
    `override` replaces arrays (a defect)."""
    folder.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(seed)
    for image_id, color in image_colors(image_ids).items():
        arrays = dict(features=_features(rng, color, regions), boxes=pixel_boxes(rng, regions),
                      image_w=WIDTH, image_h=HEIGHT, num_boxes=regions)
        arrays.update(override)
        np.savez(folder / f"{image_id}.npz", **{k: v for k, v in arrays.items()
                                                  if v is not None})
    return str(folder)


def write_vqa(folder, split, image_ids, annotated=True):
    """VQA v2 `v2_OpenEnded_mscoco_<split>_questions.json` (and the
    annotations JSON when `annotated`): two questions an image. Returns
    `(questions path, annotations path or None)`."""
    folder.mkdir(parents=True, exist_ok=True)
    questions, annotations = [], []
    for image_id, color in image_colors(image_ids).items():
        for k, (text, answer, kind) in enumerate((
                ("What color is the object?", color, "what color is the"),
                ("Is there an object?", "yes", "is there a"))):
            question_id = image_id * 10 + k
            questions.append({"image_id": image_id, "question": text,
                              "question_id": question_id})
            annotations.append({
                "question_id": question_id, "image_id": image_id, "question_type": kind,
                "answer_type": "other" if k == 0 else "yes/no",
                "multiple_choice_answer": answer,
                "answers": [{"answer": answer, "answer_confidence": "yes", "answer_id": i + 1}
                            for i in range(10)]})
    info = {"description": "test", "version": "2.0"}
    q_path = folder / f"v2_OpenEnded_mscoco_{split}_questions.json"
    q_path.write_text(json.dumps({"info": info, "task_type": "Open-Ended",
                                  "data_type": "mscoco", "data_subtype": split,
                                  "questions": questions, "license": {}}))
    if not annotated:
        return str(q_path), None
    a_path = folder / f"v2_mscoco_{split}_annotations.json"
    a_path.write_text(json.dumps({"info": info, "data_type": "mscoco", "data_subtype": split,
                                  "annotations": annotations, "license": {}}))
    return str(q_path), str(a_path)


def write_glove(path, words, dim=8, seed=0):
    """GloVe's text format: `word v1 ... vd` a line."""
    rng = np.random.default_rng(seed)
    path.write_text("".join(f"{w} {' '.join(f'{v:.4f}' for v in rng.normal(size=dim))}\n"
                            for w in words))
    return str(path)


def write_refcoco(folder, splits):
    """RefCOCO as the refer toolkit ships it: `refs(unc).p` (a pickled list
    of refs) and COCO `instances.json`; `splits` `{split: image ids}` (the
    toolkit's names: train, val, testA, testB). One ref of two sentences an
    image, referring to its object (annotation id = image id)."""
    folder.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(1)
    refs, images, annotations = [], [], []
    sent_id = 0
    for split, image_ids in splits.items():
        for image_id, color in image_colors(image_ids).items():
            x1, y1, x2, y2 = (float(v) for v in pixel_boxes(rng, 1)[0])
            images.append({"id": image_id, "width": WIDTH, "height": HEIGHT,
                           "file_name": f"COCO_train2014_{image_id:012d}.jpg"})
            annotations.append({"id": image_id, "image_id": image_id, "category_id": 1,
                                "bbox": [x1, y1, x2 - x1, y2 - y1], "area": (x2 - x1) * (y2 - y1),
                                "iscrowd": 0})
            sentences = []
            for raw in (f"the {color} thing", f"{color} one"):
                sentences.append({"tokens": raw.split(), "raw": raw, "sent_id": sent_id})
                sent_id += 1
            refs.append({"ref_id": image_id, "ann_id": image_id, "image_id": image_id,
                         "split": split, "category_id": 1, "sentences": sentences,
                         "sent_ids": [s["sent_id"] for s in sentences],
                         "file_name": f"COCO_train2014_{image_id:012d}_{image_id}.jpg"})
    with open(folder / "refs(unc).p", "wb") as f:
        pickle.dump(refs, f)
    (folder / "instances.json").write_text(json.dumps(
        {"images": images, "annotations": annotations,
         "categories": [{"id": 1, "name": "thing", "supercategory": "thing"}]}))
    return str(folder / "refs(unc).p"), str(folder / "instances.json")


def write_karpathy(path, splits):
    """Karpathy's `dataset_coco.json`: `splits` `{split: image ids}`, five
    tokenised captions an image, COCO file names."""
    images = []
    for split, image_ids in splits.items():
        for image_id, color in image_colors(image_ids).items():
            raws = [f"a {color} object", f"the {color} thing", f"one {color} object",
                    f"a {color} thing here", f"a picture of a {color} object"]
            images.append({"filepath": "val2014", "filename":
                           f"COCO_val2014_{image_id:012d}.jpg", "cocoid": image_id,
                           "imgid": len(images), "split": split,
                           "sentences": [{"tokens": r.split(), "raw": r} for r in raws]})
    path.write_text(json.dumps({"images": images, "dataset": "coco"}))
    return str(path)


def write_coco_grid_folder(folder, image_ids, grid=(3, 3), seed=0):
    """Grid features as `extract` writes them for COCO's images:
    `COCO_val2014_<12 digits>.npy`, `[H, W, C]`."""
    folder.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(seed)
    for image_id, color in image_colors(image_ids).items():
        array = _features(rng, color, grid[0] * grid[1]).reshape(*grid, FEATURE_DIM)
        np.save(folder / f"COCO_val2014_{image_id:012d}.npy", array)
    return str(folder)


def write_openvqa_folder(folder, image_ids, regions=5, seed=0):
    """OpenVQA's per-image `.npz`: `x` channels-first `[C, N]`, `bbox`
    `[N, 4]` pixels, `num_bbox`, `image_h`, `image_w`, named
    `COCO_train2014_<12 digits>.jpg.npz`."""
    folder.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(seed)
    for image_id, color in image_colors(image_ids).items():
        np.savez(folder / f"COCO_train2014_{image_id:012d}.jpg.npz",
                 x=_features(rng, color, regions).T, bbox=pixel_boxes(rng, regions),
                 num_bbox=regions, image_h=HEIGHT, image_w=WIDTH)
    return str(folder)
