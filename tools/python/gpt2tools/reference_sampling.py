"""Independent float64 NumPy reference of the sampling pipeline: the logits processors and warpers that turn
one position's logits into the distribution a token is drawn from.

Written from the published definitions (Hugging Face transformers' LogitsProcessor / LogitsWarper classes,
OpenAI's presence and frequency penalties), not from the engine, and sharing no code with it: the engine's
sampler tests compare against distributions this module computes, so a mistake would have to be made twice,
independently, to go unnoticed.

`processed_distribution(logits, window, n_generated, settings)` returns the probabilities over the whole
vocabulary (float64, 0 for removed tokens, one-hot at temperature 0). `window` is the token ids in context,
oldest first; its last min(n_generated, len(window)) ids are the tokens generated in this run. The steps, in
order:

  1. logit_bias ([[token, bias], ...], entries add up) and banned (ids set to -inf)
  2. repetition_penalty (CTRL): each distinct window token's score > 0 is divided by it, otherwise multiplied
  3. presence_penalty, frequency_penalty (OpenAI), over the generated tokens: score -= count * freq + presence
  4. no_repeat_ngram_size n: bans every token that would complete an n-gram already in the window
  5. bad_words: id sequences; the last id is banned when the window ends with the rest of the sequence
  6. min_new_tokens with eos_token: eos is banned while fewer tokens have been generated
  7. temperature 0: one-hot at the argmax (lowest id on ties); the warpers below do not apply
  8. top_k over the tokens still allowed (ties: lower id first)
  9. softmax of score / temperature
 10. top_p (nucleus), 11. min_p, 12. typical_p (locally typical sampling), each renormalizing

`trace_distribution` returns the same distribution plus, for every decision taken at a threshold, how far the
nearest token was from it, so that fixture makers can reject cases a float32 engine could decide differently.
"""
import math

import numpy as np

DEFAULTS = {
    "temperature": 1.0, "top_k": 0, "top_p": 1.0, "repetition_penalty": 1.0, "min_p": 0.0, "typical_p": 1.0,
    "no_repeat_ngram_size": 0, "presence_penalty": 0.0, "frequency_penalty": 0.0, "logit_bias": [],
    "banned": [], "bad_words": [], "min_new_tokens": 0, "eos_token": -1,
}


def full_settings(settings):
    """Settings with every key present, missing ones at their off value; unknown keys are an error."""
    unknown = set(settings) - set(DEFAULTS)
    if unknown:
        raise ValueError(f"unknown sampling settings {sorted(unknown)}")
    return {**DEFAULTS, **settings}


def _relative_gap(a, b):
    """|a - b| relative to the larger magnitude; inf when a threshold has nothing on one side."""
    scale = max(abs(a), abs(b))
    return abs(a - b) / scale if scale > 0 else 0.0


def _order(values, descending):
    """Indices sorting `values` (ties: lower index first), descending or ascending."""
    keys = -values if descending else values
    return np.lexsort((np.arange(len(values)), keys))


def _prefix_reaching(mass_sorted, target, margins, name):
    """Length of the smallest prefix whose cumulative mass >= target (at least 1), recording the margin of
    the cumulative sums on both sides of the cut."""
    cumulative = np.cumsum(mass_sorted)
    n_keep = min(int(np.searchsorted(cumulative, target, side="left")) + 1, len(cumulative))
    # The cut is decided by cumulative[n_keep - 1] >= target > cumulative[n_keep - 2].
    gaps = [_relative_gap(cumulative[n_keep - 1], target)]
    if n_keep >= 2:
        gaps.append(_relative_gap(cumulative[n_keep - 2], target))
    margins.append((name, min(gaps)))
    return n_keep


