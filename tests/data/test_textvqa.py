"""TextVQA data: the imdb reader, the answer word vocabulary, M4C's targets.

The targets are compared with brute-force references written here from the
definitions (full products of the word matches, explicit leave-one-out
scores), not with values of the module itself.
"""

import itertools

import numpy as np
import pytest

from keras_structattn.data import shapes_world as sw
from keras_structattn.tasks.textvqa.textvqa import AnswerWordVocab
from keras_structattn.tasks.textvqa.textvqa import answer_sequences
from keras_structattn.tasks.textvqa.textvqa import m4c_targets
from keras_structattn.tasks.textvqa.textvqa import read_imdb
from keras_structattn.tasks.textvqa.textvqa import simple_word

SPECIAL = ["<pad>", "<s>", "</s>", "<unk>"]


@pytest.mark.parametrize("text, expected", [
    ("Joe's Cafe?", "joe 's cafe"),
    ("  1,000 ", "1000"),
    ("STOP", "stop"),
    ("it's", "it 's"),
])
def test_simple_word(text, expected):
    assert simple_word(text) == expected


# ---------------------------------------------------------------- imdb reader


def entry(qid, **changes):
    base = {
        "image_id": "img%d" % qid, "image_name": "img%d" % qid, "question_id": qid,
        "question": "what does the sign say?", "question_tokens": ["what", "does"],
        "ocr_tokens": ["Stop", "here"],
        "ocr_normalized_boxes": np.array([[0.1, 0.2, 0.3, 0.4], [0.5, 0.5, 1.0, 0.9]],
                                         np.float32),
        "answers": ["stop"] * 10, "feature_path": "f.npy",
    }
    base.update(changes)
    return {k: v for k, v in base.items() if v is not REMOVE}


REMOVE = object()
HEADER = {"version": 1, "dataset_name": "textvqa", "dataset_type": "train", "has_answer": True}


def save_imdb(path, items):
    array = np.empty(len(items), dtype=object)
    array[:] = items
    np.save(path, array, allow_pickle=True)
    return str(path)


def test_read_imdb(tmp_path):
    info = [{"word": w, "bounding_box": {"top_left_x": x, "top_left_y": 0.25, "width": 0.25,
                                         "height": 0.5, "rotation": 0.0}}
            for w, x in (("a", 0.0), ("b", 0.75))]
    path = save_imdb(tmp_path / "imdb.npy", [
        HEADER,
        entry(7, question_type="t", answer_source="ocr", bias_conflict=np.bool_(True),
              feature_index=np.int64(3)),
        entry(8, ocr_normalized_boxes=REMOVE, ocr_info=info, ocr_tokens=["a", "b"],
              question_tokens=REMOVE, image_id=np.int64(12)),
        entry(9, answers=REMOVE, ocr_tokens=[], ocr_normalized_boxes=np.zeros((0, 4)),
              image_name=REMOVE),
    ])
    records, report = read_imdb(path)
    assert report.header == HEADER and report.entries == 3 and report.kept == 3
    assert report.skipped == 0 and report.first_error is None
    r7, r8, r9 = records
    assert (r7.question_id, r7.image_id, r7.question) == (7, "img7", "what does the sign say?")
    assert r7.ocr_tokens == ["Stop", "here"] and r7.answers == ["stop"] * 10
    assert r7.ocr_boxes.dtype == np.float32
    np.testing.assert_allclose(r7.ocr_boxes, [[0.1, 0.2, 0.3, 0.4], [0.5, 0.5, 1.0, 0.9]])
    assert (r7.question_type, r7.answer_source, r7.bias_conflict) == ("t", "ocr", True)
    assert r7.feature_index == 3 and type(r7.feature_index) is int
    assert r7.feature_path == "f.npy"
    # Boxes from ocr_info (x, y, w, h -> x1, y1, x2, y2); mmf's tokens of the
    # question where the imdb has none; int image ids stay ints.
    np.testing.assert_allclose(r8.ocr_boxes, [[0.0, 0.25, 0.25, 0.75], [0.75, 0.25, 1.0, 0.75]])
    assert r8.question_tokens == ["what", "does", "the", "sign", "say"]
    assert r8.image_id == 12 and type(r8.image_id) is int
    assert r8.question_type is None and r8.bias_conflict is None
    assert r9.answers == [] and r9.ocr_boxes.shape == (0, 4) and r9.image_name is None
    # Without a header, element 0 is a question.
    records, report = read_imdb(save_imdb(tmp_path / "nohead.npy", [entry(1), entry(2)]))
    assert [r.question_id for r in records] == [1, 2] and report.header is None


