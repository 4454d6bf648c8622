"""Caption files: Karpathy's splits, COCO captions, split lists, id batches.

The files are tiny and written here; the malformed ones check that every
error names the file and the image id, annotation index or line. A Shapes
world captions file is read back against pycocotools' `COCO` reader, and the
batches against plain loops.
"""

import json
import os

import numpy as np
import pytest

from keras_structattn.data import shapes_world as sw
from keras_structattn.data.word_vocab import WordVocab
from keras_structattn.decoding.tokens import EOS_ID
from keras_structattn.decoding.tokens import PAD_ID
from keras_structattn.decoding.tokens import UNK_ID
from keras_structattn.tasks.captioning.coco_captions import CaptionReport
from keras_structattn.tasks.captioning.coco_captions import SplitList
from keras_structattn.tasks.captioning.coco_captions import caption_batch
from keras_structattn.tasks.captioning.coco_captions import caption_ids
from keras_structattn.tasks.captioning.coco_captions import default_tokenize
from keras_structattn.tasks.captioning.coco_captions import read_coco_captions
from keras_structattn.tasks.captioning.coco_captions import read_karpathy
from keras_structattn.tasks.captioning.coco_captions import read_split_list


def _sentence(raw):
    return {"tokens": raw.replace(".", "").split(), "raw": raw}


def karpathy_images():
    return [
        {"split": "train", "cocoid": 9, "filepath": "train2014",
         "filename": "COCO_train2014_000000000009.jpg",
         "sentences": [_sentence("A Red circle."), _sentence("Two shapes")]},
        {"split": "restval", "cocoid": 25, "filepath": "val2014",
         "filename": "COCO_val2014_000000000025.jpg", "sentences": [_sentence("A giraffe")]},
        {"split": "val", "cocoid": 30, "filename": "b.jpg", "sentences": [_sentence("A dog.")]},
        {"split": "test", "imgid": 4, "filename": "c.jpg", "sentences": [_sentence("Cats")]},
        {"split": "restval", "id": 7, "filename": "d.jpg", "sentences": [_sentence("Sky")]},
    ]


def write_json(path, obj):
    with open(path, "w", encoding="utf-8") as f:
        json.dump(obj, f, indent=1)
    return str(path)


def coco_file():
    return {
        "info": {}, "licenses": [], "type": "captions",
        "images": [
            {"id": 5, "file_name": "COCO_val2014_000000000005.jpg", "width": 640},
            {"id": 3, "file_name": "COCO_val2014_000000000003.jpg"},
            {"id": 8, "file_name": "COCO_val2014_000000000008.jpg"},
        ],
        "annotations": [
            {"id": 1, "image_id": 3, "caption": "A man's Hat, red."},
            {"id": 2, "image_id": 5, "caption": "Two dogs"},
            {"id": 3, "image_id": 3, "caption": "A hat\n"},
            {"id": 4, "image_id": 8, "caption": "Über café"},
        ],
    }


# --------------------------------------------------------------------------
# Karpathy's splits.


def test_karpathy_splits_merge_restval_and_lower_case(tmp_path):
    data = {"images": karpathy_images(), "dataset": "coco"}
    path = write_json(tmp_path / "dataset_coco.json", data)
    splits = read_karpathy(path)
    assert list(splits) == ["train", "val", "test"]
    assert [r.image_id for r in splits["train"]] == [9, 25, 7]  # file order, restval merged
    assert [r.image_id for r in splits["val"]] == [30]
    assert [r.image_id for r in splits["test"]] == [4]  # Flickr-style `imgid`
    first = splits["train"][0]
    assert first.file_name == "train2014/COCO_train2014_000000000009.jpg"
    assert first.captions == ["A Red circle.", "Two shapes"]
    assert first.tokens == [["a", "red", "circle"], ["two", "shapes"]]
    assert splits["val"][0].file_name == "b.jpg"
    report = splits.report
    assert isinstance(report, CaptionReport)
    assert (report.images_in_file, report.images, report.captions) == (5, 5, 6)
    assert report.restval_merged == 2
    assert report.splits == {"train": 3, "val": 1, "test": 1}
    line = report.describe()
    assert "\n" not in line and "2 restval images merged into train" in line and "5 images" in line


def test_karpathy_tokenize_applies_to_raw(tmp_path):
    path = write_json(tmp_path / "k.json", {"images": karpathy_images()})
    splits = read_karpathy(path, tokenize=lambda raw: raw.split())
    assert splits["train"][0].tokens[0] == ["A", "Red", "circle."]


def _karpathy_error(tmp_path, images, match, **kwargs):
    path = write_json(tmp_path / "bad.json", {"images": images})
    with pytest.raises(ValueError, match=match) as info:
        read_karpathy(path, **kwargs)
    message = str(info.value)
    assert path in message and "\n" not in message
    return message


