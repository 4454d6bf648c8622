"""Small files in the official formats, written by hand from the formats'
own descriptions (not with the library's writers), for the recipes' tests
on real data: VQA v2 questions and annotations, bottom-up-attention
per-image `.npz`, GloVe text, RefCOCO's `refs(unc).p` with COCO instances,
Karpathy's `dataset_coco.json` with COCO-named grid features, and TextVQA as
M4C reads it: mmf imdbs, mmf's per-image object `.npy` + `_info.npy`, OCR
features, a FastText `.vec` and an answer vocabulary.

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


# TextVQA's images are Open Images', named by 16 hex digits; one that is all
# digits must stay a name (not the int it also reads as).
OPEN_IMAGES_SIZE = (1024, 768)
OCR_WORDS = ("stop", "cafe", "exit")


def textvqa_image_ids(count, start=0):
    ids = [f"{(0x9E3779B97F4A7C15 * (k + 1 + start)) % 2 ** 64:016x}" for k in range(count)]
    if start == 0:
        ids[0] = "1234567890123456"
    return ids


def write_textvqa_imdb(path, split, image_ids, annotated=True):
    """mmf's TextVQA imdb (`imdb_<split>.npy`): a header, then one question
    an image asking for the word on its sign (one of its two OCR tokens,
    given with `ocr_info` and `ocr_normalized_boxes`); the official test
    imdb (`annotated=False`) has no answers."""
    w, h = OPEN_IMAGES_SIZE
    header = {"version": 1, "dataset_name": "textvqa", "dataset_type": split,
              "has_answer": annotated}
    entries = []
    for k, image_id in enumerate(image_ids):
        word, other = OCR_WORDS[k % 3], OCR_WORDS[(k + 1) % 3]
        boxes = [[0.1, 0.1, 0.4, 0.2], [0.5, 0.6, 0.9, 0.7]]
        entry = {
            "question_id": 1000 * (split == "val") + 2000 * (split == "test") + k,
            "image_id": image_id, "image_name": image_id, "image_width": w, "image_height": h,
            "set_name": split, "feature_path": f"{image_id}.npy",
            "question": "what is written on the sign?",
            "question_tokens": ["what", "is", "written", "on", "the", "sign"],
            "ocr_tokens": [word, other],
            "ocr_info": [{"word": t, "bounding_box": {
                "top_left_x": b[0], "top_left_y": b[1], "width": b[2] - b[0],
                "height": b[3] - b[1], "rotation": 0, "roll": 0, "pitch": 0, "yaw": 0}}
                for t, b in zip((word, other), boxes)],
            "ocr_normalized_boxes": np.array(boxes, np.float32),
        }
        if annotated:
            entry["answers"] = [word] * 10
            entry["valid_answers"] = [word] * 10
        entries.append(entry)
    np.save(path, np.array([header, *entries], dtype=object), allow_pickle=True)
    return str(path)


def write_mmf_object_folder(folder, image_ids, regions=5, seed=0):
    """mmf's per-image object features (`extract_features_vmb.py`):
    `<image_id>.npy` `[N, C]` and `<image_id>_info.npy`, a pickled dict of
    pixel `bbox`, `num_boxes`, `objects`, `cls_prob`, `image_width`,
    `image_height`."""
    folder.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(seed)
    w, h = OPEN_IMAGES_SIZE
    for k, image_id in enumerate(image_ids):
        np.save(folder / f"{image_id}.npy", _features(rng, COLORS[k % 3], regions))
        boxes = pixel_boxes(rng, regions) * np.float32(w / WIDTH)
        np.save(folder / f"{image_id}_info.npy",
                {"bbox": boxes, "num_boxes": regions, "objects": np.zeros(regions, np.int64),
                 "cls_prob": np.full((regions, 1601), 1 / 1601, np.float32),
                 "image_width": w, "image_height": h}, allow_pickle=True)
    return str(folder)


def write_mmf_ocr_folder(folder, imdb_paths, seed=1):
    """mmf's OCR token features as `projects/m4c/scripts/extract_ocr_frcn_feature.py`
    writes them: for each image of the imdbs, `<feature_path>` (`<image_id>.npy`)
    `[T, C]` in the imdb's OCR order beside `<image_id>_info.npy`, a pickled
    dict of `ocr_boxes` (pixels) and `ocr_tokens`."""
    folder.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(seed)
    for path in imdb_paths:
        for info in np.load(path, allow_pickle=True)[1:]:
            w, h = info["image_width"], info["image_height"]
            boxes = np.asarray(info["ocr_normalized_boxes"]).reshape(-1, 4) * [w, h, w, h]
            save = folder / info["feature_path"]
            np.save(str(save).replace(".npy", "_info.npy"),
                    {"ocr_boxes": boxes, "ocr_tokens": info["ocr_tokens"]})
            np.save(save, rng.normal(size=(len(boxes), FEATURE_DIM)).astype(np.float32))
    return str(folder)


def write_fasttext(path, words, dim=6, seed=2):
    """FastText's `.vec`: a `count dim` line, then `word v1 ... vd`."""
    write_glove(path, words, dim, seed)
    path.write_text(f"{len(words)} {dim}\n" + path.read_text())
    return str(path)


def write_answer_vocab(path, words):
    """M4C's `fixed_answer_vocab_textvqa_5k.txt`: `<pad>`, `<s>`, `</s>`, then words."""
    path.write_text("\n".join(("<pad>", "<s>", "</s>", *words)) + "\n")
    return str(path)