MALFORMED = {
    "not_a_dict": (["not", "a", "dict"], "expected a dict"),
    "missing_key": (entry(5, ocr_tokens=REMOVE), "missing key 'ocr_tokens'"),
    "bad_id": (entry(5, question_id="5"), "'question_id' must be a non-negative int"),
    "boxes_shape": (entry(5, ocr_normalized_boxes=np.zeros((3, 4))), r"shape \[2, 4\]"),
    "nan_box": (entry(5, ocr_normalized_boxes=np.array([[0, 0, 1, 1], [0, np.nan, 1, 1]])),
                "box 1"),
    "outside": (entry(5, ocr_normalized_boxes=np.array([[0, 0, 1.01, 1], [0, 0, 1, 1]])),
                "box 0"),
    "x1_after_x2": (entry(5, ocr_normalized_boxes=np.array([[0.5, 0, 0.4, 1], [0, 0, 1, 1]])),
                    "x1 <= x2"),
    "token_not_str": (entry(5, ocr_tokens=["a", 3]), r"ocr_tokens\[1\] must be a str"),
    "answer_not_str": (entry(5, answers=["a", None]), r"answers\[1\] must be a str"),
    "duplicate": (entry(1), r"duplicate question id \(also imdb\[1\]\)"),
}


@pytest.mark.parametrize("case", sorted(MALFORMED))
def test_read_imdb_malformed(tmp_path, case):
    bad, message = MALFORMED[case]
    path = save_imdb(tmp_path / "bad.npy", [HEADER, entry(1), bad, entry(2)])
    with pytest.raises(ValueError, match=message) as info:
        read_imdb(path)
    text = str(info.value)
    assert path in text and "imdb[2]" in text
    if case not in ("not_a_dict", "bad_id"):
        assert "question id " in text
    records, report = read_imdb(path, skip_invalid=True)
    assert [r.question_id for r in records] == [1, 2]
    assert (report.entries, report.kept, report.skipped) == (3, 2, 1)
    assert sum(report.reasons.values()) == 1 and "imdb[2]" in report.first_error


def test_read_imdb_skip_counts_and_file_errors(tmp_path):
    items = [HEADER] + [MALFORMED[c][0] for c in sorted(MALFORMED)] + [entry(3)]
    records, report = read_imdb(save_imdb(tmp_path / "all.npy", items), skip_invalid=True)
    # The "duplicate" item (question id 1) is valid here, where it comes
    # first; every other malformed item is skipped and counted.
    assert [r.question_id for r in records] == [1, 3]
    assert report.kept == 2 and report.skipped == len(MALFORMED) - 1
    assert report.reasons["bad_boxes"] == 4 and "skipped" in report.summary()
    with pytest.raises(FileNotFoundError, match="missing.npy"):
        read_imdb(tmp_path / "missing.npy")
    np.save(tmp_path / "numbers.npy", np.zeros((2, 3)))
    with pytest.raises(ValueError, match="numbers.npy.*1-D object array"):
        read_imdb(tmp_path / "numbers.npy")
    (tmp_path / "text.npy").write_text("hello")
    with pytest.raises(ValueError, match="text.npy: not a NumPy"):
        read_imdb(tmp_path / "text.npy")


def test_read_shapes_world_imdb(tmp_path):
    world = sw.generate(train=20, val=2, test=2, tasks="textvqa")
    written = sw.write(world, tmp_path, compress=False)
    for path in written["textvqa"]:
        records, report = read_imdb(path)
        split = world.splits[report.header["dataset_type"]]
        questions = [(scene, q) for scene, qs in zip(split.scenes, split.tasks["textvqa"])
                     for q in qs]
        assert report.entries == report.kept == len(questions) and report.skipped == 0
        for record, (scene, q) in zip(records, questions):
            assert record.image_id == scene.image_id and record.question == q["question"]
            tokens = [w for sign in scene.signs for w in sign.ocr_words]
            assert record.ocr_tokens == tokens and len(record.answers) == 10
            np.testing.assert_allclose(record.ocr_boxes, scene.normalized_boxes("t"))
            assert record.answer_source in ("ocr", "vocab")
    assert len(records) > 0


