"""Self-critical sequence training (SCST) for encoder-decoder captioners.

Rennie, Marcheret, Mroueh, Ross and Goel, "Self-critical Sequence Training
for Image Captioning", CVPR 2017, arXiv:1612.00563. The policy gradient of
the expected reward (their Eq. 7-9) is estimated from sampled captions
`w^s` with a baseline `b`:

    grad L = -(r(w^s) - b) * grad log p(w^s)

with `r` the CIDEr-D of the sample against the image's references and `b`
either the reward of the greedy caption (the paper's "self-critical"
baseline, Eq. 9) or the mean reward of the image's other samples (the
"new self-critical" baseline of Luo, 2020, arXiv:2003.09971).

The pieces, each usable on its own:

* `sampler(model, samples, max_decode_length)`: a compiled function
  `(features, uniforms) -> ids [B * samples, L]` drawing `samples` captions
  per image with `keras_structattn.decoding.sample_search` (one encoder
  pass per image, the decoder cache tiled over the samples).
* `advantages(rewards, baseline_rewards=None)`: `r - b` per sample.
* `training_batch(ids, advantages)`: the sampled captions as a
  teacher-forced batch `(decoder_inputs, targets, sample_weight)`: with
  an unsmoothed cross-entropy, a gradient step on it is exactly the policy
  gradient step above (the weight of each token of a caption is its
  advantage), so the step is a plain compiled `train_on_batch`.
* `self_critical_batch(draw, features, image_ids, reward, uniforms, ...)`:
  the three above, with the rewards, for one step's images.

The reward runs on the host (NumPy, `keras_structattn.metrics.CiderD`); the
sampling and the gradient step are compiled.
"""

import numpy as np
from keras import ops

from keras_structattn.decoding import _cache
from keras_structattn.decoding.sampling import sample_search
from keras_structattn.decoding.seq2seq import compile_function
from keras_structattn.decoding.tokens import EOS_ID
from keras_structattn.decoding.tokens import PAD_ID

BASELINES = ("mean", "greedy")


def sample_captions(model, features, uniforms, samples):
    """Draws `samples` captions per image (eager; see `sampler`).

    Args:
        model: a model with the decoding protocol of
            `keras_structattn.decoding.seq2seq`.
        features: the model's encoder input for `B` images.
        uniforms: float `[B * samples, L]` in [0, 1): the randomness of the
            draw (`L` is the caption length, EOS included).
        samples: captions per image; image `b`'s are rows
            `b * samples ... b * samples + samples - 1`.

    Returns:
        int32 ids `[B * samples, L]` (EOS included, 0 after it).
    """
    encoded, mask = model.encode(features, training=False)
    max_decode_length = int(uniforms.shape[1])
    cache = model.initial_cache(encoded, mask, max_decode_length)
    cache = _cache.tile(cache, samples)
    start = ops.zeros((ops.shape(mask)[0] * samples,), "int32")
    ids, _ = sample_search(model.decode_step, start, cache, uniforms=uniforms)
    return ids


def sampler(model, samples):
    """`sample_captions` for a fixed `samples`, compiled with XLA.

    Returns:
        A function `(features, uniforms) -> ids` (one compiled program per
        input shape).
    """
    return compile_function(lambda features, uniforms: sample_captions(
        model, features, uniforms, samples))


def draw_uniforms(seed, step, rows, length):
    """The uniforms of one SCST step: float32 `[rows, length]`, a function of
    `(seed, step)` alone, so a resumed run draws what an uninterrupted one
    would."""
    return np.random.default_rng([int(seed), int(step)]).random((rows, length), np.float32)


def advantages(rewards, baseline_rewards=None):
    """`reward - baseline` of each sample.

    Args:
        rewards: `[B, K]` rewards of the K samples of each image.
        baseline_rewards: `[B]` rewards of each image's greedy caption, or
            None for the mean of the image's other samples (needs K >= 2).

    Returns:
        float64 `[B, K]`.
    """
    rewards = np.asarray(rewards, np.float64)
    if rewards.ndim != 2:
        raise ValueError(f"`rewards` must be [images, samples]; got shape {rewards.shape}")
    if baseline_rewards is not None:
        return rewards - np.asarray(baseline_rewards, np.float64)[:, None]
    k = rewards.shape[1]
    if k < 2:
        raise ValueError("The mean-of-other-samples baseline needs >= 2 samples per image")
    others = (rewards.sum(axis=1, keepdims=True) - rewards) / (k - 1)
    return rewards - others


def training_batch(ids, sample_advantages):
    """The sampled captions as a teacher-forced batch.

    Args:
        ids: int `[N, L]` sampled captions (EOS included, 0 after it).
        sample_advantages: `[N]` advantage of each caption.

    Returns:
        `(decoder_inputs, targets, sample_weight)`: int32 `[N, L]` (the
        targets shifted right with `PAD_ID`), int32 `[N, L]` (the ids;
        padding after EOS is ignored by `PaddedCrossEntropy`), float32
        `[N, L]` (the advantage on every token).
    """
    ids = np.asarray(ids, np.int32)
    decoder_inputs = np.concatenate([np.full((len(ids), 1), PAD_ID, np.int32), ids[:, :-1]], 1)
    weight = np.repeat(np.asarray(sample_advantages, np.float32)[:, None], ids.shape[1], 1)
    return decoder_inputs, ids, weight * (ids != PAD_ID)


def caption_tokens(ids, id_to_word):
    """Token lists of decoded ids (up to EOS, padding and EOS left out)."""
    captions = []
    for row in np.asarray(ids):
        words = []
        for token in row:
            if token == EOS_ID:
                break
            if token != PAD_ID:
                words.append(id_to_word(int(token)))
        captions.append(words)
    return captions


def self_critical_batch(draw, features, image_ids, reward, uniforms, id_to_word, greedy=None):
    """One SCST step's batch: sampled captions, their rewards and advantages.

    Args:
        draw: `sampler(model, samples)`.
        features: the encoder input of `B` images.
        image_ids: the `B` images' ids, the keys of `reward`.
        reward: `reward(image_ids, token_lists)` -> float `[N]`, e.g.
            `keras_structattn.metrics.CiderD(references).scores`.
        uniforms: float `[B * samples, L]` (`draw_uniforms`).
        id_to_word: an id's word (`caption_tokens`).
        greedy: optional `greedy(features)` -> `(ids, ...)`: the greedy
            captions, whose rewards are the baseline (Rennie et al.); None
            for the mean of the image's other samples (Luo).

    Returns:
        `((decoder_inputs, targets, sample_weight), rewards)`: the
        `training_batch` of the samples by image, `[B, samples, L]` each,
        and the samples' rewards, `[B, samples]`.
    """
    count = len(image_ids)
    samples = len(uniforms) // count
    ids = ops.convert_to_numpy(draw(features, uniforms))
    rewards = reward(np.repeat(image_ids, samples), caption_tokens(ids, id_to_word))
    rewards = np.asarray(rewards).reshape(count, samples)
    baseline = None
    if greedy is not None:
        greedy_ids = ops.convert_to_numpy(greedy(features)[0])
        baseline = reward(image_ids, caption_tokens(greedy_ids, id_to_word))
    batch = training_batch(ids, advantages(rewards, baseline).reshape(-1))
    return tuple(array.reshape(count, samples, -1) for array in batch), rewards
