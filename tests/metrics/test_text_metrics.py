"""Corpus BLEU / chrF wrappers, checked against sacreBLEU's functional API
and against BLEU counted by hand."""

import math

import pytest
import sacrebleu

from keras_structattn.metrics import BleuResult
from keras_structattn.metrics import ChrfResult
from keras_structattn.metrics import corpus_bleu
from keras_structattn.metrics import corpus_chrf
from keras_structattn.metrics.text import group_references

HYPOTHESES = [
    "The cat sat on the mat.",
    "A quick brown fox jumps over the lazy dog!",
    "It is raining, so we stayed home today.",
    "He said: \"no way\".",
]
REFERENCES = [
    "The cat is sitting on the mat.",
    "The quick brown fox jumped over the lazy dog!",
    "It was raining, so we stayed at home today.",
    "He said \"no way\".",
]
# 1 to 3 references per segment; the first is REFERENCES'.
MULTI_REFERENCES = [
    [REFERENCES[0], "A cat sat on the mat."],
    [REFERENCES[1]],
    [REFERENCES[2], "It rained, so we stayed home today.", "Because of rain we stayed home."],
    [REFERENCES[3], "He said: \"No way\"."],
]


def _none_padded_streams(per_segment):
    """sacreBLEU's reference streams, written out longhand."""
    width = max(len(refs) for refs in per_segment)
    streams = []
    for k in range(width):
        stream = []
        for refs in per_segment:
            stream.append(refs[k] if k < len(refs) else None)
        streams.append(stream)
    return streams


def _assert_same_bleu(result, expected):
    assert isinstance(result, BleuResult)
    assert result.score == pytest.approx(expected.score, abs=1e-9)
    assert result.precisions == pytest.approx(expected.precisions, abs=1e-9)
    assert result.brevity_penalty == pytest.approx(expected.bp, abs=1e-12)
    assert result.sys_len == expected.sys_len
    assert result.ref_len == expected.ref_len
    assert list(result.counts) == list(expected.counts)
    assert list(result.totals) == list(expected.totals)


# ---------------------------------------------------------------------------
# Agreement with sacreBLEU.


@pytest.mark.parametrize(
    "tokenize,lowercase", [("13a", False), ("13a", True), ("intl", False), ("none", False)]
)
def test_single_reference_bleu_agrees_with_sacrebleu(tokenize, lowercase):
    result = corpus_bleu(HYPOTHESES, REFERENCES, tokenize=tokenize, lowercase=lowercase)
    expected = sacrebleu.corpus_bleu(
        HYPOTHESES, [REFERENCES], tokenize=tokenize, lowercase=lowercase
    )
    _assert_same_bleu(result, expected)
    case = "lc" if lowercase else "mixed"
    assert result.signature == (
        f"nrefs:1|case:{case}|eff:no|tok:{tokenize}|smooth:exp|version:{sacrebleu.__version__}"
    )
    # Lists of one reference per segment are the same corpus.
    _assert_same_bleu(
        corpus_bleu(HYPOTHESES, [[r] for r in REFERENCES], tokenize=tokenize, lowercase=lowercase),
        expected,
    )


def test_str_is_sacrebleu_score_line_then_signature():
    result = corpus_bleu(HYPOTHESES, REFERENCES)
    expected = sacrebleu.corpus_bleu(HYPOTHESES, [REFERENCES])
    line, signature = str(result).split("\n")
    assert line == str(expected)
    assert line.startswith("BLEU = ")
    assert signature == result.signature


def test_variable_references_agree_with_none_padded_streams():
    result = corpus_bleu(HYPOTHESES, MULTI_REFERENCES)
    streams = _none_padded_streams(MULTI_REFERENCES)
    assert streams[2] == [None, None, MULTI_REFERENCES[2][2], None]
    expected = sacrebleu.corpus_bleu(HYPOTHESES, streams)
    _assert_same_bleu(result, expected)
    assert "nrefs:var|" in result.signature

    chrf = corpus_chrf(HYPOTHESES, MULTI_REFERENCES)
    assert chrf.score == pytest.approx(sacrebleu.corpus_chrf(HYPOTHESES, streams).score, abs=1e-9)
    assert "nrefs:var|" in chrf.signature


def test_fixed_reference_count_is_in_signature():
    refs = [[r, r.upper()] for r in REFERENCES]
    assert corpus_bleu(HYPOTHESES, refs).signature.startswith("nrefs:2|")
    assert corpus_chrf(HYPOTHESES, refs).signature.startswith("nrefs:2|")


def test_chrf_agrees_with_sacrebleu():
    result = corpus_chrf(HYPOTHESES, REFERENCES)
    expected = sacrebleu.corpus_chrf(HYPOTHESES, [REFERENCES])
    assert isinstance(result, ChrfResult)
    assert result.score == pytest.approx(expected.score, abs=1e-9)
    assert result.signature == (
        f"nrefs:1|case:mixed|eff:yes|nc:6|nw:0|space:no|version:{sacrebleu.__version__}"
    )
    assert str(result) == f"{expected}\n{result.signature}"


