"""BLEU, ROUGE-L and CIDEr-D (`keras_structattn.metrics.caption_scores`)
against pycocoevalcap 1.2: its recorded numbers on the coco-caption demo, the
upstream small cases, and its own Python scorers on edge cases; `CiderD`, the
self-critical reward, against pycocoevalcap's per-image CIDEr-D."""

import json
import os
import random
import time

import numpy as np
import pytest

from keras_structattn.metrics import CiderD
from keras_structattn.metrics.caption_scores import bleu
from keras_structattn.metrics.caption_scores import cider_d
from keras_structattn.metrics.caption_scores import lcs_length
from keras_structattn.metrics.caption_scores import rouge_l

FIXTURES = os.path.join(os.path.dirname(__file__), os.pardir, "fixtures", "coco_caption_eval")
TOLERANCE = 1e-9  # corpus scores, as asked; per-image checks are tighter


def _load(name):
    with open(os.path.join(FIXTURES, name), encoding="utf-8") as f:
        return json.load(f)


@pytest.fixture(scope="module")
def demo():
    tokenized = _load("tokenized.json")
    expected = _load("expected_scores.json")
    gts = {int(k): v for k, v in tokenized["gts"].items()}
    res = {int(k): v for k, v in tokenized["res"].items()}
    assert list(gts) == expected["per_image_image_ids"]
    return gts, res, expected


def test_demo_scores_equal_pycocoevalcap(demo):
    gts, res, expected = demo
    want = expected["recomputed_pycocoevalcap_1_2"]
    per_image = expected["per_image"]
    bleu_corpus, bleu_images = bleu(gts, res)
    got = {f"Bleu_{k + 1}": (bleu_corpus[k], bleu_images[k]) for k in range(4)}
    got["ROUGE_L"] = rouge_l(gts, res)
    got["CIDEr"] = cider_d(gts, res)
    for name, (corpus, images) in got.items():
        assert corpus == pytest.approx(want[name], abs=TOLERANCE), name
        np.testing.assert_allclose(images, per_image[name], rtol=0, atol=1e-12, err_msg=name)
        # The notebook's printed (rounded) value.
        assert round(corpus, 3) == expected["notebook_printed"][name]


def test_small_cases():
    scorers = {"CIDEr-D": cider_d, "BLEU": bleu, "ROUGE-L": rouge_l}
    for case in _load("small_cases.json"):
        corpus, per_item = scorers[case["metric"]](case["refs"], case["cands"])
        np.testing.assert_allclose(corpus, case["pycocoevalcap_1_2_corpus"], rtol=0, atol=1e-12)
        np.testing.assert_allclose(corpus, case["expected_upstream"], rtol=0, atol=1e-10)
        np.testing.assert_allclose(per_item, case["pycocoevalcap_1_2_per_item"], rtol=0,
                                   atol=1e-12)


def _official(gts, res):
    from pycocoevalcap.bleu.bleu import Bleu
    from pycocoevalcap.cider.cider import Cider
    from pycocoevalcap.rouge.rouge import Rouge

    bleu_corpus, bleu_images = Bleu(4).compute_score(gts, res, verbose=0)
    rouge_corpus, rouge_images = Rouge().compute_score(gts, res)
    cider_corpus, cider_images = Cider().compute_score(gts, res)
    return ((bleu_corpus, np.array(bleu_images)), (rouge_corpus, rouge_images),
            (cider_corpus, cider_images))


EDGE_CASES = {
    "empty hypothesis": ({1: ["a dog on a mat", "a brown dog"], 2: ["two cats", "cats sleep"]},
                         {1: [""], 2: ["two cats sleep"]}),
    "hypothesis equals a reference": (
        {1: ["a dog on a mat", "a brown dog lies on a mat"], 2: ["two cats on a sofa"],
         3: ["a red bus on the street", "a bus"]},
        {1: ["a brown dog lies on a mat"], 2: ["two cats on a sofa"], 3: ["a bus"]}),
    "single image": ({5: ["a man rides a horse", "a person on a horse"]},
                     {5: ["a man on a horse"]}),
    "unicode": ({1: ["un caf\u00e9 na\u00eff \u00e0 paris", "\u65e5\u672c\u8a9e \u306e \u732b"],
                 2: ["\u00fcber die stra\u00dfe", "stra\u00dfe \u00fcber"]},
                {1: ["un caf\u00e9 \u00e0 paris"], 2: ["die stra\u00dfe \u00fcber"]}),
    "repeated n-grams and lengths": (
        {1: ["a a a a", "a b a b a b"], 2: ["x y z", "x y", "x"], 3: ["the the", "the"]},
        {1: ["a a b a"], 2: ["x y z x y z"], 3: ["the"]}),
}


@pytest.mark.parametrize("name", sorted(EDGE_CASES))
def test_edge_cases_equal_pycocoevalcap(name):
    gts, res = EDGE_CASES[name]
    (b, bi), (r, ri), (c, ci) = _official(gts, res)
    corpus, images = bleu(gts, res)
    np.testing.assert_allclose(corpus, b, rtol=0, atol=1e-12)
    np.testing.assert_allclose(images, bi, rtol=0, atol=1e-12)
    corpus, images = rouge_l(gts, res)
    np.testing.assert_allclose(corpus, r, rtol=0, atol=1e-12)
    np.testing.assert_allclose(images, ri, rtol=0, atol=1e-12)
    corpus, images = cider_d(gts, res)
    np.testing.assert_allclose(corpus, c, rtol=0, atol=1e-12)
    np.testing.assert_allclose(images, ci, rtol=0, atol=1e-12)