def _apply_processors(scores, window, n_generated, s):
    """Steps 1-6 on float64 scores, in place."""
    n_vocab = len(scores)
    for token, bias in s["logit_bias"]:
        scores[int(token)] += float(bias)
    for token in s["banned"]:
        scores[int(token)] = -math.inf

    penalty = float(s["repetition_penalty"])
    if penalty != 1.0:
        # Each distinct token once: a token repeated in the window is not penalized twice.
        for token in sorted(set(window)):
            score = scores[token]
            scores[token] = score / penalty if score > 0 else score * penalty

    n_gen = min(int(n_generated), len(window))
    generated = window[len(window) - n_gen:]
    presence, frequency = float(s["presence_penalty"]), float(s["frequency_penalty"])
    if presence != 0.0 or frequency != 0.0:
        counts = {}
        for token in generated:
            counts[token] = counts.get(token, 0) + 1
        for token, count in counts.items():
            scores[token] -= count * frequency + presence

    n = int(s["no_repeat_ngram_size"])
    if n > 0:
        length = len(window)
        tail = window[length - n + 1:] if n > 1 else []
        for i in range(length - n + 1):
            if window[i:i + n - 1] == tail:
                scores[window[i + n - 1]] = -math.inf

    for sequence in s["bad_words"]:
        sequence = [int(t) for t in sequence]
        prefix = sequence[:-1]
        if len(prefix) == 0 or (len(window) >= len(prefix) and window[len(window) - len(prefix):] == prefix):
            scores[sequence[-1]] = -math.inf

    eos = int(s["eos_token"])
    if eos >= 0 and n_gen < int(s["min_new_tokens"]):
        if eos >= n_vocab:
            raise ValueError(f"eos_token {eos} outside the vocabulary")
        scores[eos] = -math.inf


def trace_distribution(logits, window, n_generated, settings):
    """(probabilities, margins): the distribution of processed_distribution and, for each threshold decision,
    (step name, the smallest relative distance of a kept or removed token from that threshold)."""
    s = full_settings(settings)
    # float32 first: the engine receives float32 logits, and this is exactly what it sees.
    scores = np.asarray(logits, dtype=np.float32).astype(np.float64).copy()
    if scores.ndim != 1:
        raise ValueError("logits must be one row")
    n_vocab = len(scores)
    window = [int(t) for t in window]
    if any(t < 0 or t >= n_vocab for t in window):
        raise ValueError("window ids outside the vocabulary")
    margins = []
    _apply_processors(scores, window, n_generated, s)

    allowed = np.flatnonzero(scores != -math.inf)
    if len(allowed) == 0:
        raise ValueError("every token was removed")
    probabilities = np.zeros(n_vocab, dtype=np.float64)

    temperature = float(s["temperature"])
    if temperature == 0.0:
        order = _order(scores[allowed], descending=True)
        best = allowed[order[0]]
        if len(allowed) > 1:
            margins.append(("greedy", _relative_gap(scores[best], scores[allowed[order[1]]])))
        probabilities[best] = 1.0
        return probabilities, margins
    if temperature < 0:
        raise ValueError("temperature must be >= 0")

    candidates = allowed  # ascending ids, so the stable sorts below break ties toward lower ids
    top_k = int(s["top_k"])
    if 0 < top_k < len(candidates):
        order = _order(scores[candidates], descending=True)
        margins.append(("top_k", _relative_gap(scores[candidates[order[top_k - 1]]],
                                               scores[candidates[order[top_k]]])))
        candidates = np.sort(candidates[order[:top_k]])

    z = scores[candidates] / temperature
    p = np.exp(z - z.max())
    p /= p.sum()

    top_p = float(s["top_p"])
    if top_p < 1.0:
        order = _order(p, descending=True)
        n_keep = _prefix_reaching(p[order], top_p, margins, "top_p")
        if n_keep < len(order):
            margins.append(("top_p order", _relative_gap(p[order[n_keep - 1]], p[order[n_keep]])))
        keep = np.sort(order[:n_keep])
        candidates, p = candidates[keep], p[keep] / p[keep].sum()

    min_p = float(s["min_p"])
    if min_p > 0.0:
        threshold = min_p * p.max()
        margins.append(("min_p", float(np.min(np.abs(p - threshold)) / threshold)))
        keep = p >= threshold
        candidates, p = candidates[keep], p[keep] / p[keep].sum()

    typical_p = float(s["typical_p"])
    if typical_p < 1.0:
        log_p = np.log(p)
        entropy = -np.sum(p * log_p)
        shifted = np.abs(-log_p - entropy)
        # ascending shifted score, ties: higher probability first, then lower id
        order = np.lexsort((np.arange(len(p)), -p, shifted))
        n_keep = _prefix_reaching(p[order], typical_p, margins, "typical_p")
        if n_keep < len(order):
            margins.append(("typical_p order", _relative_gap(shifted[order[n_keep - 1]], shifted[order[n_keep]])))
        keep = np.sort(order[:n_keep])
        candidates, p = candidates[keep], p[keep] / p[keep].sum()

    probabilities[candidates] = p
    return probabilities, margins


def processed_distribution(logits, window, n_generated, settings):
    """The probabilities (float64, n_vocab) the engine's draw uses for these logits, window and settings."""
    return trace_distribution(logits, window, n_generated, settings)[0]
