"""NumPy (float64) references for the decoders, with explicit loops.

A *model* here is `next_log_probs(prefix) -> [V]`: the log-probabilities of
the next token after `prefix` (a tuple of tokens, the initial id first).

- `brute_force`: scores every sequence up to length `T` (what beam search
  with enough beams must find).
- `beam_search`: tensor2tensor's algorithm written over Python lists, with
  no early stopping (what a narrow beam must find).
- `greedy_search`: argmax decoding.
"""

import itertools
import math

import numpy as np


def length_penalty(length, alpha):
    return ((5.0 + length) / 6.0) ** alpha


def log_softmax(logits):
    logits = np.asarray(logits, dtype=np.float64)
    top = np.max(logits)
    return logits - top - np.log(np.sum(np.exp(logits - top)))


def sequence_log_prob(model, initial_id, tokens):
    """Sum of the log-probabilities of `tokens`, one step at a time."""
    total = 0.0
    prefix = (initial_id,)
    for token in tokens:
        total += model(prefix)[token]
        prefix = prefix + (token,)
    return total


def brute_force(model, initial_id, vocab_size, max_length, alpha, eos_id):
    """All hypotheses beam search can return, best first.

    Returns `(finished, alive)`: lists of `(score, tokens)` sorted by
    decreasing score (ties: the earlier enumerated first). `finished` holds
    every sequence of length 1..max_length that ends with its only EOS and
    has a finite log-probability, scored with the penalty of its length;
    `alive` every EOS-free sequence of length `max_length`, scored with the
    penalty of `max_length`.
    """
    finished = []
    alive = []
    non_eos = [v for v in range(vocab_size) if v != eos_id]
    for length in range(1, max_length + 1):
        for body in itertools.product(non_eos, repeat=length - 1):
            tokens = body + (eos_id,)
            log_prob = sequence_log_prob(model, initial_id, tokens)
            if log_prob > -math.inf:
                finished.append((log_prob / length_penalty(length, alpha), tokens))
    for tokens in itertools.product(non_eos, repeat=max_length):
        log_prob = sequence_log_prob(model, initial_id, tokens)
        alive.append((log_prob / length_penalty(max_length, alpha), tokens))
    finished.sort(key=lambda item: -item[0])
    alive.sort(key=lambda item: -item[0])
    return finished, alive


def best(model, initial_id, vocab_size, max_length, alpha, eos_id):
    """`(score, tokens)` beam search must return with enough beams."""
    finished, alive = brute_force(model, initial_id, vocab_size, max_length, alpha, eos_id)
    return finished[0] if finished else alive[0]


def beam_search(model, initial_id, vocab_size, max_length, beam_size, alpha, eos_id):
    """tensor2tensor beam search over lists; returns `(score, tokens)` best first.

    Runs all `max_length` steps. Returns the finished set (at most
    `beam_size` entries), or the alive set if nothing finished.
    """
    alive = [(0.0, ())]  # (log_prob, tokens)
    finished = []  # (score, tokens)
    for step in range(max_length):
        candidates = []
        for log_prob, tokens in alive:
            next_log_probs = model((initial_id,) + tokens)
            for token in range(vocab_size):
                candidates.append((log_prob + next_log_probs[token], tokens + (token,)))
        candidates.sort(key=lambda item: -item[0])
        candidates = candidates[: 2 * beam_size]
        alive = [c for c in candidates if c[1][-1] != eos_id][:beam_size]
        for log_prob, tokens in candidates:
            if tokens[-1] == eos_id and log_prob > -math.inf:
                finished.append((log_prob / length_penalty(step + 1, alpha), tokens))
        finished.sort(key=lambda item: -item[0])
        finished = finished[:beam_size]
    if finished:
        return finished
    return [(lp / length_penalty(max_length, alpha), tokens) for lp, tokens in alive]


def greedy_search(model, initial_id, max_length, eos_id):
    """Argmax decoding; returns `(sum of log-probs, tokens)`."""
    tokens = ()
    total = 0.0
    for _ in range(max_length):
        next_log_probs = model((initial_id,) + tokens)
        token = int(np.argmax(next_log_probs))
        total += next_log_probs[token]
        tokens = tokens + (token,)
        if token == eos_id:
            break
    return total, tokens


def padded(tokens, max_length):
    """`tokens` padded with 0 to `max_length` (NumPy int)."""
    out = np.zeros(max_length, dtype=np.int64)
    out[: len(tokens)] = tokens
    return out