def test_more_references_never_lower_the_score():
    """Hypotheses that equal a second reference of some segments score
    higher with all references than with the first ones only."""
    hypotheses = [MULTI_REFERENCES[0][1], HYPOTHESES[1], MULTI_REFERENCES[2][1], HYPOTHESES[3]]
    single = corpus_bleu(hypotheses, REFERENCES)
    multi = corpus_bleu(hypotheses, MULTI_REFERENCES)
    assert multi.score >= single.score
    assert multi.score > single.score + 1.0  # the extra references matter here
    chrf_multi = corpus_chrf(hypotheses, MULTI_REFERENCES)
    assert chrf_multi.score >= corpus_chrf(hypotheses, REFERENCES).score


def test_perfect_hypotheses_score_100():
    assert corpus_bleu(REFERENCES, REFERENCES).score == pytest.approx(100.0)
    assert corpus_chrf(REFERENCES, REFERENCES).score == pytest.approx(100.0)
    # Each hypothesis equals one (any) of its references.
    hypotheses = [refs[-1] for refs in MULTI_REFERENCES]
    result = corpus_bleu(hypotheses, MULTI_REFERENCES)
    assert result.score == pytest.approx(100.0)
    assert result.brevity_penalty == 1.0


# ---------------------------------------------------------------------------
# Known answer, counted by hand.


def _ngram_counts(tokens, n):
    counts = {}
    for start in range(len(tokens) - n + 1):
        gram = tuple(tokens[start : start + n])
        counts[gram] = counts.get(gram, 0) + 1
    return counts


def _hand_bleu(hypotheses, references):
    """BLEU of whitespace tokens: clipped n-gram precisions (max count over
    a segment's references), closest reference length (shorter on ties),
    brevity penalty, geometric mean of the 1- to 4-gram precisions."""
    correct = [0, 0, 0, 0]
    total = [0, 0, 0, 0]
    sys_len = 0
    ref_len = 0
    for hypothesis, refs in zip(hypotheses, references):
        hyp_tokens = hypothesis.split()
        ref_tokens = [r.split() for r in refs]
        sys_len += len(hyp_tokens)
        closest = None
        for tokens in ref_tokens:
            key = (abs(len(tokens) - len(hyp_tokens)), len(tokens))
            if closest is None or key < closest:
                closest = key
        ref_len += closest[1]
        for n in range(1, 5):
            max_ref = {}
            for tokens in ref_tokens:
                for gram, count in _ngram_counts(tokens, n).items():
                    max_ref[gram] = max(max_ref.get(gram, 0), count)
            for gram, count in _ngram_counts(hyp_tokens, n).items():
                total[n - 1] += count
                correct[n - 1] += min(count, max_ref.get(gram, 0))
    log_mean = sum(math.log(c / t) for c, t in zip(correct, total)) / 4
    bp = 1.0 if sys_len >= ref_len else math.exp(1 - ref_len / sys_len)
    return 100 * bp * math.exp(log_mean), correct, total, sys_len, ref_len, bp


# Every n-gram order has matches (no smoothing involved); the hypotheses
# are shorter than the references, so the brevity penalty applies; "the"
# repeats, so clipping matters.
KNOWN_HYPOTHESES = [
    "the the cat sat on the mat",
    "a dog ran in the park today",
    "we like green tea",
]
KNOWN_SINGLE = [
    ["the cat sat on the red mat"],
    ["the dog ran in the big park today"],
    ["we all like green tea a lot"],
]
# Segment 1 has references of 8 and 6 tokens for a 7-token hypothesis: the
# shorter one counts for the brevity penalty.
KNOWN_MULTI = [
    ["the cat sat on the old red mat", "a cat was on the mat"],
    ["the dog ran in the big park today"],
    ["we all like green tea a lot", "we like hot tea very much", "we like green tea so much"],
]


@pytest.mark.parametrize("references", [KNOWN_SINGLE, KNOWN_MULTI], ids=["single", "multi"])
def test_bleu_known_answer(references):
    score, correct, total, sys_len, ref_len, bp = _hand_bleu(KNOWN_HYPOTHESES, references)
    assert min(correct) > 0 and bp < 1.0
    result = corpus_bleu(KNOWN_HYPOTHESES, references, tokenize="none")
    assert list(result.counts) == correct
    assert list(result.totals) == total
    assert (result.sys_len, result.ref_len) == (sys_len, ref_len)
    assert result.brevity_penalty == pytest.approx(bp, rel=1e-12)
    assert result.score == pytest.approx(score, rel=1e-12)


