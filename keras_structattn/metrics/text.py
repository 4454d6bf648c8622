"""Corpus-level translation metrics (BLEU, chrF) computed by sacreBLEU.

Thin wrappers over sacreBLEU's object API (`sacrebleu.metrics.BLEU`,
`CHRF`) that accept the references the way test sets come: one string per
segment, or a list of strings per segment whose length may vary (multi-
reference sets where each source has 1 to 7 translations). sacreBLEU wants
reference *streams* instead, one per reference slot and each as long as the
corpus, with `None` where a segment has no reference in that slot; its
signature then reports `nrefs:var`. `group_references` makes the per-segment
lists from `(source, target)` pairs where a source may repeat.

sacreBLEU is imported by the scoring functions only, so grouping works
without it.
"""

import dataclasses


@dataclasses.dataclass(frozen=True)
class BleuResult:
    """Corpus BLEU, as reported by sacreBLEU.

    Attributes:
        score: BLEU in [0, 100].
        signature: sacreBLEU's signature, e.g.
            `nrefs:1|case:mixed|eff:no|tok:13a|smooth:exp|version:2.6.0`.
        precisions: the (smoothed) 1- to 4-gram precisions, in percent.
        brevity_penalty: the brevity penalty, in (0, 1].
        sys_len: hypothesis tokens in the corpus.
        ref_len: reference tokens counted for the brevity penalty (per
            segment, the reference length closest to the hypothesis).
        counts: matched (clipped) n-grams per order.
        totals: hypothesis n-grams per order.
    """

    score: float
    signature: str
    precisions: tuple
    brevity_penalty: float
    sys_len: int
    ref_len: int
    counts: tuple
    totals: tuple

    def __str__(self):
        # sacreBLEU's own score line, then the signature.
        precisions = "/".join(f"{p:.1f}" for p in self.precisions)
        ratio = self.sys_len / self.ref_len if self.ref_len else 0
        return (
            f"BLEU = {self.score:.2f} {precisions} (BP = {self.brevity_penalty:.3f} "
            f"ratio = {ratio:.3f} hyp_len = {self.sys_len:d} "
            f"ref_len = {self.ref_len:d})\n{self.signature}"
        )


@dataclasses.dataclass(frozen=True)
class ChrfResult:
    """Corpus chrF, as reported by sacreBLEU.

    Attributes:
        score: chrF in [0, 100].
        signature: sacreBLEU's signature, e.g.
            `nrefs:1|case:mixed|eff:yes|nc:6|nw:0|space:no|version:2.6.0`.
        name: the metric's name in sacreBLEU (`chrF2`).
    """

    score: float
    signature: str
    name: str = "chrF2"

    def __str__(self):
        return f"{self.name} = {self.score:.2f}\n{self.signature}"


def corpus_bleu(hypotheses, references, *, tokenize="13a", lowercase=False):
    """Corpus BLEU with sacreBLEU (exp smoothing, no effective order).

    Args:
        hypotheses: list of detokenised hypothesis strings, one per segment.
        references: list with one entry per segment: a reference string, or
            a non-empty list of reference strings (the count may vary from
            segment to segment).
        tokenize: sacreBLEU tokenizer: one of `sacrebleu.metrics.BLEU.
            TOKENIZERS` (`"13a"`, `"intl"`, `"none"`, `"char"`, `"zh"`, ...).
        lowercase: whether to lowercase hypotheses and references.

    Returns:
        A `BleuResult`.
    """
    from sacrebleu.metrics import BLEU

    if tokenize not in BLEU.TOKENIZERS:
        raise ValueError(
            f"Argument `tokenize` must be one of {list(BLEU.TOKENIZERS)}. "
            f"Received: tokenize={tokenize!r}"
        )
    if not isinstance(lowercase, bool):
        raise ValueError(
            f"Argument `lowercase` must be a bool. Received: lowercase={lowercase!r}"
        )
    hypotheses, streams = _corpus(hypotheses, references)
    metric = BLEU(tokenize=tokenize, lowercase=lowercase)
    result = metric.corpus_score(hypotheses, streams)
    return BleuResult(
        score=float(result.score),
        signature=str(metric.get_signature()),
        precisions=tuple(float(p) for p in result.precisions),
        brevity_penalty=float(result.bp),
        sys_len=int(result.sys_len),
        ref_len=int(result.ref_len),
        counts=tuple(int(c) for c in result.counts),
        totals=tuple(int(t) for t in result.totals),
    )