# ---------------------------------------------------------------- vocabulary


def test_vocab_from_file_and_save(tmp_path):
    path = tmp_path / "vocab.txt"
    path.write_text("<pad>\n<s>\n</s>\n red \ncafe\n", encoding="utf-8")
    vocab = AnswerWordVocab.from_file(path)
    # "<unk>" is appended where the file has none; lines are stripped.
    assert vocab.words == ["<pad>", "<s>", "</s>", "red", "cafe", "<unk>"]
    assert (vocab.PAD, vocab.BOS, vocab.EOS, vocab.UNK, vocab.size) == (0, 1, 2, 5, 6)
    assert vocab.index("cafe") == 4 and vocab.index("blue") == -1 and vocab.word(3) == "red"
    vocab.save(tmp_path / "out.txt")
    assert (tmp_path / "out.txt").read_text() == "<pad>\n<s>\n</s>\nred\ncafe\n<unk>\n"
    assert AnswerWordVocab.from_file(tmp_path / "out.txt").words == vocab.words
    with pytest.raises(ValueError, match="outside"):
        vocab.word(6)


@pytest.mark.parametrize("text, message", [
    ("<pad>\n<s>\n\n</s>\n", r"line 3: blank line"),
    ("<pad>\n<s>\n</s>\nred\nred\n", r"line 5: 'red' is already on line 4"),
    ("<s>\n<pad>\n</s>\n", r"must start with '<pad>'"),
    ("<pad>\n<s>\nred\n", r"must contain '</s>'"),
])
def test_vocab_file_errors(tmp_path, text, message):
    path = tmp_path / "v.txt"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(ValueError, match=message) as info:
        AnswerWordVocab.from_file(path)
    assert str(path) in str(info.value)


def test_vocab_from_answers():
    answers = [["Red cafe", "red", "red"], ["Joe's", "cafe?", "blue"]]
    vocab = AnswerWordVocab.from_answers(answers)
    # counts: red 3, cafe 2, blue 1, joe 1, 's 1 -> by count, then alphabetical.
    assert vocab.words == SPECIAL + ["red", "cafe", "'s", "blue", "joe"]
    assert vocab.words == AnswerWordVocab.from_answers(iter(answers)).words
    assert AnswerWordVocab.from_answers(answers, min_count=2).words == SPECIAL + ["red", "cafe"]
    with pytest.raises(ValueError, match="min_count=4"):
        AnswerWordVocab.from_answers(answers, min_count=4)
    with pytest.raises(ValueError, match="item 0"):
        AnswerWordVocab.from_answers(["red"])


# ------------------------------------------------------- reference targets


def ref_norm(text):
    return text.lower().replace(",", "").replace("?", "").replace("'s", " 's").strip()


def ref_score(answer, answers):
    """Mean over the leave-one-out subsets of min(1, matches / 3)."""
    accs = []
    for k in range(len(answers)):
        others = answers[:k] + answers[k + 1:]
        accs.append(min(1.0, sum(a == answer for a in others) / 3.0))
    return float(np.mean(accs))


def ref_sequences(answers, ocr_tokens, words, max_ocr, max_match):
    answers = [ref_norm(a) for a in answers]
    ocr = [ref_norm(t) for t in ocr_tokens[:max_ocr]]
    size = len(words)
    step0, sequences = {}, []
    for answer in answers:
        options = []
        for word in answer.split():
            found = [words.index(word)] if word in words else []
            found += [size + n for n, t in enumerate(ocr) if t == word]
            options.append(found)
        if not options or not all(options):
            continue
        # mmf cuts the partial products to max_match after each word; that
        # keeps the first max_match items of the full product.
        seqs = list(itertools.product(*options))[:max_match]
        sequences += seqs
        score = ref_score(answer, answers)
        for s in seqs:
            step0[s[0]] = max(step0.get(s[0], 0.0), score)
    return step0, sequences


