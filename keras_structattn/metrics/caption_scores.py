"""BLEU-1..4, ROUGE-L and CIDEr-D as the COCO caption evaluation defines them.

The definitions, constants and rounding are those of pycocoevalcap 1.2 (the
scorers behind the COCO captioning leaderboard), reimplemented without Java
or pycocoevalcap and checked against it number for number
(`docs/caption_metrics.md`):

* BLEU (Papineni et al., 2002): corpus BLEU-1..4 with the reference length
  closest to each hypothesis (ties to the shorter), clipped n-gram counts,
  and pycocoevalcap's smoothing of every precision as
  `(correct + 1e-15) / (guess + 1e-9)`; the per-image scores are the same
  formula on one image.
* ROUGE-L (Lin, 2004): the F-measure of the longest common subsequence with
  `beta = 1.2`, from the best precision and the best recall over the
  references (each maximised on its own), averaged over images.
* CIDEr-D (Vedantam et al., 2015, arXiv:1411.5726): TF-IDF n-gram vectors
  (n = 1..4) with document frequencies counted over the images of the
  reference set, `idf = log(number of images) - log(max(1, df))`, the
  candidate's weights clipped at the reference's, a Gaussian length penalty
  with `sigma = 6`, the mean over n, the mean over references, times 10.
  Like pycocoevalcap, the "length" in the penalty is the number of bigrams.

Inputs are the tokenised captions pycocoevalcap's scorers take: dicts
`{image_id: [caption, ...]}` of strings whose tokens are separated by
spaces (`keras_structattn.metrics.tokenize_captions` makes them from raw
captions). BLEU and CIDEr-D split them on any whitespace, ROUGE-L on single
spaces (so an empty caption is one empty token there), as pycocoevalcap
does.

`CiderD` is CIDEr-D as a reward for self-critical training (Rennie et al.,
2017, arXiv:1612.00563): the document frequencies and the reference vectors
are computed once, from the training references, and every call scores a
batch of sampled captions against them with array operations.
"""

import math

import numpy as np

BLEU_TINY = 1e-15  # pycocoevalcap's "tiny": a precision with nothing correct is ~0, not 0/0
BLEU_SMALL = 1e-9  # pycocoevalcap's "small", added to every denominator
ROUGE_BETA = 1.2
CIDER_SIGMA = 6.0


def _ngram_counts(tokens, n):
    """n-gram (tuple) -> count for orders 1..n, in pycocoevalcap's order
    (by order, then by first position), which fixes its summation order."""
    counts = {}
    for k in range(1, n + 1):
        for i in range(len(tokens) - k + 1):
            gram = tuple(tokens[i:i + k])
            counts[gram] = counts.get(gram, 0) + 1
    return counts


def _check_scoring_input(gts, res):
    """The images in gts order, with each hypothesis and its references."""
    if not isinstance(gts, dict) or not isinstance(res, dict):
        raise ValueError(f"gts and res must be dicts {{image_id: [caption, ...]}}, got "
                         f"{type(gts).__name__} and {type(res).__name__}.")
    if gts.keys() != res.keys():
        only_gts = [k for k in gts if k not in res][:5]
        only_res = [k for k in res if k not in gts][:5]
        raise ValueError(f"gts and res must have the same image ids: only in gts "
                         f"{only_gts}, only in res {only_res}.")
    items = []
    for image_id, refs in gts.items():
        hyp = res[image_id]
        if not isinstance(hyp, (list, tuple)) or len(hyp) != 1 or not isinstance(hyp[0], str):
            raise ValueError(f"res[{image_id!r}] must be a list of exactly one caption string, "
                             f"got {hyp!r:.80}.")
        if (not isinstance(refs, (list, tuple)) or not refs
                or not all(isinstance(r, str) for r in refs)):
            raise ValueError(f"gts[{image_id!r}] must be a non-empty list of caption strings, "
                             f"got {refs!r:.80}.")
        items.append((image_id, hyp[0], list(refs)))
    return items