def test_bleu_known_answer_values():
    """Both corpora worked out on paper.

    Single reference, matched / total n-grams per segment:
      1-grams: 6/7 ("the" x3 clipped to 2), 6/7 ("a" unmatched), 4/4;
      2-grams: 4/6, 4/6, 2/3;  3-grams: 3/5, 2/5, 1/2;  4-grams: 2/4, 1/4, 0/1;
      lengths: hypotheses 7 + 7 + 4 = 18, references 7 + 8 + 7 = 22.
    Multiple references (max count over a segment's references):
      segment 1: 6/7, 5/6 (+"the mat"), 4/5 (+"on the mat"), 2/4;
      segment 2: as above; segment 3: 4/4, 3/3, 2/2, 1/1 ("we like green
      tea" is in the third reference);
      lengths: segment 1's references (8 and 6 tokens) tie at distance 1
      from its 7 tokens and the shorter counts; segment 3's closest has 6;
      6 + 8 + 6 = 20.
    """
    score, correct, total, sys_len, ref_len, _ = _hand_bleu(KNOWN_HYPOTHESES, KNOWN_SINGLE)
    assert (correct, total, sys_len, ref_len) == ([16, 10, 6, 3], [18, 15, 12, 9], 18, 22)
    want = 100 * math.exp(1 - 22 / 18) * (16 / 18 * 10 / 15 * 6 / 12 * 3 / 9) ** 0.25
    assert score == pytest.approx(want, rel=1e-12)
    result = corpus_bleu(KNOWN_HYPOTHESES, KNOWN_SINGLE, tokenize="none")
    assert result.score == pytest.approx(want, rel=1e-12)

    score, correct, total, sys_len, ref_len, _ = _hand_bleu(KNOWN_HYPOTHESES, KNOWN_MULTI)
    assert (correct, total, sys_len, ref_len) == ([16, 12, 8, 4], [18, 15, 12, 9], 18, 20)
    want = 100 * math.exp(1 - 20 / 18) * (16 / 18 * 12 / 15 * 8 / 12 * 4 / 9) ** 0.25
    assert score == pytest.approx(want, rel=1e-12)
    result = corpus_bleu(KNOWN_HYPOTHESES, KNOWN_MULTI, tokenize="none")
    assert result.score == pytest.approx(want, rel=1e-12)


# ---------------------------------------------------------------------------
# Multi-reference grouping.


def test_group_references_order():
    pairs = [("b", "1"), ("a", "2"), ("b", "3")]
    assert group_references(pairs) == (["b", "a"], [["1", "3"], ["2"]])
    assert group_references([]) == ([], [])


def test_grouped_references_score_as_written_out_streams():
    """Pairs with a repeated source, grouped, give sacreBLEU's score for the
    hand-made None-padded streams of those references."""
    pairs = [(f"s{i}", ref) for i, refs in enumerate(MULTI_REFERENCES) for ref in refs]
    # Interleave the sources, as a test file may list them.
    pairs = pairs[::2] + pairs[1::2]
    sources, references = group_references(pairs)
    assert sorted(sources) == [f"s{i}" for i in range(len(MULTI_REFERENCES))]
    by_source = dict(zip(sources, references))
    hypotheses = [HYPOTHESES[int(s[1:])] for s in sources]
    # Order of first occurrence, targets in input order within a source.
    for source, refs in by_source.items():
        assert refs == [t for s, t in pairs if s == source]
    streams = _none_padded_streams(references)
    want = sacrebleu.corpus_bleu(hypotheses, streams).score
    assert corpus_bleu(hypotheses, references).score == pytest.approx(want, rel=1e-12)
    want = sacrebleu.corpus_chrf(hypotheses, streams).score
    assert corpus_chrf(hypotheses, references).score == pytest.approx(want, rel=1e-12)


def test_grouping_and_scoring_modules_import_without_sacrebleu():
    import subprocess
    import sys

    script = (
        "import sys; sys.modules['sacrebleu'] = None\n"
        "from keras_structattn.metrics.text import group_references\n"
        "print(group_references([('a', 'x'), ('a', 'y')]))\n"
    )
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                            timeout=300)
    assert result.returncode == 0, result.stderr[-2000:]
    assert result.stdout.strip().endswith("(['a'], [['x', 'y']])")


# ---------------------------------------------------------------------------
# Arguments.


def test_length_mismatch_names_both_counts():
    with pytest.raises(ValueError, match="3 hypotheses and 4 references"):
        corpus_bleu(HYPOTHESES[:3], REFERENCES)
    with pytest.raises(ValueError, match="4 hypotheses and 2 references"):
        corpus_chrf(HYPOTHESES, MULTI_REFERENCES[:2])


@pytest.mark.parametrize(
    "call,name",
    [
        (lambda: corpus_bleu(HYPOTHESES, REFERENCES, tokenize="moses"), "`tokenize`"),
        (lambda: corpus_bleu(HYPOTHESES, REFERENCES, lowercase="yes"), "`lowercase`"),
        (lambda: corpus_bleu("a b c", ["a b c"]), "`hypotheses`"),
        (lambda: corpus_bleu(["a b c"], "a b c"), "`references`"),
        (lambda: corpus_bleu(["a b c"], [[]]), "`references`"),
        (lambda: corpus_chrf(["a b c"], [["x", None]]), "`references`"),
        (lambda: corpus_bleu([], []), "empty"),
    ],
)
def test_bad_arguments_raise(call, name):
    with pytest.raises(ValueError, match=name):
        call()