def ref_targets(step0, seq, ocr_tokens, words, num_steps, max_ocr, all_copies):
    size = len(words)
    bos, eos, unk = words.index("<s>"), words.index("</s>"), words.index("<unk>")
    prev = np.zeros(num_steps, np.int64)
    scores = np.zeros((num_steps, size + max_ocr))
    mask = np.zeros(num_steps)
    for i, s in step0.items():
        scores[0, i] = s
    if seq is None:
        return prev, scores, mask
    ocr = [ref_norm(t) for t in ocr_tokens[:max_ocr]]
    full = [bos] + list(seq)  # inputs
    goal = list(seq) + [eos]  # what follows each input
    for t in range(num_steps):
        if t > len(seq):
            break
        mask[t] = 1
        prev[t] = full[t]
        if t == 0:
            continue
        target = goal[t]
        scores[t, target] = 1
        if all_copies and target != eos:
            word = words[target] if target < size else ocr[target - size]
            for n, tok in enumerate(ocr):
                if tok == word:
                    scores[t, size + n] = 1
            if word in words and words.index(word) != unk:
                scores[t, words.index(word)] = 1
    return prev, scores, mask


def test_answer_sequences_by_hand():
    vocab = AnswerWordVocab(SPECIAL + ["red", "cafe"])  # V = 6
    ocr = ["Red", "CAFE", "red?"]  # normalised: red, cafe, red -> 6, 7, 8
    answers = ["red cafe"] * 3 + ["Cafe"] + ["blue"] * 6
    step0, seqs = answer_sequences(answers, ocr, vocab)
    # "red cafe" (3 annotators, 0.9): red -> 4, 6, 8; cafe -> 5, 7; six
    # sequences each time. "cafe" (1, 0.3): (5,), (7,). "blue" (1.0): none.
    six = [(4, 5), (4, 7), (6, 5), (6, 7), (8, 5), (8, 7)]
    assert seqs == six * 3 + [(5,), (7,)]
    assert step0.keys() == {4, 5, 6, 7, 8}
    np.testing.assert_allclose([step0[i] for i in (4, 6, 8, 5, 7)], [0.9] * 3 + [0.3] * 2)
    # max_ocr = 2 drops the third OCR token; max_match = 3 keeps the first three.
    _, seqs = answer_sequences(answers[:1], ocr, vocab, max_ocr=2, max_match=3)
    assert seqs == [(4, 5), (4, 7), (6, 5)]
    assert answer_sequences([], ocr, vocab) == ({}, [])
    assert answer_sequences(["blue"] * 10, ocr, vocab) == ({}, [])


def random_case(rng):
    pool = ["red", "cafe", "stop", "joe's", "open", "2"]
    words = SPECIAL + list(rng.choice(pool[:4], size=rng.integers(1, 4), replace=False))
    ocr = [str(rng.choice(pool + ["Red", "CAFE", "x"])) for _ in range(rng.integers(0, 7))]
    answers = []
    while len(answers) < 10:
        text = " ".join(rng.choice(pool + ["blue"], size=rng.integers(1, 4)))
        answers += [text] * int(rng.integers(1, 5))
    return words, ocr, answers[:10]


