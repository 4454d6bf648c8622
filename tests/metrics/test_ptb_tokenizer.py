"""The Python PTB tokenizer against pycocoevalcap 1.2's Java one: string by
string on the coco-caption demo (recorded Java output, always run), on edge
strings (the Stanford jar itself, when `java` is on PATH), and the line
separators that make pycocoevalcap give captions to the wrong images."""

import importlib.util
import json
import os
import shutil
import subprocess

import pytest

from keras_structattn.metrics import ptb_tokenize
from keras_structattn.metrics import tokenize_captions
from keras_structattn.metrics.ptb_tokenizer import LINE_SEPARATORS
from keras_structattn.metrics.ptb_tokenizer import PUNCTUATION
from keras_structattn.metrics.ptb_tokenizer import stanford_ptb_lines

FIXTURES = os.path.join(os.path.dirname(__file__), os.pardir, "fixtures", "coco_caption_eval")


def _pycocoevalcap_dir():
    spec = importlib.util.find_spec("pycocoevalcap")
    return None if spec is None else list(spec.submodule_search_locations)[0]


JAVA = shutil.which("java") is not None and _pycocoevalcap_dir() is not None
needs_java = pytest.mark.skipif(not JAVA, reason="needs `java` on PATH and pycocoevalcap")


def _load(name):
    with open(os.path.join(FIXTURES, name), encoding="utf-8") as f:
        return json.load(f)


@pytest.fixture(scope="module")
def demo():
    """The demo's raw captions, grouped the way pycocoevalcap groups them
    (images in the annotation file's order, references in file order)."""
    annotations = _load("captions_val2014_fakecap_subset.json")
    results = _load("captions_val2014_fakecap_results.json")
    result_ids = {r["image_id"] for r in results}
    order = [image["id"] for image in annotations["images"] if image["id"] in result_ids]
    refs = {i: [] for i in order}
    for ann in annotations["annotations"]:
        refs[ann["image_id"]].append(ann)
    hyps = {r["image_id"]: [r] for r in results}
    return {"refs": refs, "hyps": {i: hyps[i] for i in order}, "tokenized": _load("tokenized.json")}


def test_demo_matches_the_java_tokenizer_string_by_string(demo):
    # 5,005 references and 1,000 hypotheses, as two batches (as pycocoevalcap).
    for side, captions in (("gts", demo["refs"]), ("res", demo["hyps"])):
        got = tokenize_captions(captions)
        want = {int(k): v for k, v in demo["tokenized"][side].items()}
        assert list(got) == list(captions)
        wrong = [(i, got[i], want[i]) for i in got if got[i] != want[i]]
        assert not wrong, f"{side}: {len(wrong)} images differ, e.g. {wrong[:3]}"
    assert sum(len(v) for v in demo["refs"].values()) == 5005


# Edge cases with the tokens pycocoevalcap 1.2 gave for them (Stanford
# CoreNLP 3.4.1 on OpenJDK 17, one caption per line in this order), recorded
# so they are checked without Java too; `test_edge_strings_match_the_jar`
# re-runs the jar on them.
RECORDED = [
    ("A dog (brown) sits on a [red] mat {indoors} <near> a door.",
     "a dog -lrb- brown -rrb- sits on a -lsb- red -rsb- mat -lcb- indoors -rcb- <near> a door"),
    ("The man's hat isn't red; they're sure it'll fit, I'd say.",
     "the man 's hat is n't red they 're sure it 'll fit i 'd say"),
    ("He said \"look\" and 'smiled' at the \u201cbig\u201d \u2018cat\u2019.",
     "he said look and smiled at the big cat"),
    ("A well-known twin-hulled boat -- and a T-shirt - with a x-ray.",
     "a well-known twin-hulled boat and a t-shirt with a x-ray"),
    ("1,000 people, 3.5 miles, 1/2 a pie, $5.00 and 10:30pm on 12/25/2014.",
     "1,000 people 3.5 miles 1/2 a pie $ 5.00 and 10:30 pm on 12/25/2014"),
    ("Caf\u00e9 na\u00efve r\u00e9sum\u00e9 \u65e5\u672c\u8a9e \u00d7 \u00bd \u20ac5 "
     "\U0001F600 emoji",
     "caf\u00e9 na\u00efve r\u00e9sum\u00e9 \u65e5\u672c\u8a9e \u00d7 1/2 $ 5 emoji"),
    ("", ""),
    ("   ", ""),
    ("...!?", "!?"),
    ("- -- --- . , ; :", ""),
    ("Mr. Smith and Dr. Who at St. Louis, U.S. The end etc.",
     "mr. smith and dr. who at st. louis u.s. the end etc."),
    ("I cannot go, gonna wait. 'Tis fine 'twas.",
     "i can not go gon na wait 't is fine 't was"),
    ("e-mail me at a@b.com or www.example.com :) #tag @user",
     "e-mail me at a@b.com or www.example.com :-rrb- #tag @user"),
]