def test_karpathy_errors_name_file_and_image(tmp_path):
    images = karpathy_images()
    del images[2]["split"]
    _karpathy_error(tmp_path, images, r"image id 30 \(images\[2\]\): missing key 'split'")
    images = karpathy_images()
    images[1]["split"] = "dev"
    _karpathy_error(tmp_path, images, r"image id 25 .*unknown split 'dev'.*restval")
    images = karpathy_images()
    images[3]["imgid"] = 9
    _karpathy_error(tmp_path, images, r"image id 9 \(images\[3\]\): duplicate image id")
    images = karpathy_images()
    del images[0]["cocoid"]
    _karpathy_error(tmp_path, images, r"images\[0\]: missing the image id")
    images = karpathy_images()
    del images[0]["sentences"][1]["tokens"]
    _karpathy_error(tmp_path, images, r"image id 9 \(images\[0\]\), sentences\[1\]: missing key")
    _karpathy_error(tmp_path, {"x": 1}, r"'images' must be a list")


def test_karpathy_image_without_sentences(tmp_path):
    images = karpathy_images()
    images[2]["sentences"] = []
    _karpathy_error(tmp_path, images, r"image id 30 .*no sentences")
    path = write_json(tmp_path / "k.json", {"images": images})
    splits = read_karpathy(path, images_without_captions="skip")
    assert "val" not in splits
    assert splits.report.skipped_without_captions == [30]
    assert "1 images without captions skipped" in splits.report.describe()


def test_malformed_json_names_the_line(tmp_path):
    path = tmp_path / "broken.json"
    path.write_text('{"images": [\n  {"split": "train",\n   "cocoid": 1,,\n  }\n]}\n')
    for reader in (read_karpathy, read_coco_captions):
        with pytest.raises(ValueError, match=rf"{path}, line 3: not valid JSON"):
            reader(path)
    with pytest.raises(FileNotFoundError, match="nothing.json"):
        read_karpathy(tmp_path / "nothing.json")


# --------------------------------------------------------------------------
# COCO captions and split lists.


def test_coco_captions_read_in_file_order(tmp_path):
    path = write_json(tmp_path / "captions_val2014.json", coco_file())
    records = read_coco_captions(path)
    assert [r.image_id for r in records] == [5, 3, 8]
    assert records[1].captions == ["A man's Hat, red.", "A hat\n"]
    # Default tokenisation: lower-case, split on anything not a letter or digit.
    assert records[1].tokens == [["a", "man", "s", "hat", "red"], ["a", "hat"]]
    assert records[2].tokens == [["über", "café"]]
    assert records.report.images == 3 and records.report.captions == 4
    custom = read_coco_captions(path, tokenize=str.split)
    assert custom[1].tokens[0] == ["A", "man's", "Hat,", "red."]


def test_default_tokenize():
    assert default_tokenize("A man's  HAT_2, (red)!") == ["a", "man", "s", "hat", "2", "red"]
    assert default_tokenize(" .. ") == []


def test_coco_matches_pycocotools_on_shapes_world(tmp_path):
    coco_module = pytest.importorskip("pycocotools.coco")
    world = sw.generate(train=3, val=0, test=0, tasks="captions", seed=1)
    sw.write(world, str(tmp_path))
    path = os.path.join(tmp_path, "captions", "captions_train.json")
    records = read_coco_captions(path)
    coco = coco_module.COCO(path)
    assert sorted(r.image_id for r in records) == sorted(coco.getImgIds())
    for record in records:
        expected = [a["caption"] for a in coco.imgToAnns[record.image_id]]
        assert record.captions == expected
        assert record.file_name == coco.imgs[record.image_id]["file_name"]


def _coco_error(tmp_path, data, match, **kwargs):
    path = write_json(tmp_path / "bad_captions.json", data)
    with pytest.raises(ValueError, match=match) as info:
        read_coco_captions(path, **kwargs)
    assert path in str(info.value) and "\n" not in str(info.value)


def test_coco_errors_name_file_and_index(tmp_path):
    data = coco_file()
    data["annotations"][2]["image_id"] = 42
    _coco_error(tmp_path, data, r"annotations\[2\]: image id 42 is not in the file's 'images'")
    data = coco_file()
    del data["annotations"][3]["caption"]
    _coco_error(tmp_path, data, r"annotations\[3\] \(image id 8\): missing key 'caption'")
    data = coco_file()
    data["images"][2]["id"] = 5
    _coco_error(tmp_path, data, r"image id 5 \(images\[2\]\): duplicate image id.*images\[0\]")
    data = coco_file()
    data["images"][1]["id"] = "3"
    _coco_error(tmp_path, data, r"images\[1\]: 'id' must be a non-negative integer")
    data = coco_file()
    del data["images"][0]["file_name"]
    _coco_error(tmp_path, data, r"image id 5 \(images\[0\]\): missing key 'file_name'")
    data = coco_file()
    del data["annotations"]
    _coco_error(tmp_path, data, r"missing key 'annotations'")