def bleu(gts, res, n=4):
    """pycocoevalcap's BLEU-1..n (`Bleu(n).compute_score(gts, res)`).

    Papineni, Roukos, Ward and Zhu, "BLEU: a Method for Automatic Evaluation
    of Machine Translation", ACL 2002, with the "closest" reference length
    and pycocoevalcap's epsilon smoothing.

    Args:
        gts: `{image_id: [reference caption, ...]}` (tokenised strings).
        res: `{image_id: [hypothesis caption]}` with the same image ids.
        n: the largest n-gram order.

    Returns:
        `(corpus, per_image)`: `corpus` a list of n floats (BLEU-1..n of the
        corpus), `per_image` a float64 array `[n, images]` in gts order.
    """
    items = _check_scoring_input(gts, res)
    total_test = total_ref = 0
    total_guess = [0] * n
    total_correct = [0] * n
    per_image = np.zeros((n, len(items)))
    for column, (_, hyp, refs) in enumerate(items):
        words = hyp.split()
        test_len = len(words)
        ref_lens = []
        max_counts = {}
        for ref in refs:
            ref_words = ref.split()
            ref_lens.append(len(ref_words))
            for gram, count in _ngram_counts(ref_words, n).items():
                if count > max_counts.get(gram, 0):
                    max_counts[gram] = count
        # The closest reference length; a tie goes to the shorter one.
        ref_len = min((abs(length - test_len), length) for length in ref_lens)[1]
        guess = [max(0, test_len - k) for k in range(n)]
        correct = [0] * n
        for gram, count in _ngram_counts(words, n).items():
            correct[len(gram) - 1] += min(max_counts.get(gram, 0), count)
        total_test += test_len
        total_ref += ref_len
        for k in range(n):
            total_guess[k] += guess[k]
            total_correct[k] += correct[k]
        per_image[:, column] = _bleu_from_counts(correct, guess, test_len, ref_len, n)
    corpus = _bleu_from_counts(total_correct, total_guess, total_test, total_ref, n)
    return corpus, per_image


def _bleu_from_counts(correct, guess, test_len, ref_len, n):
    # The same operations in the same order as pycocoevalcap, so the floats
    # agree to the last bit.
    scores = []
    product = 1.0
    for k in range(n):
        product *= (float(correct[k]) + BLEU_TINY) / (float(guess[k]) + BLEU_SMALL)
        scores.append(product ** (1.0 / (k + 1)))
    ratio = (test_len + BLEU_TINY) / (ref_len + BLEU_SMALL)
    if ratio < 1:
        brevity = math.exp(1 - 1 / ratio)
        scores = [s * brevity for s in scores]
    return scores


def lcs_length(a, b):
    """Length of the longest common subsequence of two token sequences.

    Bit-parallel (Allison and Dix, 1986; Hyyro, 2004): one bit per token of
    `a`, one big-integer update per token of `b`; exact.
    """
    if not a or not b:
        return 0
    masks = {}
    for i, token in enumerate(a):
        masks[token] = masks.get(token, 0) | (1 << i)
    full = (1 << len(a)) - 1
    v = full
    for token in b:
        u = v & masks.get(token, 0)
        v = ((v + u) | (v - u)) & full
    return len(a) - bin(v).count("1")


