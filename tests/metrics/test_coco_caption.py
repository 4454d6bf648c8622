"""`evaluate_captions` on the official COCO formats: the coco-caption demo from
raw captions to pycocoevalcap 1.2's numbers, METEOR and SPICE only where
they can run, line separators that cannot move captions between images, and
one-line errors that name the file and the entry."""

import copy
import json
import os
import shutil

import numpy as np
import pytest

from keras_structattn.metrics import CaptionScores
from keras_structattn.metrics import evaluate_captions
from keras_structattn.metrics import java_scorers
from keras_structattn.metrics import write_scores_json
from keras_structattn.metrics.ptb_tokenizer import LINE_SEPARATORS

FIXTURES = os.path.join(os.path.dirname(__file__), os.pardir, "fixtures", "coco_caption_eval")
ANNOTATIONS = os.path.join(FIXTURES, "captions_val2014_fakecap_subset.json")
RESULTS = os.path.join(FIXTURES, "captions_val2014_fakecap_results.json")
JAVA_FREE = ["Bleu", "ROUGE_L", "CIDEr"]


def _load(path):
    with open(path, encoding="utf-8") as f:
        return json.load(f)


@pytest.fixture(scope="module")
def expected():
    return _load(os.path.join(FIXTURES, "expected_scores.json"))


@pytest.fixture(scope="module")
def demo_scores():
    return evaluate_captions(ANNOTATIONS, RESULTS, metrics=JAVA_FREE)


def test_demo_from_raw_captions_equals_pycocoevalcap(demo_scores, expected):
    want = expected["recomputed_pycocoevalcap_1_2"]
    names = ["Bleu_1", "Bleu_2", "Bleu_3", "Bleu_4", "ROUGE_L", "CIDEr"]
    assert list(demo_scores.scores) == names
    for name in names:
        assert demo_scores.scores[name] == pytest.approx(want[name], abs=1e-9), name
    # Scored images: the result images, in the annotation file's order.
    assert demo_scores.image_ids == expected["per_image_image_ids"]
    assert list(demo_scores.per_image) == demo_scores.image_ids
    for name in names:
        got = [demo_scores.per_image[i][name] for i in demo_scores.image_ids]
        np.testing.assert_allclose(got, expected["per_image"][name], rtol=0, atol=1e-12)
    first = demo_scores.per_image[400]
    assert list(first) == ["image_id", *names] and first["image_id"] == 400
    assert demo_scores.not_computed == {}


def test_loaded_objects_and_a_subset_of_images(expected):
    annotations, results = _load(ANNOTATIONS), _load(RESULTS)
    scores = evaluate_captions(annotations, results, metrics=["cider"])
    assert list(scores.scores) == ["CIDEr"]
    assert scores.scores["CIDEr"] == pytest.approx(
        expected["recomputed_pycocoevalcap_1_2"]["CIDEr"], abs=1e-9)
    # Results for 20 images: only those are scored, and CIDEr-D's document
    # frequencies come from their references (pycocoevalcap's behaviour).
    subset = results[:20]
    alone = evaluate_captions(annotations, subset, metrics=["CIDEr"])
    assert sorted(alone.image_ids) == sorted(r["image_id"] for r in subset)
    from pycocoevalcap.cider.cider import Cider

    from keras_structattn.metrics import tokenize_captions

    refs = {i: [a["caption"] for a in annotations["annotations"] if a["image_id"] == i]
            for i in alone.image_ids}
    hyps = {r["image_id"]: [r["caption"]] for r in subset}
    want, _ = Cider().compute_score(tokenize_captions(refs),
                                    tokenize_captions({i: hyps[i] for i in refs}))
    assert alone.scores["CIDEr"] == pytest.approx(want, abs=1e-12)
    # image_ids picks (and orders) the scored images.
    picked = evaluate_captions(annotations, results, metrics=["Bleu_4"], image_ids=[1146, 400])
    assert picked.image_ids == [1146, 400] and list(picked.scores) == ["Bleu_4"]


def _small(count=30):
    """The first `count` demo images, as loaded objects."""
    annotations, results = _load(ANNOTATIONS), _load(RESULTS)
    keep = [image["id"] for image in annotations["images"][:count]]
    return ({"images": annotations["images"][:count],
             "annotations": [a for a in annotations["annotations"] if a["image_id"] in keep]},
            [r for r in results if r["image_id"] in keep])


def test_a_line_separator_scores_as_a_space():
    annotations, results = _small()
    target = 3  # the result whose caption gets the separator
    spaced = copy.deepcopy(results)
    spaced[target]["caption"] = "a dog on a mat next to a man"
    spaced_refs = copy.deepcopy(annotations)
    spaced_refs["annotations"][7]["caption"] = "a dog next to a man on a mat"
    base = evaluate_captions(spaced_refs, spaced, metrics=JAVA_FREE)
    for separator in LINE_SEPARATORS:
        separated = copy.deepcopy(spaced)
        separated[target]["caption"] = f"a dog on a mat{separator}next to a man"
        separated_refs = copy.deepcopy(spaced_refs)
        separated_refs["annotations"][7]["caption"] = f"a dog next to{separator}a man on a mat"
        got = evaluate_captions(separated_refs, separated, metrics=JAVA_FREE)
        # (a) the caption scores as with a space, (b) every other image too.
        assert got.scores == base.scores, repr(separator)
        assert got.per_image == base.per_image, repr(separator)


