"""Independent float64 NumPy reference of deterministic beam search, with Hugging Face transformers'
BeamSearchScorer / BeamHypotheses semantics (the versions whose length penalty counts the generated tokens
only, end-of-text included).

Written from that published definition, not from the engine, and sharing no code with it (the logits
processors come from gpt2tools.reference_sampling, itself independent of the engine): the engine's beam
search test compares against hypotheses this module computes, so a mistake would have to be made twice,
independently, to go unnoticed.

The search, for a prompt and the settings below (every beam has generated the same number g of tokens):

  1. every running beam's next-token log-probabilities (float64 log_softmax of the model's last-position
     logits) go through the logits processors of reference_sampling (logit_bias, banned, repetition_penalty,
     presence and frequency penalties, no_repeat_ngram_size, bad_words, min_new_tokens), the window being
     prompt + the beam's tokens; candidate (beam, token) scores beam sum + processed log-probability
  2. the 2 * num_beams best finite candidates over all beams, best first (ties: lower beam * n_vocab + token)
  3. walked best first: an end-of-text candidate ranked below num_beams is skipped, one ranked higher becomes
     a hypothesis (its tokens without the end-of-text, which still counts in its length g + 1); any other
     candidate becomes a new beam, until num_beams new beams exist
  4. once num_beams hypotheses exist, early_stopping decides whether any running beam could still beat the
     worst of them: "done" stops at once, "heuristic" compares against the best candidate's score at the
     current length, "never" at max_new_tokens (when length_penalty > 0; otherwise as "heuristic")
  5. at max_new_tokens (or when no beam is left) the running beams become hypotheses, unless the search is done

A hypothesis scores sum_logprobs / generated_len ** length_penalty; the list keeps the num_beams best
(removing the lowest, ties: the earliest added). The result is the hypotheses sorted by score (ties: the
later added first), the first num_return_sequences of them.

The temperature and the warpers (top_k, top_p, ...) have no part in deterministic beam search, so they are
not settings here. `trace_beam_search` also returns, for every decision the search took, how far (in score
units: sums of log-probabilities) it was from going the other way, so that fixture makers can reject cases
a float32 engine could decide differently.
"""
import math

import numpy as np

from gpt2tools.reference_sampling import DEFAULTS as PROCESSOR_DEFAULTS, _apply_processors, full_settings

EARLY_STOPPING = ("heuristic", "done", "never")
# Sampling settings that only shape a distribution to draw from; beam search draws nothing.
WARPERS = ("temperature", "top_k", "top_p", "min_p", "typical_p")
PROCESSOR_KEYS = tuple(k for k in PROCESSOR_DEFAULTS if k not in WARPERS)
REQUIRED = ("num_beams", "max_new_tokens")
DEFAULTS = {"length_penalty": 1.0, "early_stopping": "heuristic", "num_return_sequences": 1,
            **{k: PROCESSOR_DEFAULTS[k] for k in PROCESSOR_KEYS}}
# worst_score before any hypothesis exists, as in BeamHypotheses
INITIAL_WORST_SCORE = 1e9


def full_beam_settings(settings):
    """Settings with every key present, missing optional ones at their off value; unknown keys, a missing
    num_beams or max_new_tokens, and values outside their range are errors."""
    unknown = set(settings) - set(DEFAULTS) - set(REQUIRED)
    if unknown:
        raise ValueError(f"unknown beam search settings {sorted(unknown)}")
    missing = [k for k in REQUIRED if k not in settings]
    if missing:
        raise ValueError(f"missing beam search settings {missing}")
    s = {**DEFAULTS, **settings}
    if not 2 <= int(s["num_beams"]) <= 16:
        raise ValueError("num_beams must be in [2, 16]")
    if not 1 <= int(s["num_return_sequences"]) <= int(s["num_beams"]):
        raise ValueError("num_return_sequences must be in [1, num_beams]")
    if int(s["max_new_tokens"]) < 1:
        raise ValueError("max_new_tokens must be >= 1")
    if s["early_stopping"] not in EARLY_STOPPING:
        raise ValueError(f"early_stopping must be one of {EARLY_STOPPING}")
    return s


def _log_softmax(logits):
    shifted = logits - logits.max()
    return shifted - math.log(np.exp(shifted).sum())


class _Hypotheses:
    """BeamHypotheses: the num_beams best finished sequences and the worst score among them, recording the
    margin of every comparison that decided something."""

    def __init__(self, num_beams, length_penalty, margins):
        self.num_beams = num_beams
        self.length_penalty = length_penalty
        self.margins = margins
        self.entries = []          # dicts: score, tokens, ended, added (the order they were added in)
        self.n_added = 0
        self.worst_score = INITIAL_WORST_SCORE

    def add(self, tokens, sum_logprobs, generated_len, ended, label):
        score = sum_logprobs / (generated_len ** self.length_penalty)
        full = len(self.entries) >= self.num_beams
        if full:
            # only a full list compares: the new score against the worst kept one
            self.margins.append((f"{label}: hypothesis score vs worst_score", abs(score - self.worst_score)))
        if full and not score > self.worst_score:
            return
        self.entries.append({"score": score, "tokens": list(tokens), "ended": ended, "added": self.n_added})
        self.n_added += 1
        if len(self.entries) > self.num_beams:
            ranked = sorted(range(len(self.entries)), key=lambda i: (self.entries[i]["score"], self.entries[i]["added"]))
            smallest, second = self.entries[ranked[0]]["score"], self.entries[ranked[1]]["score"]
            self.margins.append((f"{label}: hypothesis removal, smallest vs second smallest", second - smallest))
            del self.entries[ranked[0]]
            self.worst_score = min(e["score"] for e in self.entries)
        else:
            self.worst_score = min(score, self.worst_score)

    def sorted(self):
        """Best first; ties: the later added first."""
        return sorted(self.entries, key=lambda e: (-e["score"], -e["added"]))