def corpus_chrf(hypotheses, references):
    """Corpus chrF (sacreBLEU defaults: character 6-grams, beta 2).

    Args:
        hypotheses: list of detokenised hypothesis strings, one per segment.
        references: list with one entry per segment: a reference string, or
            a non-empty list of reference strings (the count may vary from
            segment to segment).

    Returns:
        A `ChrfResult`.
    """
    from sacrebleu.metrics import CHRF

    hypotheses, streams = _corpus(hypotheses, references)
    metric = CHRF()
    result = metric.corpus_score(hypotheses, streams)
    return ChrfResult(
        score=float(result.score),
        signature=str(metric.get_signature()),
        name=result.name,
    )


def group_references(pairs):
    """Groups `(source, target)` pairs by source, for multi-reference scoring.

    Test sets such as Tatoeba's list one pair per translation, so a source
    with several translations comes several times. Translate each source
    once and score it against all its targets: pass the returned
    `references` to `corpus_bleu` / `corpus_chrf` as they are.

    Args:
        pairs: iterable of `(source, target)` pairs.

    Returns:
        `(sources, references)`: the distinct sources in order of first
        occurrence, and for each a list of all its targets in input order.
        For the Tatoeba test split: 837 sources with 1 to 7 references.
    """
    groups = {}
    for source, target in pairs:
        groups.setdefault(source, []).append(target)
    return list(groups), list(groups.values())


def _corpus(hypotheses, references):
    """Checks the corpus; returns `(hypotheses, reference streams)`."""
    # A bare string is a sequence too; reject it rather than score its
    # characters as segments.
    if isinstance(hypotheses, str) or not _is_list(hypotheses):
        raise ValueError(
            "Argument `hypotheses` must be a list of strings. "
            f"Received: {type(hypotheses).__name__}"
        )
    if isinstance(references, str) or not _is_list(references):
        raise ValueError(
            "Argument `references` must be a list of strings or of lists of "
            f"strings. Received: {type(references).__name__}"
        )
    if len(hypotheses) != len(references):
        raise ValueError(
            "`hypotheses` and `references` must have one entry per segment. "
            f"Received: {len(hypotheses)} hypotheses and {len(references)} "
            "references"
        )
    if not hypotheses:
        raise ValueError("Received an empty corpus: `hypotheses` has no segment.")
    for i, hypothesis in enumerate(hypotheses):
        if not isinstance(hypothesis, str):
            raise ValueError(
                f"Argument `hypotheses` must hold strings. Received: "
                f"hypotheses[{i}] of type {type(hypothesis).__name__}"
            )
    per_segment = []
    for i, refs in enumerate(references):
        refs = [refs] if isinstance(refs, str) else refs
        if not _is_list(refs) or not refs or not all(isinstance(r, str) for r in refs):
            raise ValueError(
                "Each entry of `references` must be a string or a non-empty "
                f"list of strings. Received: references[{i}]={refs!r}"
            )
        per_segment.append(list(refs))
    return list(hypotheses), _reference_streams(per_segment)


def _reference_streams(per_segment):
    """Per-segment reference lists -> sacreBLEU streams padded with `None`.

    Stream `k` holds each segment's `k`-th reference, or `None` where the
    segment has fewer; sacreBLEU skips the `None`s.
    """
    num_streams = max(len(refs) for refs in per_segment)
    return [
        [refs[k] if k < len(refs) else None for refs in per_segment]
        for k in range(num_streams)
    ]


def _is_list(value):
    return isinstance(value, (list, tuple))