def test_recorded_edge_cases():
    got = tokenize_captions({i: [caption] for i, (caption, _) in enumerate(RECORDED)})
    assert [v[0] for v in got.values()] == [want for _, want in RECORDED]
    # A caption alone is the last line of its input: the same tokens here.
    for caption, want in RECORDED:
        assert ptb_tokenize(caption) == (want.split(" ") if want else [])


def test_punctuation_list_is_pycocoevalcap_s():
    from pycocoevalcap.tokenizer.ptbtokenizer import PUNCTUATIONS

    assert PUNCTUATION == frozenset(PUNCTUATIONS)


# Extra strings for the jar: each exercises a token class or a context rule.
EDGE = [
    "(a) [b] {c} <d> &lt;e&gt; (555) 555-1234 -LRB- -rrb-",
    "don't DON'T can\u2019t won't ain't I'm it's it\u2019s they're we've you'll she'd y'all",
    "o'clock O'Neil d'Artagnan rock'n'roll '90s 'em 'cause cont'd ma'am",
    "\"Hello\" said \"he\" \" 'single' `tick' \u201cdouble\u201d \u00abguillemets\u00bb "
    "\u201elow\u201f",
    "co-op e-mail x-ray 3-d T-shirt a-b-c-d-e non-U.S. x-U.S. -3-d 5-a a--b a---b "
    "a\u2013b a\u2014b",
    "1,000,000 3.14 .5 -3 +4 1:30 12/25/2014 1 1/2 1/22222 \u00bd \u00bc \u2153 \u215b $5 "
    "US$ \u00a33",
    "\u00a2 \u20ac \u00a5 \u00a9 \u00b0 \u00d7 \u2192 \u2665 \u2122 \u00b9\u00b2\u00b3 "
    "\u2081\u2082",
    "na\u00efve caf\u00e9 \u00c9COLE Stra\u00dfe \u65e5\u672c\u8a9e \ud55c\uad6d\uc5b4 "
    "\u0440\u0443\u0441 "
    "\u03b5\u03bb\u03bb\u03b7\u03bd\u03b9\u03ba\u03ac \u0639\u0631\u0628\u064a",
    "a\u00adb tab\there nbsp\u00a0here zero\u200bwidth \ufeffbom x\x00y x\x7fy x\x1by",
    "\U0001F600 \U0001F436dog a\U0001F355b",
    "U.S. The U.S. and etc. The Inc. x Jan. Feb. a.m. p.m. e.g. i.e. Ph.D. I. The No. 5 no. x",
    "dog., cat.; bird.: e.g., etc., 9.x, foo.txt a.b.c x.y.z. A",
    "... .. . . . .... ..... \u2026 -- --- ---- ----- * ** \\* @@ ## __ ?! !!! \u00a1hola "
    "\u00bfque",
    "http://www.google.com/x?a=1. www.cnn.com. foo.com bar.org/baz. x@y.com @user #tag c++ f#",
    "<a href=\"x\">link</a> <b> <br /> <!-- c --> <a b=c> :) :-( ;D ^_^ (^_^) =) 8)",
    "AT&T Q&A at&t S&P-500 &amp; &quot;q&quot; &apos;s &mdash; &nbsp; &#39; &eacute;",
    "AT&AMP;T &APOS;s &QUOT;q&QUOT; &Apos;s &LT;b&GT; &MDASH;",
    "cannot gonna gotta lemme gimme wanna 'tis 'twas \u2019twas dunno",
    "",
    "   ",
    ".",
    "'",
    "\"",
    "ends with an abbreviation etc.",
    "Inc.",
]