def test_coco_image_without_captions(tmp_path):
    data = coco_file()
    data["annotations"] = [a for a in data["annotations"] if a["image_id"] != 5]
    _coco_error(tmp_path, data, r"image id 5: the image has no caption")
    path = write_json(tmp_path / "c.json", data)
    records = read_coco_captions(path, images_without_captions="skip")
    assert [r.image_id for r in records] == [3, 8]
    assert records.report.skipped_without_captions == [5]
    with pytest.raises(ValueError, match="images_without_captions"):
        read_coco_captions(path, images_without_captions="drop")


def test_split_ids_select_and_count(tmp_path):
    path = write_json(tmp_path / "c.json", coco_file())
    records = read_coco_captions(path, split_ids={8, 3})
    assert [r.image_id for r in records] == [3, 8]
    assert records.report.outside_split == 1
    assert "1 images outside the split list" in records.report.describe()
    with pytest.raises(ValueError, match=r"argument `split_ids`: image id 4 is not in .*c.json"):
        read_coco_captions(path, split_ids={3, 4})


def test_split_list_file(tmp_path):
    path = write_json(tmp_path / "c.json", coco_file())
    split = tmp_path / "test_split.txt"
    split.write_text(
        "# Karpathy test split\n\n000000000008\nCOCO_val2014_000000000003.jpg  # a name\n"
    )
    listed = read_split_list(split)
    assert isinstance(listed, SplitList) and len(listed) == 2
    assert listed.ids == {8: 3} and listed.names == {"COCO_val2014_000000000003.jpg": 4}
    for split_ids in (listed, str(split)):
        records = read_coco_captions(path, split_ids=split_ids)
        assert [r.image_id for r in records] == [3, 8]
    split.write_text("3\nCOCO_val2014_000000000005\n")  # a stem names an image too
    assert [r.image_id for r in read_coco_captions(path, split_ids=split)] == [5, 3]


def test_split_list_errors_name_file_and_line(tmp_path):
    path = write_json(tmp_path / "c.json", coco_file())
    split = tmp_path / "split.txt"
    split.write_text("3\n\n# comment\n8 5\n")
    with pytest.raises(ValueError, match=rf"{split}, line 4: expected one image id"):
        read_split_list(split)
    split.write_text("3\n5\n000003\n")
    with pytest.raises(ValueError, match=rf"{split}, line 3: image 3 is already listed on line 1"):
        read_split_list(split)
    split.write_text("3\n\n99\n")
    with pytest.raises(ValueError, match=rf"{split}, line 3: image id 99 is not in .*c.json"):
        read_coco_captions(path, split_ids=split)
    split.write_text("5\nmissing.jpg\n")
    with pytest.raises(ValueError, match=rf"{split}, line 2: image file name 'missing.jpg'"):
        read_coco_captions(path, split_ids=split)
    split.write_text("# nothing\n\n")
    with pytest.raises(ValueError, match=rf"{split}: the split list names no image"):
        read_split_list(split)
    split.write_bytes(b"3\n\xff\n")
    with pytest.raises(ValueError, match=rf"{split}, line 2: not valid UTF-8"):
        read_split_list(split)


# --------------------------------------------------------------------------
# Caption ids and batches.


def test_caption_ids_truncate_then_eos():
    vocab = WordVocab(["a", "red", "circle"])
    assert caption_ids(["a", "red", "square"], vocab, 5) == [3, 4, UNK_ID, EOS_ID]
    assert caption_ids(["a", "red", "circle", "a"], vocab, 2) == [3, 4, EOS_ID]
    assert caption_ids([], vocab, 2) == [EOS_ID]
    with pytest.raises(ValueError, match="max_length"):
        caption_ids(["a"], vocab, 0)


def test_caption_batch_matches_loops():
    rng = np.random.default_rng(0)
    words = ["w%d" % i for i in range(12)]
    vocab = WordVocab(words[:9])  # w9..w11 are unknown
    token_lists = [list(rng.choice(words, size=rng.integers(0, 9))) for _ in range(7)]
    max_length = 5
    decoder_inputs, targets = caption_batch(token_lists, vocab, max_length)
    assert decoder_inputs.dtype == np.int32 and targets.dtype == np.int32
    assert targets.shape == decoder_inputs.shape == (7, max_length + 1)
    for b, tokens in enumerate(token_lists):
        expected = []
        for token in tokens[:max_length]:
            expected.append(words.index(token) + 3 if token in words[:9] else UNK_ID)
        expected.append(EOS_ID)
        expected += [PAD_ID] * (max_length + 1 - len(expected))
        assert targets[b].tolist() == expected
        assert decoder_inputs[b].tolist() == [PAD_ID] + expected[:-1]
    with pytest.raises(ValueError, match="token_lists"):
        caption_batch([], vocab, 3)