def rouge_l(gts, res, beta=ROUGE_BETA):
    """pycocoevalcap's ROUGE-L (`Rouge().compute_score(gts, res)`).

    Lin, "ROUGE: A Package for Automatic Evaluation of Summaries", ACL
    Workshop 2004: `F = (1 + beta^2) P R / (R + beta^2 P)` from the longest
    common subsequence, with `P` and `R` each the best over the references.

    Args:
        gts: `{image_id: [reference caption, ...]}` (tokenised strings).
        res: `{image_id: [hypothesis caption]}` with the same image ids.
        beta: the recall weight (1.2 in pycocoevalcap).

    Returns:
        `(corpus, per_image)`: the mean over images and a float64 array of
        the per-image scores in gts order.
    """
    items = _check_scoring_input(gts, res)
    scores = []
    for _, hyp, refs in items:
        candidate = hyp.split(" ")
        precision = []
        recall = []
        for ref in refs:
            reference = ref.split(" ")
            common = lcs_length(reference, candidate)
            precision.append(common / float(len(candidate)))
            recall.append(common / float(len(reference)))
        p, r = max(precision), max(recall)
        if p != 0 and r != 0:
            scores.append(((1 + beta ** 2) * p * r) / float(r + beta ** 2 * p))
        else:
            scores.append(0.0)
    per_image = np.array(scores, dtype=np.float64)
    return float(np.mean(per_image)) if len(scores) else 0.0, per_image


def cider_d(gts, res, n=4, sigma=CIDER_SIGMA):
    """pycocoevalcap's CIDEr-D (`Cider().compute_score(gts, res)`).

    The document frequencies come from the references being scored, so the
    score of an image depends on which other images are scored with it.

    Args:
        gts: `{image_id: [reference caption, ...]}` (tokenised strings).
        res: `{image_id: [hypothesis caption]}` with the same image ids.
        n: the largest n-gram order.
        sigma: the standard deviation of the length penalty.

    Returns:
        `(corpus, per_image)`: the mean over images and a float64 array of
        the per-image scores in gts order.
    """
    items = _check_scoring_input(gts, res)
    scorer = CiderD({image_id: refs for image_id, _, refs in items}, n=n, sigma=sigma)
    per_image = scorer.scores([image_id for image_id, _, _ in items],
                              [hyp for _, hyp, _ in items])
    return float(np.mean(per_image)) if len(items) else 0.0, per_image


def _tokens(caption, where):
    if isinstance(caption, str):
        return caption.split()
    if isinstance(caption, (list, tuple)):
        return list(caption)
    raise ValueError(f"{where}: a caption must be a string of space-separated tokens or a "
                     f"list of tokens, got {type(caption).__name__} {caption!r:.60}.")


