// generate()'s prompt: what it may be, and the ids a run feeds. Plain ES module.

// A prompt is a text, or the token ids of one (e.g. a run's prompt ids and the tokens of its pieces, to continue
// exactly where it stopped: re-encoding its text may give other ids, and reuse less of the cache). The ids'
// bounds are the loaded model's (option_checks.js checkModelOptions). model.inspect()'s input is one too (caller
// 'inspect', name 'input').
export function checkPrompt(prompt, caller = 'generate', name = 'prompt') {
  const isIds = (Array.isArray(prompt) || ArrayBuffer.isView(prompt)) && Array.prototype.every.call(prompt, Number.isInteger);
  if (typeof prompt !== 'string' && !isIds) {
    throw new TypeError(`${caller}: ${name} must be a string or an array of token ids, got ${describePrompt(prompt)}`);
  }
}

function describePrompt(prompt) {
  return Array.isArray(prompt) || ArrayBuffer.isView(prompt) ? 'an array with a value that is not an integer' : typeof prompt;
}

// The ids a run feeds: a text's tokens or the ids given; <|endoftext|> alone for an empty prompt.
export function promptIds(tokenizer, prompt) {
  const given = typeof prompt === 'string' ? tokenizer.encode(prompt) : Array.from(prompt);
  return given.length === 0 ? [tokenizer.eosId] : given;
}