def test_write_scores_json(tmp_path, demo_scores):
    path = tmp_path / "scores.json"
    write_scores_json(path, demo_scores)
    data = _load(path)
    assert data["scores"] == demo_scores.scores and data["not_computed"] == {}
    assert [e["image_id"] for e in data["per_image"]] == demo_scores.image_ids
    assert data["per_image"][0] == demo_scores.per_image[400]


def test_without_java_meteor_and_spice_are_not_computed(monkeypatch):
    monkeypatch.setattr(shutil, "which", lambda name: None)
    annotations, results = _small(5)
    scores = evaluate_captions(annotations, results, metrics=["METEOR", "SPICE", "CIDEr"])
    assert list(scores.scores) == ["CIDEr"]
    assert set(scores.not_computed) == {"METEOR", "SPICE"}
    for reason in scores.not_computed.values():
        assert reason.startswith("not computed: no `java` on PATH") and "\n" not in reason
    assert "METEOR" not in scores.per_image[annotations["images"][0]["id"]]


def test_spice_needs_the_corenlp_models(monkeypatch, tmp_path):
    # A pycocoevalcap folder without the CoreNLP 3.6.0 jars (which it would
    # download): SPICE is not computed, and says why.
    (tmp_path / "spice" / "lib").mkdir(parents=True)
    monkeypatch.setattr(java_scorers, "_pycocoevalcap_dir", lambda: str(tmp_path))
    monkeypatch.setattr(shutil, "which", lambda name: "/usr/bin/java")
    reason = java_scorers.spice_unavailable()
    assert reason.startswith("not computed: SPICE needs the Stanford CoreNLP 3.6.0 models")
    assert "stanford-corenlp-3.6.0-models.jar" in reason and "nothing is downloaded" in reason
    annotations, results = _small(3)
    scores = evaluate_captions(annotations, results, metrics=["SPICE"])
    assert scores.scores == {} and scores.not_computed == {"SPICE": reason}
    with pytest.raises(RuntimeError, match="CoreNLP"):
        java_scorers.spice({1: ["a"]}, {1: ["a"]})


def test_spice_availability_follows_the_jars():
    lib = os.path.join(java_scorers._pycocoevalcap_dir(), "spice", "lib")
    jars = [os.path.join(lib, f"stanford-corenlp-3.6.0{s}.jar") for s in ("", "-models")]
    can_run = shutil.which("java") is not None and all(os.path.exists(j) for j in jars)
    assert (java_scorers.spice_unavailable() is None) == can_run


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("java") is None, reason="METEOR runs pycocoevalcap's jar")
def test_meteor_on_the_demo(expected):
    scores = evaluate_captions(ANNOTATIONS, RESULTS, metrics=["METEOR"])
    assert scores.not_computed == {}
    assert scores.scores["METEOR"] == pytest.approx(0.19525467177780284, abs=1e-12)
    got = [scores.per_image[i]["METEOR"] for i in scores.image_ids]
    np.testing.assert_allclose(got, expected["per_image"]["METEOR"], rtol=0, atol=1e-12)


def _write(tmp_path, name, data):
    path = tmp_path / name
    path.write_text(data if isinstance(data, str) else json.dumps(data), encoding="utf-8")
    return str(path)


def test_errors_name_the_file_and_the_entry(tmp_path):
    annotations, results = _small(4)
    ann_path = _write(tmp_path, "ann.json", annotations)
    first = results[0]["image_id"]
    cases = [
        ([*results, {"image_id": 999999999, "caption": "a dog"}],
         r"res\.json'?: result 4 has image_id 999999999, which has no reference caption in "
         r"the annotations file '.*ann\.json'"),
        ([*results, {"image_id": first, "caption": "again"}],
         rf"res\.json'?: results 0 and 4 are both for image_id {first}"),
        ([{"image_id": first, "caption": 7}],
         rf"res\.json'?: result 0 \(image_id {first}\): 'caption' must be a string, got int"),
        ([{"image_id": first}], r"res\.json'?: result 0 must be a dict with 'image_id' and"),
        ({"image_id": first, "caption": "x"}, r"res\.json'?: expected a list of"),
        ([], r"res\.json'?: no results"),
        ('[{"image_id": 1, "caption": "a"', r"res\.json'?: not valid JSON \(.* at line 1"),
    ]
    for data, pattern in cases:
        res_path = _write(tmp_path, "res.json", data)
        with pytest.raises(ValueError, match=pattern) as error:
            evaluate_captions(ann_path, res_path, metrics=["Bleu"])
        assert "\n" not in str(error.value)
    bad = copy.deepcopy(annotations)
    bad["annotations"][2]["caption"] = ["a", "list"]
    with pytest.raises(ValueError, match=r"bad\.json'?: annotations\[2\] \(image_id \d+, id 3\): "
                                         r"'caption' must be a string, got list"):
        evaluate_captions(_write(tmp_path, "bad.json", bad), results)
    with pytest.raises(ValueError, match="an 'annotations' list"):
        evaluate_captions(_write(tmp_path, "bad.json", {"images": []}), results)
    with pytest.raises(ValueError, match="cannot be read"):
        evaluate_captions(str(tmp_path / "missing.json"), results)
    with pytest.raises(ValueError, match="unknown metric 'BLEURT'; allowed: Bleu"):
        evaluate_captions(annotations, results, metrics=["BLEURT"])
    with pytest.raises(ValueError, match="image_ids: 12345 has no caption"):
        evaluate_captions(annotations, results, image_ids=[12345])
    # A loaded dict or list is named as such.
    with pytest.raises(ValueError, match="^results: result 0 must be a dict"):
        evaluate_captions(annotations, ["a dog"])
    assert isinstance(evaluate_captions(annotations, results, metrics="Bleu_1"), CaptionScores)
