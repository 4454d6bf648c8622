"""Ten annotator answers per question, with a little realistic noise.

VQA and TextVQA score a prediction against 10 human answers with
`min(#humans who gave it / 3, 1)` (averaged over the ten leave-one-out
subsets), so answers that some annotators gave earn partial credit. Each of
the ten answers here is the true answer, except `k` noisy ones with
`k ~ Binomial(10, answer_noise)` capped at `MAX_NOISY` = 4, so the true
answer always has a clear majority (>= 6 of 10) and is the
`multiple_choice_answer`. Noisy answers are what people plausibly say:

| kind | noisy answers |
| --- | --- |
| number | off by one (never below 0) |
| color | a neighbouring colour (orange for red, purple for blue, ...) |
| shape | a synonym or a near miss ("disc", "box", "rhombus", "pyramid") |
| yes/no | the other one |
| text | a word dropped from a multi-word answer, or a one-letter typo |

Noisy answers carry `answer_confidence` "maybe", true ones "yes".
"""

MAX_NOISY = 4
NUM_ANSWERS = 10
COLOR_CONFUSIONS = {
    "red": ("orange", "purple"),
    "orange": ("red", "yellow"),
    "yellow": ("orange", "green"),
    "green": ("yellow", "blue"),
    "blue": ("purple", "green"),
    "purple": ("blue", "red"),
}
SHAPE_CONFUSIONS = {
    "circle": ("disc", "round", "oval"),
    "square": ("box", "rectangle", "block"),
    "triangle": ("pyramid", "diamond"),
    "diamond": ("rhombus", "square"),
}
ANSWER_TYPES = {
    "number": "number",
    "yes/no": "yes/no",
    "color": "other",
    "shape": "other",
    "text": "other",
}


def _typo(rng, word):
    i = int(rng.integers(len(word)))
    ch = chr(ord("a") + int(rng.integers(26)))
    out = word[:i] + ch + word[i + 1 :]
    return out if out != word else word + ch


def noisy_answer(rng, answer, kind):
    """One plausible wrong answer for `answer` of `kind` (see above).

    Args:
        rng: a `np.random.Generator`.
        answer: the right answer string.
        kind: the answer kind (`"number"`, `"yes/no"`, `"color"`,
            `"shape"` or `"text"`).

    Returns:
        A string different from `answer`.
    """
    if kind == "number":
        k = int(answer)
        return str(k + 1) if k == 0 or rng.random() < 0.5 else str(k - 1)
    if kind == "yes/no":
        return "no" if answer == "yes" else "yes"
    if kind == "color":
        return COLOR_CONFUSIONS[answer][int(rng.integers(2))]
    if kind == "shape":
        options = SHAPE_CONFUSIONS[answer]
        return options[int(rng.integers(len(options)))]
    words = answer.split()
    if len(words) > 1 and rng.random() < 0.6:
        words.pop(0 if rng.random() < 0.5 else len(words) - 1)
        return " ".join(words)
    i = int(rng.integers(len(words)))
    words[i] = _typo(rng, words[i])
    return " ".join(words)


def annotate(rng, answer, kind, noise):
    """Ten `(answer, confidence)` pairs for a true `answer`.

    Args:
        rng: `np.random.Generator`.
        answer: the true answer string.
        kind: "number", "yes/no", "color", "shape" or "text".
        noise: per-annotator noise probability.

    Returns:
        A list of 10 `(answer, "yes" | "maybe")`.
    """
    k = min(int(rng.binomial(NUM_ANSWERS, noise)), MAX_NOISY)
    noisy = set(rng.choice(NUM_ANSWERS, size=k, replace=False).tolist())
    return [
        (noisy_answer(rng, answer, kind), "maybe") if i in noisy else (answer, "yes")
        for i in range(NUM_ANSWERS)
    ]