def test_lcs_matches_pycocoevalcap():
    from pycocoevalcap.rouge.rouge import my_lcs

    rng = random.Random(0)
    for _ in range(300):
        a = [rng.choice("abcd ") for _ in range(rng.randint(0, 12))]
        b = [rng.choice("abcde") for _ in range(rng.randint(0, 12))]
        assert lcs_length(a, b) == my_lcs(a, b), (a, b)
    # 70 tokens: more bits than a machine word.
    a = [rng.choice("abc") for _ in range(70)]
    b = [rng.choice("abc") for _ in range(70)]
    assert lcs_length(a, b) == my_lcs(a, b)


def test_inputs_are_checked():
    with pytest.raises(ValueError, match="same image ids: only in gts \\[2\\]"):
        bleu({1: ["a"], 2: ["b"]}, {1: ["a"]})
    with pytest.raises(ValueError, match="exactly one caption"):
        rouge_l({1: ["a"]}, {1: ["a", "b"]})
    with pytest.raises(ValueError, match="non-empty list of caption strings"):
        cider_d({1: []}, {1: ["a"]})


def _samples(gts, rng, count):
    """`count` (image id, caption) pairs: a reference of another image, a
    shuffled reference of the same image, or a reference itself."""
    ids = list(gts)
    out = []
    for _ in range(count):
        image_id = rng.choice(ids)
        kind = rng.random()
        if kind < 0.3:
            caption = rng.choice(gts[rng.choice(ids)])
        elif kind < 0.8:
            words = rng.choice(gts[image_id]).split()
            rng.shuffle(words)
            caption = " ".join(words[:rng.randint(0, len(words))])
        else:
            caption = rng.choice(gts[image_id])
        out.append((image_id, caption))
    return out


def _official_per_image(refs, placed):
    """pycocoevalcap's per-image CIDEr-D of the candidates in `placed`
    ({image_id: caption}), the other images getting their first reference;
    an image's score depends only on its own candidate and on the
    references of all images (the document frequencies)."""
    from pycocoevalcap.cider.cider import Cider

    res = {i: [placed.get(i, refs[i][0])] for i in refs}
    _, scores = Cider().compute_score(refs, res)
    return dict(zip(refs, scores))


def test_cider_d_reward_equals_pycocoevalcap(demo):
    gts, _, _ = demo
    rng = random.Random(1)
    # References = the scored images: K = 3 samples per image.
    refs = {i: gts[i] for i in list(gts)[:40]}
    samples = {i: [c for _, c in _samples({i: refs[i]}, rng, 3)] for i in refs}
    reward = CiderD(refs)
    got = reward.scores([i for i in refs for _ in range(3)], [c for i in refs for c in samples[i]])
    assert got.dtype == np.float64 and got.shape == (120,)
    for k in range(3):
        want = _official_per_image(refs, {i: samples[i][k] for i in refs})
        np.testing.assert_array_equal(got[k::3], [want[i] for i in refs])
    # Token lists give the same scores as strings.
    tokens = [c.split() for i in refs for c in samples[i]]
    np.testing.assert_array_equal(
        reward.scores([i for i in refs for _ in range(3)], tokens), got)


def test_cider_d_reward_with_training_document_frequencies(demo):
    # Document frequencies from 60 "training" images; candidates for a few
    # of them only (as a self-critical batch is).
    gts, _, _ = demo
    rng = random.Random(2)
    train = {i: gts[i] for i in list(gts)[100:160]}
    batch = _samples({i: train[i] for i in list(train)[:12]}, rng, 12)
    got = CiderD(train).scores([i for i, _ in batch], [c for _, c in batch])
    for (image_id, caption), score in zip(batch, got):
        assert score == _official_per_image(train, {image_id: caption})[image_id]
    # With other document frequencies, other scores: they are the training set's.
    other = CiderD({i: train[i] for i in list(train)[:12]})
    assert not np.allclose(other.scores([i for i, _ in batch], [c for _, c in batch]), got)


def test_cider_d_reward_errors_and_speed(demo):
    gts, _, _ = demo
    reward = CiderD(gts)
    with pytest.raises(ValueError, match="image id 'nope' has no references"):
        reward.scores([400, "nope"], ["a dog", "a cat"])
    with pytest.raises(ValueError, match="same length"):
        reward.scores([400], ["a", "b"])
    with pytest.raises(ValueError, match="non-empty list"):
        CiderD({1: []})
    assert reward.scores([], []).shape == (0,)
    # 5,000 candidates (K = 5 per image) against the demo's 5,005 references.
    batch = _samples(gts, random.Random(3), 5000)
    start = time.perf_counter()
    scores = reward.scores([i for i, _ in batch], [c for _, c in batch])
    print(f"\nCiderD: 5000 candidates in {time.perf_counter() - start:.3f} s")
    assert scores.shape == (5000,) and np.isfinite(scores).all() and (scores >= 0).all()