def _run_stanford_jar(lines, directory):
    """The jar as pycocoevalcap runs it (one caption per line), in `directory`."""
    jar = os.path.join(_pycocoevalcap_dir(), "tokenizer", "stanford-corenlp-3.4.1.jar")
    path = os.path.join(directory, "captions.txt")
    with open(path, "wb") as f:
        f.write("\n".join(lines).encode("utf-8"))
    out = subprocess.run(["java", "-cp", jar, "edu.stanford.nlp.process.PTBTokenizer",
                          "-preserveLines", "-lowerCase", path],
                         capture_output=True, check=True, timeout=120).stdout
    return out.decode("utf-8").split("\n")


@needs_java
def test_edge_strings_match_the_jar(tmp_path):
    lines = EDGE + [caption for caption, _ in RECORDED]
    assert stanford_ptb_lines(lines) == _run_stanford_jar(lines, str(tmp_path))


# The line separators of Java's tokenizer, with the caption text around them.
SEPARATED = {"\\r": "a dog\ron a mat", "U+2028": "a cat\u2028on a sofa",
             "U+2029": "a bird\u2029in a tree", "U+000B": "a man\x0bon a horse",
             "U+000C": "a boat\x0con a lake"}


def test_a_line_separator_is_a_space():
    # Every character Java ends a line at (and U+0085) tokenises as a space,
    # and the captions around it keep their own tokens.
    for separator in LINE_SEPARATORS:
        caption = f"A dog{separator}on a mat."
        assert ptb_tokenize(caption) == ptb_tokenize("A dog on a mat.") == \
            ["a", "dog", "on", "a", "mat"]
        batch = {1: ["A cat."], 2: [caption, "Two dogs."], 3: ["A bird."]}
        assert tokenize_captions(batch) == {1: ["a cat"], 2: ["a dog on a mat", "two dogs"],
                                            3: ["a bird"]}


@needs_java
def test_pycocoevalcap_gives_captions_to_the_wrong_images(tmp_path):
    # pycocoevalcap writes one caption per line; Java also ends a line at
    # these characters, so everything after the first of them moves down a
    # line: image k receives image k-1's remainder, the last caption is lost
    # (zip stops at the shorter list), and nothing says so.
    # U+0085 comes first: Java reads it as the CP1252 ellipsis ("..."), not
    # as a line end, so it shifts nothing.
    texts = ["a horse\x85in a field", *SEPARATED.values(), "the last caption"]
    captions = {k: [{"caption": text}] for k, text in enumerate(texts)}
    official = _pycocoevalcap_tokenize(captions, str(tmp_path))
    ours = tokenize_captions(captions)
    assert ours == {0: ["a horse in a field"], 1: ["a dog on a mat"], 2: ["a cat on a sofa"],
                    3: ["a bird in a tree"], 4: ["a man on a horse"], 5: ["a boat on a lake"],
                    6: ["the last caption"]}
    assert official == {0: ["a horse in a field"], 1: ["a dog"], 2: ["on a mat"], 3: ["a cat"],
                        4: ["on a sofa"], 5: ["a bird"], 6: ["in a tree"]}


def _pycocoevalcap_tokenize(captions, directory):
    """pycocoevalcap's PTBTokenizer().tokenize; it writes its temporary file
    next to its jar, so where that folder is read-only the same steps run
    here with the file in `directory`."""
    from pycocoevalcap.tokenizer import ptbtokenizer

    if os.access(os.path.dirname(ptbtokenizer.__file__), os.W_OK):
        return ptbtokenizer.PTBTokenizer().tokenize(captions)
    ids = [k for k, v in captions.items() for _ in v]
    text = [c["caption"].replace("\n", " ") for v in captions.values() for c in v]
    result = {}
    for k, line in zip(ids, _run_stanford_jar(text, directory)):
        result.setdefault(k, []).append(" ".join(
            w for w in line.rstrip().split(" ") if w not in ptbtokenizer.PUNCTUATIONS))
    return result


def test_context_reaches_into_the_next_caption():
    # Java's trailing-context rules look past the line end: "etc." before a
    # capital, or at the end of the input, also ends the sentence (a "."
    # token); "'12" before a line break is one token, at the end two.
    lines = stanford_ptb_lines(
        ["see etc.", "A dog", "see etc.", "a dog", "the '12", "x", "the '12"])
    assert lines == ["see etc. .", "a dog", "see etc.", "a dog", "the '12", "x", "the ' 12"]


def test_non_strings_are_refused():
    with pytest.raises(ValueError, match="image 7, caption 1: a caption must be a string"):
        tokenize_captions({7: ["a dog", None]})
    with pytest.raises(ValueError, match="expected a list of captions"):
        tokenize_captions({7: "a dog"})