class CiderD:
    """CIDEr-D against fixed references: the self-critical training reward.

    Rennie, Marcheret, Mroueh, Ross and Goel, "Self-critical Sequence
    Training for Image Captioning", CVPR 2017, arXiv:1612.00563, optimise
    CIDEr-D (Vedantam, Zitnick and Parikh, 2015, arXiv:1411.5726) with
    document frequencies from the training references (`df="coco-train"`
    in their code). This object computes those frequencies, the references'
    TF-IDF vectors, norms and lengths once; `scores` then gives every
    candidate its CIDEr-D with a few array operations per batch.

    When the references are exactly the images being scored, the scores
    are pycocoevalcap's `Cider` per-image scores (`cider_d` is that).

    Args:
        references: dict `{image_id: [caption, ...]}`; a caption is a string
            of space-separated tokens or a list of tokens (strings, or any
            hashable tokens such as word ids, compared as they are).
        n: the largest n-gram order (4 in CIDEr-D).
        sigma: the standard deviation of the Gaussian length penalty (6).

    Call arguments of `scores`:
        image_ids: one image id per candidate (ids may repeat: K samples
            per image), each a key of `references`.
        candidates: the candidate captions, strings or token lists.

    Returns (of `scores`):
        A float64 NumPy array with one CIDEr-D per candidate.
    """

    def __init__(self, references, *, n=4, sigma=CIDER_SIGMA):
        if not isinstance(references, dict) or not references:
            raise ValueError("references must be a non-empty dict {image_id: [caption, ...]}, "
                             f"got {type(references).__name__} of length "
                             f"{len(references) if hasattr(references, '__len__') else '?'}.")
        if int(n) != n or n < 1:
            raise ValueError(f"n must be a positive integer, got {n!r}.")
        self.n = int(n)
        self.sigma = float(sigma)
        self._index = {}
        self._vocab = {}
        ref_rows, grams, orders, tfs = [], [], [], []
        first_ref, ref_count, bigrams = [], [], []
        df_grams = []
        row = 0
        for image, (image_id, captions) in enumerate(references.items()):
            if not isinstance(captions, (list, tuple)) or not captions:
                raise ValueError(f"references[{image_id!r}] must be a non-empty list of "
                                 f"captions, got {captions!r:.80}.")
            self._index[image_id] = image
            first_ref.append(row)
            ref_count.append(len(captions))
            seen = set()
            for j, caption in enumerate(captions):
                counts = _ngram_counts(_tokens(caption, f"references[{image_id!r}][{j}]"),
                                       self.n)
                bigram_count = 0
                for gram, count in counts.items():
                    gid = self._vocab.setdefault(gram, len(self._vocab))
                    ref_rows.append(row)
                    grams.append(gid)
                    orders.append(len(gram) - 1)
                    tfs.append(count)
                    seen.add(gid)
                    if len(gram) == 2:
                        bigram_count += count
                bigrams.append(bigram_count)
                row += 1
            df_grams.extend(seen)
        self._first_ref = np.asarray(first_ref, dtype=np.int64)
        self._ref_count = np.asarray(ref_count, dtype=np.int64)
        self._ref_bigrams = np.asarray(bigrams, dtype=np.int64)
        ref_rows = np.asarray(ref_rows, dtype=np.int64)
        grams = np.asarray(grams, dtype=np.int64)
        orders = np.asarray(orders, dtype=np.int64)
        tfs = np.asarray(tfs, dtype=np.float64)

        # Document frequency: in how many images' reference sets each n-gram
        # occurs. pycocoevalcap takes np.log of Python floats one by one; the
        # same calls on the few distinct counts give the same bits.
        df = np.bincount(np.asarray(df_grams, dtype=np.int64), minlength=len(self._vocab))
        self.ref_len = np.log(float(len(references)))
        counts, inverse = np.unique(df, return_inverse=True)
        table = np.array([self.ref_len - np.log(max(1.0, float(d))) for d in counts],
                         dtype=np.float64)
        # One more weight at the end, for n-grams no reference has (df 0).
        self._idf = np.append(table[inverse], self.ref_len - np.log(max(1.0, 0.0)))

        ref_values = tfs * self._idf[grams]
        self._ref_norms = self._norms(ref_rows, orders, ref_values, row)
        # The reference entries sorted by (image, n-gram), for the join with
        # the candidates' n-grams (stable: references stay in order).
        ref_image = np.repeat(np.arange(len(references), dtype=np.int64), ref_count)
        keys = ref_image[ref_rows] * len(self._vocab) + grams
        order = np.argsort(keys, kind="stable")
        self._keys = keys[order]
        self._key_rows = ref_rows[order]
        self._key_values = ref_values[order]
        self._penalties = {}

    @property
    def image_ids(self):
        """The image ids of the references, in order."""
        return list(self._index)

    def _norms(self, rows, orders, values, num_rows):
        # Squares summed in pycocoevalcap's order (bincount adds in input
        # order), then the square root.
        sums = np.bincount(rows * self.n + orders, weights=values * values,
                           minlength=num_rows * self.n)
        return np.sqrt(sums).reshape(num_rows, self.n)

    def _penalty(self, deltas):
        # exp(-delta^2 / (2 sigma^2)) as pycocoevalcap writes it (np.e **),
        # once per distinct length difference.
        out = np.empty(len(deltas), dtype=np.float64)
        for delta in np.unique(deltas):
            value = self._penalties.get(int(delta))
            if value is None:
                d = float(delta)
                value = np.e ** (-(d ** 2) / (2 * self.sigma ** 2))
                self._penalties[int(delta)] = value
            out[deltas == delta] = value
        return out

    def scores(self, image_ids, candidates):
        """CIDEr-D of each candidate against its image's references."""
        image_ids = list(image_ids)
        candidates = list(candidates)
        if len(image_ids) != len(candidates):
            raise ValueError(f"image_ids and candidates must have the same length, got "
                             f"{len(image_ids)} and {len(candidates)}.")
        count = len(candidates)
        if count == 0:
            return np.zeros(0, dtype=np.float64)
        n = self.n
        images = np.empty(count, dtype=np.int64)
        rows, grams, orders, tfs = [], [], [], []
        bigrams = np.zeros(count, dtype=np.int64)
        vocab = self._vocab
        for c, (image_id, caption) in enumerate(zip(image_ids, candidates)):
            image = self._index.get(image_id)
            if image is None:
                raise ValueError(f"candidate {c}: image id {image_id!r} has no references "
                                 f"(the CiderD object knows {len(self._index)} images).")
            images[c] = image
            counts = _ngram_counts(_tokens(caption, f"candidate {c}"), n)
            for gram, tf in counts.items():
                rows.append(c)
                grams.append(vocab.get(gram, -1))
                orders.append(len(gram) - 1)
                tfs.append(tf)
                if len(gram) == 2:
                    bigrams[c] += tf
        rows = np.asarray(rows, dtype=np.int64)
        grams = np.asarray(grams, dtype=np.int64)
        orders = np.asarray(orders, dtype=np.int64)
        tfs = np.asarray(tfs, dtype=np.float64)
        known = grams >= 0
        # An n-gram no reference has: document frequency 0, weight log(N).
        values = tfs * self._idf[np.where(known, grams, len(vocab))]
        cand_norms = self._norms(rows, orders, values, count)

        # Every (candidate, reference of its image) pair, candidate-major.
        ref_count = self._ref_count[images]
        pair_start = np.concatenate([[0], np.cumsum(ref_count)[:-1]])
        pairs = int(ref_count.sum())
        pair_cand = np.repeat(np.arange(count), ref_count)
        pair_ref = (np.repeat(self._first_ref[images] - pair_start, ref_count)
                    + np.arange(pairs))

        # Join the candidates' n-grams with the same n-grams of the image's
        # references: min(v_cand, v_ref) * v_ref summed per pair and order
        # (the clipping of CIDEr-D), in the candidate's n-gram order.
        entries = np.flatnonzero(known)
        keys = images[rows[entries]] * len(vocab) + grams[entries]
        lo = np.searchsorted(self._keys, keys, side="left")
        hi = np.searchsorted(self._keys, keys, side="right")
        matches = hi - lo
        entry = np.repeat(entries, matches)
        where = np.repeat(lo - np.cumsum(matches) + matches, matches) + np.arange(matches.sum())
        ref_rows = self._key_rows[where]
        ref_values = self._key_values[where]
        cand = rows[entry]
        pair = pair_start[cand] + (ref_rows - self._first_ref[images[cand]])
        clipped = np.minimum(values[entry], ref_values) * ref_values
        sims = np.bincount(pair * n + orders[entry], weights=clipped,
                           minlength=pairs * n).reshape(pairs, n)

        # Cosine similarity where both norms are non-zero (pycocoevalcap
        # leaves the raw sum, 0, otherwise), times the length penalty.
        norm_c = cand_norms[pair_cand]
        norm_r = self._ref_norms[pair_ref]
        both = (norm_c != 0) & (norm_r != 0)
        sims = np.where(both, sims / np.where(both, norm_c * norm_r, 1.0), sims)
        deltas = bigrams[pair_cand] - self._ref_bigrams[pair_ref]
        sims = sims * self._penalty(deltas)[:, None]

        # Sum over the references (in order, from 0.0), mean over n, mean
        # over references, times 10: pycocoevalcap's steps one by one.
        totals = np.bincount(np.repeat(np.arange(count) * n, ref_count * n)
                             + np.tile(np.arange(n), pairs),
                             weights=sims.ravel(), minlength=count * n).reshape(count, n)
        score = np.mean(totals, axis=1)
        score = score / ref_count
        return score * 10.0
