// A token as a run gives it out: its piece (text, position, time, with topAlternatives its probability and the
// likeliest alternatives, with inspect what the pass that drew it showed), a token's text on its own, and a score pass's alternatives. Plain ES module.

// A model may have more ids than its tokenizer has tokens (a vocabulary padded to a round size, which the
// loader allows): such an id, if sampled, has no text.
export function makePiece(session, tokenizer, decoder, { token, row }, position, ms, options) {
  const piece = { text: token < tokenizer.vocabSize ? decoder.push(token) : '', token, position, ms };
  if (options.topAlternatives > 0) {
    const { probability, alternatives } = session.distribution(token, options.topAlternatives, row);
    piece.probability = probability;
    piece.alternatives = alternatives.map((a) => ({ ...a, text: tokenText(tokenizer, a.token) }));
  }
  if (options.inspect) piece.inspection = session.inspection();  // an InspectedSession's (generate.js)
  return piece;
}

// The text of one token on its own ('' for an id past the tokenizer's vocabulary, see makePiece).
export function tokenText(tokenizer, id) {
  return id < tokenizer.vocabSize ? tokenizer.decode([id]) : '';
}

// A score pass's alternatives [token, logprob, token, logprob, ...] -> [[token, logprob], ...]
export function pairs(flat) {
  const out = [];
  for (let i = 0; i < flat.length; i += 2) out.push([flat[i], flat[i + 1]]);
  return out;
}