@pytest.mark.parametrize("seed", range(3))
def test_answer_sequences_and_targets_match_reference(seed):
    rng = np.random.default_rng(seed)
    checked = {"sequences": 0, "none": 0, "cut": 0}
    for _ in range(120):
        words, ocr, answers = random_case(rng)
        vocab = AnswerWordVocab(words)
        max_ocr = int(rng.integers(1, 7))
        max_match = int(rng.integers(1, 10))
        step0, seqs = answer_sequences(answers, ocr, vocab, max_ocr=max_ocr,
                                       max_match=max_match)
        ref0, ref_seqs = ref_sequences(answers, ocr, words, max_ocr, max_match)
        assert seqs == ref_seqs
        assert step0.keys() == ref0.keys()
        np.testing.assert_allclose([step0[k] for k in ref0], list(ref0.values()), rtol=1e-12)
        choices = [None] if not seqs else [seqs[0], seqs[-1]]
        for seq, num_steps, all_copies in itertools.product(choices, (2, 12), (False, True)):
            got = m4c_targets(step0, seq, ocr, vocab, num_steps=num_steps, max_ocr=max_ocr,
                              all_copies=all_copies)
            want = ref_targets(ref0, seq, ocr, words, num_steps, max_ocr, all_copies)
            assert got[0].dtype == np.int32 and got[1].dtype == got[2].dtype == np.float32
            for g, w in zip(got, want):
                np.testing.assert_allclose(g, w, rtol=1e-6)
        checked["sequences"] += bool(seqs)
        checked["none"] += not seqs
        checked["cut"] += any(len(s) >= 2 for s in seqs) and max_match < 9
    # The random cases cover each branch.
    assert min(checked.values()) > 5, checked


def test_m4c_targets_by_hand():
    vocab = AnswerWordVocab(SPECIAL + ["red", "cafe"])  # V = 6, BOS 1, EOS 2
    ocr = ["red", "cafe", "red"]  # 6, 7, 8
    step0 = {4: 0.9, 6: 0.9, 5: 0.3}
    prev, scores, mask = m4c_targets(step0, (6, 5), ocr, vocab, num_steps=4, max_ocr=3)
    np.testing.assert_array_equal(prev, [1, 6, 5, 0])
    np.testing.assert_array_equal(mask, [1, 1, 1, 0])
    assert scores.shape == (4, 9)
    np.testing.assert_allclose(scores[0], [0, 0, 0, 0, 0.9, 0.3, 0.9, 0, 0])
    assert set(zip(*np.nonzero(scores[1:]))) == {(0, 5), (1, 2)}
    # SA-M4C: vocab "cafe" at step 1 also marks its OCR copy 7; the OCR "red"
    # target (6) marks vocab "red" (4) and the other copy 8; </s> alone.
    _, scores, _ = m4c_targets(step0, (4, 5, 6), ocr, vocab, num_steps=5, max_ocr=3,
                               all_copies=True)
    assert [set(np.flatnonzero(row)) for row in scores[1:]] == [{5, 7}, {6, 4, 8}, {2}, set()]
    # An OCR token reading "</s>" is no copy of the end symbol.
    _, scores, _ = m4c_targets({}, (4,), ["</s>"], vocab, num_steps=2, max_ocr=1,
                               all_copies=True)
    assert set(np.flatnonzero(scores[1])) == {2}
    # Longer than the steps: no </s>, every step in the loss.
    prev, scores, mask = m4c_targets({4: 1.0}, (4, 5, 4), ocr, vocab, num_steps=3, max_ocr=3)
    np.testing.assert_array_equal(prev, [1, 4, 5])
    np.testing.assert_array_equal(mask, [1, 1, 1])
    assert [int(np.argmax(r)) for r in scores[1:]] == [5, 4]
    # No sequence: all zero (mmf's inputs are then all <pad>).
    prev, scores, mask = m4c_targets({}, None, ocr, vocab)
    assert not prev.any() and not scores.any() and not mask.any() and scores.shape == (12, 56)


def test_m4c_targets_errors():
    vocab = AnswerWordVocab(SPECIAL + ["red"])
    with pytest.raises(ValueError, match="sequence` is None"):
        m4c_targets({4: 1.0}, None, [], vocab)
    with pytest.raises(ValueError, match=r"outside \[0, 7\)"):
        m4c_targets({}, (4, 7), ["red", "x"], vocab, max_ocr=2)
    with pytest.raises(ValueError, match="step0"):
        m4c_targets({-1: 1.0}, (4,), [], vocab)
    with pytest.raises(ValueError, match="empty"):
        m4c_targets({}, (), [], vocab)
    with pytest.raises(ValueError, match="num_steps"):
        m4c_targets({}, (4,), [], vocab, num_steps=0)
    with pytest.raises(ValueError, match="past the 1 OCR tokens"):
        m4c_targets({}, (4, 6), ["red"], vocab, max_ocr=2, all_copies=True)