def trace_beam_search(model, prompt, settings):
    """(hypotheses, margins): the first num_return_sequences hypotheses, best first, each {"tokens" (generated
    ids, end-of-text excluded), "score", "ended" ("eos" or "length")}; and, for each decision, (its name, the
    absolute distance in score units by which it was taken)."""
    s = full_beam_settings(settings)
    processors = full_settings({k: s[k] for k in PROCESSOR_KEYS})
    num_beams, max_new = int(s["num_beams"]), int(s["max_new_tokens"])
    n_keep = 2 * num_beams
    length_penalty = float(s["length_penalty"])
    early_stopping = s["early_stopping"]
    eos = int(s["eos_token"])
    prompt = [int(t) for t in prompt]
    n_vocab = model.n_vocab
    if len(prompt) == 0:
        raise ValueError("the prompt must not be empty")
    if any(t < 0 or t >= n_vocab for t in prompt):
        raise ValueError("prompt ids outside the vocabulary")
    if eos >= n_vocab:
        raise ValueError(f"eos_token {eos} outside the vocabulary")
    assert len(prompt) + max_new <= model.n_positions, "the search would run past the model's context"

    margins = []
    hypotheses = _Hypotheses(num_beams, length_penalty, margins)
    beams = [([], 0.0)]   # (generated tokens, sum of processed log-probabilities)
    g = 0
    while True:
        label = f"step {g + 1}"
        rows = []
        for tokens, total in beams:
            window = prompt + tokens
            logp = _log_softmax(np.asarray(model.logits(window)[-1], dtype=np.float64))
            _apply_processors(logp, window, len(tokens), processors)
            rows.append(total + logp)
        # flat index = beam * n_vocab + token; a stable sort keeps lower indices first on ties, -inf last
        flat = np.concatenate(rows)
        order = np.argsort(-flat, kind="stable")
        n_finite = int(np.count_nonzero(flat != -math.inf))
        if n_finite == 0:
            raise ValueError("every candidate was removed")
        ranked = order[:min(n_keep, n_finite)]
        if n_finite > n_keep:
            margins.append((f"{label}: n_keep cut", flat[order[n_keep - 1]] - flat[order[n_keep]]))
        beam_of = [int(i) // n_vocab for i in ranked]
        token_of = [int(i) % n_vocab for i in ranked]
        is_eos = [eos >= 0 and t == eos for t in token_of]
        if any(is_eos) and len(ranked) > num_beams:
            margins.append((f"{label}: eos rank cut", flat[ranked[num_beams - 1]] - flat[ranked[num_beams]]))

        new_beams = []
        last_beam_rank = None
        for rank, index in enumerate(ranked):
            b, token, score = beam_of[rank], token_of[rank], float(flat[index])
            if is_eos[rank]:
                if rank >= num_beams:
                    continue
                hypotheses.add(beams[b][0], score, g + 1, "eos", label)
            else:
                new_beams.append((beams[b][0] + [token], score))
                last_beam_rank = rank
            if len(new_beams) == num_beams:
                break
        if last_beam_rank is not None:
            following = [r for r in range(last_beam_rank + 1, len(ranked)) if not is_eos[r]]
            if following:
                margins.append((f"{label}: last new beam vs next candidate",
                                flat[ranked[last_beam_rank]] - flat[ranked[following[0]]]))
        g += 1

        done = False
        if len(hypotheses.entries) >= num_beams:
            best = float(flat[ranked[0]])
            if early_stopping == "done":
                done = True
            else:
                horizon = max_new if early_stopping == "never" and length_penalty > 0 else g
                bound = best / (horizon ** length_penalty)
                done = hypotheses.worst_score >= bound
                margins.append((f"{label}: done check, worst_score vs bound", abs(hypotheses.worst_score - bound)))
        if done:
            break
        if g == max_new or not new_beams:
            for tokens, total in new_beams:
                hypotheses.add(tokens, total, g, "length", label + " (final)")
            break
        beams = new_beams

    ordered = hypotheses.sorted()
    n_return = int(s["num_return_sequences"])
    for i in range(min(n_return + 1, len(ordered)) - 1):
        margins.append((f"final order {i} vs {i + 1}", ordered[i]["score"] - ordered[i + 1]["score"]))
    result = [{"tokens": e["tokens"], "score": e["score"], "ended": e["ended"]} for e in ordered[:n_return]]
    return result, margins


def beam_search(model, prompt, settings):
    """The first num_return_sequences hypotheses of the search, best first (see trace_beam_search)."""
    return trace_beam_search(model, prompt, settings)[0]
